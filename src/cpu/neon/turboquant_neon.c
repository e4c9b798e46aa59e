/* turboquant_neon.c — scalar-quantizer kernels, 4 lanes: compare-count for
 * up to 15 boundaries (bits <= 4, the common case); the scalar binary search
 * beyond. Exactly the scalar kernel's answers. */
#include <arm_neon.h>

#include "codecs/turboquant_kernels.h"

static void quantize_row_neon(const float *x, int64_t n, float mul, const vq_boundaries *q, uint8_t *idx)
{
    int64_t j = 0;
    if (q->n <= 15) {
        for (; j + 4 <= n; j += 4) {
            const float32x4_t v = vmulq_n_f32(vld1q_f32(x + j), mul);
            uint32x4_t count = vdupq_n_u32(0);
            for (int k = 0; k < q->n; k++) /* a true compare is all ones = -1 */
                count = vsubq_u32(count, vcgtq_f32(v, vdupq_n_f32(q->b[k])));
            idx[j] = (uint8_t)vgetq_lane_u32(count, 0);
            idx[j + 1] = (uint8_t)vgetq_lane_u32(count, 1);
            idx[j + 2] = (uint8_t)vgetq_lane_u32(count, 2);
            idx[j + 3] = (uint8_t)vgetq_lane_u32(count, 3);
        }
    }
    vq_quantize_row_scalar(x + j, n - j, mul, q, idx + j);
}

void vq_turbo_kernels_init_neon(vq_turbo_kernels *k) { k->quantize_row = quantize_row_neon; }
