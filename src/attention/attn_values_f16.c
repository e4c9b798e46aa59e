/* attn_values_f16.c — plain f16/f32 values, accumulated straight from the
 * cache (converted in registers by kern->pv). */
#include "attention/attn_formats.h"

typedef struct f16_values {
    vq_attn_view v;  /* [B,Hkv,Skv,D] */
    vq_attn_elt elt;
    int64_t esz, D;
} f16_values;
_Static_assert(sizeof(f16_values) <= sizeof(vq_attn_desc_storage), "f16_values too big");

/* p [R][BN] -> o [R][D] += p . v[t0 .. t0+n) */
static void accumulate(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                       int R, float *o)
{
    const f16_values *v = desc;
    const char *vb = vq_attn_at(&v->v, blk->b, blk->hk, blk->t0);
    /* no software prefetch of the next block (attn_keys_f16.c says why) */
    th->kern->pv[v->elt](R, blk->n, v->D, p, VQ_ATTN_BN, vb, v->v.st / v->esz, o, v->D);
}

static const vq_attn_value_ops f16_ops = {accumulate, NULL, NULL, NULL};

vq_status vq_attn_bind_values_f16(vq_ctx *ctx, const DLTensor *values, const char *name,
                                    const vq_attn_dims *dims, vq_attn_values *out)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, values, name, VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(
        vq_check_shape(ctx, values, name, 4, (const int64_t[]){dims->B, dims->Hkv, dims->Skv, dims->D}));
    f16_values *d = (f16_values *)(void *)out->storage.bytes;
    *d = (f16_values){vq_attn_view_of(values), vq_attn_elt_of(values),
                        (int64_t)vq_dtype_size(vq_dtype_of(values)), dims->D};
    out->ops = &f16_ops;
    out->desc = d;
    out->thread_floats = 0;
    return VQ_OK;
}
