/* format_kivi.h — the KIVI group-affine layout (docs/FORMATS.md §6) and its decoders,
 * shared by the C library and the CUDA kernels.
 *
 * Per (b, h) slice, with S tokens, D channels, group size g and code width bits:
 *   codes      [S, CD] u8   CD = D          one code per byte (bits 1..8), or
 *                           CD = D*bits/8   bit-packed along D (bits 2, 4, 8),
 *                                           code c at stream bits [c*bits, (c+1)*bits):
 *                                           bit (c*bits) % 8 of byte c*bits/8 upward.
 *                                           Widths 2/4/8 divide 8, so no code straddles a byte.
 *   keys:   scale, zero [ceil(S/g), D]  f32 or f16   per channel, per group of g tokens
 *   values: scale, zero [S, ceil(D/g)]  f32 or f16   per token, per group of g channels
 *   x_hat[t, c] = code[t, c] * scale + zero
 * With bits == 8 both layouts coincide (CD == D). The layout is told apart by
 * CD alone: CD == D is one code per byte, CD == D*bits/8 < D is packed. */
#ifndef VQ_FORMAT_KIVI_H
#define VQ_FORMAT_KIVI_H

#include "format_common.h"

/* Widest code; packed rows use 2, 4 or 8 bits. */
#define VQ_KIVI_MAX_BITS 8

/* True for the widths a packed row may use. */
static inline VQ_HOST_DEVICE int vq_kivi_packable_bits(int bits) { return bits == 2 || bits == 4 || bits == 8; }

/* Bytes of one packed code row of d codes (d*bits must be a multiple of 8). */
static inline VQ_HOST_DEVICE int64_t vq_kivi_packed_row_bytes(int64_t d, int bits) { return d * bits / 8; }

/* The mask of a code of `bits` bits. */
static inline VQ_HOST_DEVICE uint32_t vq_kivi_code_mask(int bits) { return (1u << bits) - 1u; }

/* row [d*bits/8] packed -> code c, bits in {2, 4, 8}. */
static inline VQ_HOST_DEVICE uint32_t vq_kivi_code_packed(const uint8_t *row, int64_t c, int bits)
{
    const int64_t s = c * bits;
    return ((uint32_t)row[s >> 3] >> (s & 7)) & vq_kivi_code_mask(bits);
}

/* Code c of a row in either layout (packed != 0: bit-packed). A one-per-byte
 * code is read whole, not masked to `bits`: the encoder never writes more, and
 * every decoder (dequantizers, attention) then agrees on any byte. */
static inline VQ_HOST_DEVICE uint32_t vq_kivi_code(const uint8_t *row, int64_t c, int bits, int packed)
{
    return packed ? vq_kivi_code_packed(row, c, bits) : (uint32_t)row[c];
}

/* x_hat = code * scale + zero (the one reconstruction formula). */
static inline VQ_HOST_DEVICE float vq_kivi_dequant(uint32_t code, float scale, float zero)
{
    return (float)code * scale + zero;
}

/* Index into a key scale/zero plane [ceil(S/g), D] of element (t, c). */
static inline VQ_HOST_DEVICE int64_t vq_kivi_key_param_index(int64_t t, int64_t c, int64_t g, int64_t d)
{
    return (t / g) * d + c;
}

/* Index into a value scale/zero plane [S, ceil(D/g)] of element (t, c). */
static inline VQ_HOST_DEVICE int64_t vq_kivi_value_param_index(int64_t t, int64_t c, int64_t g, int64_t gv)
{
    return t * gv + c / g;
}

/* codes [d] (each < 2^bits) -> row [d*bits/8] packed, bits in {2, 4, 8}.
 * Writes every byte of the row (no read-modify-write of the output). One
 * fixed-shape loop per width, so compilers vectorize it. */
static inline VQ_HOST_DEVICE void vq_kivi_pack_row(const uint8_t *codes, int64_t d, int bits, uint8_t *row)
{
    if (bits == 8) {
        for (int64_t c = 0; c < d; c++) row[c] = codes[c];
    } else if (bits == 4) {
        for (int64_t i = 0; i < d / 2; i++) row[i] = (uint8_t)((codes[2 * i] & 15u) | ((codes[2 * i + 1] & 15u) << 4));
    } else {
        for (int64_t i = 0; i < d / 4; i++)
            row[i] = (uint8_t)((codes[4 * i] & 3u) | ((codes[4 * i + 1] & 3u) << 2) | ((codes[4 * i + 2] & 3u) << 4) |
                               ((codes[4 * i + 3] & 3u) << 6));
    }
}

/* row [d*bits/8] packed -> codes [d], bits in {2, 4, 8}: one fixed-shape
 * loop per width, so compilers vectorize it. */
static inline VQ_HOST_DEVICE void vq_kivi_unpack_row(const uint8_t *row, int64_t d, int bits, uint8_t *codes)
{
    if (bits == 8) {
        for (int64_t c = 0; c < d; c++) codes[c] = row[c];
    } else if (bits == 4) {
        for (int64_t i = 0; i < d / 2; i++) {
            codes[2 * i] = (uint8_t)(row[i] & 15u);
            codes[2 * i + 1] = (uint8_t)(row[i] >> 4);
        }
    } else {
        for (int64_t i = 0; i < d / 4; i++) {
            codes[4 * i] = (uint8_t)(row[i] & 3u);
            codes[4 * i + 1] = (uint8_t)((row[i] >> 2) & 3u);
            codes[4 * i + 2] = (uint8_t)((row[i] >> 4) & 3u);
            codes[4 * i + 3] = (uint8_t)(row[i] >> 6);
        }
    }
}

#endif /* VQ_FORMAT_KIVI_H */
