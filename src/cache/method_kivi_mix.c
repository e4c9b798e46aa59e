/* method_kivi_mix.c — mixed-width KIVI keys (VQ_KEY_KIVI_MIX), a cache-only
 * format (layout: formats/format_kivi_mix.h): the cache method (its
 * validation and streams), the encoder of whole key groups, and the
 * attention binding, which unpacks a group segment's code
 * rows into one byte per code and scores them with the affine kernels'
 * one-code-per-byte path (each channel's width is in its scale, so decoding
 * needs the mask only to order the channels). Decode (few rows) keeps the
 * codes in stream order and permutes the queries; more rows unpack into
 * channel order and decode a tile. */
#include <math.h>
#include <string.h>

#include "cache/cache_method.h"
#include "formats/format_kivi.h"
#include "formats/format_kivi_mix.h"

/* ---- encoder ---- */

/* Marks in mask [D/8] the nw channels of the widest range[c] (ties to the
 * lower channel): a stable selection, D <= 256. */
static void widest(const float *range, int64_t D, int64_t nw, uint8_t *mask)
{
    int order[256];
    for (int64_t c = 0; c < D; c++) {
        int64_t j = c;
        /* insertion by descending range; an equal range stays after the lower channel */
        while (j > 0 && range[order[j - 1]] < range[c]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = (int)c;
    }
    memset(mask, 0, (size_t)vq_kivi_mix_mask_bytes(D));
    for (int64_t i = 0; i < nw; i++) mask[order[i] >> 3] |= (uint8_t)(1u << (order[i] & 7));
}

/* k [1,Hkv,T,D] f16 compact, T a multiple of kc->group_size -> compact
 * staging views codes [1,Hkv,T,RB] u8, scale and zero [1,Hkv,T/g,D] f16,
 * mask [1,Hkv,T/g,D/8] u8, host memory. (On a CUDA cache the key format's
 * device encoder, src/cuda/keys_kivi_mix.cu, writes the same bytes.) */
static vq_status encode_groups(vq_cache *c, const vq_key_config *kc, const DLTensor *k, DLTensor *codes,
                               DLTensor *scale, DLTensor *zero, DLTensor *mask)
{
    const int64_t Hkv = c->Hkv, D = c->D, T = vq_dim(k, 2), g = kc->group_size;
    const int64_t nw = vq_kivi_mix_wide_channels(kc->wide_channels, D);
    const int64_t rb = vq_kivi_mix_row_bytes(D, nw, kc->bits, kc->bits2), mb = vq_kivi_mix_mask_bytes(D);
    VQ_RETURN_IF(c->ctx, T % g != 0, VQ_ERR_INVALID_ARGUMENT, "kivi_mix encode: %lld tokens, not whole groups of %lld",
                 (long long)T, (long long)g);
    const uint16_t *x = k->data;
    uint8_t *cd = codes->data, *mk = mask->data;
    uint16_t *sc16 = scale->data, *ze16 = zero->data;
    float mn[256], mx[256], range[256], sc[256], ze[256];
    uint8_t row[256];
    for (int64_t h = 0; h < Hkv; h++)
        for (int64_t g0 = 0; g0 < T; g0 += g) {
            const int64_t gi = h * (T / g) + g0 / g;
            const uint16_t *xg = x + (h * T + g0) * D;
            for (int64_t ch = 0; ch < D; ch++) mn[ch] = mx[ch] = vq_half_to_float(xg[ch]);
            for (int64_t t = 1; t < g; t++)
                for (int64_t ch = 0; ch < D; ch++) {
                    const float v = vq_half_to_float(xg[t * D + ch]);
                    mn[ch] = v < mn[ch] ? v : mn[ch];
                    mx[ch] = v > mx[ch] ? v : mx[ch];
                }
            for (int64_t ch = 0; ch < D; ch++) range[ch] = mx[ch] - mn[ch];
            uint8_t *m = mk + gi * mb;
            widest(range, D, nw, m);
            for (int64_t ch = 0; ch < D; ch++) {
                const float maxq = (float)((1 << (vq_kivi_mix_wide(m, ch) ? kc->bits2 : kc->bits)) - 1);
                /* stored in f16; the codes are computed against what decoding reads */
                sc16[gi * D + ch] = vq_f32_to_f16(mx[ch] > mn[ch] ? range[ch] / maxq : 0.0f);
                ze16[gi * D + ch] = vq_f32_to_f16(mn[ch]);
                sc[ch] = vq_half_to_float(sc16[gi * D + ch]);
                ze[ch] = vq_half_to_float(ze16[gi * D + ch]);
            }
            for (int64_t t = 0; t < g; t++) {
                for (int64_t ch = 0; ch < D; ch++) {
                    const float maxq = (float)((1 << (vq_kivi_mix_wide(m, ch) ? kc->bits2 : kc->bits)) - 1);
                    float q = (vq_half_to_float(xg[t * D + ch]) - ze[ch]) / sc[ch];
                    q = q > 0.0f ? q : 0.0f; /* also maps NaN to 0 */
                    q = q < maxq ? q : maxq;
                    row[ch] = sc[ch] != 0.0f ? (uint8_t)nearbyintf(q) : 0;
                }
                vq_kivi_mix_pack_row(row, m, D, nw, kc->bits, kc->bits2, cd + (h * T + g0 + t) * rb);
            }
        }
    return VQ_OK;
}

/* ---- attention ---- */

typedef struct mix_keys {
    vq_attn_view codes;       /* [B,Hkv,Skv,RB] */
    vq_attn_view scale, zero; /* [B,Hkv,GK,D] f16 */
    vq_attn_view mask;        /* [B,Hkv,GK,D/8] u8 */
    int bits, bits2;
    int64_t g, D, nw; /* nw wide channels */
    float softmax_scale;
    bool int8; /* integer scores (mix_use_int8) */
} mix_keys;
_Static_assert(sizeof(mix_keys) <= sizeof(vq_attn_desc_storage), "mix_keys too big");

/* Thread scratch: f32 scale and zero rows [2][D], the same in stream order
 * [2][D], the direct path's query rows in stream order
 * [VQ_ATTN_DIRECT_ROWS][D], then the unpacked codes [VQ_ATTN_BN][D] u8. */
static int64_t thread_floats(int64_t D) { return (4 + VQ_ATTN_DIRECT_ROWS) * D + VQ_ATTN_BN * D / 4; }

/* The stream order of a group (mask m): perm[i] = the channel of code i
 * (vq_kivi_mix_order, without a branch on each channel's random width). */
static void stream_order(const mix_keys *k, const uint8_t *m, int *perm)
{
    for (int64_t c = 0, w = 0, nn = k->nw; c < k->D; c++) {
        const int64_t wide = vq_kivi_mix_wide(m, c);
        perm[wide ? w : nn] = (int)c;
        w += wide;
        nn += 1 - wide;
    }
}

/* The R query rows qp [R][D], scale and zero of a group (mask m) permuted
 * to the order of its code stream (the wide channels, then the narrow):
 * qs [R][D], scp, zep [D]. */
static void to_stream_order(const mix_keys *k, const uint8_t *m, int R, const float *qp, const float *sc,
                            const float *ze, float *qs, float *scp, float *zep)
{
    const int64_t D = k->D;
    int perm[256];
    stream_order(k, m, perm);
    for (int64_t i = 0; i < D; i++) {
        scp[i] = sc[perm[i]];
        zep[i] = ze[perm[i]];
    }
    for (int r = 0; r < R; r++)
        for (int64_t i = 0; i < D; i++) qs[r * D + i] = qp[r * D + perm[i]];
}

/* Few rows (decode): the codes stay in stream order (two whole-row unpacks
 * where both widths are 2, 4 or 8 and both parts fill whole bytes, no
 * per-channel branch) and the query
 * rows, scale and zero are permuted to it once per group segment instead:
 * the score is the same sum over the channels. */
static void score_direct(const mix_keys *k, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                         int R, int64_t t, int n, const uint8_t *m, const float *sc, const float *ze, float *s)
{
    const int64_t D = k->D, nw = k->nw;
    float *scp = th->extra + 2 * D, *zep = th->extra + 3 * D, *qs = th->extra + 4 * D;
    uint8_t *u = (uint8_t *)(th->extra + (4 + VQ_ATTN_DIRECT_ROWS) * D);
    to_stream_order(k, m, R, qp, sc, ze, qs, scp, zep);
    const bool whole = vq_kivi_packable_bits(k->bits) && vq_kivi_packable_bits(k->bits2) &&
                       (nw * k->bits2) % 8 == 0 && ((D - nw) * k->bits) % 8 == 0;
    for (int j = 0; j < n; j++) {
        const uint8_t *row = vq_attn_at(&k->codes, blk->b, blk->hk, t + j);
        uint8_t *dst = u + (int64_t)j * D;
        if (whole) {
            vq_kivi_unpack_row(row, nw, k->bits2, dst);
            vq_kivi_unpack_row(row + nw * k->bits2 / 8, D - nw, k->bits, dst + nw);
        } else {
            vq_kivi_mix_unpack_stream(row, D, nw, k->bits, k->bits2, dst);
        }
    }
    th->kern->kivi_qk(R, n, D, 8, u, D, scp, zep, qs, D, s, VQ_ATTN_BN);
}

/* Integer scores' scratch after thread_floats(D): the rows' int8 in
 * channel order [MAX_ROWS][D] bytes and the code rows as nibbles
 * [VQ_ATTN_BN][D / 2] and the 32 bytes mix_nibbles may spill past them (the
 * int8 rows in stream order and their steps live in the thread's memo). */
static int64_t int8_floats(int64_t D) { return VQ_ATTN_MAX_ROWS * D / 4 + VQ_ATTN_BN * D / 8 + 8; }

/* The rows qp [R][D] quantised against key group grp in channel order
 * (kivi_q8 at 4 bits: every code, 2 or 4 bits wide, is a nibble): xc
 * [R][D], their steps and zero terms z [R][2]. */
static void channel_q8(const mix_keys *k, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                       int64_t grp, int8_t *xc, float *z)
{
    const int64_t D = k->D;
    float *sc = th->extra, *ze = th->extra + D;
    th->kern->cvt_f16(D, vq_attn_at(&k->scale, blk->b, blk->hk, grp), sc);
    th->kern->cvt_f16(D, vq_attn_at(&k->zero, blk->b, blk->hk, grp), ze);
    th->kern->kivi_q8(R, D, 4, qp, D, sc, ze, xc, z);
}

/* The rows' int8 against key group grp in the group's stream order, and
 * their steps and zero terms (*dz): quantised once per group in channel
 * order (channel_q8), their int8 moved to stream order (the step is a max over the channels,
 * the zero term a sum: neither depends on the order, so this is the
 * quantisation of the permuted rows, a byte move per channel instead of
 * float moves of the rows, scale and zero) and kept in the thread's memo
 * for the group's later blocks. */
static const int8_t *group_q8(const mix_keys *k, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                              int R, int64_t grp, const float **dz)
{
    const int64_t D = k->D;
    int8_t *xq = (int8_t *)th->memo_data;
    float *z = th->memo_data + VQ_ATTN_MAX_ROWS * D / 4;
    *dz = z;
    if (vq_attn_memo_hit(th, k, blk->b, blk->hk, grp, qp, R)) return xq;
    int8_t *xc = (int8_t *)(th->extra + thread_floats(D)); /* the rows' int8 in channel order */
    channel_q8(k, th, blk, qp, R, grp, xc, z);
    int perm[256];
    stream_order(k, vq_attn_at(&k->mask, blk->b, blk->hk, grp), perm);
    /* code 2i of the stream sits at byte i of plane 0, code 2i + 1 of plane 1 (vq_attn_q8_pos) */
    for (int64_t i = 0; i < D / 2; i++) {
        const int64_t a = vq_attn_q8_pos(perm[2 * i], 4, D), b = vq_attn_q8_pos(perm[2 * i + 1], 4, D);
        for (int r = 0; r < R; r++) {
            xq[r * D + i] = xc[r * D + a];
            xq[r * D + D / 2 + i] = xc[r * D + b];
        }
    }
    return xq;
}

/* Integer scores of one group segment (any R): the rows' int8 of the group
 * (group_q8); the code rows turned into nibble rows (the wide codes are
 * nibbles already, the narrow 2-bit ones spread), then exact integer dots
 * (kivi_qk8). */
static void score_int8(const mix_keys *k, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                       int R, int64_t t, int n, int64_t grp, float *s)
{
    const int64_t D = k->D, nw = k->nw;
    uint8_t *nib = (uint8_t *)(th->extra + thread_floats(D) + VQ_ATTN_MAX_ROWS * D / 4);
    const float *dz;
    const int8_t *xq = group_q8(k, th, blk, qp, R, grp, &dz);
    th->kern->mix_nibbles(n, vq_attn_at(&k->codes, blk->b, blk->hk, t), k->codes.st, nw / 2, (D - nw) / 4, nib);
    th->kern->kivi_qk8(R, n, D, 4, nib, D / 2, xq, dz, s, VQ_ATTN_BN);
}

/* vq_attn_q8_pos(c, 4, 64): where channel c's byte sits in a row of
 * kivi_q8 at 4 bits and D = 64. */
static inline uint8_t q8_pos64(int c) { return (uint8_t)((c & 1) << 5 | c >> 1); }

/* The rows of group grp as the fused kernel takes them (kivi_turbo_keys):
 * kivi_q8's int8 in channel order (xc [R][D] at the memo's data) and, per
 * stream code, the byte of a row that holds its channel (b->sidx [D]); the
 * kernel gathers the rows itself. Kept in the memo under a tag of their
 * own (the next byte of the descriptor), as they are not group_q8's layout. */
static void group_q8_fused(const mix_keys *k, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                           int R, int64_t grp, vq_attn_kivi_turbo_block *b)
{
    const int64_t D = k->D;
    int8_t *xc = (int8_t *)th->memo_data;
    uint8_t *sidx = (uint8_t *)th->memo_data + VQ_ATTN_DIRECT_ROWS * D;
    float *z = th->memo_data + VQ_ATTN_MAX_ROWS * D / 4;
    b->xc = xc, b->sidx = sidx, b->dz = z;
    b->xk = (int8_t *)th->memo_data + 8 * D; /* 64-byte aligned, past xc and sidx, before z */
    b->xk_ready = vq_attn_memo_hit(th, (const char *)k + 1, blk->b, blk->hk, grp, qp, R);
    if (b->xk_ready) return; /* the kernel built xk on the group's first block */
    channel_q8(k, th, blk, qp, R, grp, xc, z);
    /* the stream order (stream_order) from the 64-bit mask, bit c channel
     * c's width on a little-endian host: a wide channel's place is the
     * count of wide ones below it, a narrow one's nw plus the narrow ones
     * below it (the loop carries one add, where walking the set bits
     * carried a clear-lowest-bit and a bit scan) */
    uint64_t wide;
    memcpy(&wide, vq_attn_at(&k->mask, blk->b, blk->hk, grp), sizeof wide);
    for (int c = 0, below = 0; c < 64; c++) {
        const int w = (int)(wide >> c & 1u);
        sidx[w ? below : (int)k->nw + c - below] = q8_pos64(c);
        below += w;
    }
}

/* The keys' part of the fused block (kivi_turbo_keys in attn_skeleton.h):
 * the layouts kivi_turbo_block reads (D = 64, 24 or 8 wide 4-bit channels,
 * narrow 2-bit ones, contiguous rows), a whole block inside one group. */
static bool kivi_turbo_keys(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                           int R, vq_attn_kivi_turbo_block *b)
{
    const mix_keys *k = desc;
    if (!k->int8 || k->D != 64 || (k->nw != 24 && k->nw != 8) || k->bits != 2 || k->bits2 != 4 ||
        k->codes.st != vq_kivi_mix_row_bytes(64, k->nw, 2, 4) ||
        blk->n != VQ_ATTN_BN || k->g % VQ_ATTN_BN != 0 || blk->t0 % VQ_ATTN_BN != 0 || R > VQ_ATTN_DIRECT_ROWS)
        return false;
    group_q8_fused(k, th, blk, qp, R, blk->t0 / k->g, b);
    b->kcodes = vq_attn_at(&k->codes, blk->b, blk->hk, blk->t0);
    b->nw = (int)k->nw;
    return true;
}

static void mix_prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const mix_keys *k = desc;
    (void)row;
    for (int64_t c = 0; c < k->D; c++) qp[c] = q[c] * k->softmax_scale;
}

static void mix_score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                      float *s)
{
    const mix_keys *k = desc;
    const int64_t D = k->D;
    const bool direct = R <= VQ_ATTN_DIRECT_ROWS;
    /* the codes two blocks ahead (vq_attn_prefetch; a prefetch past the
     * segment's rows never faults): they are first read by mix_nibbles */
    if (k->int8) vq_attn_prefetch(vq_attn_at(&k->codes, blk->b, blk->hk, blk->t0 + VQ_ATTN_PREFETCH_AHEAD),
                                  VQ_ATTN_BN * k->codes.st);
    float *sc = th->extra, *ze = th->extra + D;
    uint8_t *u = (uint8_t *)(th->extra + (4 + VQ_ATTN_DIRECT_ROWS) * D);
    for (int64_t t = blk->t0; t < blk->t0 + blk->n;) {
        const int64_t grp = t / k->g;
        int64_t end = (grp + 1) * k->g;
        if (end > blk->t0 + blk->n) end = blk->t0 + blk->n;
        const int n = (int)(end - t);
        if (k->int8) {
            score_int8(k, th, blk, qp, R, t, n, grp, s + (t - blk->t0));
            t = end;
            continue;
        }
        th->kern->cvt_f16(D, vq_attn_at(&k->scale, blk->b, blk->hk, grp), sc);
        th->kern->cvt_f16(D, vq_attn_at(&k->zero, blk->b, blk->hk, grp), ze);
        const uint8_t *m = vq_attn_at(&k->mask, blk->b, blk->hk, grp);
        if (direct) {
            score_direct(k, th, blk, qp, R, t, n, m, sc, ze, s + (t - blk->t0));
        } else {
            for (int j = 0; j < n; j++)
                vq_kivi_mix_unpack_row(vq_attn_at(&k->codes, blk->b, blk->hk, t + j), m, D, k->nw, k->bits,
                                         k->bits2, u + (int64_t)j * D);
            th->kern->kivi_k_tile(n, D, 8, u, D, sc, ze, th->tile + (t - blk->t0) * D);
        }
        t = end;
    }
    if (!direct && !k->int8) th->kern->qk[VQ_ATTN_F32](R, blk->n, D, qp, D, th->tile, D, s, VQ_ATTN_BN);
}

static bool mix_use_int8(vq_attn_keys *keys, const vq_attn_kernels *kern, bool asked);
/* integer scores under AUTO wherever the layout allows, as the KIVI keys' */
static const vq_attn_key_ops mix_ops = {mix_prep_q, mix_score, mix_use_int8, kivi_turbo_keys};

vq_status vq_cache_bind_kivi_mix(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale, const DLTensor *zero,
                                 const DLTensor *mask, const vq_key_config *kc, const vq_attn_dims *dims,
                                 float softmax_scale, vq_attn_keys *out)
{
    const int64_t D = dims->D, GK = vq_ceil_div(dims->Skv, kc->group_size), nw = vq_kivi_mix_wide_channels(kc->wide_channels, D);
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, codes, "k_codes", VQ_DTM_U8, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(
        ctx, codes, "k_codes", 4,
        (const int64_t[]){dims->B, dims->Hkv, dims->Skv, vq_kivi_mix_row_bytes(D, nw, kc->bits, kc->bits2)}));
    const int64_t want[4] = {dims->B, dims->Hkv, GK, D};
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, scale, "k_scale", VQ_DTM_F16, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, scale, "k_scale", 4, want));
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, zero, "k_zero", VQ_DTM_F16, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, zero, "k_zero", 4, want));
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, mask, "k_mask", VQ_DTM_U8, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, mask, "k_mask", 4,
                                       (const int64_t[]){dims->B, dims->Hkv, GK, vq_kivi_mix_mask_bytes(D)}));
    mix_keys *d = (mix_keys *)(void *)out->storage.bytes;
    *d = (mix_keys){vq_attn_view_of(codes), vq_attn_view_of(scale), vq_attn_view_of(zero), vq_attn_view_of(mask),
                    kc->bits, kc->bits2, kc->group_size, D, nw, softmax_scale, false};
    out->ops = &mix_ops;
    out->desc = d;
    out->qp_floats = D;
    out->thread_floats = thread_floats(D);
    return VQ_OK;
}

/* The switch to integer scores (the affine kernels' 4-bit path over the
 * codes as nibble rows; the bound of vq_key_scores in veloxquant.h, codes of
 * at most 15). False, changing nothing, unless the widths are 2 and 4, the
 * wide count a multiple of 4 and D a multiple of 64. */
static bool mix_use_int8(vq_attn_keys *keys, const vq_attn_kernels *kern, bool asked)
{
    (void)kern, (void)asked;
    mix_keys *d = (mix_keys *)(void *)keys->storage.bytes;
    if (d->bits != 2 || d->bits2 != 4 || d->nw % 4 != 0 || !vq_attn_q8_supported(4, d->D)) return false;
    d->int8 = true;
    keys->thread_floats = thread_floats(d->D) + int8_floats(d->D);
    return true;
}

/* ---- the cache method ---- */

static vq_status layout(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_key_config *k = &L->cfg.keys;
    const int64_t P = c->P;
    const int D = c->D;
    VQ_RETURN_IF(c->ctx, !vq_cache_in_range(k->bits, 1, 7) || !vq_cache_in_range(k->bits2, k->bits + 1, 8),
                 VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.bits/bits2': KIVI_MIX takes 1 <= bits < bits2 <= 8, got %d and %d", name,
                 k->bits, k->bits2);
    if (k->group_size == 0) k->group_size = 32;
    VQ_RETURN_IF(c->ctx, k->group_size < 1 || P % k->group_size != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.group_size': must divide page_size %lld, got %d", name, (long long)P,
                 k->group_size);
    VQ_RETURN_IF(c->ctx, !vq_cache_in_range(k->wide_channels, 0, D - 1), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.wide_channels': KIVI_MIX takes 1..%d (0 = %d), got %d", name, D - 1, D / 2,
                 k->wide_channels);
    if (k->wide_channels == D / 2) k->wide_channels = 0; /* one spelling of the default (LCFG) */
    L->g = k->group_size;
    vq_cache_add_stream(c, L, "k_codes", VQ_DT_U8, P,
                        vq_kivi_mix_row_bytes(D, vq_kivi_mix_wide_channels(k->wide_channels, D), k->bits, k->bits2), 4, true,
                        VQ_CACHE_PART_CODE);
    vq_cache_add_stream(c, L, "k_scale", VQ_DT_F16, P / L->g, D, 4, true, VQ_CACHE_PART_PARAM);
    vq_cache_add_stream(c, L, "k_zero", VQ_DT_F16, P / L->g, D, 4, true, VQ_CACHE_PART_PARAM);
    vq_cache_add_stream(c, L, "k_mask", VQ_DT_U8, P / L->g, vq_kivi_mix_mask_bytes(D), 4, true,
                        VQ_CACHE_PART_PARAM);
    return VQ_OK;
}

static vq_status encode(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                        unsigned char *scratch, int64_t T)
{
    return encode_groups(c, &L->cfg.keys, x, outs[0], outs[1], outs[2], outs[3]);
}

/* no public format: cache_attend.c binds the four streams with
 * vq_cache_bind_kivi_mix (cuda_cache.c as vq_cuda_kivi_mix_keys) */
static void describe(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                     vq_encoded_values *ev)
{
}

const vq_cache_method vq_cache_keys_kivi_mix = {
    .name = "KIVI_MIX", .id = VQ_KEY_KIVI_MIX, .window = true,
    .layout = layout, .encode = encode, .describe = describe,
};
