/* attn_int8_neon.c — NEON integer key scores for 2/4-bit affine keys
 * (attn_kernels.h, affine_q8 / affine_qk8). Each 16-byte run of a code row
 * gives its K = 8/bits shifts with one shift and one mask; each is multiplied
 * against the matching 16 query bytes with sdot (codes <= 15 fit s8) when the
 * build targets the dot-product extension (__ARM_FEATURE_DOTPROD, e.g.
 * -march=armv8.2-a+dotprod), else with smull/smlal into i16 and a pairwise
 * widening add (ARMv8.0). The quantisation rounds with vcvtnq (nearest even),
 * the same integers as the scalar and x86 kernels. */
#include <arm_neon.h>
#include <math.h>

#include "attention/attn_kernels.h"

static void affine_q8_neon(int R, int64_t D, int bits, const float *q, int64_t ldq, const float *scale,
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

/* acc += the dot of 16 u8 codes (<= 15) and 16 s8 query bytes, four lanes */
static inline int32x4_t dot16(int32x4_t acc, uint8x16_t e, int8x16_t qv)
{
#ifdef __ARM_FEATURE_DOTPROD
    return vdotq_s32(acc, vreinterpretq_s8_u8(e), qv);
#else
    const int8x16_t es = vreinterpretq_s8_u8(e);
    int16x8_t p = vmull_s8(vget_low_s8(es), vget_low_s8(qv));
    p = vmlal_s8(p, vget_high_s8(es), vget_high_s8(qv)); /* |sum| <= 2 * 15 * 127 */
    return vpadalq_s16(acc, p);
#endif
}

static void affine_qk8_neon(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                            const float *dz, float *s, int64_t lds)
{
    const int K = 8 / bits;
    const int64_t P = D / K, nb = D * bits / 8;
    const uint8x16_t mask = vdupq_n_u8(bits == 2 ? 3 : 15);
    (void)K;
    for (int j = 0; j < n; j++) {
        const uint8_t *row = codes + j * ldc;
        for (int r = 0; r < R; r++) {
            const int8_t *x = xq + r * D;
            int32x4_t a0 = vdupq_n_s32(0), a1 = vdupq_n_s32(0);
            for (int64_t i = 0; i < nb; i += 16) {
                const uint8x16_t raw = vld1q_u8(row + i);
                a0 = dot16(a0, vandq_u8(raw, mask), vld1q_s8(x + i));
                if (bits == 2) { /* shifts 0, 2, 4, 6 */
                    a1 = dot16(a1, vandq_u8(vshrq_n_u8(raw, 2), mask), vld1q_s8(x + P + i));
                    a0 = dot16(a0, vandq_u8(vshrq_n_u8(raw, 4), mask), vld1q_s8(x + 2 * P + i));
                    a1 = dot16(a1, vshrq_n_u8(raw, 6), vld1q_s8(x + 3 * P + i));
                } else { /* shifts 0, 4 */
                    a1 = dot16(a1, vshrq_n_u8(raw, 4), vld1q_s8(x + P + i));
                }
            }
            s[r * lds + j] = dz[2 * r] * (float)vaddvq_s32(vaddq_s32(a0, a1)) + dz[2 * r + 1];
        }
    }
}

void vq_attn_kernels_init_neon_int8(vq_attn_kernels *k)
{
    k->affine_q8 = affine_q8_neon;
    k->affine_qk8 = affine_qk8_neon;
}
