/* turboquant_avx2.c — scalar-quantizer kernels, 8 lanes. Up to 7
 * boundaries (bits <= 3) the index is a count of compares against broadcast
 * boundaries; beyond, a two-level count whose second level fetches each
 * lane's boundaries by register permutes (gathers are slow on many cores).
 * Both give the scalar kernel's answer exactly (same f32 product, same
 * comparisons). */
#include <immintrin.h>

#include "codecs/turboquant_kernels.h"

/* The low byte of each i32 lane, as 8 bytes at dst. */
static inline void store_u8x8(uint8_t *dst, __m256i v)
{
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i b = _mm256_shuffle_epi8(v, pick);
    const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
    _mm_storel_epi64((__m128i *)dst, _mm_unpacklo_epi32(lo, hi));
}

static void quantize_row_avx2(const float *x, int64_t n, float mul, const vq_boundaries *q, uint8_t *idx)
{
    const __m256 m = _mm256_set1_ps(mul);
    int64_t j = 0;
    if (q->log2_levels <= 3) { /* up to 7 boundaries: count them all */
        __m256 b[7];
        for (int k = 0; k < q->n; k++) b[k] = _mm256_set1_ps(q->b[k]);
        for (; j + 8 <= n; j += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), m);
            __m256i count = _mm256_setzero_si256();
            for (int k = 0; k < q->n; k++) /* a true compare is all ones = -1 */
                count = _mm256_sub_epi32(count, _mm256_castps_si256(_mm256_cmp_ps(v, b[k], _CMP_GT_OQ)));
            store_u8x8(idx + j, count);
        }
    } else { /* two levels over 8 groups of G levels (see vq_boundaries) */
        const int log2_g = q->log2_levels - 3, G = 1 << log2_g;
        __m256 coarse[7];
        for (int k = 0; k < 7; k++) coarse[k] = _mm256_set1_ps(q->b[(k + 1) * G - 1]);
        for (; j + 8 <= n; j += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), m);
            __m256i g = _mm256_setzero_si256(), within = _mm256_setzero_si256();
            for (int k = 0; k < 7; k++)
                g = _mm256_sub_epi32(g, _mm256_castps_si256(_mm256_cmp_ps(v, coarse[k], _CMP_GT_OQ)));
            for (int t = 0; t + 1 < G; t++) {
                const __m256 bt = _mm256_permutevar8x32_ps(_mm256_loadu_ps(q->fine8 + 8 * t), g);
                within = _mm256_sub_epi32(within, _mm256_castps_si256(_mm256_cmp_ps(v, bt, _CMP_GT_OQ)));
            }
            store_u8x8(idx + j, _mm256_add_epi32(_mm256_slli_epi32(g, log2_g), within));
        }
    }
    vq_quantize_row_scalar(x + j, n - j, mul, q, idx + j);
}

/* cents[i] for 8 indices i < 16 held in two registers: two lane permutes
 * and a blend on bit 3, far cheaper than a memory gather. */
static inline __m256 lookup16(__m256 lo, __m256 hi, __m256i i)
{
    const __m256 from_hi = _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)); /* bit 3 -> sign bit */
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, i), _mm256_permutevar8x32_ps(hi, i), from_hi);
}

static void gather_row_avx2(const uint8_t *idx, int64_t n, const float *cents, uint8_t mask, float scale,
                            bool accumulate, float *out)
{
    const __m256 s = _mm256_set1_ps(scale);
    const __m256i mk = _mm256_set1_epi32(mask);
    const bool small = mask < 16; /* at most 16 centroids: table in registers */
    float table[16] = {0};
    for (int c = 0; small && c <= mask; c++) table[c] = cents[c];
    const __m256 lo = _mm256_loadu_ps(table), hi = _mm256_loadu_ps(table + 8);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i i = _mm256_and_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(idx + j))), mk);
        __m256 c = _mm256_mul_ps(s, small ? lookup16(lo, hi, i) : _mm256_i32gather_ps(cents, i, 4));
        if (accumulate) c = _mm256_add_ps(_mm256_loadu_ps(out + j), c); /* no FMA: match the scalar rounding */
        _mm256_storeu_ps(out + j, c);
    }
    vq_gather_row_scalar(idx + j, n - j, cents, mask, scale, accumulate, out + j);
}

static double sumsq_avx2(const float *x, int64_t n)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + j)), hi = _mm256_cvtps_pd(_mm_loadu_ps(x + j + 4));
        a0 = _mm256_fmadd_pd(lo, lo, a0);
        a1 = _mm256_fmadd_pd(hi, hi, a1);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(a0, a1));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + vq_sumsq_scalar(x + j, n - j);
}

void vq_turbo_kernels_init_avx2(vq_turbo_kernels *k)
{
    k->quantize_row = quantize_row_avx2;
    k->gather_row = gather_row_avx2;
    k->sumsq = sumsq_avx2;
}
