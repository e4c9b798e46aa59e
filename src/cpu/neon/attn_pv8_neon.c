/* attn_pv8_neon.c — NEON integer p.V (attn_kernels.h: kivi_pv8 for 2-bit
 * KIVI values, codebook_pv8 for RaBitQ's nibble-packed codebook values) on
 * ARMv8.0 (widening multiply-accumulates; sdot does not fit: the codes of one
 * channel lie in different tokens' rows). The weights are quantised with the
 * f32 operations of the scalar definitions (vrndnq = rintf, round to nearest
 * even), so the integer sums equal the scalar kernels' exactly and the
 * outputs agree to f32 rounding. pv8_fast / cb8_fast stay false: AUTO keeps
 * the f32 p.V on NEON until a measurement on an ARM machine says otherwise. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "attention/attn_skeleton.h"

_Static_assert(VQ_ATTN_BN <= 32, "int16 sums of kivi_pv8 hold 32 tokens of |127 * 3|");

/* wq [VQ_ATTN_BN] = the weights w [n] rounded against `levels` steps (127:
 * int8 in [-127, 127], 255: uint8), as int16; returns step = amax / levels, NaN
 * (and wq all 0) when a weight is not finite. w is zero-padded to a multiple
 * of 4 by the caller. */
static float quantise_weights(int n, const float *w, float levels, int16_t *wq)
{
    float32x4_t amax = vdupq_n_f32(0.0f);
    uint32x4_t nonfin = vdupq_n_u32(0);
    for (int j = 0; j < n; j += 4) {
        const float32x4_t x = vld1q_f32(w + j), z = vsubq_f32(x, x); /* 0, or NaN for inf / NaN */
        amax = vmaxq_f32(amax, vabsq_f32(x));
        nonfin = vorrq_u32(nonfin, vmvnq_u32(vceqq_f32(z, z)));
    }
    const float am = vmaxvq_f32(amax);
    const bool finite = vmaxvq_u32(nonfin) == 0;
    memset(wq, 0, sizeof(int16_t) * VQ_ATTN_BN);
    if (!finite) return NAN;
    const float32x4_t inv = vdupq_n_f32(vq_attn_q8_inv_levels(levels, am, true));
    const float32x4_t hi = vdupq_n_f32(levels), lo = vdupq_n_f32(levels > 127.0f ? 0.0f : -127.0f);
    for (int j = 0; j < n; j += 4) {
        const float32x4_t x = vminq_f32(vmaxq_f32(vrndnq_f32(vmulq_f32(vld1q_f32(w + j), inv)), lo), hi);
        vst1_s16(wq + j, vmovn_s32(vcvtq_s32_f32(x)));
    }
    return am / levels;
}

/* o [R][ldo] (channels at vq_attn_pv8_pos) += the integer p.V of 2-bit codes
 * [n][ldc] (D = 128, g = 32), vs / vz [n][4]. Per row: the four groups'
 * weights quantised, then per token the four shift planes of its 32 code
 * bytes, each 8-byte half one group, multiplied by that group's int8 weight
 * into i16 lanes: acc[k][gi] lane b holds channel 32 gi + 4 b + k. */
static void kivi_pv8_neon(int R, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                            const float *p, int64_t ldp, float *o, int64_t ldo)
{
    const int n4 = (n + 3) & ~3;
    float w[4][VQ_ATTN_BN];
    for (int r = 0; r < R; r++) {
        const float *pr = p + r * ldp;
        int16_t wq16[4][VQ_ATTN_BN];
        float step[4], zs[4];
        for (int gi = 0; gi < 4; gi++) {
            float z = 0.0f;
            for (int j = 0; j < n; j++) {
                w[gi][j] = pr[j] * vs[4 * j + gi];
                z += pr[j] * vz[4 * j + gi];
            }
            for (int j = n; j < n4; j++) w[gi][j] = 0.0f;
            step[gi] = quantise_weights(n4, w[gi], 127.0f, wq16[gi]);
            zs[gi] = z;
        }
        int8_t wq[4][VQ_ATTN_BN];
        for (int gi = 0; gi < 4; gi++)
            for (int j = 0; j < n; j++) wq[gi][j] = (int8_t)wq16[gi][j];
        int16x8_t acc[4][4];
        for (int k = 0; k < 4; k++)
            for (int gi = 0; gi < 4; gi++) acc[k][gi] = vdupq_n_s16(0);
        const uint8x16_t m3 = vdupq_n_u8(3);
        for (int j = 0; j < n; j++) {
            const uint8x16_t b0 = vld1q_u8(codes + j * ldc), b1 = vld1q_u8(codes + j * ldc + 16);
            const int8x8_t w0 = vdup_n_s8(wq[0][j]), w1 = vdup_n_s8(wq[1][j]), w2 = vdup_n_s8(wq[2][j]),
                           w3 = vdup_n_s8(wq[3][j]);
#define VQ_PV8_PLANE(k, e0, e1)                                                                   \
    do {                                                                                          \
        const int8x16_t s0 = vreinterpretq_s8_u8(e0), s1 = vreinterpretq_s8_u8(e1);              \
        acc[k][0] = vmlal_s8(acc[k][0], vget_low_s8(s0), w0);                                     \
        acc[k][1] = vmlal_s8(acc[k][1], vget_high_s8(s0), w1);                                    \
        acc[k][2] = vmlal_s8(acc[k][2], vget_low_s8(s1), w2);                                     \
        acc[k][3] = vmlal_s8(acc[k][3], vget_high_s8(s1), w3);                                    \
    } while (0)
            VQ_PV8_PLANE(0, vandq_u8(b0, m3), vandq_u8(b1, m3));
            VQ_PV8_PLANE(1, vandq_u8(vshrq_n_u8(b0, 2), m3), vandq_u8(vshrq_n_u8(b1, 2), m3));
            VQ_PV8_PLANE(2, vandq_u8(vshrq_n_u8(b0, 4), m3), vandq_u8(vshrq_n_u8(b1, 4), m3));
            VQ_PV8_PLANE(3, vshrq_n_u8(b0, 6), vshrq_n_u8(b1, 6));
#undef VQ_PV8_PLANE
        }
        float *orow = o + r * ldo;
        for (int k = 0; k < 4; k++)
            for (int gi = 0; gi < 4; gi++) {
                int16_t sums[8];
                vst1q_s16(sums, acc[k][gi]);
                for (int b = 0; b < 8; b++)
                    orow[vq_attn_pv8_pos(32 * gi + 4 * b + k)] += step[gi] * (float)sums[b] + zs[gi];
            }
    }
}

/* o [R][ldo] += (step * cstep) * the integer sums of the row's quantised
 * weights times cq[idx] (D = 128, idx nibble-packed [n][ldi]). Per token the
 * 64 index bytes give the even channels (low nibbles) and odd ones (high) by
 * table lookups (tbl) into cq; the i8 values widen to i16 and accumulate
 * times the weight (up to 255) into i32 lanes, 64 channels per pass (16
 * accumulators: two passes keep them in registers). */
static void codebook_pv8_neon(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                              const float *w, int64_t ldw, float *o, int64_t ldo)
{
    const int n4 = (n + 3) & ~3;
    const int8x16_t table = vld1q_s8(cq);
    const uint8x16_t m15 = vdupq_n_u8(15);
    for (int r = 0; r < R; r++) {
        float wr[VQ_ATTN_BN];
        bool nonneg = true;
        for (int j = 0; j < n; j++) {
            wr[j] = w[r * ldw + j];
            nonneg = nonneg && !(wr[j] < 0.0f);
        }
        for (int j = n; j < n4; j++) wr[j] = 0.0f;
        int16_t wq[VQ_ATTN_BN];
        const float sv = quantise_weights(n4, wr, nonneg ? 255.0f : 127.0f, wq) * cstep;
        float *orow = o + r * ldo;
        for (int half = 0; half < 2; half++) { /* bytes 32 half .. + 32: channels 64 half .. + 64 */
            int32x4_t acc[2][2][4]; /* [byte run of 16][even, odd][lanes 4q ..] */
            for (int a = 0; a < 2; a++)
                for (int e = 0; e < 2; e++)
                    for (int q = 0; q < 4; q++) acc[a][e][q] = vdupq_n_s32(0);
            for (int j = 0; j < n; j++) {
                const int16_t wj = wq[j];
                for (int a = 0; a < 2; a++) {
                    const uint8x16_t bytes = vld1q_u8(idx + j * ldi + 32 * half + 16 * a);
                    const int8x16_t ev = vqtbl1q_s8(table, vandq_u8(bytes, m15));
                    const int8x16_t od = vqtbl1q_s8(table, vshrq_n_u8(bytes, 4));
                    const int16x8_t e0 = vmovl_s8(vget_low_s8(ev)), e1 = vmovl_high_s8(ev);
                    const int16x8_t o0 = vmovl_s8(vget_low_s8(od)), o1 = vmovl_high_s8(od);
                    acc[a][0][0] = vmlal_n_s16(acc[a][0][0], vget_low_s16(e0), wj);
                    acc[a][0][1] = vmlal_high_n_s16(acc[a][0][1], e0, wj);
                    acc[a][0][2] = vmlal_n_s16(acc[a][0][2], vget_low_s16(e1), wj);
                    acc[a][0][3] = vmlal_high_n_s16(acc[a][0][3], e1, wj);
                    acc[a][1][0] = vmlal_n_s16(acc[a][1][0], vget_low_s16(o0), wj);
                    acc[a][1][1] = vmlal_high_n_s16(acc[a][1][1], o0, wj);
                    acc[a][1][2] = vmlal_n_s16(acc[a][1][2], vget_low_s16(o1), wj);
                    acc[a][1][3] = vmlal_high_n_s16(acc[a][1][3], o1, wj);
                }
            }
            for (int a = 0; a < 2; a++)
                for (int e = 0; e < 2; e++)
                    for (int q = 0; q < 4; q++) {
                        int32_t sums[4];
                        vst1q_s32(sums, acc[a][e][q]);
                        for (int l = 0; l < 4; l++) { /* byte b of the row: channels 2 b (even), 2 b + 1 */
                            const int b = 32 * half + 16 * a + 4 * q + l;
                            orow[2 * b + e] += sv * (float)sums[l];
                        }
                    }
        }
    }
}

void vq_attn_kernels_init_neon_pv8(vq_attn_kernels *k)
{
    k->kivi_pv8 = kivi_pv8_neon;
    k->codebook_pv8 = codebook_pv8_neon;
}
