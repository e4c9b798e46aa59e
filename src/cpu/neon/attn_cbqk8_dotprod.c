/* attn_cbqk8_dotprod.c — NEON integer scores against codebook keys at
 * D = 128 (attn_kernels.h, codebook_qk8: TurboQuant and RVQ stages), with
 * the ARMv8.2 dot product (sdot: signed x signed, so the centroids are
 * looked up as they are, one tbl per 16 nibbles). Installed where the CPU
 * reports the dot product; AUTO does not take it (no ARM machine has
 * measured it against the f32 path: cbqk8_fast stays false). */
#include <arm_neon.h>

#include "attention/attn_kernels.h"

static void codebook_qk8_dotprod(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, const int8_t *xq,
                                 int64_t ldx, int32_t *isum, int64_t lds)
{
    const int8x16_t lut = vld1q_s8(cq);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    for (int j = 0; j < n; j++) {
        int8x16_t e[4], o[4]; /* channels 2k (k = 16 q .. 16 q + 15) and 2k + 1 */
        for (int q = 0; q < 4; q++) {
            const uint8x16_t x = vld1q_u8(idx + j * ldi + 16 * q);
            e[q] = vqtbl1q_s8(lut, vandq_u8(x, low4));
            o[q] = vqtbl1q_s8(lut, vshrq_n_u8(x, 4));
        }
        for (int r = 0; r < R; r++) {
            const int8_t *x = xq + r * ldx;
            int32x4_t acc = vdupq_n_s32(0);
            for (int q = 0; q < 4; q++) {
                const int8x16_t xe = vld1q_s8(x + 16 * q), xo = vld1q_s8(x + 64 + 16 * q);
                acc = vdotq_s32(vdotq_s32(acc, xe, e[q]), xo, o[q]);
            }
            isum[r * lds + j] = vaddvq_s32(acc);
        }
    }
}

void vq_attn_kernels_init_neon_cbqk8_dotprod(vq_attn_kernels *k) { k->codebook_qk8 = codebook_qk8_dotprod; }
