/* attn_int8_neon.c — NEON integer key scores for 2/4-bit affine keys
 * (attn_kernels.h, kivi_q8 / kivi_qk8) on ARMv8.0: the dots with
 * smull/smlal (the loop is attn_int8_neon.h's; attn_int8_dotprod.c replaces
 * it with sdot where the CPU has it). The quantisation rounds with vcvtnq
 * (nearest even), the same integers as the scalar and x86 kernels. */
#include <math.h>

#include "cpu/neon/attn_int8_neon.h"

static void kivi_q8_neon(int R, int64_t D, int bits, const float *q, int64_t ldq, const float *scale,
                           const float *zero, int8_t *xq, float *dz)
{
    for (int r = 0; r < R; r++) {
        const float *qr = q + r * ldq;
        float32x4_t amax = vdupq_n_f32(0.0f), qz = vdupq_n_f32(0.0f);
        uint32x4_t nonfin = vdupq_n_u32(0);
        for (int64_t c = 0; c < D; c += 4) {
            const float32x4_t qv = vld1q_f32(qr + c), x = vmulq_f32(qv, vld1q_f32(scale + c));
            amax = vmaxq_f32(amax, vabsq_f32(x));
            const float32x4_t z = vsubq_f32(x, x); /* 0, or NaN for inf / NaN */
            nonfin = vorrq_u32(nonfin, vmvnq_u32(vceqq_f32(z, z)));
            qz = vfmaq_f32(qz, qv, vld1q_f32(zero + c));
        }
        const float am = vmaxvq_f32(amax), z = vaddvq_f32(qz);
        const int finite = vmaxvq_u32(nonfin) == 0 && isfinite(z);
        const float inv = vq_attn_q8_inv(am, finite);
        int8_t *xr = xq + r * D;
        for (int64_t c = 0; c < D; c += 4) {
            const float32x4_t x = vmulq_f32(vld1q_f32(qr + c), vld1q_f32(scale + c));
            int32_t w[4];
            vst1q_s32(w, vcvtnq_s32_f32(vmulq_n_f32(x, inv)));
            for (int u = 0; u < 4; u++) xr[vq_attn_q8_pos(c + u, bits, D)] = (int8_t)w[u];
        }
        dz[2 * r] = finite ? am / 127.0f : NAN;
        dz[2 * r + 1] = z;
    }
}

/* acc += the dot of 16 u8 codes (<= 15) and 16 s8 query bytes, four lanes:
 * smull/smlal into i16 (|sum| <= 2 * 15 * 127) and a pairwise widening add */
static inline int32x4_t dot16_smull(int32x4_t acc, uint8x16_t e, int8x16_t qv)
{
    const int8x16_t es = vreinterpretq_s8_u8(e);
    int16x8_t p = vmull_s8(vget_low_s8(es), vget_low_s8(qv));
    p = vmlal_s8(p, vget_high_s8(es), vget_high_s8(qv));
    return vpadalq_s16(acc, p);
}

static void kivi_qk8_neon(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                            const float *dz, float *s, int64_t lds)
{
    vq_neon_kivi_qk8(R, n, D, bits, codes, ldc, xq, dz, s, lds, dot16_smull);
}

void vq_attn_kernels_init_neon_int8(vq_attn_kernels *k)
{
    k->kivi_q8 = kivi_q8_neon;
    k->kivi_qk8 = kivi_qk8_neon;
}
