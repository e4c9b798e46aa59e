/* rows_avx2.c — f16 <-> f32 rows with F16C, 8 per step; the tail and other
 * dtypes go to the portable core conversion (bit-identical results). */
#include <immintrin.h>

#include "core/core.h"

static void to_f32_avx2(const void *src, vq_dtype dt, int64_t n, float *dst)
{
    if (dt != VQ_DT_F16) {
        vq_row_to_f32(src, dt, n, dst);
        return;
    }
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    vq_row_to_f32(h + i, dt, n - i, dst + i);
}

static void from_f32_avx2(const float *src, int64_t n, vq_dtype dt, void *dst)
{
    if (dt != VQ_DT_F16) {
        vq_row_from_f32(src, n, dt, dst);
        return;
    }
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    vq_row_from_f32(src + i, n - i, dt, h + i);
}

void vq_row_kernels_init_avx2(vq_row_kernels *k)
{
    k->to_f32 = to_f32_avx2;
    k->from_f32 = from_f32_avx2;
}
