/* attn_popcnt_avx512.c — AVX-512 attention kernels: Hamming distances with
 * VPOPCNTDQ and sign tiles from mask registers. The other entries keep the
 * AVX2 versions (the table is filled AVX2-first). */
#include <immintrin.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_ham_avx512.h"

#define VQ_INLINE16 static inline __attribute__((always_inline))

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

/* RaBitQ Hamming scores for code rows of W = D/64 in {1, 2, 4} qwords (see
 * attn_kernels.h): 16 tokens per step, their rows loaded once (2W registers,
 * 8/W tokens each) and XORed with each query row repeated across the lanes;
 * the qword popcounts of a token are summed by W/2-level even/odd adds, and
 * the 16 distances go to the score formula as one vector (the bodies:
 * attn_ham_avx512.h). */
VQ_INLINE16 void ham16(int W, int R, int n, const uint8_t *qb, int64_t ldq, const float *qs, int64_t ldqs,
                       const uint8_t *kb, const float *mag, const float *cnst, float *s, int64_t lds, float Df)
{
    __m512i k[8];
    __m512 mg, cn;
    ham16_load(W, n, kb, mag, cnst, k, &mg, &cn);
    const __mmask16 valid = (__mmask16)((1u << n) - 1u);
    for (int r = 0; r < R; r++)
        _mm512_mask_storeu_ps(s + r * lds, valid, ham16_row(W, k, qb + r * ldq, qs[r * ldqs], mg, cn, Df));
}

static void hamming_score_avx512(int R, int n, int64_t D, const uint8_t *qb, int64_t ldq, const float *qs,
                                 int64_t ldqs, const uint8_t *kb, const float *mag, const float *cnst, float *s,
                                 int64_t lds)
{
    const int W = (int)(D / 64);
    if (D % 64 != 0 || (W != 1 && W != 2 && W != 4)) { /* other widths: distances, then the formula */
        int32_t ham[16];
        for (int j0 = 0; j0 < n; j0 += 16) {
            const int nb = n - j0 < 16 ? n - j0 : 16;
            for (int r = 0; r < R; r++) {
                hamming_avx512(1, nb, D / 8, qb + r * ldq, ldq, kb + (int64_t)j0 * (D / 8), ham, 16);
                for (int j = 0; j < nb; j++)
                    s[r * lds + j0 + j] =
                        (float)(D - 2 * ham[j]) * qs[r * ldqs] * mag[j0 + j] + (cnst ? cnst[j0 + j] : 0.0f);
            }
        }
        return;
    }
    for (int j = 0; j < n; j += 16) {
        const int nb = n - j < 16 ? n - j : 16;
        const uint8_t *kj = kb + (int64_t)j * (D / 8);
        const float *cj = cnst ? cnst + j : NULL;
        switch (W) {
        case 1: ham16(1, R, nb, qb, ldq, qs, ldqs, kj, mag + j, cj, s + j, lds, (float)D); break;
        case 2: ham16(2, R, nb, qb, ldq, qs, ldqs, kj, mag + j, cj, s + j, lds, (float)D); break;
        default: ham16(4, R, nb, qb, ldq, qs, ldqs, kj, mag + j, cj, s + j, lds, (float)D); break;
        }
    }
}

void vq_attn_kernels_init_avx512(vq_attn_kernels *k)
{
    k->hamming_score = hamming_score_avx512;
    k->hamming = hamming_avx512;
    k->sign_tile = sign_tile_avx512;
}
