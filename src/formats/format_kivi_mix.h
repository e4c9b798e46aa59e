/* format_kivi_mix.h — the layout of mixed-width KIVI keys
 * (VQ_KEY_KIVI_MIX, include/veloxquant.h) and its row packers. Host only
 * (src/cuda/keys_kivi_mix.cu encodes and reads the same bytes on the
 * device); no libc calls, as the other formats.
 *
 * Per (page, head), with P tokens, D channels (a multiple of 8), group size
 * g, the narrow width bits, the wide width bits2 (1 <= bits < bits2 <= 8)
 * and W wide channels (0 < W < D):
 *   codes  [P, RB] u8      RB = ceil((W * bits2 + (D - W) * bits) / 8): per
 *                          token one bit stream, the W wide channels' codes
 *                          in channel order (bits2 bits each), then the
 *                          D - W narrow ones' (bits bits each); stream bit j
 *                          is bit j % 8 of byte j / 8; a code may straddle
 *                          two bytes
 *   scale, zero [P/g, D] f16   per group and channel: x_hat = code * scale + zero
 *   mask   [P/g, D/8] u8   per group: bit c % 8 of byte c / 8 set = channel c
 *                          is wide; exactly W bits set
 * The encoder picks the W channels of the widest range (max - min in f32
 * over the group's tokens, ties to the lower channel), scale = range /
 * (2^w - 1) for the channel's width w (0 when flat), zero = min, and codes
 * clamp(round_half_even((x - zero) / scale), 0, 2^w - 1) against the f16
 * scale and zero it stores (0 where scale == 0 or the quotient is NaN). */
#ifndef VQ_FORMAT_KIVI_MIX_H
#define VQ_FORMAT_KIVI_MIX_H

#include <stdint.h>

/* Bytes of one token's code row. */
static inline int64_t vq_kivi_mix_row_bytes(int64_t d, int64_t nw, int bits, int bits2)
{
    return (nw * bits2 + (d - nw) * bits + 7) / 8;
}

/* W, the wide channels of a group: wide_channels (vq_key_config), 0
 * meaning d/2. */
static inline int64_t vq_kivi_mix_wide_channels(int wide_channels, int64_t d)
{
    return wide_channels > 0 ? wide_channels : d / 2;
}

/* Bytes of one group's width mask. */
static inline int64_t vq_kivi_mix_mask_bytes(int64_t d) { return d / 8; }

/* True when channel c is wide in the group of mask. */
static inline int vq_kivi_mix_wide(const uint8_t *mask, int64_t c) { return (mask[c >> 3] >> (c & 7)) & 1; }

/* The code of w bits at stream bit s of row. */
static inline uint32_t vq_kivi_mix_get(const uint8_t *row, int64_t s, int w)
{
    uint32_t x = row[s >> 3];
    if ((s & 7) + w > 8) x |= (uint32_t)row[(s >> 3) + 1] << 8;
    return (x >> (s & 7)) & ((1u << w) - 1u);
}

/* row [RB] -> codes [d], one per byte in channel order. */
static inline void vq_kivi_mix_unpack_row(const uint8_t *row, const uint8_t *mask, int64_t d, int64_t nw, int bits,
                                            int bits2, uint8_t *codes)
{
    int64_t sw = 0, sn = nw * bits2; /* next wide / narrow stream bit */
    for (int64_t c = 0; c < d; c++) {
        if (vq_kivi_mix_wide(mask, c)) {
            codes[c] = (uint8_t)vq_kivi_mix_get(row, sw, bits2);
            sw += bits2;
        } else {
            codes[c] = (uint8_t)vq_kivi_mix_get(row, sn, bits);
            sn += bits;
        }
    }
}

/* The stream order of a group: perm[i] = the channel of code i of a row
 * (the wide channels ascending, then the narrow ones). */
static inline void vq_kivi_mix_order(const uint8_t *mask, int64_t d, int64_t nw, int *perm)
{
    int64_t w = 0, n = nw;
    for (int64_t c = 0; c < d; c++) perm[vq_kivi_mix_wide(mask, c) ? w++ : n++] = (int)c;
}

/* row [RB] -> codes [d] in stream order (code i is channel perm[i]'s). */
static inline void vq_kivi_mix_unpack_stream(const uint8_t *row, int64_t d, int64_t nw, int bits, int bits2,
                                               uint8_t *codes)
{
    for (int64_t i = 0; i < nw; i++) codes[i] = (uint8_t)vq_kivi_mix_get(row, i * bits2, bits2);
    for (int64_t i = 0; i < d - nw; i++) codes[nw + i] = (uint8_t)vq_kivi_mix_get(row, nw * bits2 + i * bits, bits);
}

/* codes [d] (each below 2^(its width)) -> row [RB]; writes every byte. */
static inline void vq_kivi_mix_pack_row(const uint8_t *codes, const uint8_t *mask, int64_t d, int64_t nw, int bits,
                                          int bits2, uint8_t *row)
{
    const int64_t rb = vq_kivi_mix_row_bytes(d, nw, bits, bits2);
    for (int64_t i = 0; i < rb; i++) row[i] = 0;
    int64_t sw = 0, sn = nw * bits2;
    for (int64_t c = 0; c < d; c++) {
        const int wide = vq_kivi_mix_wide(mask, c);
        int64_t *s = wide ? &sw : &sn;
        const uint32_t x = (uint32_t)codes[c] << (*s & 7);
        row[*s >> 3] |= (uint8_t)x;
        if ((*s & 7) + (wide ? bits2 : bits) > 8) row[(*s >> 3) + 1] |= (uint8_t)(x >> 8);
        *s += wide ? bits2 : bits;
    }
}

#endif /* VQ_FORMAT_KIVI_MIX_H */
