/* attn_int8_neon.h — the integer key-score loop (attn_kernels.h, kivi_qk8)
 * shared by the ARMv8.0 file (attn_int8_neon.c: smull/smlal) and the ARMv8.2
 * one (attn_int8_dotprod.c: sdot), which differ only in the 16-byte dot.
 * Each 16-byte run of a code row gives its K = 8/bits shifts with one shift
 * and one mask; each is multiplied against the matching 16 query bytes
 * (codes <= 15 fit s8). The integer sums are exact either way. */
#ifndef VQ_ATTN_INT8_NEON_H
#define VQ_ATTN_INT8_NEON_H

#include <arm_neon.h>

#include "attention/attn_kernels.h"

/* acc += the dot of 16 u8 codes (<= 15) and 16 s8 query bytes, four lanes */
typedef int32x4_t (*vq_neon_dot16)(int32x4_t acc, uint8x16_t e, int8x16_t qv);

/* kivi_qk8 with `dot` (a constant at each call: inlined) */
static inline __attribute__((always_inline)) void vq_neon_kivi_qk8(int R, int n, int64_t D, int bits,
                                                                     const uint8_t *codes, int64_t ldc,
                                                                     const int8_t *xq, const float *dz, float *s,
                                                                     int64_t lds, vq_neon_dot16 dot)
{
    const int64_t P = D / (8 / bits), nb = D * bits / 8;
    const uint8x16_t mask = vdupq_n_u8(bits == 2 ? 3 : 15);
    for (int j = 0; j < n; j++) {
        const uint8_t *row = codes + j * ldc;
        for (int r = 0; r < R; r++) {
            const int8_t *x = xq + r * D;
            int32x4_t a0 = vdupq_n_s32(0), a1 = vdupq_n_s32(0);
            for (int64_t i = 0; i < nb; i += 16) {
                const uint8x16_t raw = vld1q_u8(row + i);
                a0 = dot(a0, vandq_u8(raw, mask), vld1q_s8(x + i));
                if (bits == 2) { /* shifts 0, 2, 4, 6 */
                    a1 = dot(a1, vandq_u8(vshrq_n_u8(raw, 2), mask), vld1q_s8(x + P + i));
                    a0 = dot(a0, vandq_u8(vshrq_n_u8(raw, 4), mask), vld1q_s8(x + 2 * P + i));
                    a1 = dot(a1, vshrq_n_u8(raw, 6), vld1q_s8(x + 3 * P + i));
                } else { /* shifts 0, 4 */
                    a1 = dot(a1, vshrq_n_u8(raw, 4), vld1q_s8(x + P + i));
                }
            }
            s[r * lds + j] = dz[2 * r] * (float)vaddvq_s32(vaddq_s32(a0, a1)) + dz[2 * r + 1];
        }
    }
}

#endif /* VQ_ATTN_INT8_NEON_H */
