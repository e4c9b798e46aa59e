/* attn_decode_avx2.c — AVX2 block decoders of the compressed formats: affine
 * codes, RaBitQ signs and Hamming distances, codebook (nibble) values.
 * Codes are expanded in registers (broadcast + variable shift, or vpshufb /
 * vpermps tables) and written once into the thread's L1 tile. */
#include <immintrin.h>

#include "attention/attn_kernels.h"

#include "cpu/avx2/attn_avx2_inline.h"

/* codes [n][ldc] -> out [n][D] = code * scale[c] + zero[c] */
static void affine_k_tile_avx2(int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *scale,
                               const float *zero, float *out)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *row = codes + j * ldc;
        for (int64_t c = 0; c < D; c += 8) {
            const __m256 x = _mm256_cvtepi32_ps(codes8(row, bits, c));
            _mm256_storeu_ps(out + j * D + c, _mm256_fmadd_ps(x, _mm256_loadu_ps(scale + c), _mm256_loadu_ps(zero + c)));
        }
    }
}

/* codes [n][ldc], vs/vz [n][GV] -> out [n][D] = code * vs[c/g] + vz[c/g];
 * vector path when a group covers whole 8-lane chunks (g % 8 == 0) */
static void affine_v_tile_avx2(int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *vs,
                               const float *vz, int64_t GV, int64_t g, float *out)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *row = codes + j * ldc;
        const float *s = vs + j * GV, *z = vz + j * GV;
        for (int64_t c = 0; c < D; c += 8) {
            const __m256 x = _mm256_cvtepi32_ps(codes8(row, bits, c));
            __m256 sc, zc;
            if (g % 8 == 0) {
                sc = _mm256_set1_ps(s[c / g]);
                zc = _mm256_set1_ps(z[c / g]);
            } else {
                float st[8], zt[8];
                for (int t = 0; t < 8; t++) {
                    st[t] = s[(c + t) / g];
                    zt[t] = z[(c + t) / g];
                }
                sc = _mm256_loadu_ps(st);
                zc = _mm256_loadu_ps(zt);
            }
            _mm256_storeu_ps(out + j * D + c, _mm256_fmadd_ps(x, sc, zc));
        }
    }
}

/* qb [R][ldq], kb [n][nbytes] -> ham [R][ldh]: 64-bit popcnt over the bytes */
static void hamming_avx2(int R, int n, int64_t nbytes, const uint8_t *qb, int64_t ldq, const uint8_t *kb,
                         int32_t *ham, int64_t ldh)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *k = kb + j * nbytes;
        for (int r = 0; r < R; r++) {
            const uint8_t *q = qb + r * ldq;
            int64_t h = 0, i = 0;
            for (; i + 8 <= nbytes; i += 8) {
                uint64_t a, b;
                __builtin_memcpy(&a, q + i, 8);
                __builtin_memcpy(&b, k + i, 8);
                h += _mm_popcnt_u64(a ^ b);
            }
            for (; i < nbytes; i++) h += _mm_popcnt_u32((unsigned)(q[i] ^ k[i]));
            ham[r * ldh + j] = (int32_t)h;
        }
    }
}

/* bits [n][D/8], mag [n] -> out [n][D] = ±mag: each byte broadcast, tested
 * against the 8 lane bits, and the sign of mag flipped where the bit is 0 */
static void sign_tile_avx2(int n, int64_t D, const uint8_t *bits, const float *mag, float *out)
{
    const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int j = 0; j < n; j++) {
        const __m256 m = _mm256_set1_ps(mag[j]);
        const uint8_t *row = bits + j * (D / 8);
        for (int64_t c = 0; c < D; c += 8) {
            const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(row[c / 8]), lane), lane);
            const __m256 flip = _mm256_andnot_ps(_mm256_castsi256_ps(set), sign);
            _mm256_storeu_ps(out + j * D + c, _mm256_xor_ps(m, flip));
        }
    }
}

/* idx [n][D/2 or D] -> out [n][D] = cents[min(idx, n_cents - 1)] * vscale.
 * Up to 16 centroids live in two registers (vpermps + blend on bit 3);
 * larger codebooks gather. */
static void codebook_tile_avx2(int n, int64_t D, bool packed, const uint8_t *idx, const float *cents, int n_cents,
                               const float *vscale, float *out)
{
    const bool small = n_cents <= 16;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    if (small) lut16_table(cents, n_cents, &lo, &hi);
    /* padded table: clamp to 15; larger codebooks gather, clamped to n_cents - 1 */
    const __m256i top = _mm256_set1_epi32(small ? 15 : n_cents - 1);
    for (int j = 0; j < n; j++) {
        const __m256 sc = _mm256_set1_ps(vscale ? vscale[j] : 1.0f);
        float *o = out + j * D;
        for (int64_t c = 0; c < D; c += 8) {
            const __m256i i8 = cb_index8(idx, packed, D, j, c, top);
            const __m256 x = small ? lut16(i8, lo, hi) : _mm256_i32gather_ps(cents, i8, 4);
            _mm256_storeu_ps(o + c, _mm256_mul_ps(x, sc));
        }
    }
}

void vq_attn_kernels_init_avx2_decode(vq_attn_kernels *k)
{
    k->affine_k_tile = affine_k_tile_avx2;
    k->affine_v_tile = affine_v_tile_avx2;
    k->hamming = hamming_avx2;
    k->sign_tile = sign_tile_avx2;
    k->codebook_tile = codebook_tile_avx2;
}
