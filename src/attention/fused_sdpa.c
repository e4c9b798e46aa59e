/* fused_sdpa.c — vq_fused_sdpa: validate, bind the key format and the plain
 * values, run the skeleton. One line per key format in `binders`. The body is
 * vq_attn_fused_sdpa, shared with vq_turboquant_fused_rvq_decode_attend. */
#include <math.h>

#include "attention/attn_formats.h"
#ifdef VQ_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

typedef vq_status (*keys_binder)(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                 vq_attn_keys *out);

static const keys_binder binders[] = {
    [VQ_KEYS_F16] = vq_attn_bind_keys_plain,
    [VQ_KEYS_TURBO] = vq_attn_bind_keys_turbo,
    [VQ_KEYS_TURBO_RVQ] = vq_attn_bind_keys_rvq,
    [VQ_KEYS_AFFINE] = vq_attn_bind_keys_affine_encoded,
    [VQ_KEYS_RABITQ] = vq_attn_bind_keys_rabitq_rotated,
    [VQ_KEYS_QJL] = vq_attn_bind_keys_qjl,
    [VQ_KEYS_PQ] = vq_attn_bind_keys_pq,
    [VQ_KEYS_COMMVQ] = vq_attn_bind_keys_commvq,
};

/* mask [B or 1, Hq or 1, Sq, Skv] f32/f16 -> its batch and head strides (0 = broadcast) */
static vq_status check_mask(vq_ctx *ctx, const DLTensor *mask, const vq_attn_dims *dm, vq_attn_problem *p)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, mask, "mask", VQ_DTM_F16_F32, 4, 4));
    const int64_t mb = mask->shape[0], mh = mask->shape[1];
    if ((mb != 1 && mb != dm->B) || (mh != 1 && mh != dm->Hq) || mask->shape[2] != dm->Sq ||
        mask->shape[3] != dm->Skv) {
        char s[160];
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT,
                       "argument 'mask': expected shape [%lld or 1, %lld or 1, %lld, %lld], got %s",
                       (long long)dm->B, (long long)dm->Hq, (long long)dm->Sq, (long long)dm->Skv,
                       vq_shape_str(mask, s, sizeof s));
    }
    p->mask = vq_data(mask);
    p->mask_dt = vq_dtype_of(mask);
    p->mask_sh = mh == 1 ? 0 : dm->Sq * dm->Skv;
    p->mask_sb = mb == 1 ? 0 : mh * dm->Sq * dm->Skv;
    return VQ_OK;
}

vq_status vq_attn_fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                             const DLTensor *values, float scale, const DLTensor *mask, DLTensor *out,
                             const vq_attend_opts *opts)
{
    VQ_RETURN_IF(ctx, keys == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'keys' is NULL");
    const int fmt = (int)keys->format;
    VQ_RETURN_IF(ctx, fmt < 0 || fmt >= (int)(sizeof binders / sizeof binders[0]) || binders[fmt] == NULL,
                 VQ_ERR_INVALID_ARGUMENT, "argument 'keys': unknown or unsupported format %d", fmt);
    vq_attn_dims dm;
    VQ_FORWARD_IF_ERROR(vq_attn_check_common(ctx, queries, "queries", values, "values", out, &dm));
    VQ_RETURN_IF(ctx, !isfinite(scale), VQ_ERR_INVALID_ARGUMENT, "argument 'scale' must be finite, got %g",
                 (double)scale);
    VQ_RETURN_IF(ctx, opts && opts->num_splits < 0, VQ_ERR_INVALID_ARGUMENT,
                 "opts->num_splits must be >= 0, got %d", opts->num_splits);
    vq_attn_keys kb;
    vq_attn_values vb;
    VQ_FORWARD_IF_ERROR(binders[fmt](ctx, keys, &dm, scale, &kb));
    VQ_FORWARD_IF_ERROR(vq_attn_bind_values_plain(ctx, values, "values", &dm, &vb));
    vq_attn_problem p = {.dims = dm,
                         .q = vq_data(queries),
                         .q_dt = vq_dtype_of(queries),
                         .keys = &kb,
                         .values = &vb,
                         .causal = opts ? opts->causal : false,
                         .num_splits = opts ? opts->num_splits : 0,
                         .out = vq_data(out),
                         .out_dt = vq_dtype_of(out)};
    if (mask) VQ_FORWARD_IF_ERROR(check_mask(ctx, mask, &dm, &p));
    /* CUDA dispatch point: the binders above touched no tensor data (device
     * pointers on a CUDA ctx), only shapes, dtypes and scalars. */
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_fused_sdpa(ctx, queries, keys, values, scale, mask, out, opts);
#else
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED, "this build has no CUDA backend");
#endif
    return vq_attn_run(ctx, &p);
}

vq_status vq_fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                        const DLTensor *values, float scale, const DLTensor *mask, DLTensor *out,
                        const vq_attend_opts *opts)
{
    VQ_ENTER(ctx);
    return vq_attn_fused_sdpa(ctx, queries, keys, values, scale, mask, out, opts);
}

bool vq_fused_sdpa_supports_shape(int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim)
{
    return batch > 0 && heads > 0 && seq_len > 0 && head_dim > 0 && head_dim % 32 == 0 && head_dim <= 256;
}
