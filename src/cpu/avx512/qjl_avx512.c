/* qjl_avx512.c — AVX-512 kernels of the QJL codec: dot-product and 4x16
 * register-tiled projections, compare-to-mask sign packing, masked sign-flip
 * sums. */
#include <immintrin.h>

#include "codecs/qjl_kernels.h"

static inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u); }

static void project_avx512(const float *S, int64_t m, int64_t d, const float *x, int64_t n, float *out)
{
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < m; j++) {
            __m512 acc = _mm512_setzero_ps();
            for (int64_t c = 0; c < d; c += 16) {
                const __mmask16 k = tail_mask(d - c);
                acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, S + j * d + c), _mm512_maskz_loadu_ps(k, x + r * d + c), acc);
            }
            out[r * m + j] = _mm512_reduce_add_ps(acc);
        }
}

/* R (1..4) rows of x against 16 columns of St: R accumulators, one
 * broadcast of x[r, c] and one load of St per c. */
static inline __attribute__((always_inline)) void tile(const float *St, int64_t m_pad, int64_t d, const float *x,
                                                       int R, int64_t j, float *out)
{
    __m512 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; c++) {
        const __m512 b = _mm512_loadu_ps(St + c * m_pad + j);
        for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * d + c]), b, acc[r]);
    }
    for (int r = 0; r < R; r++) _mm512_storeu_ps(out + r * m_pad + j, acc[r]);
}

static void project_t_avx512(const float *St, int64_t m_pad, int64_t d, const float *x, int64_t n, float *out)
{
    int64_t r = 0;
    for (; r + 4 <= n; r += 4)
        for (int64_t j = 0; j < m_pad; j += 16) tile(St, m_pad, d, x + r * d, 4, j, out + r * m_pad);
    for (; r < n; r++)
        for (int64_t j = 0; j < m_pad; j += 16) tile(St, m_pad, d, x + r * d, 1, j, out + r * m_pad);
}

static void signs_to_bits_avx512(const float *p, int64_t m, uint32_t *words)
{
    const __m512 z = _mm512_setzero_ps();
    for (int64_t w = 0; w < (m + 31) / 32; w++) {
        uint32_t word = 0;
        for (int64_t j = w * 32; j < m && j < w * 32 + 32; j += 16) {
            const __mmask16 k = tail_mask(m - j);
            word |= (uint32_t)_mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, p + j), z, _CMP_GE_OQ) << (j & 31);
        }
        words[w] = word;
    }
}

static float signed_sum_avx512(const float *v, const uint32_t *words, int64_t m)
{
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < m; j += 16) {
        const __mmask16 k = tail_mask(m - j);
        const __mmask16 plus = (__mmask16)(words[j >> 5] >> (j & 31));
        const __m512 x = _mm512_maskz_loadu_ps(k, v + j);
        /* +x where the bit is 1, -x where it is 0; masked-off lanes are 0 */
        acc = _mm512_add_ps(acc, _mm512_mask_sub_ps(x, (__mmask16)~plus, _mm512_setzero_ps(), x));
    }
    return _mm512_reduce_add_ps(acc);
}

void vq_qjl_kernels_init_avx512(vq_qjl_kernels *k)
{
    k->project = project_avx512;
    k->project_t = project_t_avx512;
    k->signs_to_bits = signs_to_bits_avx512;
    k->signed_sum = signed_sum_avx512;
}
