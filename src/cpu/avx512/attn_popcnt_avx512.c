/* attn_popcnt_avx512.c — AVX-512 attention kernels: Hamming distances with
 * VPOPCNTDQ and sign tiles from mask registers. The other entries keep the
 * AVX2 versions (the table is filled AVX2-first). */
#include <immintrin.h>

#include "attention/attn_kernels.h"

/* qb [R][ldq], kb [n][nbytes] -> ham [R][ldh]; 64 bytes per step, masked tail */
static void hamming_avx512(int R, int n, int64_t nbytes, const uint8_t *qb, int64_t ldq, const uint8_t *kb,
                           int32_t *ham, int64_t ldh)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *k = kb + j * nbytes;
        for (int r = 0; r < R; r++) {
            const uint8_t *q = qb + r * ldq;
            __m512i acc = _mm512_setzero_si512();
            for (int64_t i = 0; i < nbytes; i += 64) {
                const int64_t left = nbytes - i;
                const __mmask64 m = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
                const __m512i a = _mm512_maskz_loadu_epi8(m, q + i), b = _mm512_maskz_loadu_epi8(m, k + i);
                acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(_mm512_xor_si512(a, b)));
            }
            ham[r * ldh + j] = (int32_t)_mm512_reduce_add_epi64(acc);
        }
    }
}

/* bits [n][D/8], mag [n] -> out [n][D] = ±mag, 16 lanes per 2 bytes */
static void sign_tile_avx512(int n, int64_t D, const uint8_t *bits, const float *mag, float *out)
{
    for (int j = 0; j < n; j++) {
        const __m512 pos = _mm512_set1_ps(mag[j]), neg = _mm512_set1_ps(-mag[j]);
        const uint8_t *row = bits + j * (D / 8);
        int64_t c = 0;
        for (; c + 16 <= D; c += 16) {
            const __mmask16 m = (__mmask16)(row[c / 8] | (row[c / 8 + 1] << 8));
            _mm512_storeu_ps(out + j * D + c, _mm512_mask_blend_ps(m, neg, pos));
        }
        if (c < D) {  /* D % 16 == 8 */
            const __mmask16 m = (__mmask16)row[c / 8];
            _mm512_mask_storeu_ps(out + j * D + c, 0xff, _mm512_mask_blend_ps(m, neg, pos));
        }
    }
}

void vq_attn_kernels_init_avx512(vq_attn_kernels *k)
{
    k->hamming = hamming_avx512;
    k->sign_tile = sign_tile_avx512;
}
