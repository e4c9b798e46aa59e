/* attn_softmax_avx2.h — the inline bodies of the AVX2 online-softmax step,
 * poison and rescale passes (attn_kernels.h: softmax, poison, rescale),
 * shared by their table entries (attn_dot_avx2.c) and the fused block
 * kernels (attn_kivi_int8_avx2.c, attn_rabitq_avx2.c), which so compute the same
 * floats. Internal; include only from files built with the AVX2 flags. */
#ifndef VQ_ATTN_SOFTMAX_AVX2_H
#define VQ_ATTN_SOFTMAX_AVX2_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "cpu/avx2/attn_avx2_inline.h"

/* exp(x) for x <= 0 (Cephes polynomial after range reduction, ~1 ulp); x
 * below -87 (and NaN) gives exactly 0, so masked (-inf) scores vanish.
 * The callers' x = s - max is never above 0: no upper clamp. */
VQ_INLINE __m256 exp8(__m256 x)
{
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
}

/* max(m, max of row[0 .. n-1]) */
VQ_INLINE float row_max_avx2(const float *row, int n, float m)
{
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(row + j));
    float mx = m;
    for (int t = j; t < n; t++) mx = row[t] > mx ? row[t] : mx;
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h) > mx ? _mm_cvtss_f32(h) : mx;
}

/* One online-softmax step over s [R][lds] (see attn_kernels.h). Tails of
 * n % 8 are padded to -inf in a local vector so every lane runs the same.
 * Rows go four at a time, their maxima first: a row's exponentials wait on
 * its max, and with the maxima of the four ahead the out-of-order window
 * holds the exponentials of more than one row (Zen 1's cannot take a whole
 * row's step at once). */
VQ_INLINE void softmax_rows_avx2(int R, int n, float *s, int64_t lds, float *m, float *d, float *alpha)
{
    for (int r0 = 0; r0 < R; r0 += 4) {
        const int rn = R - r0 < 4 ? R - r0 : 4;
        float mx[4];
        for (int i = 0; i < rn; i++) mx[i] = row_max_avx2(s + (r0 + i) * lds, n, m[r0 + i]);
        for (int i = 0; i < rn; i++) {
            const int r = r0 + i;
            float *row = s + r * lds;
            if (mx[i] == -INFINITY) {
                for (int t = 0; t < n; t++) row[t] = 0.0f;
                alpha[r] = 1.0f;
                continue;
            }
            const __m256 vm = _mm256_set1_ps(mx[i]);
            __m256 vsum = _mm256_setzero_ps();
            int j = 0;
            for (; j + 8 <= n; j += 8) {
                const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
                _mm256_storeu_ps(row + j, e);
                vsum = _mm256_add_ps(vsum, e);
            }
            if (j < n) {
                float tmp[8];
                for (int t = 0; t < 8; t++) tmp[t] = j + t < n ? row[j + t] : -INFINITY;
                const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(tmp), vm));
                _mm256_storeu_ps(tmp, e);
                for (int t = 0; j + t < n; t++) row[j + t] = tmp[t];
                vsum = _mm256_add_ps(vsum, e);
            }
            /* a max that did not move: alpha 1 without the libm call (expf(0) is 1) */
            const float a = m[r] == -INFINITY ? 0.0f : m[r] == mx[i] ? 1.0f : expf(m[r] - mx[i]);
            alpha[r] = a;
            d[r] = d[r] * a + hsum8(vsum);
            m[r] = mx[i];
        }
    }
}

/* s [R][lds]: NaN / +inf scores -> -inf, rows marked bad; 8 lanes, one
 * compare (not less than +inf, unordered: NaN or +inf) per step. Where n %
 * 8 == 0 the compares of all rows meet in one test first (the common case:
 * none hit; one branch, not one per vector). */
VQ_INLINE void poison_rows_avx2(int R, int n, float *s, int64_t lds, bool *bad)
{
    const __m256 inf = _mm256_set1_ps(INFINITY), ninf = _mm256_set1_ps(-INFINITY);
    if (n % 8 == 0) {
        __m256 any = _mm256_setzero_ps();
        for (int r = 0; r < R; r++)
            for (int j = 0; j < n; j += 8)
                any = _mm256_or_ps(any, _mm256_cmp_ps(_mm256_loadu_ps(s + r * lds + j), inf, _CMP_NLT_UQ));
        if (!_mm256_movemask_ps(any)) return;
    }
    for (int r = 0; r < R; r++) {
        float *row = s + r * lds;
        int j = 0, hit = 0;
        for (; j + 8 <= n; j += 8) {
            const __m256 x = _mm256_loadu_ps(row + j), m = _mm256_cmp_ps(x, inf, _CMP_NLT_UQ);
            if (_mm256_movemask_ps(m)) {
                _mm256_storeu_ps(row + j, _mm256_blendv_ps(x, ninf, m));
                hit = 1;
            }
        }
        for (; j < n; j++)
            if (!(row[j] < INFINITY)) {
                row[j] = -INFINITY;
                hit = 1;
            }
        if (hit) bad[r] = true;
    }
}

/* o [R][ldo] *= alpha[r] where alpha[r] != 1 */
VQ_INLINE void rescale_rows_avx2(int R, int64_t D, float *o, int64_t ldo, const float *alpha)
{
    for (int r = 0; r < R; r++) {
        if (alpha[r] == 1.0f) continue;
        const __m256 a = _mm256_set1_ps(alpha[r]);
        float *row = o + r * ldo;
        for (int64_t c = 0; c < D; c += 8) _mm256_storeu_ps(row + c, _mm256_mul_ps(_mm256_loadu_ps(row + c), a));
    }
}

#endif /* VQ_ATTN_SOFTMAX_AVX2_H */
