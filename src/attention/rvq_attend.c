/* rvq_attend.c — vq_turboquant_fused_rvq_decode_attend: vq_fused_sdpa over
 * VQ_KEYS_TURBO_RVQ keys (the query rotated once, scored against
 * y_hat = scale1 c[idx1] + scale2 c[idx2] in the tile), without a mask. */
#include "attention/attn_formats.h"

vq_status vq_turboquant_fused_rvq_decode_attend(vq_ctx *ctx, const DLTensor *queries,
                                                const vq_encoded_keys *keys, const DLTensor *values,
                                                float scale, DLTensor *out, const vq_attend_opts *opts)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, keys == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'keys' is NULL");
    VQ_RETURN_IF(ctx, keys->format != VQ_KEYS_TURBO_RVQ, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'keys': format must be VQ_KEYS_TURBO_RVQ (%d), got %d", (int)VQ_KEYS_TURBO_RVQ,
                 (int)keys->format);
    const vq_encoded_values v = vq_f16_values(values);
    return vq_attn_fused_sdpa(ctx, queries, keys, &v, scale, NULL, out, opts);
}
