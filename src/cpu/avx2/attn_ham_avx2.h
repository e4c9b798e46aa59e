/* attn_ham_avx2.h — the inline body of the AVX2 RaBitQ Hamming scores
 * (attn_ham_avx2.c, hamming_score: how it works), shared with the fused
 * RaBitQ block kernel (attn_rabitq_avx2.c). Internal; include only from
 * src/cpu/avx2 files (built with AVX2). */
#ifndef VQ_ATTN_HAM_AVX2_H
#define VQ_ATTN_HAM_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "cpu/avx2/attn_avx2_inline.h"

/* The nibbles of RB query rows' 16 sign bytes, both lanes: ql[r] = q & 15,
 * qh[r] = q >> 4. */
VQ_INLINE void ham_q_avx2(int RB, const uint8_t *qb, int64_t ldq, __m256i *ql, __m256i *qh)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int r = 0; r < RB; r++) {
        const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(qb + r * ldq)));
        ql[r] = _mm256_and_si256(q, m4);
        qh[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
}

/* Scores of 8 tokens (key rows kb, 16 bytes each, contiguous) against RB
 * query rows at D = 128: x[r] = (float)(128 - 2 ham) * qs[r] * mg + cn, the
 * format's formula and order (no FMA). The popcounts: the key nibbles (once
 * for all rows) XOR the query's, looked up in a 16-entry popcount table by
 * vpshufb; the two 8-byte halves of each token added, vpsadbw per 4
 * tokens, and one vpermd puts the 8 distances in token order. */
VQ_INLINE void ham8_avx2(int RB, const uint8_t *kb, const __m256i *ql, const __m256i *qh, const float *qs, __m256 mg,
                         __m256 cn, __m256 *x)
{
    const __m256i m4 = _mm256_set1_epi8(15), zero = _mm256_setzero_si256();
    const __m256i pop = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2,
                                         3, 2, 3, 3, 4);
    const __m256i order = _mm256_setr_epi32(0, 4, 2, 6, 1, 5, 3, 7);
    __m256i kl[4], kh[4];
    for (int i = 0; i < 4; i++) { /* tokens 2i (low lane), 2i+1 */
        const __m256i k = _mm256_loadu_si256((const __m256i *)(kb + 32 * i));
        kl[i] = _mm256_and_si256(k, m4);
        kh[i] = _mm256_and_si256(_mm256_srli_epi16(k, 4), m4);
    }
    for (int r = 0; r < RB; r++) {
        __m256i c[4];
        for (int i = 0; i < 4; i++)
            c[i] = _mm256_add_epi8(_mm256_shuffle_epi8(pop, _mm256_xor_si256(kl[i], ql[r])),
                                   _mm256_shuffle_epi8(pop, _mm256_xor_si256(kh[i], qh[r])));
        /* qwords (t0, t2 | t1, t3) and (t4, t6 | t5, t7) -> dwords (t0, t4, t2, t6 | t1, t5, t3, t7) */
        const __m256i s01 = _mm256_sad_epu8(
            _mm256_add_epi8(_mm256_unpacklo_epi64(c[0], c[1]), _mm256_unpackhi_epi64(c[0], c[1])), zero);
        const __m256i s23 = _mm256_sad_epu8(
            _mm256_add_epi8(_mm256_unpacklo_epi64(c[2], c[3]), _mm256_unpackhi_epi64(c[2], c[3])), zero);
        const __m256i h =
            _mm256_permutevar8x32_epi32(_mm256_or_si256(s01, _mm256_slli_epi64(s23, 32)), order);
        const __m256 d = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_set1_epi32(128), _mm256_add_epi32(h, h)));
        x[r] = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(qs[r])), mg), cn);
    }
}

#endif /* VQ_ATTN_HAM_AVX2_H */
