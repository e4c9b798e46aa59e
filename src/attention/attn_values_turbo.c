/* attn_values_turbo.c — TurboQuant values, v_hat = rot^-1(scale * c[idx]).
 * Attention is linear in the values, so P.V is accumulated in the rotated
 * basis, o_rot = sum_j p_j y_hat_j with y_hat = scale * c[idx] (a block
 * decoded into the tile with kern->codebook_tile, as the rotated keys are),
 * and each output row is rotated back once (finish): o = rot^-1(o_rot).
 * That costs one rotation per row instead of one per token.
 * With integer p.V (use_int8: D = 64, 128 or 256, bits <= 4) every
 * block goes to kern->codebook_pv8 (per 128 channels; codebook_pv8_64 at
 * D = 64) with the Lloyd-Max centroids rounded once
 * and the weights p_j * scale_j, the codes as nibble rows (in place for
 * 4-bit words): the codebook values' arithmetic, in the rotated basis.
 * Behind KIVI keys at D = 64 (2- and 3-bit words) runs of whole blocks go
 * to one fused kernel per block (kivi_turbo_run) where the ISA has one;
 * VQ_ATTN_UNFUSED=1 (read when the values bind) keeps the separate kernels. */
#include "attention/attn_turbo_stage.h"
#include "codecs/hadamard.h"

typedef struct turbo_values {
    vq_attn_turbo_stage stage;
    vq_rotate_row_fn rotate;
    const float *diag;  /* [D] or NULL */
    int64_t D;
    int8_t cq[16];  /* integer p.V (turbo_int8_ops): the centroids rounded, and their step */
    float cstep;
} turbo_values;
_Static_assert(sizeof(turbo_values) <= sizeof(vq_attn_desc_storage), "turbo_values too big");

/* p [R][BN] -> o [R][D] += p . y_hat[t0 .. t0+n) (rotated basis): 2- to
 * 4-bit words as the block's nibble rows, decoded in one codebook_tile
 * call (the same floats as token by token), other layouts token by token */
static void accumulate(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                       int R, float *o)
{
    const turbo_values *v = desc;
    const vq_attn_turbo_stage *st = &v->stage;
    const int64_t D = v->D;
    uint8_t *scratch = (uint8_t *)th->extra;
    float sc[VQ_ATTN_BN];
    vq_attn_turbo_stage_scales(th->kern, st, blk->b, blk->hk, blk->t0, blk->n, sc);
    int64_t ldi = 0;
    const uint8_t *idx = NULL;
    if (st->packed && st->bits >= 2 && st->bits <= 4 && D % 16 == 0)
        idx = vq_attn_turbo_stage_nibble_rows(th->kern, st, blk->b, blk->hk, blk->t0, blk->n, D, scratch,
                                              scratch + D, &ldi);
    const uint8_t *bytes = idx ? NULL : vq_attn_turbo_stage_byte_rows(st, blk->b, blk->hk, blk->t0, D);
    if (idx && ldi == D / 2) {
        th->kern->codebook_tile(blk->n, D, true, idx, st->cents, 1 << st->bits, sc, th->tile);
    } else if (bytes) {
        th->kern->codebook_tile(blk->n, D, false, bytes, st->cents, 1 << st->bits, sc, th->tile);
    } else {
        for (int j = 0; j < blk->n; j++) {
            bool nibbles;
            const uint8_t *codes = vq_attn_turbo_stage_codes(st, blk->b, blk->hk, blk->t0 + j, D, scratch, &nibbles);
            th->kern->codebook_tile(1, D, nibbles, codes, st->cents, 1 << st->bits, &sc[j], th->tile + j * D);
        }
    }
    th->kern->pv[VQ_ATTN_F32](R, blk->n, D, p, VQ_ATTN_BN, th->tile, D, o, D);
}

/* Integer p.V: w = p * scale (extra [R][BN]), the block's codes as nibble
 * rows (in place, or packed into extra after w), codebook_pv8. */
static void accumulate_int8(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                            int R, float *o)
{
    const turbo_values *v = desc;
    float *w = th->extra;
    uint8_t *pk = (uint8_t *)(w + VQ_ATTN_MAX_ROWS * VQ_ATTN_BN), *scratch = pk + VQ_ATTN_BN * v->D / 2;
    float sc[VQ_ATTN_BN];
    /* the codes and scales two blocks ahead (a prefetch past the rows never faults) */
    const int64_t ahead = blk->t0 + VQ_ATTN_PREFETCH_AHEAD;
    vq_attn_prefetch(vq_attn_at(&v->stage.idx, blk->b, blk->hk, ahead), VQ_ATTN_BN * v->stage.idx.st);
    vq_attn_prefetch(vq_attn_at(&v->stage.scale, blk->b, blk->hk, ahead), VQ_ATTN_BN * v->stage.scale.st);
    vq_attn_turbo_stage_scales(th->kern, &v->stage, blk->b, blk->hk, blk->t0, blk->n, sc);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < blk->n; j++) w[r * VQ_ATTN_BN + j] = p[r * VQ_ATTN_BN + j] * sc[j];
    int64_t ldi;
    const uint8_t *idx =
        vq_attn_turbo_stage_nibble_rows(th->kern, &v->stage, blk->b, blk->hk, blk->t0, blk->n, v->D, scratch, pk, &ldi);
    if (v->D == 64) {
        th->kern->codebook_pv8_64(R, blk->n, idx, ldi, v->cq, v->cstep, w, VQ_ATTN_BN, o, v->D);
        return;
    }
    /* each 128 channels alone: the weights round per row and block, the
     * same in every piece, so this is the one sum the header states */
    for (int64_t c0 = 0; c0 < v->D; c0 += 128)
        th->kern->codebook_pv8(R, blk->n, idx + c0 / 2, ldi, v->cq, v->cstep, w, VQ_ATTN_BN, o + c0, v->D);
}

/* A run of whole blocks, one kern->kivi_turbo_block call each, where the
 * keys are KIVI ones that take it (their kivi_turbo_keys), R <= 4 and the
 * values 2- or 3-bit words of D = 64 with contiguous rows and f16 scales;
 * returns the blocks it ran (0: the skeleton runs score, softmax and
 * accumulate). */
static int64_t kivi_turbo_run(const void *desc, const vq_attn_keys *keys, const vq_attn_thread *th,
                             const vq_attn_block *blk, int64_t count, const float *qp, int R, float *o, float *m,
                             float *d, bool *bad)
{
    const turbo_values *v = desc;
    const vq_attn_turbo_stage *st = &v->stage;
    if (R > 4 || th->kern->kivi_turbo_block == NULL || keys->ops->kivi_turbo_keys == NULL || v->D != 64 ||
        (st->bits != 2 && st->bits != 3) || !st->packed || st->idx.st != 8 * st->bits || !st->scale_f16 ||
        st->scale.st != 2)
        return 0;
    vq_attn_kivi_turbo_block b = {.vbits = st->bits, .cq = v->cq, .cstep = v->cstep};
    for (int64_t i = 0; i < count; i++) {
        const vq_attn_block one = {blk->b, blk->hk, blk->t0 + i * VQ_ATTN_BN, VQ_ATTN_BN};
        if (!keys->ops->kivi_turbo_keys(keys->desc, th, &one, qp, R, &b)) return i;
        b.vidx = vq_attn_at(&st->idx, one.b, one.hk, one.t0);
        b.vscale = vq_attn_at(&st->scale, one.b, one.hk, one.t0);
        th->kern->kivi_turbo_block(R, &b, o, v->D, m, d, bad);
    }
    return count;
}

/* o [D] <- rot^-1(o) */
static void finish(const void *desc, float *o)
{
    const turbo_values *v = desc;
    v->rotate(o, v->D, v->diag, true);
}

static bool use_int8(vq_attn_values *values, const vq_attn_kernels *kern, bool asked);
static const vq_attn_value_ops turbo_ops = {accumulate, finish, NULL, use_int8};
static const vq_attn_value_ops turbo_int8_ops = {accumulate_int8, finish, NULL, NULL};
static const vq_attn_value_ops turbo_fused_ops = {accumulate_int8, finish, kivi_turbo_run, NULL};

vq_status vq_attn_bind_values_turbo(vq_ctx *ctx, const vq_encoded_values *values, const vq_attn_dims *dims,
                                    vq_attn_values *out)
{
    VQ_RETURN_IF(ctx, !vq_is_pow2(dims->D), VQ_ERR_INVALID_ARGUMENT,
                 "values.turbo: head dim D = %lld must be a power of two (Hadamard rotation)", (long long)dims->D);
    const DLTensor *diag = values->turbo.diag;
    if (diag) {
        VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, diag, "values.turbo.diag", VQ_DTM_F32, 1, 1));
        VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, diag, "values.turbo.diag", 0, dims->D, "D"));
    }
    turbo_values *d = (turbo_values *)(void *)out->storage.bytes;
    VQ_FORWARD_IF_ERROR(vq_attn_turbo_check_stage(ctx, "values.turbo", "idx", values->turbo.idx, "scale",
                                                  values->turbo.scale, VQ_DTM_F16_F32, "bits", values->turbo.bits, dims, &d->stage));
    d->rotate = vq_hadamard_kernels_for(ctx->isa)->rotate_row;
    d->diag = diag ? vq_data(diag) : NULL;
    d->D = dims->D;
    out->ops = &turbo_ops;
    out->desc = d;
    /* a code row [D] u8, nibble rows [BN][D/2] and the 32 bytes past them that nibble_rows may write */
    out->thread_floats = (dims->D + 3) / 4 + VQ_ATTN_BN * dims->D / 8 + 8;
    return VQ_OK;
}

/* The switch to integer p.V: kern->codebook_pv8 over the Lloyd-Max
 * centroids rounded once, the weights p_j * scale_j. False, changing
 * nothing, for D other than 64, 128 and 256 or bits > 4, and under AUTO where the ISA has no
 * SIMD codebook_pv8 or the codes are not u32 words of a width AUTO takes
 * (vq_attn_turbo_auto_widths). */
static bool use_int8(vq_attn_values *values, const vq_attn_kernels *kern, bool asked)
{
    turbo_values *d = (turbo_values *)(void *)values->storage.bytes;
    if ((d->D != 64 && d->D != 128 && d->D != 256) || d->stage.bits > 4 || (!asked && !kern->cb8_fast))
        return false;
    if (!asked && !(d->stage.packed && (vq_attn_turbo_auto_widths(kern) >> d->stage.bits & 1u))) return false;
    if (!vq_attn_cb8_round(d->stage.cents, 1 << d->stage.bits, d->cq, &d->cstep)) return false;
    values->ops = vq_attn_env_on("VQ_ATTN_UNFUSED") ? &turbo_int8_ops : &turbo_fused_ops;
    /* weights of up to VQ_ATTN_MAX_ROWS rows, nibble rows [BN][D/2] (at
     * least 64 bytes each: D = 64 spreads pairs of rows), a code row [D] and
     * the 32 bytes past the nibble rows that nibble_rows may write */
    const int64_t nib = d->D / 2 > 64 ? d->D / 2 : 64;
    values->thread_floats =
        VQ_ATTN_MAX_ROWS * VQ_ATTN_BN + (VQ_ATTN_BN * nib + d->D + 32 + 3) / (int64_t)sizeof(float);
    return true;
}
