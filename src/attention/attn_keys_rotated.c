/* attn_keys_rotated.c — key formats stored in the rotated basis y = rot(k):
 *   VQ_KEYS_TURBO      y_hat = scale * c_b[idx]
 *   VQ_KEYS_TURBO_RVQ  y_hat = scale1 * c_b1[idx1] + scale2 * c_b2[idx2]
 *   VQ_KEYS_RABITQ     y_hat = mag * sign,  plus an additive cnst per token
 * rot is orthonormal, so q . k_hat = rot(q) . y_hat: each query row is rotated
 * once in prep_q (softmax scale folded in) and never rotated back. A block's
 * y_hat is decoded into the thread's f32 tile (Lloyd-Max centroid look-ups,
 * or ±mag from the sign bits) and scored by all rows of the tile at once.
 * With integer scores (use_int8: D = 128, stages of at
 * most 4 bits) prep_q also rounds the rotated row to int8 once per call, and
 * each stage's codes, as nibble rows, are scored with exact integer dots
 * against the stage's centroids rounded to int8 (kern->codebook_qk8):
 *   s = sum over stages of isum * ((qstep * cstep) * scale_j),
 * isum = sum_c xq_c cq[idx_c]; veloxquant.h (vq_key_scores) bounds it. */
#include <math.h>
#include <stdio.h>

#include "attention/attn_turbo_stage.h"
#include "codecs/hadamard.h"

typedef struct rotated_keys {
    vq_rotate_row_fn rotate;
    const float *diag;         /* [D] or NULL */
    int64_t Hkv, Skv, D;
    float scale;               /* softmax scale */
    int n_stages;              /* 1 turbo, 2 rvq, 0 rabitq */
    vq_attn_turbo_stage stage[2];
    vq_attn_view sign_bits;    /* rabitq: [B,Hkv,Skv,D/8] */
    vq_attn_view mag, cnst;    /* rabitq: [B,Hkv,Skv]; cnst.base may be NULL */
    bool int8;                 /* integer scores: cq, cstep per stage */
    int8_t cq[2][16];
    float cstep[2];
} rotated_keys;
_Static_assert(sizeof(rotated_keys) <= sizeof(vq_attn_desc_storage), "rotated_keys too big");

/* The integer scores' prepared row after the f32 one (qp [D]): xq [D] int8
 * in plane order (codebook_qk8), then qstep. */
#define INT8_QP_FLOATS(D) ((D) + (D) / 4 + 1)

/* q [D] -> qp [D] = scale * rot(q); with integer scores also its int8 row:
 * amax = max |qp_c|, qstep = amax / 127, xq_c = rint(qp_c * (127 / amax))
 * (0 where amax is 0 or not finite; a non-finite qp makes qstep NaN, and so
 * the row's scores, as in the float path). */
static void prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const rotated_keys *k = desc;
    const int64_t D = k->D;
    (void)row;
    for (int64_t c = 0; c < D; c++) qp[c] = q[c];
    k->rotate(qp, D, k->diag, false);
    for (int64_t c = 0; c < D; c++) qp[c] *= k->scale;
    if (!k->int8) return;
    float amax = 0.0f;
    bool finite = true;
    for (int64_t c = 0; c < D; c++) {
        const float a = qp[c] < 0.0f ? -qp[c] : qp[c];
        finite = finite && a <= 3.40282347e38f; /* false for NaN and inf */
        amax = a > amax ? a : amax;
    }
    const float inv = vq_attn_q8_inv(amax, finite);
    int8_t *xq = (int8_t *)(qp + D);
    for (int64_t c = 0; c < D; c++) /* NaN * 0 would not convert */
        xq[(c % 2) * (D / 2) + c / 2] = finite ? (int8_t)rintf(qp[c] * inv) : 0;
    qp[D + D / 4] = finite ? amax / 127.0f : NAN;
}

/* Integer scores of the block: per stage, its codes as nibble rows, the
 * integer dots of every row, then s (+)= isum * ((qstep * cstep) * scale_j). */
static void score_int8(const rotated_keys *k, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                       int R, float *s)
{
    const int64_t D = k->D, qpf = INT8_QP_FLOATS(D);
    int32_t *isum = (int32_t *)th->extra;
    uint8_t *pk = (uint8_t *)(th->extra + VQ_ATTN_MAX_ROWS * VQ_ATTN_BN), *scratch = pk + VQ_ATTN_BN * D / 2;
    for (int st = 0; st < k->n_stages; st++) {
        const vq_attn_turbo_stage *g = &k->stage[st];
        int64_t ldi;
        const uint8_t *idx = vq_attn_turbo_stage_nibble_rows(th->kern, g, blk->b, blk->hk, blk->t0, blk->n, D, scratch, pk, &ldi);
        th->kern->codebook_qk8(R, blk->n, idx, ldi, k->cq[st], (const int8_t *)(qp + D), qpf * (int64_t)sizeof(float),
                               isum, VQ_ATTN_BN);
        float sc[VQ_ATTN_BN];
        vq_attn_turbo_stage_scales(th->kern, g, blk->b, blk->hk, blk->t0, blk->n, sc);
        for (int r = 0; r < R; r++) {
            const float f = qp[r * qpf + D + D / 4] * k->cstep[st];
            for (int j = 0; j < blk->n; j++) {
                const float v = (float)isum[r * VQ_ATTN_BN + j] * (f * sc[j]);
                s[r * VQ_ATTN_BN + j] = st ? s[r * VQ_ATTN_BN + j] + v : v;
            }
        }
    }
}

/* Tokens [t0, t0 + n) of kv head hk in batch b -> tile [n][D] = y_hat, the
 * stages summed in order. Per token and stage the codes are looked up with
 * kern->codebook_tile (register look-ups for <= 16 centroids); a second stage
 * goes through row [D] and is added, as the RVQ decoder adds it. */
static void decode_turbo(const rotated_keys *k, const vq_attn_kernels *kern, const vq_attn_block *blk,
                         uint8_t *scratch, float *row, float *tile)
{
    const vq_attn_turbo_stage *st0 = &k->stage[0];
    const uint8_t *bytes = k->n_stages == 1 ? vq_attn_turbo_stage_byte_rows(st0, blk->b, blk->hk, blk->t0, k->D) : NULL;
    if (bytes) { /* one call for the block: the same floats as token by token */
        float sc[VQ_ATTN_BN];
        vq_attn_turbo_stage_scales(kern, st0, blk->b, blk->hk, blk->t0, blk->n, sc);
        kern->codebook_tile(blk->n, k->D, false, bytes, st0->cents, 1 << st0->bits, sc, tile);
        return;
    }
    for (int j = 0; j < blk->n; j++) {
        float *y = tile + (int64_t)j * k->D;
        const int64_t t = blk->t0 + j;
        for (int s = 0; s < k->n_stages; s++) {
            const vq_attn_turbo_stage *st = &k->stage[s];
            bool nibbles;
            const uint8_t *codes = vq_attn_turbo_stage_codes(st, blk->b, blk->hk, t, k->D, scratch, &nibbles);
            const float scale = vq_attn_turbo_stage_scale(st, blk->b, blk->hk, t);
            kern->codebook_tile(1, k->D, nibbles, codes, st->cents, 1 << st->bits, &scale, s ? row : y);
            if (s)
                for (int64_t c = 0; c < k->D; c++) y[c] += row[c];
        }
    }
}

/* The block's sign bits as ±mag into the tile: one call when the token rows
 * are contiguous, else one per token. */
static void decode_signs(const rotated_keys *k, const vq_attn_kernels *kern, const vq_attn_block *blk,
                         float *tile)
{
    const uint8_t *bits = vq_attn_at(&k->sign_bits, blk->b, blk->hk, blk->t0);
    const float *mag = vq_attn_at(&k->mag, blk->b, blk->hk, blk->t0);
    if (k->sign_bits.st == k->D / 8) {
        kern->sign_tile(blk->n, k->D, bits, mag, tile);
        return;
    }
    for (int j = 0; j < blk->n; j++) kern->sign_tile(1, k->D, bits + j * k->sign_bits.st, mag + j, tile + j * k->D);
}

/* qp [R][D] -> s [R][BN] */
static void score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s)
{
    const rotated_keys *k = desc;
    if (k->int8) {
        score_int8(k, th, blk, qp, R, s);
        return;
    }
    if (k->n_stages == 0) decode_signs(k, th->kern, blk, th->tile);
    else decode_turbo(k, th->kern, blk, (uint8_t *)(th->extra + k->D), th->extra, th->tile);
    th->kern->qk[VQ_ATTN_F32](R, blk->n, k->D, qp, k->D, th->tile, k->D, s, VQ_ATTN_BN);
    if (k->cnst.base) {
        const float *cn = vq_attn_at(&k->cnst, blk->b, blk->hk, blk->t0);
        for (int r = 0; r < R; r++)
            for (int j = 0; j < blk->n; j++) s[r * VQ_ATTN_BN + j] += cn[j];
    }
}

static bool use_int8(vq_attn_keys *keys, const vq_attn_kernels *kern, bool asked);
static const vq_attn_key_ops rotated_ops = {prep_q, score, use_int8, NULL};

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
                        .scale = scale,
                        .int8 = false};
    out->ops = &rotated_ops;
    out->desc = d;
    out->qp_floats = dims->D;
    out->thread_floats = dims->D + (dims->D + 3) / 4;  /* a stage row [D] f32, then a code row [D] u8 */
    *desc = d;
    return VQ_OK;
}

vq_status vq_attn_bind_keys_turbo(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                  vq_attn_keys *out)
{
    rotated_keys *d = NULL;
    VQ_FORWARD_IF_ERROR(bind_common(ctx, "keys.turbo", keys->turbo.diag, dims, scale, out, &d));
    d->n_stages = 1;
    return vq_attn_turbo_check_stage(ctx, "keys.turbo", "idx", keys->turbo.idx, "scale", keys->turbo.scale,
                                     VQ_DTM_F16_F32, "bits", keys->turbo.bits, dims, &d->stage[0]);
}

vq_status vq_attn_bind_keys_rvq(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                vq_attn_keys *out)
{
    rotated_keys *d = NULL;
    VQ_FORWARD_IF_ERROR(bind_common(ctx, "keys.rvq", keys->rvq.diag, dims, scale, out, &d));
    d->n_stages = 2;
    VQ_FORWARD_IF_ERROR(vq_attn_turbo_check_stage(ctx, "keys.rvq", "idx1", keys->rvq.idx1, "scale1",
                                                  keys->rvq.scale1, VQ_DTM_F32, "b1", keys->rvq.b1, dims,
                                                  &d->stage[0]));
    return vq_attn_turbo_check_stage(ctx, "keys.rvq", "idx2", keys->rvq.idx2, "scale2", keys->rvq.scale2,
                                     VQ_DTM_F16_F32, "b2", keys->rvq.b2, dims, &d->stage[1]);
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
    d->sign_bits = vq_attn_view_of(keys->rabitq.bits);
    d->mag = vq_attn_view_of(keys->rabitq.mag);
    d->cnst = keys->rabitq.cnst ? vq_attn_view_of(keys->rabitq.cnst) : (vq_attn_view){0};
    return VQ_OK;
}

/* The switch to integer scores of TurboQuant and RVQ keys: the rotated query
 * rounded to int8 once per row and call, kern->codebook_qk8 per stage
 * against the centroids rounded once. False, changing nothing, for RaBitQ
 * signs, D != 128, a stage of more than 4 bits, and under AUTO where the
 * ISA has no SIMD codebook_qk8 or a stage's width is not one AUTO takes
 * (vq_attn_turbo_auto_widths). */
static bool use_int8(vq_attn_keys *keys, const vq_attn_kernels *kern, bool asked)
{
    rotated_keys *d = (rotated_keys *)(void *)keys->storage.bytes;
    if (d->n_stages == 0 || d->D != 128 || (!asked && !kern->cbqk8_fast)) return false;
    const unsigned widths = asked ? ~0u : vq_attn_turbo_auto_widths(kern);
    for (int st = 0; st < d->n_stages; st++) {
        const vq_attn_turbo_stage *g = &d->stage[st];
        if (g->bits > 4 || (widths != ~0u && !(g->packed && (widths >> g->bits & 1u)))) return false;
    }
    for (int st = 0; st < d->n_stages; st++)
        if (!vq_attn_cb8_round(d->stage[st].cents, 1 << d->stage[st].bits, d->cq[st], &d->cstep[st])) return false;
    d->int8 = true;
    keys->qp_floats = INT8_QP_FLOATS(d->D);
    /* isum [MAX_ROWS][BN], nibble rows [BN][D/2], a code row [D] */
    keys->thread_floats = VQ_ATTN_MAX_ROWS * VQ_ATTN_BN + VQ_ATTN_BN * d->D / 8 + d->D / 4 + 8; /* + nibble_rows' 32 bytes */
    return true;
}
