/* attn_keys_commvq.c — VQ_KEYS_COMMVQ: additive codes with RoPE applied at
 * decode, k = RoPE_p(scale * sum_r codebook[r, idx_r]) for a token at
 * position p (format_commvq.h). RoPE depends on the token, so there is no
 * per-query shortcut: each block is decoded token by token into the thread's
 * tile (the centroids kernel table's gather + RoPE), never for the whole cache, and
 * scored by all rows of the tile with kern->qk. Codes outside [0, C) read
 * the nearest valid centroid (format_commvq.h clamps); positions are checked
 * against the tables at bind time (CPU ctx; a CUDA ctx clamps them). */
#include "attention/attn_formats.h"
#include "codecs/centroids.h"

typedef struct commvq_keys {
    vq_commvq_layout L;
    void (*decode)(const vq_commvq_layout *L, const void *codes, const float *codebook, float scale,
                   const float *cos_row, const float *sin_row, float *out);
    vq_attn_view idx;            /* [B,Hkv,Skv,R] of L.idx_bytes each */
    const float *codebook;       /* [R,C,D] */
    const float *cos, *sin;      /* [P, D/2] */
    const int32_t *positions;    /* [Skv] or [B,Skv] */
    vq_attn_view tok_scale;      /* [B,Hkv,Skv], base NULL when absent */
    int64_t pos_batch_stride;    /* elements between batch rows of positions ([B,Skv]), else 0 */
    int64_t D;
    float scale;                 /* softmax scale */
} commvq_keys;
_Static_assert(sizeof(commvq_keys) <= sizeof(vq_attn_desc_storage), "commvq_keys too big");

/* q [D] -> qp [D] = scale * q */
static void prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const commvq_keys *k = desc;
    (void)row;
    for (int64_t c = 0; c < k->D; c++) qp[c] = q[c] * k->scale;
}

/* qp [R][D] -> s [R][BN] */
static void score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s)
{
    const commvq_keys *k = desc;
    const int64_t half = k->D / 2;
    const int32_t *pos = k->positions + blk->b * k->pos_batch_stride + blk->t0;
    const uint8_t *idx = vq_attn_at(&k->idx, blk->b, blk->hk, blk->t0);
    const float *ts = k->tok_scale.base ? vq_attn_at(&k->tok_scale, blk->b, blk->hk, blk->t0) : NULL;
    for (int j = 0; j < blk->n; j++) {
        const int64_t p = pos[j];
        k->decode(&k->L, idx + j * k->idx.st, k->codebook, ts ? ts[j] : 1.0f, k->cos + p * half, k->sin + p * half,
                  th->tile + j * k->D);
    }
    th->kern->qk[VQ_ATTN_F32](R, blk->n, k->D, qp, k->D, th->tile, k->D, s, VQ_ATTN_BN);
}

static const vq_attn_key_ops commvq_ops = {prep_q, score, NULL, NULL};

vq_status vq_attn_bind_keys_commvq(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims,
                                   float scale, vq_attn_keys *out)
{
    const DLTensor *idx = keys->commvq.idx, *cb = keys->commvq.codebook, *pos = keys->commvq.positions;
    const DLTensor *cs = keys->commvq.cos_freqs, *sn = keys->commvq.sin_freqs, *ts = keys->commvq.scale;
    const int64_t D = dims->D;
    VQ_RETURN_IF(ctx, keys->commvq.rope != VQ_ROPE_HALF && keys->commvq.rope != VQ_ROPE_INTERLEAVED,
                 VQ_ERR_INVALID_ARGUMENT, "keys.commvq.rope must be VQ_ROPE_HALF or VQ_ROPE_INTERLEAVED, got %d",
                 (int)keys->commvq.rope);
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, idx, "keys.commvq.idx", VQ_DTM_U8 | VQ_DTM_U16 | VQ_DTM_I32, 4, 4));
    VQ_FORWARD_IF_ERROR(
        vq_check_shape(ctx, idx, "keys.commvq.idx", 4, (const int64_t[]){dims->B, dims->Hkv, dims->Skv, -1}));
    const int64_t R = idx->shape[3];
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cb, "keys.commvq.codebook", VQ_DTM_F32, 3, 3));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, cb, "keys.commvq.codebook", 3, (const int64_t[]){R, -1, D}));
    VQ_RETURN_IF(ctx, cb->shape[1] > INT32_MAX, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'keys.commvq.codebook': C = %lld centroids exceed the i32 codes", (long long)cb->shape[1]);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cs, "keys.commvq.cos_freqs", VQ_DTM_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, cs, "keys.commvq.cos_freqs", 1, D / 2, "D/2"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, sn, "keys.commvq.sin_freqs", VQ_DTM_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, sn, "keys.commvq.sin_freqs", cs, "keys.commvq.cos_freqs", 2));
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, pos, "keys.commvq.positions", VQ_DTM_I32, 1, 2));
    const bool batched = pos->ndim == 2;
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, pos, "keys.commvq.positions", (int)pos->ndim,
                                       batched ? (const int64_t[]){dims->B, dims->Skv} : (const int64_t[]){dims->Skv}));
    if (ts) VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, ts, "keys.commvq.scale", VQ_DTM_F32, dims, 0));
    const int64_t P = cs->shape[0];
    /* The one data-dependent check; device memory cannot be read here, so a
     * CUDA ctx clamps positions to [0, P) in the kernel instead (as
     * vq_commvq_decode does on CUDA). */
    const int64_t rows = batched ? dims->B : 1, row_stride = batched ? vq_stride(pos, 0) : 0;
    for (int64_t b = 0; b < rows && !vq_ctx_is_cuda(ctx); b++) {
        const int32_t *row = (const int32_t *)vq_data(pos) + b * row_stride;
        const int64_t bad = vq_centroids_find_bad_code(row, VQ_DT_I32, dims->Skv, P);
        VQ_RETURN_IF(ctx, bad >= 0, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'keys.commvq.positions': element %lld is %d, outside [0, P = %lld) (the rows of "
                     "'keys.commvq.cos_freqs')",
                     (long long)(b * dims->Skv + bad), bad >= 0 ? row[bad] : 0, (long long)P);
    }

    commvq_keys *d = (commvq_keys *)(void *)out->storage.bytes;
    *d = (commvq_keys){.L = {(int32_t)R, (int32_t)cb->shape[1], (int32_t)D, (int32_t)vq_dtype_size(vq_dtype_of(idx)),
                             keys->commvq.rope == VQ_ROPE_HALF ? VQ_FMT_ROPE_HALF : VQ_FMT_ROPE_INTERLEAVED},
                       .decode = vq_centroids_kernels_for(ctx->isa)->commvq_decode,
                       .idx = vq_attn_view_of(idx),
                       .codebook = vq_data(cb),
                       .cos = vq_data(cs),
                       .sin = vq_data(sn),
                       .positions = vq_data(pos),
                       .tok_scale = ts ? vq_attn_view_of(ts) : (vq_attn_view){0},
                       .pos_batch_stride = batched ? vq_stride(pos, 0) : 0,
                       .D = D,
                       .scale = scale};
    out->ops = &commvq_ops;
    out->desc = d;
    out->qp_floats = D;
    out->thread_floats = 0;
    return VQ_OK;
}
