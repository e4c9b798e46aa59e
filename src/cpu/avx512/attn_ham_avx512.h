/* attn_ham_avx512.h — the inline body of the AVX-512 RaBitQ Hamming scores
 * (attn_popcnt_avx512.c, hamming_score: how it works), shared with the fused
 * RaBitQ block kernel (attn_rabitq_vnnivbmi.c). Internal; include only from a
 * file built with AVX512_VPOPCNTDQ. */
#ifndef VQ_ATTN_HAM_AVX512_H
#define VQ_ATTN_HAM_AVX512_H

#include <immintrin.h>
#include <string.h>

/* Up to 16 tokens' code rows of W = D/64 qwords (2W registers, 8/W tokens
 * each; zeros past n), magnitudes and constants (0 past n / without cnst). */
static inline __attribute__((always_inline)) void ham16_load(int W, int n, const uint8_t *kb, const float *mag,
                                                             const float *cnst, __m512i *k, __m512 *mg, __m512 *cn)
{
    const int tpz = 8 / W; /* tokens per register */
    for (int i = 0; i < 2 * W; i++) {
        const int left = (n - i * tpz) * W; /* valid qwords of this register */
        const __mmask8 m = left >= 8 ? 0xff : left <= 0 ? 0 : (__mmask8)((1u << left) - 1u);
        k[i] = _mm512_maskz_loadu_epi64(m, kb + (int64_t)i * 64);
    }
    const __mmask16 valid = (__mmask16)((1u << n) - 1u);
    *mg = _mm512_maskz_loadu_ps(valid, mag);
    *cn = cnst ? _mm512_maskz_loadu_ps(valid, cnst) : _mm512_setzero_ps();
}

/* The 16 tokens' scores against one query row q (its D/8 sign bytes, scale
 * qs): the code rows XORed with q repeated across the lanes, the qword
 * popcounts of a token summed by W/2-level even/odd adds, then the formula. */
static inline __attribute__((always_inline)) __m512 ham16_row(int W, const __m512i *k, const uint8_t *q, float qs,
                                                              __m512 mg, __m512 cn, float Df)
{
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    long long q8;
    memcpy(&q8, q, 8);
    const __m512i qv = W == 1   ? _mm512_set1_epi64(q8)
                       : W == 2 ? _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)q))
                                : _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)q));
    __m512i p[8];
    for (int i = 0; i < 2 * W; i++) p[i] = _mm512_popcnt_epi64(_mm512_xor_si512(k[i], qv));
    for (int w = W; w > 1; w /= 2) /* sum adjacent qwords: 2w registers -> w */
        for (int i = 0; i < w; i++)
            p[i] = _mm512_add_epi64(_mm512_permutex2var_epi64(p[2 * i], even, p[2 * i + 1]),
                                    _mm512_permutex2var_epi64(p[2 * i], odd, p[2 * i + 1]));
    const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(p[0])),
                                         _mm512_cvtepi64_epi32(p[1]), 1);
    const __m512 d = _mm512_sub_ps(_mm512_set1_ps(Df), _mm512_cvtepi32_ps(_mm512_add_epi32(h, h)));
    return _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(qs)), mg), cn);
}

#endif /* VQ_ATTN_HAM_AVX512_H */
