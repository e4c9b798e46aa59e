/* hadamard_neon.c — the rotation kernel with 4-lane butterflies: stages
 * h = 1, 2 inside one register, h >= 4 across registers; the last stage
 * carries 1/sqrt(d) (and diag for the inverse). */
#include <arm_neon.h>

#include "codecs/hadamard.h"

static inline float32x4_t finish4(float32x4_t v, float32x4_t s, const float *diag, int64_t j)
{
    return diag != NULL ? vmulq_f32(v, vmulq_f32(s, vld1q_f32(diag + j))) : vmulq_f32(v, s);
}

/* row [d] in place; d < 4 goes to the scalar kernel. */
void vq_rotate_row_neon(float *row, int64_t d, const float *diag, bool inverse)
{
    if (d < 4) {
        vq_rotate_row_scalar(row, d, diag, inverse);
        return;
    }
    static const float s1v[4] = {1, -1, 1, -1}, s2v[4] = {1, 1, -1, -1};
    const float32x4_t s1 = vld1q_f32(s1v), s2 = vld1q_f32(s2v);
    const float32x4_t s = vdupq_n_f32(vq_hadamard_norm(d));
    const float *out_diag = inverse ? diag : NULL;
    for (int64_t j = 0; j < d; j += 4) {
        float32x4_t v = vld1q_f32(row + j);
        if (!inverse && diag != NULL) v = vmulq_f32(v, vld1q_f32(diag + j));
        v = vfmaq_f32(vrev64q_f32(v), v, s1);     /* partner + sign * self, h = 1 */
        v = vfmaq_f32(vextq_f32(v, v, 2), v, s2); /* h = 2 */
        if (d == 4) v = finish4(v, s, out_diag, j);
        vst1q_f32(row + j, v);
    }
    for (int64_t h = 4; h < d; h <<= 1) {
        const bool last = 2 * h == d;
        for (int64_t i = 0; i < d; i += 2 * h) {
            for (int64_t j = i; j < i + h; j += 4) {
                const float32x4_t a = vld1q_f32(row + j), b = vld1q_f32(row + j + h);
                float32x4_t lo = vaddq_f32(a, b), hi = vsubq_f32(a, b);
                if (last) {
                    lo = finish4(lo, s, out_diag, j);
                    hi = finish4(hi, s, out_diag, j + h);
                }
                vst1q_f32(row + j, lo);
                vst1q_f32(row + j + h, hi);
            }
        }
    }
}
