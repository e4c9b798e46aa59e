/* qjl_avx2.c — AVX2 kernels of the QJL codec: 4-row register-blocked
 * projection with FMA, movemask sign packing, sign-flip sums. */
#include <immintrin.h>

#include "codecs/qjl_kernels.h"

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One S row against rows x0..x0+3 (4 FMA chains share each S load). */
static void project4(const float *s, int64_t d, const float *x, float *o0, float *o1, float *o2, float *o3)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) {
        const __m256 sv = _mm256_loadu_ps(s + c);
        a0 = _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + c), a0);
        a1 = _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + d + c), a1);
        a2 = _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + 2 * d + c), a2);
        a3 = _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + 3 * d + c), a3);
    }
    float t0 = hsum(a0), t1 = hsum(a1), t2 = hsum(a2), t3 = hsum(a3);
    for (; c < d; c++) {
        t0 += s[c] * x[c];
        t1 += s[c] * x[d + c];
        t2 += s[c] * x[2 * d + c];
        t3 += s[c] * x[3 * d + c];
    }
    *o0 = t0; *o1 = t1; *o2 = t2; *o3 = t3;
}

static float dot(const float *a, const float *b, int64_t d)
{
    __m256 acc = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c), acc);
    float t = hsum(acc);
    for (; c < d; c++) t += a[c] * b[c];
    return t;
}

static void project_avx2(const float *S, int64_t m, int64_t d, const float *x, int64_t n, float *out)
{
    int64_t r = 0;
    for (; r + 4 <= n; r += 4)
        for (int64_t j = 0; j < m; j++)
            project4(S + j * d, d, x + r * d, &out[r * m + j], &out[(r + 1) * m + j], &out[(r + 2) * m + j],
                     &out[(r + 3) * m + j]);
    for (; r < n; r++)
        for (int64_t j = 0; j < m; j++) out[r * m + j] = dot(S + j * d, x + r * d, d);
}

static void signs_to_bits_avx2(const float *p, int64_t m, uint32_t *words)
{
    const __m256 z = _mm256_setzero_ps();
    for (int64_t w = 0; w < (m + 31) / 32; w++) {
        uint32_t word = 0;
        int64_t j = w * 32;
        for (; j + 8 <= m && j < w * 32 + 32; j += 8)
            word |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j), z, _CMP_GE_OQ)) << (j & 31);
        for (; j < m && j < w * 32 + 32; j++) word |= (uint32_t)(p[j] >= 0.0f) << (j & 31);
        words[w] = word;
    }
}

static float signed_sum_avx2(const float *v, const uint32_t *words, int64_t m)
{
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const int byte = (int)((words[j >> 5] >> (j & 31)) & 0xffu);
        /* lanes whose bit is 0 get their sign flipped */
        const __m256i off = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(byte), lane_bit), _mm256_setzero_si256());
        acc = _mm256_add_ps(acc, _mm256_xor_ps(_mm256_loadu_ps(v + j), _mm256_and_ps(_mm256_castsi256_ps(off), sign)));
    }
    float t = hsum(acc);
    for (; j < m; j++) t += ((words[j >> 5] >> (j & 31)) & 1u) ? v[j] : -v[j];
    return t;
}

void vq_qjl_kernels_init_avx2(vq_qjl_kernels *k)
{
    k->project = project_avx2;
    k->signs_to_bits = signs_to_bits_avx2;
    k->signed_sum = signed_sum_avx2;
}
