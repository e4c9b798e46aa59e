/* attn_values_turbo.c — TurboQuant values, v_hat = rot^-1(scale * c[idx]).
 * Attention is linear in the values, so P.V is accumulated in the rotated
 * basis, o_rot = sum_j p_j y_hat_j with y_hat = scale * c[idx] (a block
 * decoded into the tile with kern->codebook_tile, as the rotated keys are),
 * and each output row is rotated back once (finish): o = rot^-1(o_rot).
 * That costs one rotation per row instead of one per token. */
#include "attention/attn_turbo_stage.h"
#include "codecs/hadamard.h"

typedef struct turbo_values {
    vq_attn_turbo_stage stage;
    vq_rotate_row_fn rotate;
    const float *diag;  /* [D] or NULL */
    int64_t D;
} turbo_values;
_Static_assert(sizeof(turbo_values) <= sizeof(vq_attn_desc_storage), "turbo_values too big");

/* p [R][BN] -> o [R][D] += p . y_hat[t0 .. t0+n) (rotated basis) */
static void accumulate(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                       int R, float *o)
{
    const turbo_values *v = desc;
    uint8_t *scratch = (uint8_t *)th->extra;
    for (int j = 0; j < blk->n; j++) {
        bool nibbles;
        const int64_t t = blk->t0 + j;
        const uint8_t *codes = vq_attn_turbo_stage_codes(&v->stage, blk->b, blk->hk, t, v->D, scratch, &nibbles);
        const float scale = vq_attn_turbo_stage_scale(&v->stage, blk->b, blk->hk, t);
        th->kern->codebook_tile(1, v->D, nibbles, codes, v->stage.cents, 1 << v->stage.bits, &scale,
                                th->tile + j * v->D);
    }
    th->kern->pv[VQ_ATTN_F32](R, blk->n, v->D, p, VQ_ATTN_BN, th->tile, v->D, o, v->D);
}

/* o [D] <- rot^-1(o) */
static void finish(const void *desc, float *o)
{
    const turbo_values *v = desc;
    v->rotate(o, v->D, v->diag, true);
}

static const vq_attn_value_ops turbo_ops = {accumulate, finish, NULL};

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
    out->thread_floats = (dims->D + 3) / 4;  /* a code row [D] u8 */
    return VQ_OK;
}
