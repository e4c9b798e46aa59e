/* attn_dot_neon.c — NEON attention kernels for plain keys and values (f32,
 * f16, bf16; f32 is also the tile every compressed format decodes into) and
 * the f16 row conversion. f16 converts in registers (fcvtl: exact, part of
 * every AArch64 CPU), bf16 by a 16-bit shift (exact). Other entries keep the
 * scalar versions. */
#include <arm_neon.h>

#include "attention/attn_kernels.h"

/* 4 elements of a plain block as f32 */
static inline __attribute__((always_inline)) float32x4_t load4(const void *base, vq_attn_elt e, int64_t i)
{
    switch (e) {
    case VQ_ATTN_F16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)base + i)));
    case VQ_ATTN_BF16: return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)base + i), 16));
    default: return vld1q_f32((const float *)base + i);
    }
}

/* q [R][ldq] . k [n][ldk]^T -> s [R][lds] */
static inline __attribute__((always_inline)) void qk_any(vq_attn_elt e, int R, int n, int64_t D, const float *q,
                                                         int64_t ldq, const void *k, int64_t ldk, float *s,
                                                         int64_t lds)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
            for (int64_t c = 0; c < D; c += 8) {
                a0 = vfmaq_f32(a0, vld1q_f32(q + r * ldq + c), load4(k, e, j * ldk + c));
                a1 = vfmaq_f32(a1, vld1q_f32(q + r * ldq + c + 4), load4(k, e, j * ldk + c + 4));
            }
            s[r * lds + j] = vaddvq_f32(vaddq_f32(a0, a1));
        }
}

/* o [R][ldo] += p [R][ldp] . v [n][ldv] */
static inline __attribute__((always_inline)) void pv_any(vq_attn_elt e, int R, int n, int64_t D, const float *p,
                                                         int64_t ldp, const void *v, int64_t ldv, float *o,
                                                         int64_t ldo)
{
    for (int r = 0; r < R; r++)
        for (int64_t c = 0; c < D; c += 8) {
            float32x4_t a0 = vld1q_f32(o + r * ldo + c), a1 = vld1q_f32(o + r * ldo + c + 4);
            for (int j = 0; j < n; j++) {
                const float32x4_t w = vdupq_n_f32(p[r * ldp + j]);
                a0 = vfmaq_f32(a0, w, load4(v, e, j * ldv + c));
                a1 = vfmaq_f32(a1, w, load4(v, e, j * ldv + c + 4));
            }
            vst1q_f32(o + r * ldo + c, a0);
            vst1q_f32(o + r * ldo + c + 4, a1);
        }
}

VQ_ATTN_DEFINE_F16_KERNELS

/* dst[i] = f16 src[i] as f32, i < n */
static void cvt_f16_neon(int64_t n, const uint16_t *src, float *dst)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(src + i))));
    for (; i < n; i++) dst[i] = vq_half_to_float(src[i]);
}

void vq_attn_kernels_init_neon(vq_attn_kernels *k)
{
    VQ_ATTN_SET_F16_KERNELS(k);
    k->cvt_f16 = cvt_f16_neon;
}
