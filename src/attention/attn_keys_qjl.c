/* attn_keys_qjl.c — VQ_KEYS_QJL: 1-bit sign sketches of the keys, scored
 * with QJL's asymmetric unbiased estimator (vq_qjl_score):
 *   s = scale * sqrt(pi/2)/m * ||k|| * sum_j (S q)_j * sign_j.
 * prep_q projects each query row once (S q, m floats) and folds in
 * scale * sqrt(pi/2)/m, zero-padding to the 32*W bits of a sketch row. A
 * block's signs are expanded to ±||k|| (kern->sign_tile: a u32 stream is the
 * same bits as a u8 stream on a little-endian host) into per-thread scratch
 * [BN][32W] and scored by all rows of the tile with kern->qk; the padding
 * bits meet zeros of the query. */
#include <math.h>

#include "attention/attn_formats.h"
#include "codecs/qjl_kernels.h"

typedef struct qjl_keys {
    vq_attn_view bits;       /* [B,Hkv,Skv,W] u32 words, read as bytes */
    vq_attn_view norm;       /* [B,Hkv,Skv] */
    const float *S;          /* [m, D] */
    void (*project)(const float *S, int64_t m, int64_t d, const float *x, int64_t n, float *out);
    int64_t m, width, D;  /* width = 32 * W bits per sketch row */
    float mul;                      /* scale * sqrt(pi/2) / m */
} qjl_keys;
_Static_assert(sizeof(qjl_keys) <= sizeof(vq_attn_desc_storage), "qjl_keys too big");

/* q [D] -> qp [width] = mul * S q, zero past m */
static void prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const qjl_keys *k = desc;
    (void)row;
    k->project(k->S, k->m, k->D, q, 1, qp);
    for (int64_t j = 0; j < k->m; j++) qp[j] *= k->mul;
    for (int64_t j = k->m; j < k->width; j++) qp[j] = 0.0f;
}

/* qp [R][width] -> s [R][BN] */
static void score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s)
{
    const qjl_keys *k = desc;
    const uint8_t *bits = vq_attn_at(&k->bits, blk->b, blk->hk, blk->t0);
    const float *norm = vq_attn_at(&k->norm, blk->b, blk->hk, blk->t0);
    if (k->bits.st == k->width / 8) th->kern->sign_tile(blk->n, k->width, bits, norm, th->extra);
    else /* strided token rows */
        for (int j = 0; j < blk->n; j++)
            th->kern->sign_tile(1, k->width, bits + j * k->bits.st, norm + j, th->extra + j * k->width);
    th->kern->qk[VQ_ATTN_F32](R, blk->n, k->width, qp, k->width, th->extra, k->width, s, VQ_ATTN_BN);
}

static const vq_attn_key_ops qjl_ops = {prep_q, score, NULL, NULL};

vq_status vq_attn_bind_keys_qjl(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                vq_attn_keys *out)
{
    const DLTensor *S = keys->qjl.projection;
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, S, "keys.qjl.projection", VQ_DTM_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, S, "keys.qjl.projection", 1, dims->D, "D"));
    const int64_t m = S->shape[0], W = vq_ceil_div(m, 32);
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, keys->qjl.bits, "keys.qjl.bits", VQ_DTM_U32, dims, W));
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, keys->qjl.norm, "keys.qjl.norm", VQ_DTM_F32, dims, 0));
    qjl_keys *d = (qjl_keys *)(void *)out->storage.bytes;
    *d = (qjl_keys){vq_attn_view_of(keys->qjl.bits),
                    vq_attn_view_of(keys->qjl.norm),
                    vq_data(S),
                    vq_qjl_kernels_for(ctx->isa)->project,
                    m,
                    32 * W,
                    dims->D,
                    (float)((double)scale * sqrt(acos(-1.0) / 2.0) / (double)m)};
    out->ops = &qjl_ops;
    out->desc = d;
    out->qp_floats = 32 * W;
    out->thread_floats = VQ_ATTN_BN * 32 * W;
    return VQ_OK;
}
