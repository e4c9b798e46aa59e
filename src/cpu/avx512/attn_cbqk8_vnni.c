/* attn_cbqk8_vnni.c — AVX-512 VNNI integer scores against codebook keys at
 * D = 128 (attn_kernels.h, codebook_qk8: TurboQuant and RVQ stages),
 * installed only where the CPU has AVX512_VNNI (this file alone is built
 * with -mavx512vnni).
 *
 * A token's 64 nibble bytes become two registers of looked-up centroids
 * (and 0x0f / shift by 4, one vpshufb each: cq + 128 as unsigned bytes,
 * the even channels, then the odd), stored once per 16 tokens and shared
 * by the rows. Each row then takes two vpdpbusd per token against its
 * query planes (xq in plane order, signed) into one accumulator per token,
 * and one transposing sum tree per 16 tokens (unpack + add on dwords, on
 * qwords, then 128-bit lane shuffles: 45 instructions) leaves token t's
 * sum in lane t; 128 sum_c xq_c (two more vpdpbusd against ones, once per
 * row and 16 tokens) takes the + 128 of the looked-up bytes back out. */
#include <immintrin.h>

#include "attention/attn_kernels.h"

/* a[t] (t < 16) -> lane t = the sum of a[t]'s 16 lanes. */
static inline __m512i hsum16(const __m512i *a)
{
    __m512i b[8], c[4];
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]),
                                _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) /* per 128-bit lane: dword m = the lane's sum of a[4i + m] */
        c[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(b[2 * i], b[2 * i + 1]),
                                _mm512_unpackhi_epi64(b[2 * i], b[2 * i + 1]));
    const __m512i e01 = _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], 0x88), _mm512_shuffle_i32x4(c[0], c[1], 0xdd));
    const __m512i e23 = _mm512_add_epi32(_mm512_shuffle_i32x4(c[2], c[3], 0x88), _mm512_shuffle_i32x4(c[2], c[3], 0xdd));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(e01, e23, 0x88), _mm512_shuffle_i32x4(e01, e23, 0xdd));
}

static void codebook_qk8_vnni(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, const int8_t *xq,
                              int64_t ldx, int32_t *isum, int64_t lds)
{
    const __m128i t = _mm_xor_si128(_mm_loadu_si128((const __m128i *)cq), _mm_set1_epi8(-128)); /* cq + 128 */
    const __m512i lut = _mm512_broadcast_i32x4(t), low4 = _mm512_set1_epi8(0x0f), ones = _mm512_set1_epi8(1);
    _Alignas(64) uint8_t u[16][128];
    for (int j0 = 0; j0 < n; j0 += 16) {
        const int nb = n - j0 < 16 ? n - j0 : 16;
        for (int i = 0; i < 16; i++) {
            __m512i e = _mm512_setzero_si512(), o = e; /* tokens past n: zeros, their lanes not stored */
            if (i < nb) {
                const __m512i x = _mm512_loadu_si512(idx + (j0 + i) * ldi);
                e = _mm512_shuffle_epi8(lut, _mm512_and_si512(x, low4));
                o = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(x, 4), low4));
            }
            _mm512_store_si512(u[i], e);
            _mm512_store_si512(u[i] + 64, o);
        }
        const __mmask16 keep = (__mmask16)((1u << nb) - 1u);
        for (int r = 0; r < R; r++) {
            const __m512i xe = _mm512_loadu_si512(xq + r * ldx), xo = _mm512_loadu_si512(xq + r * ldx + 64);
            const int32_t xsum =
                _mm512_reduce_add_epi32(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, xe), ones, xo));
            __m512i a[16];
            for (int i = 0; i < 16; i++)
                a[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_load_si512(u[i]), xe),
                                           _mm512_load_si512(u[i] + 64), xo);
            _mm512_mask_storeu_epi32(isum + r * lds + j0, keep, _mm512_sub_epi32(hsum16(a), _mm512_set1_epi32(128 * xsum)));
        }
    }
}

void vq_attn_kernels_init_avx512_cbqk8(vq_attn_kernels *k)
{
    k->codebook_qk8 = codebook_qk8_vnni;
    k->cbqk8_fast = true; /* faster than the f32 tile path: bench/results/cache_cpu.md */
}
