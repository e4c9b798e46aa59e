/* attn_ham_avx2.c — AVX2 RaBitQ Hamming scores straight from the bits
 * (attn_kernels.h, hamming_score): at D = 128 the distances of 32 tokens
 * by scalar popcnt, then the score formula on 8 distances as one vector
 * (the bodies: attn_ham_avx2.h); other D
 * vq_rabitq_hamming per token and the formula, scalar. The scores are the
 * format's hamming() + formula bit for bit (same f32 operations, no FMA). */
#include <immintrin.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_ham_avx2.h"
#include "formats/format_rabitq.h"

/* RB rows (<= 4) at D = 128, 32 tokens at a time: their distances, then
 * 8 scores per step, a partial last step with masked magnitudes, constants
 * and stores. */
VQ_INLINE void ham_rows_avx2(int RB, int n, const uint8_t *qb, int64_t ldq, const float *qs, int64_t ldqs,
                             const uint8_t *kb, const float *mag, const float *cnst, float *s, int64_t lds)
{
    uint64_t qw[8];
    float q[4];
    ham_q_avx2(RB, qb, ldq, qw);
    for (int r = 0; r < RB; r++) q[r] = qs[r * ldqs];
    for (int j0 = 0; j0 < n; j0 += 32) {
        const int nb = n - j0 < 32 ? n - j0 : 32;
        _Alignas(32) uint32_t h[32];
        ham_dist_avx2(RB, nb, kb + 16 * j0, qw, h);
        for (int t = nb; t % 8; t++) h[t] = 0; /* a partial step's unused lanes */
        for (int j = j0; j < j0 + nb; j += 8) {
            const __m256i H = _mm256_load_si256((const __m256i *)(h + j - j0));
            __m256 x[4];
            if (n - j >= 8) {
                const __m256 mg = _mm256_loadu_ps(mag + j), cn = cnst ? _mm256_loadu_ps(cnst + j) : _mm256_setzero_ps();
                ham_score8_avx2(RB, H, q, mg, cn, x);
                for (int r = 0; r < RB; r++) _mm256_storeu_ps(s + r * lds + j, x[r]);
                continue;
            }
            const __m256i valid =
                _mm256_cmpgt_epi32(_mm256_set1_epi32(n - j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            const __m256 mg = _mm256_maskload_ps(mag + j, valid);
            const __m256 cn = cnst ? _mm256_maskload_ps(cnst + j, valid) : _mm256_setzero_ps();
            ham_score8_avx2(RB, H, q, mg, cn, x);
            for (int r = 0; r < RB; r++) _mm256_maskstore_ps(s + r * lds + j, valid, x[r]);
        }
    }
}

static void hamming_score_avx2(int R, int n, int64_t D, const uint8_t *qb, int64_t ldq, const float *qs,
                               int64_t ldqs, const uint8_t *kb, const float *mag, const float *cnst, float *s,
                               int64_t lds)
{
    if (D != 128) { /* other widths: the format's distances (popcnt), then the formula */
        for (int r = 0; r < R; r++)
            for (int j = 0; j < n; j++) {
                const int64_t h = vq_rabitq_hamming(qb + r * ldq, kb + j * (D / 8), D / 8);
                s[r * lds + j] = (float)(D - 2 * h) * qs[r * ldqs] * mag[j] + (cnst ? cnst[j] : 0.0f);
            }
        return;
    }
    int r0 = 0;
    for (; r0 + 4 <= R; r0 += 4)
        ham_rows_avx2(4, n, qb + r0 * ldq, ldq, qs + r0 * ldqs, ldqs, kb, mag, cnst, s + r0 * lds, lds);
    for (; r0 < R; r0++) ham_rows_avx2(1, n, qb + r0 * ldq, ldq, qs + r0 * ldqs, ldqs, kb, mag, cnst, s + r0 * lds, lds);
}

void vq_attn_kernels_init_avx2_ham(vq_attn_kernels *k) { k->hamming_score = hamming_score_avx2; }
