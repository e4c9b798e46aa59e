/* f16_rows_avx2.c — f16 <-> f32 rows with F16C, 8 per step, scalar tail. */
#include <immintrin.h>

#include "codecs/f16_rows.h"

static void to_f32_avx2(const uint16_t *src, int64_t n, float *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = vq_half_to_float(src[i]);
}

static void from_f32_avx2(const float *src, int64_t n, uint16_t *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = vq_float_to_half(src[i]);
}

void vq_f16_kernels_init_avx2(vq_f16_kernels *k)
{
    k->to_f32 = to_f32_avx2;
    k->from_f32 = from_f32_avx2;
}
