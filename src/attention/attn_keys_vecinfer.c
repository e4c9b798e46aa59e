/* attn_keys_vecinfer.c — VQ_KEYS_VECINFER: VecInfer product-VQ keys,
 * k_hat = concat_m codebook[m, idx[m]] ⊙ smooth (format_vecinfer.h), codebooks and
 * smooth factors shared by all heads or one per kv head.
 *
 * Two ways to score, chosen at bind time:
 *   LUT  (C <= Skv): prep_q builds the row's table lut[m][c] =
 *        scale * (q ⊙ s)[slice m] . codebook[m][c] (prep_q knows the row, hence
 *        its kv head); a token then costs M look-ups: s = sum_m lut[m][idx[m]].
 *   tile (C > Skv, or tables too big for scratch): building a table would cost
 *        more than decoding every token, so a block is decoded into the tile
 *        (vq_vecinfer_decode_token) and scored by all rows with kern->qk.
 * Indices >= C read centroid C - 1 (format_vecinfer.h clamps; never out of bounds). */
#include "attention/attn_formats.h"
#include "formats/format_vecinfer.h"

/* Bound on the LUT floats of one thread's row tile (VQ_ATTN_MAX_ROWS rows):
 * 4 MB of tables per thread. */
#define VECINFER_MAX_TILE_LUT_FLOATS (INT64_C(1) << 20)

typedef struct vecinfer_keys {
    vq_vecinfer_layout L;
    const vq_attn_kernels *kern;
    vq_attn_view idx;          /* [B,Hkv,Skv,M] of L.idx_bytes each */
    const float *codebook;     /* [M,C,dsub] or [Hkv,M,C,dsub] */
    const float *smooth;       /* [D] or [Hkv,D] */
    int64_t cb_head_stride;    /* floats per head of codebook, 0 when shared */
    int64_t sm_head_stride;    /* floats per head of smooth, 0 when shared */
    int64_t Hq, Sq, G, Hkv, Skv, D;
    float scale;
    bool lut;
} vecinfer_keys;
_Static_assert(sizeof(vecinfer_keys) <= sizeof(vq_attn_desc_storage), "vecinfer_keys too big");

/* LUT: q [D] -> qp [M][C] = the row's table; tile: qp [D] = scale * q */
static void prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const vecinfer_keys *k = desc;
    if (!k->lut) {
        for (int64_t c = 0; c < k->D; c++) qp[c] = q[c] * k->scale;
        return;
    }
    const int64_t hk = (row / k->Sq) % k->Hq / k->G, M = k->L.M, C = k->L.C, dsub = k->L.dsub;
    const float *sm = k->smooth + hk * k->sm_head_stride, *cb = k->codebook + hk * k->cb_head_stride;
    float qs[256]; /* D <= 256 */
    for (int64_t c = 0; c < k->D; c++) qs[c] = q[c] * sm[c] * k->scale;
    for (int64_t m = 0; m < M; m++) {
        const float *cbm = cb + m * C * dsub, *qm = qs + m * dsub;
        float *lut = qp + m * C;
        if (dsub % 8 == 0) {
            k->kern->qk[VQ_ATTN_F32](1, (int)C, dsub, qm, dsub, cbm, dsub, lut, C);
            continue;
        }
        for (int64_t c = 0; c < C; c++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < dsub; j++) acc += qm[j] * cbm[c * dsub + j];
            lut[c] = acc;
        }
    }
}

/* qp [R][qp_floats] -> s [R][BN] */
static void score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s)
{
    const vecinfer_keys *k = desc;
    const int64_t ld = k->idx.st;
    const uint8_t *codes = vq_attn_at(&k->idx, blk->b, blk->hk, blk->t0);
    if (k->lut) {
        const int64_t qpf = (int64_t)k->L.M * k->L.C;
        for (int j = 0; j < blk->n; j++)
            for (int r = 0; r < R; r++)
                s[r * VQ_ATTN_BN + j] = vq_vecinfer_score(&k->L, codes + j * ld, qp + r * qpf);
        return;
    }
    const float *cb = k->codebook + blk->hk * k->cb_head_stride, *sm = k->smooth + blk->hk * k->sm_head_stride;
    for (int j = 0; j < blk->n; j++)
        vq_vecinfer_decode_token(&k->L, codes + j * ld, cb, sm, th->tile + j * k->D);
    th->kern->qk[VQ_ATTN_F32](R, blk->n, k->D, qp, k->D, th->tile, k->D, s, VQ_ATTN_BN);
}

static const vq_attn_key_ops vecinfer_ops = {prep_q, score, NULL, NULL};

vq_status vq_attn_bind_keys_vecinfer(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                               vq_attn_keys *out)
{
    const DLTensor *idx = keys->vecinfer.idx, *cb = keys->vecinfer.codebook, *sm = keys->vecinfer.smooth;
    const int64_t D = dims->D, Hkv = dims->Hkv;
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, idx, "keys.vecinfer.idx", VQ_DTM_U8 | VQ_DTM_U16, 4, 4));
    VQ_FORWARD_IF_ERROR(
        vq_check_shape(ctx, idx, "keys.vecinfer.idx", 4, (const int64_t[]){dims->B, Hkv, dims->Skv, -1}));
    const int64_t M = idx->shape[3];
    VQ_RETURN_IF(ctx, D % M != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'keys.vecinfer.idx': M = %lld subspaces do not divide D = %lld", (long long)M, (long long)D);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cb, "keys.vecinfer.codebook", VQ_DTM_F32, 3, 4));
    const bool cb_heads = cb->ndim == 4;
    const int64_t C = vq_dim(cb, -2);
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, cb, "keys.vecinfer.codebook", (int)cb->ndim,
                                       cb_heads ? (const int64_t[]){Hkv, M, -1, D / M}
                                                : (const int64_t[]){M, -1, D / M}));
    VQ_RETURN_IF(ctx, C > VQ_VECINFER_MAX_CENTROIDS, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'keys.vecinfer.codebook': C = %lld centroids exceed %d", (long long)C, VQ_VECINFER_MAX_CENTROIDS);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, sm, "keys.vecinfer.smooth", VQ_DTM_F32, 1, 2));
    const bool sm_heads = sm->ndim == 2;
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, sm, "keys.vecinfer.smooth", (int)sm->ndim,
                                       sm_heads ? (const int64_t[]){Hkv, D} : (const int64_t[]){D}));

    const int64_t G = dims->Hq / Hkv, rows = G * dims->Sq < VQ_ATTN_MAX_ROWS ? G * dims->Sq : VQ_ATTN_MAX_ROWS;
    const bool lut = C <= dims->Skv && M * C * rows <= VECINFER_MAX_TILE_LUT_FLOATS;
    vecinfer_keys *d = (vecinfer_keys *)(void *)out->storage.bytes;
    *d = (vecinfer_keys){.L = {(int32_t)M, (int32_t)(D / M), (int32_t)C, vq_dtype_of(idx) == VQ_DT_U8 ? 1 : 2},
                   .kern = vq_attn_kernels_for(ctx->isa),
                   .idx = vq_attn_view_of(idx),
                   .codebook = vq_data(cb),
                   .smooth = vq_data(sm),
                   .cb_head_stride = cb_heads ? M * C * (D / M) : 0,
                   .sm_head_stride = sm_heads ? D : 0,
                   .Hq = dims->Hq,
                   .Sq = dims->Sq,
                   .G = G,
                   .Hkv = Hkv,
                   .Skv = dims->Skv,
                   .D = D,
                   .scale = scale,
                   .lut = lut};
    out->ops = &vecinfer_ops;
    out->desc = d;
    out->qp_floats = lut ? M * C : D;
    out->thread_floats = 0;
    return VQ_OK;
}
