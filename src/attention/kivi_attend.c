/* kivi_attend.c — vq_kivi_fused_attend: attention over a KIVI
 * group-affine cache (affine keys + affine values on the skeleton). */
#include <math.h>

#include "attention/attn_formats.h"
#ifdef VQ_WITH_CUDA
#include "attention/attn_cuda.h"
#endif

vq_status vq_kivi_fused_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes,
                                        const DLTensor *k_scale, const DLTensor *k_zero,
                                        const DLTensor *v_codes, const DLTensor *v_scale,
                                        const DLTensor *v_zero, int group_size, float scale, int nsg,
                                        DLTensor *out, const vq_scalar_attend_opts *opts)
{
    VQ_ENTER(ctx);
    vq_attn_dims dm;
    VQ_FORWARD_IF_ERROR(vq_attn_check_common(ctx, q, "q", k_codes, "k_codes", out, &dm));
    VQ_RETURN_IF(ctx, !isfinite(scale), VQ_ERR_INVALID_ARGUMENT, "argument 'scale' must be finite, got %g",
                 (double)scale);
    VQ_RETURN_IF(ctx, nsg < 0 || nsg > 32, VQ_ERR_INVALID_ARGUMENT, "nsg must be in 0..32, got %d", nsg);
    const int bits = opts ? opts->bits : 0;
    const vq_key_scores ks = opts ? opts->key_scores : VQ_KEY_SCORES_AUTO;
    VQ_RETURN_IF(ctx, ks != VQ_KEY_SCORES_AUTO && ks != VQ_KEY_SCORES_F32 && ks != VQ_KEY_SCORES_INT8,
                 VQ_ERR_INVALID_ARGUMENT, "opts->key_scores must be VQ_KEY_SCORES_AUTO, _F32 or _INT8, got %d",
                 (int)ks);
    vq_attn_keys kb;
    vq_attn_values vb;
    VQ_FORWARD_IF_ERROR(vq_attn_bind_keys_kivi(ctx, k_codes, k_scale, k_zero, bits, group_size, &dm, scale, &kb));
    VQ_FORWARD_IF_ERROR(vq_attn_bind_values_kivi(ctx, v_codes, v_scale, v_zero, bits, group_size, &dm, &vb));
    VQ_RETURN_IF(ctx, v_codes->shape[3] != k_codes->shape[3], VQ_ERR_INVALID_ARGUMENT,
                 "argument 'v_codes': last dim %lld differs from the %lld of 'k_codes' (one code layout)",
                 (long long)v_codes->shape[3], (long long)k_codes->shape[3]);
    const vq_value_accum va = opts ? opts->value_accum : VQ_VALUE_ACCUM_AUTO;
    VQ_RETURN_IF(ctx, va != VQ_VALUE_ACCUM_AUTO && va != VQ_VALUE_ACCUM_F32 && va != VQ_VALUE_ACCUM_INT8,
                 VQ_ERR_INVALID_ARGUMENT,
                 "opts->value_accum must be VQ_VALUE_ACCUM_AUTO, _F32 or _INT8, got %d", (int)va);
    vq_attn_choose_arith(ctx, &kb, &vb, ks, va);
    vq_attn_view lse;
    VQ_FORWARD_IF_ERROR(vq_attn_check_lse(ctx, opts ? opts->lse_out : NULL, "opts->lse_out", &dm, &lse));
    vq_attn_problem p;
    vq_attn_problem_init(&p, &dm, q, out, &lse);
    p.keys = &kb;
    p.values = &vb;
    p.causal = opts ? opts->causal : false;
    p.num_splits = nsg;
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) {
        VQ_FORWARD_IF_ERROR(vq_attn_require_compact(
            ctx, (const DLTensor *[]){q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, out},
            (const char *[]){"q", "k_codes", "k_scale", "k_zero", "v_codes", "v_scale", "v_zero", "out"}, 8));
        VQ_FORWARD_IF_ERROR(vq_attn_require_compact(ctx, (const DLTensor *[]){opts ? opts->lse_out : NULL},
                                                    (const char *[]){"opts->lse_out"}, 1));
        return vq_cuda_kivi_fused_attend(ctx, q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero,
                                                  group_size, scale, nsg, out, opts);
    }
#endif
    return vq_attn_run(ctx, &p);
}
