/* rows_avx512.c — f16 <-> f32 rows with AVX-512F, 16 per step, masked tail;
 * other dtypes go to the portable core conversion. */
#include <immintrin.h>

#include "core/core.h"

static inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u); }

static void to_f32_avx512(const void *src, vq_dtype dt, int64_t n, float *dst)
{
    if (dt != VQ_DT_F16) {
        vq_row_to_f32(src, dt, n, dst);
        return;
    }
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, h + i)));
    }
}

static void from_f32_avx512(const float *src, int64_t n, vq_dtype dt, void *dst)
{
    if (dt != VQ_DT_F16) {
        vq_row_from_f32(src, n, dt, dst);
        return;
    }
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        _mm256_mask_storeu_epi16(h + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT));
    }
}

void vq_row_kernels_init_avx512(vq_row_kernels *k)
{
    k->to_f32 = to_f32_avx512;
    k->from_f32 = from_f32_avx512;
}
