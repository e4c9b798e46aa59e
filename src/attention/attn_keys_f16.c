/* attn_keys_f16.c — VQ_KEYS_F16: plain f16/f32/bf16 keys, scored straight
 * from the cache (converted to f32 in registers by kern->qk). */
#include "attention/attn_formats.h"

typedef struct f16_keys {
    vq_attn_view k;       /* [B,Hkv,Skv,D] */
    vq_attn_elt elt;
    int64_t esz, D;
    float scale;
} f16_keys;
_Static_assert(sizeof(f16_keys) <= sizeof(vq_attn_desc_storage), "f16_keys too big");

/* q [D] -> qp [D] = scale * q */
static void prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const f16_keys *k = desc;
    (void)row;
    for (int64_t c = 0; c < k->D; c++) qp[c] = q[c] * k->scale;
}

/* qp [R][D] -> s [R][BN] */
static void score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s)
{
    const f16_keys *k = desc;
    const char *kb = vq_attn_at(&k->k, blk->b, blk->hk, blk->t0);
    /* no software prefetch of the next block: the hardware prefetcher streams
     * the rows, and issuing 8 KB of prefetches per block made f16 decode 2-2.5x
     * slower on the development VM (bench/results/cache_cpu.md) */
    th->kern->qk[k->elt](R, blk->n, k->D, qp, k->D, kb, k->k.st / k->esz, s, VQ_ATTN_BN);
}

static const vq_attn_key_ops f16_ops = {prep_q, score, NULL, NULL};

vq_status vq_attn_bind_keys_f16(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims,
                                  float scale, vq_attn_keys *out)
{
    const DLTensor *kt = keys->f16.keys;
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, kt, "keys.f16.keys", VQ_DTM_FLOAT, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, kt, "keys.f16.keys", 4,
                                       (const int64_t[]){dims->B, dims->Hkv, dims->Skv, dims->D}));
    f16_keys *d = (f16_keys *)(void *)out->storage.bytes;
    *d = (f16_keys){vq_attn_view_of(kt), vq_attn_elt_of(kt), (int64_t)vq_dtype_size(vq_dtype_of(kt)), dims->D,
                      scale};
    out->ops = &f16_ops;
    out->desc = d;
    out->qp_floats = dims->D;
    out->thread_floats = 0;
    return VQ_OK;
}
