/* attn_softmax_avx512.c — the online-softmax step (attn_kernels.h, softmax)
 * on 16 lanes, masked tails instead of a padded copy; the skeleton's row
 * passes (poison, rescale). exp of x < -87 is 0, so masked (-inf) scores
 * vanish. The skeleton's poison pass runs first, so the scores are finite or
 * -inf here. A block of <= 32 scores (every skeleton block) takes two
 * registers and no loop; alpha comes from the same vector exp (one lane), not
 * libm, which at one to four rows per kv head was a visible part of the step. */
#include <immintrin.h>
#include <math.h>

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

/* Four rows of one block (n <= 32) together: the row maxima and sums reduced
 * jointly, alpha of all four from one vector exp. Same exp16 of the same
 * differences as the one-row path, so p and alpha are bit-identical to it;
 * d is summed in another order (f32 rounding). */
static inline __attribute__((always_inline)) void softmax4(float *s, int64_t lds, float *m, float *d, float *alpha,
                                                           __mmask16 k0, __mmask16 k1)
{
    __m512 x0[4], x1[4], v[4];
    for (int r = 0; r < 4; r++) {
        x0[r] = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k0, s + r * lds);
        x1[r] = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k1, s + r * lds + 16);
        v[r] = _mm512_max_ps(x0[r], x1[r]);
    }
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512 mold = _mm512_permutexvar_ps(quad, _mm512_castps128_ps512(_mm_loadu_ps(m)));
    const __m512 bm = VQ_REDUCE4(_mm512_max_ps, v);
    const __m512 mnew = _mm512_max_ps(mold, bm);
    /* rows still at -inf: alpha 1 (and p = exp16(NaN) = 0 below) */
    const __mmask16 dead = _mm512_cmp_ps_mask(mnew, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
    const __m512 av = _mm512_mask_blend_ps(dead, exp16(_mm512_sub_ps(mold, mnew)), _mm512_set1_ps(1.0f));
    for (int r = 0; r < 4; r++) {
        const __m512 vm = _mm512_permutexvar_ps(_mm512_set1_epi32(4 * r), mnew);
        const __m512 e0 = exp16(_mm512_sub_ps(x0[r], vm)), e1 = exp16(_mm512_sub_ps(x1[r], vm));
        _mm512_mask_storeu_ps(s + r * lds, k0, e0);
        _mm512_mask_storeu_ps(s + r * lds + 16, k1, e1);
        v[r] = _mm512_add_ps(e0, e1);
    }
    const __m512 sum = VQ_REDUCE4(_mm512_add_ps, v);
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m128 a4 = _mm512_castps512_ps128(_mm512_permutexvar_ps(pick, av));
    const __m128 s4 = _mm512_castps512_ps128(_mm512_permutexvar_ps(pick, sum));
    _mm_storeu_ps(alpha, a4);
    _mm_storeu_ps(d, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(d), a4), s4));
    _mm_storeu_ps(m, _mm512_castps512_ps128(_mm512_permutexvar_ps(pick, mnew)));
}

static void softmax_avx512(int R, int n, float *s, int64_t lds, float *m, float *d, float *alpha)
{
    const __mmask16 k0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1u);
    const __mmask16 k1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1u);
    int r0 = 0;
    if (n <= 32)
        for (; r0 + 4 <= R; r0 += 4) softmax4(s + r0 * lds, lds, m + r0, d + r0, alpha + r0, k0, k1);
    for (int r = r0; r < R; r++) {
        float *row = s + r * lds;
        if (n <= 32) { /* one block of the skeleton: two registers, no loop */
            const __m512 x0 = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k0, row);
            const __m512 x1 = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k1, row + 16);
            float mx = _mm512_reduce_max_ps(_mm512_max_ps(x0, x1));
            mx = m[r] > mx ? m[r] : mx;
            if (mx == -INFINITY) {
                _mm512_mask_storeu_ps(row, k0, _mm512_setzero_ps());
                _mm512_mask_storeu_ps(row + 16, k1, _mm512_setzero_ps());
                alpha[r] = 1.0f;
                continue;
            }
            /* lane 0: exp(m_old - m_new) (0 when m_old = -inf) with the same exp as the scores */
            const __m512 vm = _mm512_set1_ps(mx);
            const __m512 e0 = exp16(_mm512_sub_ps(x0, vm)), e1 = exp16(_mm512_sub_ps(x1, vm));
            const float a = _mm512_cvtss_f32(exp16(_mm512_set1_ps(m[r] - mx)));
            _mm512_mask_storeu_ps(row, k0, e0);
            _mm512_mask_storeu_ps(row + 16, k1, e1);
            alpha[r] = a;
            d[r] = d[r] * a + _mm512_reduce_add_ps(_mm512_add_ps(e0, e1));
            m[r] = mx;
            continue;
        }
        __m512 vmax = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < n; j += 16) {
            const __mmask16 k = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1u);
            vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, row + j));
        }
        float mx = _mm512_reduce_max_ps(vmax);
        mx = m[r] > mx ? m[r] : mx;
        if (mx == -INFINITY) {
            for (int j = 0; j < n; j++) row[j] = 0.0f;
            alpha[r] = 1.0f;
            continue;
        }
        const __m512 vm = _mm512_set1_ps(mx);
        __m512 vsum = _mm512_setzero_ps();
        for (int j = 0; j < n; j += 16) {
            const __mmask16 k = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1u);
            const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), vm));
            _mm512_mask_storeu_ps(row + j, k, e);
            vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(k, e));
        }
        const float a = _mm512_cvtss_f32(exp16(_mm512_set1_ps(m[r] - mx)));
        alpha[r] = a;
        d[r] = d[r] * a + _mm512_reduce_add_ps(vsum);
        m[r] = mx;
    }
}

/* s [R][lds]: NaN / +inf scores -> -inf, rows marked bad; 16 lanes and a
 * masked tail, one compare per step (not less than +inf, unordered). */
static void poison_avx512(int R, int n, float *s, int64_t lds, bool *bad)
{
    const __m512 inf = _mm512_set1_ps(INFINITY), ninf = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < R; r++) {
        float *row = s + r * lds;
        __mmask16 hit = 0;
        for (int j = 0; j < n; j += 16) {
            const __mmask16 k = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1u);
            const __mmask16 m = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, row + j), inf, _CMP_NLT_UQ);
            _mm512_mask_storeu_ps(row + j, m, ninf);
            hit |= m;
        }
        if (hit) bad[r] = true;
    }
}

/* o [R][ldo] *= alpha[r] where alpha[r] != 1 (D % 8 == 0: a masked half step) */
static void rescale_avx512(int R, int64_t D, float *o, int64_t ldo, const float *alpha)
{
    for (int r = 0; r < R; r++) {
        if (alpha[r] == 1.0f) continue;
        const __m512 a = _mm512_set1_ps(alpha[r]);
        float *row = o + r * ldo;
        for (int64_t c = 0; c < D; c += 16) {
            const __mmask16 k = D - c >= 16 ? 0xffff : 0x00ff;
            _mm512_mask_storeu_ps(row + c, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + c), a));
        }
    }
}

void vq_attn_kernels_init_avx512_softmax(vq_attn_kernels *k)
{
    k->softmax = softmax_avx512;
    k->poison = poison_avx512;
    k->rescale = rescale_avx512;
}
