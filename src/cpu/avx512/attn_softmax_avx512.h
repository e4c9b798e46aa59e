/* attn_softmax_avx512.h — the inline bodies of the AVX-512 softmax step (attn_softmax_avx512.c: how it works), shared with the
 * fused KIVI and RaBitQ block kernels (attn_kivi_int8_vnnivbmi.c, attn_rabitq_vnnivbmi.c). Internal; include only from a file built with its
 * flags (the file names say which). */
#ifndef VQ_ATTN_SOFTMAX_AVX512_H
#define VQ_ATTN_SOFTMAX_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_avx512_inline.h"

/* exp(x) for x <= 0: x = n ln2 + r with n = rint(x / ln2) and r from a
 * two-part ln2 (Cody-Waite, so r is exact to ~2^-32 even for |x| ~ 87),
 * e^r by its degree-7 Taylor polynomial (|r| <= ln2 / 2: truncation < 6e-9,
 * about 1-2 ulp after rounding), then the 2^n factor by vscalefps. */
static inline __attribute__((always_inline)) __m512 exp16(__m512 x)
{
    static const float inv_fact[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x));
    __m512 y = _mm512_set1_ps(inv_fact[0]);
    for (int i = 1; i < 8; i++) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(inv_fact[i]));
    return _mm512_maskz_scalef_ps(keep, y, n); /* y * 2^n, 0 below -87 and for NaN */
}

/* The non-finite rule (poison) on a register of scores: of the lanes k, a
 * NaN or +inf score becomes -inf, as do the lanes outside k; true where a
 * lane of k was hit (its row is poisoned). */
static inline __attribute__((always_inline)) bool poison_regs(__m512 *x, __mmask16 k)
{
    const __mmask16 h = _mm512_mask_cmp_ps_mask(k, *x, _mm512_set1_ps(INFINITY), _CMP_NLT_UQ);
    *x = _mm512_mask_blend_ps(k & (__mmask16)~h, _mm512_set1_ps(-INFINITY), *x);
    return h != 0;
}

/* The poison rule on RB rows' scores of a whole block, x0 / x1 tokens
 * 0-15 / 16-31 (a NaN or +inf score becomes -inf and marks its row); rows
 * past RB -inf. */
static inline __attribute__((always_inline)) void poison_rows_regs(int RB, __m512 *x0, __m512 *x1, bool *bad)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < 4; r++) {
        if (r >= RB) {
            x0[r] = x1[r] = ninf;
            continue;
        }
        if (poison_regs(&x0[r], 0xffff) | poison_regs(&x1[r], 0xffff)) bad[r] = true;
    }
}

/* One row of one block (n <= 32) on registers: x0, x1 the scores of
 * tokens 0-15, 16-31 (-inf where absent) become p; m, d, alpha updated. */
static inline __attribute__((always_inline)) void softmax1_regs(__m512 *x0, __m512 *x1, float *m, float *d,
                                                                float *alpha)
{
    float mx = _mm512_reduce_max_ps(_mm512_max_ps(*x0, *x1));
    mx = *m > mx ? *m : mx;
    if (mx == -INFINITY) {
        *x0 = *x1 = _mm512_setzero_ps();
        *alpha = 1.0f;
        return;
    }
    /* lane 0: exp(m_old - m_new) (0 when m_old = -inf) with the same exp as the scores */
    const __m512 vm = _mm512_set1_ps(mx);
    *x0 = exp16(_mm512_sub_ps(*x0, vm));
    *x1 = exp16(_mm512_sub_ps(*x1, vm));
    const float a = _mm512_cvtss_f32(exp16(_mm512_set1_ps(*m - mx)));
    *alpha = a;
    *d = *d * a + _mm512_reduce_add_ps(_mm512_add_ps(*x0, *x1));
    *m = mx;
}

/* Four rows of one block (n <= 32) together: the row maxima and sums reduced
 * jointly, alpha of all four from one vector exp. Same exp16 of the same
 * differences as the one-row path, so p and alpha are bit-identical to it;
 * d is summed in another order (f32 rounding). The step on registers: x0[r], x1[r] the scores of row r (tokens 0-15,
 * 16-31; -inf where absent) become p, m / d / alpha of the four rows are
 * updated in memory. */
static inline __attribute__((always_inline)) void softmax4_regs(__m512 *x0, __m512 *x1, float *m, float *d,
                                                                float *alpha)
{
    __m512 v[4];
    for (int r = 0; r < 4; r++) v[r] = _mm512_max_ps(x0[r], x1[r]);
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512 mold = _mm512_permutexvar_ps(quad, _mm512_castps128_ps512(_mm_loadu_ps(m)));
    const __m512 bm = VQ_REDUCE4(_mm512_max_ps, v);
    const __m512 mnew = _mm512_max_ps(mold, bm);
    /* rows still at -inf: alpha 1 (and p = exp16(NaN) = 0 below) */
    const __mmask16 dead = _mm512_cmp_ps_mask(mnew, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
    const __m512 av = _mm512_mask_blend_ps(dead, exp16(_mm512_sub_ps(mold, mnew)), _mm512_set1_ps(1.0f));
    for (int r = 0; r < 4; r++) {
        const __m512 vm = _mm512_permutexvar_ps(_mm512_set1_epi32(4 * r), mnew);
        x0[r] = exp16(_mm512_sub_ps(x0[r], vm));
        x1[r] = exp16(_mm512_sub_ps(x1[r], vm));
        v[r] = _mm512_add_ps(x0[r], x1[r]);
    }
    const __m512 sum = VQ_REDUCE4(_mm512_add_ps, v);
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m128 a4 = _mm512_castps512_ps128(_mm512_permutexvar_ps(pick, av));
    const __m128 s4 = _mm512_castps512_ps128(_mm512_permutexvar_ps(pick, sum));
    _mm_storeu_ps(alpha, a4);
    _mm_storeu_ps(d, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(d), a4), s4));
    _mm_storeu_ps(m, _mm512_castps512_ps128(_mm512_permutexvar_ps(pick, mnew)));
}

/* The step of RB <= 4 rows of one block on registers, as softmax() runs it:
 * four rows together (softmax4_regs), fewer one by one (softmax1_regs). */
static inline __attribute__((always_inline)) void softmax_rows_regs(int RB, __m512 *x0, __m512 *x1, float *m, float *d,
                                                                    float *alpha)
{
    if (RB == 4) {
        _Alignas(16) float m4[4], d4[4];
        for (int r = 0; r < 4; r++) {
            m4[r] = m[r];
            d4[r] = d[r];
        }
        softmax4_regs(x0, x1, m4, d4, alpha);
        for (int r = 0; r < 4; r++) {
            m[r] = m4[r];
            d[r] = d4[r];
        }
    } else
        for (int r = 0; r < RB; r++) softmax1_regs(&x0[r], &x1[r], &m[r], &d[r], &alpha[r]);
}

/* o [RB][ldo] (D = 128) *= alpha[r] where alpha[r] != 1, one product per
 * element, as rescale. */
static inline __attribute__((always_inline)) void rescale_rows128(int RB, const float *alpha, float *o, int64_t ldo)
{
    for (int r = 0; r < RB; r++) {
        if (alpha[r] == 1.0f) continue;
        const __m512 a = _mm512_set1_ps(alpha[r]);
        for (int c = 0; c < 128; c += 16) _mm512_storeu_ps(o + r * ldo + c, _mm512_mul_ps(_mm512_loadu_ps(o + r * ldo + c), a));
    }
}

/* The step on four rows of s [4][lds] (n <= 32 scores each, k0 / k1 the
 * lanes of tokens 0-15 / 16-31). */
static inline __attribute__((always_inline)) void softmax4(float *s, int64_t lds, float *m, float *d, float *alpha,
                                                           __mmask16 k0, __mmask16 k1)
{
    __m512 x0[4], x1[4];
    for (int r = 0; r < 4; r++) {
        x0[r] = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k0, s + r * lds);
        x1[r] = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k1, s + r * lds + 16);
    }
    softmax4_regs(x0, x1, m, d, alpha);
    for (int r = 0; r < 4; r++) {
        _mm512_mask_storeu_ps(s + r * lds, k0, x0[r]);
        _mm512_mask_storeu_ps(s + r * lds + 16, k1, x1[r]);
    }
}

#endif /* VQ_ATTN_SOFTMAX_AVX512_H */
