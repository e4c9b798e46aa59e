/* rabitq_avx2.c — AVX2 kernels of the RaBitQ codec: one sign byte per 8
 * floats by movemask with float64 norm accumulation, popcnt Hamming. */
#include <immintrin.h>

#include "codecs/rabitq_kernels.h"
#include "formats/format_rabitq.h"

static inline double hsum_pd(__m256d v)
{
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static void sign_norms_avx2(const float *y, int64_t d, uint8_t *bits, double *l1, double *l2)
{
    const __m256 z = _mm256_setzero_ps(), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256d a = _mm256_setzero_pd(), s = _mm256_setzero_pd();
    for (int64_t j = 0; j < d; j += 8) {
        const __m256 v = _mm256_loadu_ps(y + j);
        bits[j / 8] = (uint8_t)_mm256_movemask_ps(_mm256_cmp_ps(v, z, _CMP_GE_OQ));
        const __m256 av = _mm256_and_ps(v, abs_mask);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(av)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(av, 1));
        a = _mm256_add_pd(a, _mm256_add_pd(lo, hi));
        s = _mm256_fmadd_pd(lo, lo, _mm256_fmadd_pd(hi, hi, s));
    }
    *l1 = hsum_pd(a);
    *l2 = hsum_pd(s);
}

/* The portable loop of format_rabitq.h, compiled here with -mpopcnt so each
 * 4-byte step is one popcnt instruction. */
static int64_t hamming_avx2(const uint8_t *a, const uint8_t *b, int64_t n) { return vq_rabitq_hamming(a, b, n); }

void vq_rabitq_kernels_init_avx2(vq_rabitq_kernels *k)
{
    k->sign_norms = sign_norms_avx2;
    k->hamming = hamming_avx2;
}
