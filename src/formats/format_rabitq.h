/* format_rabitq.h — the RaBitQ layout (docs/FORMATS.md §5) and its decoders, shared by
 * the C library and the CUDA kernels.
 *
 * Per token (leading shape [..., N]):
 *   k_bits  [D/8] u8   sign bit j of y = rot(k): bit j % 8 of byte j / 8, 1 when y_j >= 0 (+1)
 *   k_mag   f32        magnitude: ||y||_1 / D (L1) or ||y||_2^2 / ||y||_1 (unbiased)
 *   k_const f32        optional additive score term (0 when absent)
 *   v_idx   [D] u8     one codebook index per byte, or
 *           [D/2] u8   nibble-packed: element j in the low nibble of byte j/2 when j is even,
 *                      the high nibble when odd (needs n_cents <= 16)
 * Key estimate: k_hat = k_mag * sign(y), in the rotated basis. */
#ifndef VQ_FORMAT_RABITQ_H
#define VQ_FORMAT_RABITQ_H

#include "format_common.h"

/* Largest D the encoder accepts (attention kernels stop at 256). */
#define VQ_RABITQ_MAX_D 1024

/* Sign j of a k_bits row as ±1. */
static inline VQ_HOST_DEVICE float vq_rabitq_sign(const uint8_t *k_bits, int64_t j)
{
    return vq_sign_of_bit(vq_bit_u8(k_bits, j));
}

/* Index j of a nibble-packed value row [D/2]. */
static inline VQ_HOST_DEVICE uint32_t vq_rabitq_nibble(const uint8_t *v_row, int64_t j)
{
    return ((uint32_t)v_row[j >> 1] >> ((j & 1) * 4)) & 15u;
}

/* Two indices -> one packed byte (low nibble = even element). */
static inline VQ_HOST_DEVICE uint8_t vq_rabitq_pack_pair(uint8_t even, uint8_t odd)
{
    return (uint8_t)((even & 15u) | ((odd & 15u) << 4));
}

/* A value index clamped to the codebook: indices >= n_cents read the last centroid. */
static inline VQ_HOST_DEVICE uint32_t vq_rabitq_clamp_index(uint32_t idx, uint32_t n_cents)
{
    return idx < n_cents ? idx : n_cents - 1u;
}

/* popcount(a XOR b) over n_bytes bytes, four bytes per step. */
static inline VQ_HOST_DEVICE int vq_rabitq_hamming(const uint8_t *a, const uint8_t *b, int64_t n_bytes)
{
    int ham = 0;
    int64_t i = 0;
    for (; i + 4 <= n_bytes; i += 4) ham += vq_popcount32(vq_load_u32le(a + i) ^ vq_load_u32le(b + i));
    for (; i < n_bytes; i++) ham += vq_popcount32((uint32_t)(a[i] ^ b[i]));
    return ham;
}

/* The Hamming logit: (D - 2*ham) * q_scale * k_mag + k_const, D - 2*ham
 * being the dot product of the two ±1 vectors. */
static inline VQ_HOST_DEVICE float vq_rabitq_hamming_logit(int d, int ham, float q_scale, float k_mag, float k_const)
{
    return (float)(d - 2 * ham) * q_scale * k_mag + k_const;
}

/* The exact logit: dot = sum_j q_j * sign_j (full-precision query). */
static inline VQ_HOST_DEVICE float vq_rabitq_exact_logit(float dot, float q_scale, float k_mag, float k_const)
{
    return dot * k_mag * q_scale + k_const;
}

#endif /* VQ_FORMAT_RABITQ_H */
