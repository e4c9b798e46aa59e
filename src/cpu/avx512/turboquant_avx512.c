/* turboquant_avx512.c — scalar-quantizer kernels, 16 lanes: compare-count
 * up to 15 boundaries, beyond a two-level count with register permutes (see
 * vq_boundaries); exactly the scalar kernel's answers. */
#include <immintrin.h>

#include "codecs/turboquant_kernels.h"

static void quantize_row_avx512(const float *x, int64_t n, float mul, const vq_boundaries *q, uint8_t *idx)
{
    const __m512 m = _mm512_set1_ps(mul);
    const __m512i one = _mm512_set1_epi32(1);
    int64_t j = 0;
    if (q->n <= 15) {
        __m512 b[15];
        for (int k = 0; k < q->n; k++) b[k] = _mm512_set1_ps(q->b[k]);
        for (; j + 16 <= n; j += 16) {
            const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j), m);
            __m512i count = _mm512_setzero_si512();
            for (int k = 0; k < q->n; k++)
                count = _mm512_mask_add_epi32(count, _mm512_cmp_ps_mask(v, b[k], _CMP_GT_OQ), count, one);
            _mm_storeu_si128((__m128i *)(idx + j), _mm512_cvtepi32_epi8(count));
        }
    } else { /* two levels over 16 groups of G levels (see vq_boundaries) */
        const int log2_g = q->log2_levels - 4, G = 1 << log2_g;
        __m512 coarse[15];
        for (int k = 0; k < 15; k++) coarse[k] = _mm512_set1_ps(q->b[(k + 1) * G - 1]);
        for (; j + 16 <= n; j += 16) {
            const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j), m);
            __m512i g = _mm512_setzero_si512(), within = _mm512_setzero_si512();
            for (int k = 0; k < 15; k++) g = _mm512_mask_add_epi32(g, _mm512_cmp_ps_mask(v, coarse[k], _CMP_GT_OQ), g, one);
            for (int t = 0; t + 1 < G; t++) {
                const __m512 bt = _mm512_permutexvar_ps(g, _mm512_loadu_ps(q->fine16 + 16 * t));
                within = _mm512_mask_add_epi32(within, _mm512_cmp_ps_mask(v, bt, _CMP_GT_OQ), within, one);
            }
            _mm_storeu_si128((__m128i *)(idx + j), _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_slli_epi32(g, log2_g), within)));
        }
    }
    vq_quantize_row_scalar(x + j, n - j, mul, q, idx + j);
}

static void gather_row_avx512(const uint8_t *idx, int64_t n, const float *cents, uint8_t mask, float scale,
                              bool accumulate, float *out)
{
    const __m512 s = _mm512_set1_ps(scale);
    const __m512i mk = _mm512_set1_epi32(mask);
    /* up to 32 centroids live in two registers: one two-source permute per
     * 16 lanes instead of a memory gather */
    const bool small = mask < 32;
    float table[32] = {0};
    for (int c = 0; small && c <= mask; c++) table[c] = cents[c];
    const __m512 lo = _mm512_loadu_ps(table), hi = _mm512_loadu_ps(table + 16);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512i i = _mm512_and_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(idx + j))), mk);
        __m512 c = _mm512_mul_ps(s, small ? _mm512_permutex2var_ps(lo, i, hi) : _mm512_i32gather_ps(i, cents, 4));
        if (accumulate) c = _mm512_add_ps(_mm512_loadu_ps(out + j), c); /* no FMA: match the scalar rounding */
        _mm512_storeu_ps(out + j, c);
    }
    vq_gather_row_scalar(idx + j, n - j, cents, mask, scale, accumulate, out + j);
}

static double sumsq_avx512(const float *x, int64_t n)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(x + j)), hi = _mm512_cvtps_pd(_mm256_loadu_ps(x + j + 8));
        a0 = _mm512_fmadd_pd(lo, lo, a0);
        a1 = _mm512_fmadd_pd(hi, hi, a1);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1)) + vq_sumsq_scalar(x + j, n - j);
}

void vq_turbo_kernels_init_avx512(vq_turbo_kernels *k)
{
    k->quantize_row = quantize_row_avx512;
    k->gather_row = gather_row_avx512;
    k->sumsq = sumsq_avx512;
}
