/* attn_dot_neon.c — NEON attention kernels for f32 plain keys and values
 * (the f32 tiles every compressed format decodes into). Other entries keep
 * the scalar versions. */
#include <arm_neon.h>

#include "attention/attn_kernels.h"

/* q [R][ldq] . k [n][ldk]^T -> s [R][lds], f32 keys */
static void qk_f32_neon(int R, int n, int64_t D, const float *q, int64_t ldq, const void *kv, int64_t ldk,
                        float *s, int64_t lds)
{
    const float *k = kv;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
            for (int64_t c = 0; c < D; c += 8) {
                a0 = vfmaq_f32(a0, vld1q_f32(q + r * ldq + c), vld1q_f32(k + j * ldk + c));
                a1 = vfmaq_f32(a1, vld1q_f32(q + r * ldq + c + 4), vld1q_f32(k + j * ldk + c + 4));
            }
            s[r * lds + j] = vaddvq_f32(vaddq_f32(a0, a1));
        }
}

/* o [R][ldo] += p [R][ldp] . v [n][ldv], f32 values */
static void pv_f32_neon(int R, int n, int64_t D, const float *p, int64_t ldp, const void *vv, int64_t ldv,
                        float *o, int64_t ldo)
{
    const float *v = vv;
    for (int r = 0; r < R; r++)
        for (int64_t c = 0; c < D; c += 8) {
            float32x4_t a0 = vld1q_f32(o + r * ldo + c), a1 = vld1q_f32(o + r * ldo + c + 4);
            for (int j = 0; j < n; j++) {
                const float32x4_t w = vdupq_n_f32(p[r * ldp + j]);
                a0 = vfmaq_f32(a0, w, vld1q_f32(v + j * ldv + c));
                a1 = vfmaq_f32(a1, w, vld1q_f32(v + j * ldv + c + 4));
            }
            vst1q_f32(o + r * ldo + c, a0);
            vst1q_f32(o + r * ldo + c + 4, a1);
        }
}

void vq_attn_kernels_init_neon(vq_attn_kernels *k)
{
    k->qk[VQ_ATTN_F32] = qk_f32_neon;
    k->pv[VQ_ATTN_F32] = pv_f32_neon;
}
