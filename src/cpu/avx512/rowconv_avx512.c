/* rowconv_avx512.c — f16 <-> f32 row conversion, 16 lanes; bit-identical to
 * the core's conversions; other dtypes go to the core. */
#include <immintrin.h>

#include "codecs/hadamard.h"

void vq_row_to_f32_avx512(const void *src, vq_dtype dt, int64_t n, float *dst)
{
    if (dt != VQ_DT_F16) {
        vq_row_to_f32(src, dt, n, dst);
        return;
    }
    const uint16_t *h = src;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(dst + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + j))));
    vq_row_to_f32_avx2(h + j, dt, n - j, dst + j);
}

void vq_row_from_f32_avx512(const float *src, int64_t n, vq_dtype dt, void *dst)
{
    if (dt != VQ_DT_F16) {
        vq_row_from_f32(src, n, dt, dst);
        return;
    }
    uint16_t *h = dst;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i *)(h + j), _mm512_cvtps_ph(_mm512_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
    vq_row_from_f32_avx2(src + j, n - j, dt, h + j);
}
