/* attn_values_codebook.c — scalar-codebook values (RaBitQ's): v_hat[t,c] =
 * cents[idx[t,c]] * vscale[t], idx one per byte or nibble-packed. Both
 * layouts decode to the same tile, so their outputs are bit-identical.
 * With integer p.V (vq_attn_codebook_values_use_int8: D = 128, at most 16
 * centroids) every block goes to kern->codebook_pv8, one-per-byte indices
 * packed to nibbles first, so the two layouts stay bit-identical there too. */
#include "attention/attn_formats.h"

typedef struct codebook_values {
    vq_attn_view idx;      /* [B,Hkv,Skv,D] or [B,Hkv,Skv,D/2] */
    vq_attn_view vscale;   /* [B,Hkv,Skv], base NULL when absent */
    bool packed;
    int n_cents;
    int64_t D, Skv;
    const float *cents;    /* [n_cents]; kernels clamp indices to n_cents - 1 */
    bool int8;             /* integer p.V (codebook_pv8) with cq, cstep */
    int8_t cq[16];
    float cstep;
} codebook_values;
_Static_assert(sizeof(codebook_values) <= sizeof(vq_attn_desc_storage), "codebook_values too big");

/* The weights of the rows' values: p, or p * vscale in extra [R][BN]. */
static const float *weights(const vq_attn_thread *th, const vq_attn_block *blk, const float *vscale, const float *p,
                            int R)
{
    if (!vscale) return p;
    float *ws = th->extra;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < blk->n; j++) ws[r * VQ_ATTN_BN + j] = p[r * VQ_ATTN_BN + j] * vscale[j];
    return ws;
}

/* Integer p.V: w = p * vscale for every row (extra [R][BN]), one-per-byte
 * indices clamped and packed to nibbles (extra after w), codebook_pv8. */
static void accumulate_int8(const codebook_values *v, const vq_attn_thread *th, const vq_attn_block *blk,
                            const uint8_t *idx, const float *vscale, const float *p, int R, float *o)
{
    const float *w = weights(th, blk, vscale, p, R);
    int64_t ldi = v->idx.st;
    if (!v->packed) {
        uint8_t *pk = (uint8_t *)(th->extra + VQ_ATTN_MAX_ROWS * VQ_ATTN_BN);
        const unsigned top = (unsigned)v->n_cents - 1u;
        for (int j = 0; j < blk->n; j++) {
            const uint8_t *src = idx + j * v->idx.st;
            for (int c = 0; c < 64; c++) {
                const unsigned a = src[2 * c] < top ? src[2 * c] : top, b = src[2 * c + 1] < top ? src[2 * c + 1] : top;
                pk[j * 64 + c] = (uint8_t)(a | b << 4);
            }
        }
        idx = pk;
        ldi = 64;
    }
    th->kern->codebook_pv8(R, blk->n, idx, ldi, v->cq, v->cstep, w, VQ_ATTN_BN, o, v->D);
}

/* p [R][BN] -> o [R][D] += p . v_hat[t0 .. t0+n) */
static void accumulate(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                       int R, float *o)
{
    const codebook_values *v = desc;
    const int64_t row = v->packed ? v->D / 2 : v->D;
    const uint8_t *idx = vq_attn_at(&v->idx, blk->b, blk->hk, blk->t0);
    const float *vscale = v->vscale.base ? vq_attn_at(&v->vscale, blk->b, blk->hk, blk->t0) : NULL;
    /* no prefetch of later indices: see fused_block */
    if (v->int8) {
        accumulate_int8(v, th, blk, idx, vscale, p, R, o);
        return;
    }
    if (R > VQ_ATTN_DIRECT_ROWS || v->idx.st != row) {
        if (v->idx.st == row) {
            th->kern->codebook_tile(blk->n, v->D, v->packed, idx, v->cents, v->n_cents, vscale, th->tile);
        } else { /* strided token rows: decoded one by one */
            for (int j = 0; j < blk->n; j++)
                th->kern->codebook_tile(1, v->D, v->packed, idx + j * v->idx.st, v->cents, v->n_cents,
                                        vscale ? vscale + j : NULL, th->tile + j * v->D);
        }
        th->kern->pv[VQ_ATTN_F32](R, blk->n, v->D, p, VQ_ATTN_BN, th->tile, v->D, o, v->D);
        return;
    }
    const float *w = weights(th, blk, vscale, p, R);
    th->kern->codebook_pv(R, blk->n, v->D, v->packed, idx, v->cents, v->n_cents, w, VQ_ATTN_BN, o, v->D);
}

static const vq_attn_value_ops codebook_ops = {accumulate, NULL, NULL, NULL};

static const vq_attn_value_ops codebook_int8_ops = {accumulate, NULL, NULL, NULL};

/* A run of whole blocks in one kernel call (kern->rabitq_block), where keys,
 * layout, rows and ISA allow; 0: the skeleton runs score, softmax and
 * accumulate. */
static int64_t fused_block(const void *desc, const vq_attn_keys *keys, const vq_attn_thread *th,
                           const vq_attn_block *blk, int64_t count, const float *qp, int R, float *o, float *m,
                           float *d, bool *bad)
{
    const codebook_values *v = desc;
    if (R > 4 || th->kern->rabitq_block == NULL || !v->int8 || !v->packed || v->vscale.base || v->idx.st != 64)
        return 0;
    vq_attn_rabitq_block b;
    int64_t ldq, ldqs;
    if (!vq_attn_rabitq_keys_block(keys, blk, count, &b, &ldq, &ldqs)) return 0;
    /* The keys' prefetches only (pf[0], pf[1]): the value indices, 64 of the
     * 84 bytes per token, are left to the hardware prefetcher. Prefetching
     * them two blocks ahead (32 lines per block) made cold 64K-token calls
     * 8 % slower on an AMX Xeon (docs/PERFORMANCE.md, RaBitQ decode: the
     * prefetches compete with the streamer for the line fill buffers) and
     * changed nothing where the kernel is bound by its instructions (AVX2). */
    b.pf[2] = NULL;
    b.step[3] = VQ_ATTN_BN * 64;
    b.vidx = vq_attn_at(&v->idx, blk->b, blk->hk, blk->t0);
    b.cq = v->cq;
    b.cstep = v->cstep;
    th->kern->rabitq_block(R, &b, (const uint8_t *)(qp + 1), ldq, qp, ldqs, o, v->D, m, d, bad);
    return count;
}

static const vq_attn_value_ops codebook_fused_ops = {accumulate, NULL, fused_block, NULL};

vq_status vq_attn_bind_values_codebook(vq_ctx *ctx, const DLTensor *idx, const DLTensor *cents,
                                       const DLTensor *vscale, bool packed_only, const vq_attn_dims *dims,
                                       vq_attn_values *out)
{
    const int64_t D = dims->D;
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, idx, "v_idx", VQ_DTM_U8, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, idx, "v_idx", 4, (const int64_t[]){dims->B, dims->Hkv, dims->Skv, -1}));
    const bool packed = idx->shape[3] == D / 2;
    VQ_RETURN_IF(ctx, !packed && (packed_only || idx->shape[3] != D), VQ_ERR_INVALID_ARGUMENT,
                 "argument 'v_idx': last dim %lld must be D/2 = %lld (nibble-packed)%s", (long long)idx->shape[3],
                 (long long)(D / 2), packed_only ? "" : " or D (one index per byte)");
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cents, "v_cents", VQ_DTM_F32, 1, 1));
    const int64_t nc = cents->shape[0];
    VQ_RETURN_IF(ctx, nc > 256, VQ_ERR_INVALID_ARGUMENT, "argument 'v_cents': %lld centroids, at most 256",
                 (long long)nc);
    VQ_RETURN_IF(ctx, packed && nc > 16, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'v_cents': %lld centroids, but nibble-packed v_idx holds at most 16", (long long)nc);
    if (vscale) VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, vscale, "v_scale", VQ_DTM_F32, dims, 0));
    codebook_values *d = (codebook_values *)(void *)out->storage.bytes;
    d->idx = vq_attn_view_of(idx);
    d->vscale = vscale ? vq_attn_view_of(vscale) : (vq_attn_view){0};
    d->packed = packed;
    d->n_cents = (int)nc;
    d->D = D;
    d->Skv = dims->Skv;
    d->cents = vq_data(cents);
    out->ops = &codebook_ops;
    out->desc = d;
    d->int8 = false;
    out->thread_floats = VQ_ATTN_DIRECT_ROWS * VQ_ATTN_BN;
    return VQ_OK;
}

bool vq_attn_codebook_values_use_int8(vq_attn_values *values)
{
    codebook_values *d = (codebook_values *)(void *)values->storage.bytes;
    if (values->ops != &codebook_ops || d->D != 128 || !vq_attn_cb8_round(d->cents, d->n_cents, d->cq, &d->cstep))
        return false;
    d->int8 = true;
    values->ops = vq_attn_env_on("VQ_ATTN_UNFUSED") ? &codebook_int8_ops : &codebook_fused_ops;
    /* weights of up to VQ_ATTN_MAX_ROWS rows, then 32 tokens x 64 packed index bytes */
    values->thread_floats = VQ_ATTN_MAX_ROWS * VQ_ATTN_BN + VQ_ATTN_BN * 64 / (int64_t)sizeof(float);
    return true;
}
