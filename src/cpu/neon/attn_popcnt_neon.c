/* attn_popcnt_neon.c — NEON kernels for sign-bit keys and values (RaBitQ):
 * Hamming distances with cnt (per-byte popcount) and sign tiles from bit
 * tests. The fused hamming_score stays NULL: the format runs hamming() and
 * its formula (attn_kernels.h). */
#include <arm_neon.h>

#include "attention/attn_kernels.h"

/* popcount(a XOR b) over nbytes bytes: 16 per step (byte counts widened
 * pairwise into u32 lanes, no overflow for any length), the tail bytewise */
static inline int32_t hamming_row(const uint8_t *a, const uint8_t *b, int64_t nbytes)
{
    uint32x4_t acc = vdupq_n_u32(0);
    int64_t i = 0;
    for (; i + 16 <= nbytes; i += 16)
        acc = vpadalq_u16(acc, vpaddlq_u8(vcntq_u8(veorq_u8(vld1q_u8(a + i), vld1q_u8(b + i)))));
    int32_t h = (int32_t)vaddvq_u32(acc);
    for (; i < nbytes; i++) h += __builtin_popcount((unsigned)(a[i] ^ b[i]));
    return h;
}

/* qb [R][ldq], kb [n][nbytes] -> ham [R][ldh] */
static void hamming_neon(int R, int n, int64_t nbytes, const uint8_t *qb, int64_t ldq, const uint8_t *kb,
                         int32_t *ham, int64_t ldh)
{
    for (int j = 0; j < n; j++)
        for (int r = 0; r < R; r++) ham[r * ldh + j] = hamming_row(qb + r * ldq, kb + j * nbytes, nbytes);
}

/* bits [n][D/8], mag [n] -> out [n][D] = ±mag: each byte gives two vectors
 * of four lanes, lane l set where bit l (resp. 4 + l) is */
static void sign_tile_neon(int n, int64_t D, const uint8_t *bits, const float *mag, float *out)
{
    static const uint32_t lo_bits[4] = {1, 2, 4, 8}, hi_bits[4] = {16, 32, 64, 128};
    const uint32x4_t lo = vld1q_u32(lo_bits), hi = vld1q_u32(hi_bits);
    for (int j = 0; j < n; j++) {
        const float32x4_t pos = vdupq_n_f32(mag[j]), neg = vdupq_n_f32(-mag[j]);
        const uint8_t *row = bits + j * (D / 8);
        float *o = out + j * D;
        for (int64_t c = 0; c < D; c += 8) {
            const uint32x4_t b = vdupq_n_u32(row[c / 8]);
            vst1q_f32(o + c, vbslq_f32(vtstq_u32(b, lo), pos, neg));
            vst1q_f32(o + c + 4, vbslq_f32(vtstq_u32(b, hi), pos, neg));
        }
    }
}

void vq_attn_kernels_init_neon_popcnt(vq_attn_kernels *k)
{
    k->hamming = hamming_neon;
    k->sign_tile = sign_tile_neon;
}
