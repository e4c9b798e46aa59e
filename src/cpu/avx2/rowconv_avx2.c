/* rowconv_avx2.c — f16 <-> f32 row conversion with F16C, bit-identical to
 * the core's vq_row_to_f32 / vq_row_from_f32 (IEEE round-half-to-even); other
 * dtypes go to the core. KV caches are mostly f16, so this is on every
 * rotating codec's path. */
#include <immintrin.h>

#include "codecs/hadamard.h"

void vq_row_to_f32_avx2(const void *src, vq_dtype dt, int64_t n, float *dst)
{
    if (dt != VQ_DT_F16) {
        vq_row_to_f32(src, dt, n, dst);
        return;
    }
    const uint16_t *h = src;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + j))));
    vq_row_to_f32(h + j, dt, n - j, dst + j);
}

void vq_row_from_f32_avx2(const float *src, int64_t n, vq_dtype dt, void *dst)
{
    if (dt != VQ_DT_F16) {
        vq_row_from_f32(src, n, dt, dst);
        return;
    }
    uint16_t *h = dst;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(h + j), _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
    vq_row_from_f32(src + j, n - j, dt, h + j);
}
