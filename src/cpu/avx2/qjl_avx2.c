/* qjl_avx2.c — AVX2 kernels of the QJL codec: FMA dot-product and 4x16
 * register-tiled projections, movemask sign packing, sign-flip sums. */
#include <immintrin.h>

#include "codecs/qjl_kernels.h"

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void project_avx2(const float *S, int64_t m, int64_t d, const float *x, int64_t n, float *out)
{
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < m; j++) {
            const float *a = S + j * d, *b = x + r * d;
            __m256 acc = _mm256_setzero_ps();
            int64_t c = 0;
            for (; c + 8 <= d; c += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c), acc);
            float t = hsum(acc);
            for (; c < d; c++) t += a[c] * b[c];
            out[r * m + j] = t;
        }
}

/* R (1..4) rows of x against 16 columns of St: 2R accumulators, one
 * broadcast of x[r, c] and two loads of St per c (a GEMM micro-tile). */
static inline __attribute__((always_inline)) void tile(const float *St, int64_t m_pad, int64_t d, const float *x,
                                                       int R, int64_t j, float *out)
{
    __m256 acc[4][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t c = 0; c < d; c++) {
        const __m256 b0 = _mm256_loadu_ps(St + c * m_pad + j), b1 = _mm256_loadu_ps(St + c * m_pad + j + 8);
        for (int r = 0; r < R; r++) {
            const __m256 a = _mm256_broadcast_ss(x + r * d + c);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(out + r * m_pad + j, acc[r][0]);
        _mm256_storeu_ps(out + r * m_pad + j + 8, acc[r][1]);
    }
}

static void project_t_avx2(const float *St, int64_t m_pad, int64_t d, const float *x, int64_t n, float *out)
{
    int64_t r = 0;
    for (; r + 4 <= n; r += 4)
        for (int64_t j = 0; j < m_pad; j += 16) tile(St, m_pad, d, x + r * d, 4, j, out + r * m_pad);
    for (; r < n; r++)
        for (int64_t j = 0; j < m_pad; j += 16) tile(St, m_pad, d, x + r * d, 1, j, out + r * m_pad);
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
    k->project_t = project_t_avx2;
    k->signs_to_bits = signs_to_bits_avx2;
    k->signed_sum = signed_sum_avx2;
}
