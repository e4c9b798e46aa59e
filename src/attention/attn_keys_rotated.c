/* attn_keys_rotated.c — key formats stored in the rotated basis y = rot(k):
 *   VQ_KEYS_TURBO      y_hat = scale * c_b[idx]
 *   VQ_KEYS_TURBO_RVQ  y_hat = scale1 * c_b1[idx1] + scale2 * c_b2[idx2]
 *   VQ_KEYS_RABITQ     y_hat = mag * sign,  plus an additive cnst per token
 * rot is orthonormal, so q . k_hat = rot(q) . y_hat: each query row is rotated
 * once in prep_q (softmax scale folded in) and never rotated back. A block's
 * y_hat is decoded into the thread's f32 tile (Lloyd-Max centroid look-ups,
 * or ±mag from the sign bits) and scored by all rows of the tile at once. */
#include <stdio.h>
#include <string.h>

#include "attention/attn_formats.h"
#include "codecs/hadamard.h"
#include "codecs/lloyd_max.h"
#include "codecs/turboquant.h"
#include "formats/format_bitpack.h"

/* One TurboQuant stage of codes. */
typedef struct turbo_stage {
    const void *idx;     /* [B,Hkv,Skv,ld]: u8 codes (ld = D) or u32 words (ld = ceil(D*bits/32)) */
    const float *scale;  /* [B,Hkv,Skv] */
    const float *cents;  /* the 2^bits Lloyd-Max centroids */
    int64_t ld;
    int bits;
    bool packed;
} turbo_stage;

typedef struct rotated_keys {
    vq_rotate_row_fn rotate;
    const float *diag;         /* [D] or NULL */
    int64_t Hkv, Skv, D;
    float scale;               /* softmax scale */
    int n_stages;              /* 1 turbo, 2 rvq, 0 rabitq */
    turbo_stage stage[2];
    const uint8_t *sign_bits;  /* rabitq: [B,Hkv,Skv,D/8] */
    const float *mag, *cnst;   /* rabitq: [B,Hkv,Skv]; cnst may be NULL */
} rotated_keys;
_Static_assert(sizeof(rotated_keys) <= sizeof(vq_attn_desc_storage), "rotated_keys too big");

/* q [D] -> qp [D] = scale * rot(q) */
static void prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const rotated_keys *k = desc;
    (void)row;
    for (int64_t c = 0; c < k->D; c++) qp[c] = q[c];
    k->rotate(qp, k->D, k->diag, false);
    for (int64_t c = 0; c < k->D; c++) qp[c] *= k->scale;
}

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

/* Codes of token `tok` of one stage as kern->codebook_tile reads them
 * (*nibbles: two per byte, low nibble first; else one per byte), masked to the
 * stage's bits. Read in place when the stored row already is such a layout
 * (8-bit codes; a 4-bit u32 stream is exactly nibble-packed bytes on a
 * little-endian host); otherwise unpacked from the u32 stream (element i at
 * stream bits [i*bits, (i+1)*bits), vq_bit_pack's order) or masked into
 * scratch [D]. */
static const uint8_t *stage_codes(const turbo_stage *st, int64_t tok, int64_t D, uint8_t *scratch, bool *nibbles)
{
    *nibbles = st->packed && st->bits == 4;
    if (!st->packed) {
        const uint8_t *src = (const uint8_t *)st->idx + tok * st->ld, mask = (uint8_t)vq_bitpack_mask(st->bits);
        if (st->bits == 8) return src;
        for (int64_t c = 0; c < D; c++) scratch[c] = src[c] & mask;
        return scratch;
    }
    const uint8_t *bytes = (const uint8_t *)((const uint32_t *)st->idx + tok * st->ld);
    const int64_t nbytes = 4 * st->ld;
    switch (st->bits) { /* one specialised loop per width */
    case 1: unpack_fixed(bytes, nbytes, D, 1, scratch); break;
    case 2: unpack_fixed(bytes, nbytes, D, 2, scratch); break;
    case 3: unpack_fixed(bytes, nbytes, D, 3, scratch); break;
    case 4: return bytes;
    case 5: unpack_fixed(bytes, nbytes, D, 5, scratch); break;
    case 6: unpack_fixed(bytes, nbytes, D, 6, scratch); break;
    case 7: unpack_fixed(bytes, nbytes, D, 7, scratch); break;
    default: return bytes;
    }
    return scratch;
}

/* Tokens [tok, tok + n) of the flattened cache -> tile [n][D] = y_hat, the
 * stages summed in order. Per token and stage the codes are looked up with
 * kern->codebook_tile (register look-ups for <= 16 centroids); a second stage
 * goes through row [D] and is added, as the RVQ decoder adds it. */
static void decode_turbo(const rotated_keys *k, const vq_attn_kernels *kern, int64_t tok, int n, uint8_t *scratch,
                         float *row, float *tile)
{
    for (int j = 0; j < n; j++) {
        float *y = tile + (int64_t)j * k->D;
        for (int s = 0; s < k->n_stages; s++) {
            const turbo_stage *st = &k->stage[s];
            bool nibbles;
            const uint8_t *codes = stage_codes(st, tok + j, k->D, scratch, &nibbles);
            kern->codebook_tile(1, k->D, nibbles, codes, st->cents, 1 << st->bits, st->scale + tok + j, s ? row : y);
            if (s)
                for (int64_t c = 0; c < k->D; c++) y[c] += row[c];
        }
    }
}

/* qp [R][D] -> s [R][BN] */
static void score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s)
{
    const rotated_keys *k = desc;
    const int64_t tok = (blk->b * k->Hkv + blk->hk) * k->Skv + blk->t0;
    if (k->n_stages == 0) th->kern->sign_tile(blk->n, k->D, k->sign_bits + tok * (k->D / 8), k->mag + tok, th->tile);
    else decode_turbo(k, th->kern, tok, blk->n, (uint8_t *)(th->extra + k->D), th->extra, th->tile);
    th->kern->qk[VQ_ATTN_F32](R, blk->n, k->D, qp, k->D, th->tile, k->D, s, VQ_ATTN_BN);
    if (k->cnst)
        for (int r = 0; r < R; r++)
            for (int j = 0; j < blk->n; j++) s[r * VQ_ATTN_BN + j] += k->cnst[tok + j];
}

static const vq_attn_key_ops rotated_ops = {prep_q, score};

/* The checks and fields every rotated format shares: D a power of two, diag
 * NULL or [D] f32. `fmt` names the member ("keys.turbo"). Binds out to a
 * descriptor whose format fields the caller then fills (out is the binder's
 * own output: on failure the caller discards it). */
static vq_status bind_common(vq_ctx *ctx, const char *fmt, const DLTensor *diag, const vq_attn_dims *dims,
                             float scale, vq_attn_keys *out, rotated_keys **desc)
{
    VQ_RETURN_IF(ctx, !vq_is_pow2(dims->D), VQ_ERR_INVALID_ARGUMENT,
                 "%s: head dim D = %lld must be a power of two (Hadamard rotation)", fmt, (long long)dims->D);
    if (diag) {
        char name[64];
        snprintf(name, sizeof name, "%s.diag", fmt);
        VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, diag, name, VQ_DTM_F32, 1, 1));
        VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, diag, name, 0, dims->D, "D"));
    }
    rotated_keys *d = (rotated_keys *)(void *)out->storage.bytes;
    *d = (rotated_keys){.rotate = vq_hadamard_kernels_for(ctx->isa)->rotate_row,
                        .diag = diag ? vq_data(diag) : NULL,
                        .Hkv = dims->Hkv,
                        .Skv = dims->Skv,
                        .D = dims->D,
                        .scale = scale};
    out->ops = &rotated_ops;
    out->desc = d;
    out->qp_floats = dims->D;
    out->thread_floats = dims->D + (dims->D + 3) / 4;  /* a stage row [D] f32, then a code row [D] u8 */
    *desc = d;
    return VQ_OK;
}

/* One stage: bits 1..8, idx [B,Hkv,Skv,D] u8 or [B,Hkv,Skv,ceil(D*bits/32)]
 * u32, scale [B,Hkv,Skv] f32. Names: "<fmt>.<idx_name>" etc. */
static vq_status check_stage(vq_ctx *ctx, const char *fmt, const char *idx_name, const DLTensor *idx,
                             const char *scale_name, const DLTensor *scale, const char *bits_name, int bits,
                             const vq_attn_dims *dims, turbo_stage *st)
{
    char name[64];
    snprintf(name, sizeof name, "%s.%s", fmt, bits_name);
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, bits, name));
    snprintf(name, sizeof name, "%s.%s", fmt, idx_name);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, idx, name, VQ_DTM_U8 | VQ_DTM_U32, 4, 4));
    const bool packed = vq_dtype_of(idx) == VQ_DT_U32;
    const int64_t ld = packed ? vq_bitpack_words(dims->D, bits) : dims->D;
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, idx, name, VQ_DTM_U8 | VQ_DTM_U32, dims, ld));
    snprintf(name, sizeof name, "%s.%s", fmt, scale_name);
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, scale, name, VQ_DTM_F32, dims, 0));
    *st = (turbo_stage){vq_data(idx), vq_data(scale), vq_lloyd_max_centroids(bits), ld, bits, packed};
    return VQ_OK;
}

vq_status vq_attn_bind_keys_turbo(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                  vq_attn_keys *out)
{
    rotated_keys *d = NULL;
    VQ_FORWARD_IF_ERROR(bind_common(ctx, "keys.turbo", keys->turbo.diag, dims, scale, out, &d));
    d->n_stages = 1;
    return check_stage(ctx, "keys.turbo", "idx", keys->turbo.idx, "scale", keys->turbo.scale, "bits",
                       keys->turbo.bits, dims, &d->stage[0]);
}

vq_status vq_attn_bind_keys_rvq(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                vq_attn_keys *out)
{
    rotated_keys *d = NULL;
    VQ_FORWARD_IF_ERROR(bind_common(ctx, "keys.rvq", keys->rvq.diag, dims, scale, out, &d));
    d->n_stages = 2;
    VQ_FORWARD_IF_ERROR(check_stage(ctx, "keys.rvq", "idx1", keys->rvq.idx1, "scale1", keys->rvq.scale1, "b1",
                                    keys->rvq.b1, dims, &d->stage[0]));
    return check_stage(ctx, "keys.rvq", "idx2", keys->rvq.idx2, "scale2", keys->rvq.scale2, "b2", keys->rvq.b2,
                       dims, &d->stage[1]);
}

vq_status vq_attn_bind_keys_rabitq_rotated(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims,
                                           float scale, vq_attn_keys *out)
{
    rotated_keys *d = NULL;
    VQ_FORWARD_IF_ERROR(bind_common(ctx, "keys.rabitq", keys->rabitq.diag, dims, scale, out, &d));
    VQ_FORWARD_IF_ERROR(
        vq_attn_check_per_token(ctx, keys->rabitq.bits, "keys.rabitq.bits", VQ_DTM_U8, dims, dims->D / 8));
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, keys->rabitq.mag, "keys.rabitq.mag", VQ_DTM_F32, dims, 0));
    if (keys->rabitq.cnst)
        VQ_FORWARD_IF_ERROR(
            vq_attn_check_per_token(ctx, keys->rabitq.cnst, "keys.rabitq.cnst", VQ_DTM_F32, dims, 0));
    d->n_stages = 0;
    d->sign_bits = vq_data(keys->rabitq.bits);
    d->mag = vq_data(keys->rabitq.mag);
    d->cnst = keys->rabitq.cnst ? vq_data(keys->rabitq.cnst) : NULL;
    return VQ_OK;
}
