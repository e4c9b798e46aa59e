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
#include "cpu/avx512/attn_softmax_avx512.h"

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
            __m512 x0 = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k0, row);
            __m512 x1 = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k1, row + 16);
            softmax1_regs(&x0, &x1, m + r, d + r, alpha + r);
            _mm512_mask_storeu_ps(row, k0, x0);
            _mm512_mask_storeu_ps(row + 16, k1, x1);
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
