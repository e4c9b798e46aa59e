/* attn_turbo_stage.c — reading one stage of TurboQuant codes (see
 * attn_turbo_stage.h). */
#include <stdio.h>
#include <string.h>

#include "attention/attn_turbo_stage.h"
#include "formats/lloyd_max.h"
#include "codecs/turboquant.h"
#include "formats/format_bitpack.h"

/* One row of a packed stage, bytes [nbytes] -> codes [D], for a `bits` that
 * is a constant after inlining (see unpack_row). Eight codes take exactly
 * `bits` bytes, and on a little-endian host stream bit s is bit s % 8 of byte
 * s / 8, so each group of eight is one unaligned 64-bit load, eight
 * constant shifts and one 64-bit store, with no branch on codes straddling
 * words. The last groups
 * load only their own bytes, never past the row. D is a multiple of 8. */
static inline void unpack_fixed(const uint8_t *bytes, int64_t nbytes, int64_t D, int bits, uint8_t *codes)
{
    const uint64_t mask = vq_bitpack_mask(bits);
    for (int64_t g = 0; g < D / 8; g++) {
        uint64_t v = 0;
        if (g * bits + 8 <= nbytes) memcpy(&v, bytes + g * bits, 8);
        else memcpy(&v, bytes + g * bits, (size_t)bits);
        /* written out: with constant shifts this is ~3 instructions a code */
        const uint64_t out = (v & mask) | ((v >> bits) & mask) << 8 | ((v >> 2 * bits) & mask) << 16 |
                             ((v >> 3 * bits) & mask) << 24 | ((v >> 4 * bits) & mask) << 32 |
                             ((v >> 5 * bits) & mask) << 40 | ((v >> 6 * bits) & mask) << 48 |
                             ((v >> 7 * bits) & mask) << 56;
        memcpy(codes + g * 8, &out, 8);
    }
}

const uint8_t *vq_attn_turbo_stage_codes(const vq_attn_turbo_stage *st, int64_t b, int64_t hk, int64_t t,
                                         int64_t D, uint8_t *scratch, bool *nibbles)
{
    *nibbles = st->packed && st->bits == 4;
    const uint8_t *row = vq_attn_at(&st->idx, b, hk, t);
    if (!st->packed) {
        const uint8_t mask = (uint8_t)vq_bitpack_mask(st->bits);
        if (st->bits == 8) return row;
        for (int64_t c = 0; c < D; c++) scratch[c] = row[c] & mask;
        return scratch;
    }
    const int64_t nbytes = 4 * st->ld;
    switch (st->bits) { /* one specialised loop per width */
    case 1: unpack_fixed(row, nbytes, D, 1, scratch); break;
    case 2: unpack_fixed(row, nbytes, D, 2, scratch); break;
    case 3: unpack_fixed(row, nbytes, D, 3, scratch); break;
    case 4: return row;
    case 5: unpack_fixed(row, nbytes, D, 5, scratch); break;
    case 6: unpack_fixed(row, nbytes, D, 6, scratch); break;
    case 7: unpack_fixed(row, nbytes, D, 7, scratch); break;
    default: return row;
    }
    return scratch;
}

const uint8_t *vq_attn_turbo_stage_nibble_rows(const vq_attn_kernels *kern, const vq_attn_turbo_stage *st, int64_t b,
                                               int64_t hk, int64_t t0, int n, int64_t D, uint8_t *scratch,
                                               uint8_t *pk, int64_t *ldi)
{
    if (st->packed && st->bits == 4) {
        *ldi = st->idx.st;
        return vq_attn_at(&st->idx, b, hk, t0);
    }
    *ldi = D / 2;
    const uint8_t *row0 = vq_attn_at(&st->idx, b, hk, t0);
    if (st->packed && st->bits == 3 && D % 128 == 0) {
        /* a row of D codes is D / 128 rows of 48 bytes, its nibble row their
         * nibble rows in turn: one call over the block where those pieces
         * are evenly spaced (one per row, or contiguous rows), else per row */
        const int pieces = (int)(D / 128);
        if (pieces == 1 || st->idx.st == 48 * pieces) {
            kern->nibbles3(n * pieces, row0, pieces == 1 ? st->idx.st : 48, pk);
            return pk;
        }
        for (int j = 0; j < n; j++) kern->nibbles3(pieces, vq_attn_at(&st->idx, b, hk, t0 + j), 48, pk + j * D / 2);
        return pk;
    }
    if (st->packed && st->bits == 3 && D == 64 && st->idx.st == 24) {
        /* contiguous 24-byte rows: each pair is one 48-byte row of 128 codes
         * whose nibble row is the pair's two rows in turn */
        kern->nibbles3(n / 2, row0, 48, pk);
        if (n % 2) vq_bitpack_spread3_nibbles(row0 + (n - 1) * 24, 64, pk + (n - 1) * 32);
        return pk;
    }
    if (st->packed && st->bits == 2 && st->idx.st == D / 4) { /* contiguous rows: one stream (of 2-bit codes only) */
        kern->mix_nibbles(1, row0, n * D / 4, 0, n * D / 4, pk);
        return pk;
    }
    for (int j = 0; j < n; j++) {
        uint8_t *dst = pk + j * (D / 2);
        const uint8_t *row = vq_attn_at(&st->idx, b, hk, t0 + j);
        if (st->packed && st->bits == 2) {
            vq_bitpack_spread2_nibbles(row, D / 4, dst);
            continue;
        }
        if (st->packed && st->bits == 3) {
            vq_bitpack_spread3_nibbles(row, D, dst);
            continue;
        }
        bool nibbles;
        const uint8_t *codes = vq_attn_turbo_stage_codes(st, b, hk, t0 + j, D, scratch, &nibbles);
        for (int64_t c = 0; c < D / 2; c++) dst[c] = (uint8_t)(codes[2 * c] | codes[2 * c + 1] << 4);
    }
    return pk;
}

vq_status vq_attn_turbo_check_stage(vq_ctx *ctx, const char *fmt, const char *idx_name, const DLTensor *idx,
                                    const char *scale_name, const DLTensor *scale, unsigned scale_dtypes,
                                    const char *bits_name, int bits, const vq_attn_dims *dims,
                                    vq_attn_turbo_stage *st)
{
    char name[64];
    snprintf(name, sizeof name, "%s.%s", fmt, bits_name);
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, bits, name));
    snprintf(name, sizeof name, "%s.%s", fmt, idx_name);
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, idx, name, VQ_DTM_U8 | VQ_DTM_U32, 4, 4));
    const bool packed = vq_dtype_of(idx) == VQ_DT_U32;
    const int64_t ld = packed ? vq_bitpack_words(dims->D, bits) : dims->D;
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, idx, name, VQ_DTM_U8 | VQ_DTM_U32, dims, ld));
    snprintf(name, sizeof name, "%s.%s", fmt, scale_name);
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, scale, name, scale_dtypes, dims, 0));
    *st = (vq_attn_turbo_stage){vq_attn_view_of(idx), vq_attn_view_of(scale), vq_lloyd_max_centroids(bits), ld,
                                bits, packed, vq_dtype_of(scale) == VQ_DT_F16};
    return VQ_OK;
}
