/* attn_cbqk8_avx2.c — AVX2 integer scores against codebook keys at D = 128
 * (attn_kernels.h, codebook_qk8: TurboQuant and RVQ stages).
 *
 * AVX2 has no vpdpbusd, and vpmaddubsw's int16 pair sums of (cq + 128) x
 * xq would saturate. So the centroids are looked up signed (one vpshufb per
 * nibble plane: two per 32 index bytes), and each row multiplies |xq|
 * (unsigned) by the centroids with xq's signs moved onto them (vpsignb):
 * the products are xq * cq, each |.| <= 127 * 127, pairs <= 32258, exact.
 * vpmaddwd with ones widens the pairs to int32. The looked-up tokens (8
 * at a time, 128 bytes each) are shared by the rows; one horizontal-add
 * tree per 8 tokens leaves token t's sum in lane t. */
#include <immintrin.h>

#include "attention/attn_kernels.h"

/* a[t] (t < 8) -> lane t = the sum of a[t]'s 8 lanes. */
static inline __m256i hsum8(const __m256i *a)
{
    const __m256i b0 = _mm256_hadd_epi32(a[0], a[1]), b1 = _mm256_hadd_epi32(a[2], a[3]);
    const __m256i b2 = _mm256_hadd_epi32(a[4], a[5]), b3 = _mm256_hadd_epi32(a[6], a[7]);
    const __m256i c0 = _mm256_hadd_epi32(b0, b1), c1 = _mm256_hadd_epi32(b2, b3); /* per half: a0..a3, a4..a7 */
    return _mm256_add_epi32(_mm256_permute2x128_si256(c0, c1, 0x20), _mm256_permute2x128_si256(c0, c1, 0x31));
}

static void codebook_qk8_avx2(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, const int8_t *xq,
                              int64_t ldx, int32_t *isum, int64_t lds)
{
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cq));
    const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    _Alignas(32) int8_t u[8][128]; /* a token's centroids: the even channels, then the odd */
    for (int j0 = 0; j0 < n; j0 += 8) {
        const int nb = n - j0 < 8 ? n - j0 : 8;
        for (int i = 0; i < 8; i++)
            for (int h = 0; h < 2; h++) {
                __m256i e = _mm256_setzero_si256(), o = e; /* tokens past n: zeros, their lanes not stored */
                if (i < nb) {
                    const __m256i x = _mm256_loadu_si256((const __m256i *)(idx + (j0 + i) * ldi + 32 * h));
                    e = _mm256_shuffle_epi8(lut, _mm256_and_si256(x, low4));
                    o = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(x, 4), low4));
                }
                _mm256_store_si256((__m256i *)(u[i] + 32 * h), e);
                _mm256_store_si256((__m256i *)(u[i] + 64 + 32 * h), o);
            }
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(nb), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int r = 0; r < R; r++) {
            const int8_t *x = xq + r * ldx;
            __m256i xs[4], xa[4];
            for (int q = 0; q < 4; q++) {
                xs[q] = _mm256_loadu_si256((const __m256i *)(x + 32 * q));
                xa[q] = _mm256_abs_epi8(xs[q]);
            }
            __m256i a[8];
            for (int i = 0; i < 8; i++) {
                __m256i t = _mm256_setzero_si256();
                for (int q = 0; q < 4; q++) {
                    const __m256i c = _mm256_sign_epi8(_mm256_load_si256((const __m256i *)(u[i] + 32 * q)), xs[q]);
                    t = _mm256_add_epi32(t, _mm256_madd_epi16(_mm256_maddubs_epi16(xa[q], c), ones));
                }
                a[i] = t;
            }
            _mm256_maskstore_epi32(isum + r * lds + j0, keep, hsum8(a));
        }
    }
}

void vq_attn_kernels_init_avx2_cbqk8(vq_attn_kernels *k)
{
    k->codebook_qk8 = codebook_qk8_avx2;
    k->cbqk8_fast = true; /* faster than the f32 tile path: bench/results/cache_cpu.md */
}
