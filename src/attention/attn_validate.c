/* attn_validate.c — checks shared by every attention entry point. */
#include "attention/attn_formats.h"

vq_status vq_attn_check_common(vq_ctx *ctx, const DLTensor *q, const char *q_name, const DLTensor *cache,
                               const char *cache_name, const DLTensor *out, vq_attn_dims *dims)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, q, q_name, VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, cache, cache_name, ~0u, 4, 4));
    const int64_t B = q->shape[0], Hq = q->shape[1], Sq = q->shape[2], D = q->shape[3];
    const int64_t Hkv = cache->shape[1], Skv = cache->shape[2];
    VQ_RETURN_IF(ctx, cache->shape[0] != B, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s': batch %lld differs from the batch %lld of '%s'", cache_name,
                 (long long)cache->shape[0], (long long)B, q_name);
    VQ_RETURN_IF(ctx, Hq % Hkv != 0, VQ_ERR_INVALID_ARGUMENT,
                 "mismatched heads: '%s' has %lld query heads, not a multiple of the %lld kv heads of '%s'",
                 q_name, (long long)Hq, (long long)Hkv, cache_name);
    VQ_RETURN_IF(ctx, D % 8 != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s': head dim D = %lld must be a multiple of 8", q_name, (long long)D);
    VQ_RETURN_IF(ctx, D > 256, VQ_ERR_UNSUPPORTED, "argument '%s': head dim D = %lld > 256 is not supported",
                 q_name, (long long)D);
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, out, "out", VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, out, "out", 4, (const int64_t[]){B, Hq, Sq, D}));
    VQ_FORWARD_IF_ERROR(vq_check_no_overlap(ctx, out, "out"));
    *dims = (vq_attn_dims){B, Hq, Hkv, Sq, Skv, D};
    return VQ_OK;
}

vq_status vq_attn_check_per_token(vq_ctx *ctx, const DLTensor *t, const char *name, unsigned dtypes,
                                  const vq_attn_dims *dims, int64_t last)
{
    const int nd = last != 0 ? 4 : 3; /* last < 0: any size */
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, t, name, dtypes, nd, nd));
    const int64_t want[4] = {dims->B, dims->Hkv, dims->Skv, last};
    return vq_check_shape(ctx, t, name, nd, want);
}

vq_attn_elt vq_attn_elt_of(const DLTensor *t)
{
    switch (vq_dtype_of(t)) {
    case VQ_DT_F16: return VQ_ATTN_F16;
    case VQ_DT_BF16: return VQ_ATTN_BF16;
    default: return VQ_ATTN_F32;
    }
}

vq_status vq_attn_check_lse(vq_ctx *ctx, const DLTensor *lse, const char *name, const vq_attn_dims *dims,
                            vq_attn_view *view)
{
    *view = (vq_attn_view){0};
    if (lse == NULL) return VQ_OK;
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, lse, name, VQ_DTM_F32, 3, 3));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, lse, name, 3, (const int64_t[]){dims->B, dims->Hq, dims->Sq}));
    VQ_FORWARD_IF_ERROR(vq_check_no_overlap(ctx, lse, name));
    *view = vq_attn_view_of(lse);
    return VQ_OK;
}

vq_status vq_attn_require_compact(vq_ctx *ctx, const DLTensor *const *tensors, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        VQ_RETURN_IF(ctx, tensors[i] && !vq_tensor_is_compact(tensors[i]), VQ_ERR_UNSUPPORTED,
                     "argument '%s': strided tensors are not supported on a CUDA context yet (pass a compact "
                     "row-major tensor)",
                     names[i]);
    return VQ_OK;
}

void vq_attn_problem_init(vq_attn_problem *p, const vq_attn_dims *dims, const DLTensor *q, const DLTensor *out,
                          const vq_attn_view *lse)
{
    *p = (vq_attn_problem){.dims = *dims,
                           .q = vq_attn_view_of(q),
                           .q_dt = vq_dtype_of(q),
                           .out = vq_attn_view_of(out),
                           .out_dt = vq_dtype_of(out),
                           .lse = *lse};
}
