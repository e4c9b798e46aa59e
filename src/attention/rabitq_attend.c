/* rabitq_attend.c — vq_rabitq_fused_attend (decode: Hamming or exact score,
 * codebook values) and vq_rabitq_prefill_attend (large Sq: exact score, each
 * decoded K/V tile reused by up to VQ_ATTN_MAX_ROWS query rows). */
#include "attention/attn_formats.h"
#ifdef VQ_WITH_CUDA
#include "attention/attn_cuda.h"
#endif

/* Both entry points after their own option checks: validate the rest, bind
 * 1-bit keys (Hamming or exact) and codebook values, run the skeleton.
 * Decode passes q_scale [B,Hq,Sq]; prefill passes scale [1] (exact score,
 * nibble-packed values only, no causal mask). */
static vq_status attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *q_scale, const DLTensor *scale,
                        const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                        const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                        const vq_rabitq_attend_opts *opts)
{
    vq_attn_dims dm;
    VQ_FORWARD_IF_ERROR(vq_attn_check_common(ctx, q, "q", k_bits, "k_bits", out, &dm));
    if (opts) {
        VQ_RETURN_IF(ctx, opts->score != VQ_RABITQ_SCORE_HAMMING && opts->score != VQ_RABITQ_SCORE_EXACT,
                     VQ_ERR_INVALID_ARGUMENT, "opts->score must be VQ_RABITQ_SCORE_HAMMING or _EXACT, got %d",
                     (int)opts->score);
        VQ_RETURN_IF(ctx, (unsigned)opts->value_accum > (unsigned)VQ_VALUE_ACCUM_INT8, VQ_ERR_INVALID_ARGUMENT,
                     "opts->value_accum must be VQ_VALUE_ACCUM_AUTO, _F32 or _INT8, got %d", (int)opts->value_accum);
        VQ_RETURN_IF(ctx, opts->num_splits < 0, VQ_ERR_INVALID_ARGUMENT, "opts->num_splits must be >= 0, got %d",
                     opts->num_splits);
    }
    const bool prefill = scale != NULL;
    if (prefill) {
        VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, scale, "scale", VQ_DTM_F32, 1, 1));
        VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, scale, "scale", 1, (const int64_t[]){1}));
    } else {
        VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, q_scale, "q_scale", VQ_DTM_F32, 3, 3));
        VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, q_scale, "q_scale", 3, (const int64_t[]){dm.B, dm.Hq, dm.Sq}));
    }
    const bool exact = prefill || (opts && opts->score == VQ_RABITQ_SCORE_EXACT);
    vq_attn_keys kb;
    vq_attn_values vb;
    VQ_FORWARD_IF_ERROR(vq_attn_bind_keys_rabitq(ctx, k_bits, k_mag, k_const, exact, prefill ? NULL : q_scale,
                                                 prefill ? vq_data(scale) : NULL, &dm, &kb));
    VQ_FORWARD_IF_ERROR(
        vq_attn_bind_values_codebook(ctx, v_idx, v_cents, opts ? opts->v_scale : NULL, prefill, &dm, &vb));
    vq_attn_view lse;
    VQ_FORWARD_IF_ERROR(vq_attn_check_lse(ctx, opts ? opts->lse_out : NULL, "opts->lse_out", &dm, &lse));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) {
        VQ_FORWARD_IF_ERROR(vq_attn_require_compact(
            ctx, (const DLTensor *[]){q, q_scale, k_bits, k_mag, k_const, v_idx, opts ? opts->v_scale : NULL, out},
            (const char *[]){"q", "q_scale", "k_bits", "k_mag", "k_const", "v_idx", "opts->v_scale", "out"}, 8));
        VQ_RETURN_IF(ctx, prefill && lse.base != NULL, VQ_ERR_UNSUPPORTED,
                     "opts->lse_out is not supported by the CUDA prefill kernel");
        VQ_FORWARD_IF_ERROR(vq_attn_require_compact(ctx, (const DLTensor *[]){opts ? opts->lse_out : NULL},
                                                    (const char *[]){"opts->lse_out"}, 1));
        if (!prefill)
            return vq_cuda_rabitq_fused_attend(ctx, q, q_scale, k_bits, k_mag, k_const, v_idx, v_cents, out, opts);
        return vq_cuda_rabitq_prefill_attend(ctx, q, scale, k_bits, k_mag, k_const, v_idx, v_cents, out, opts);
    }
#endif
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED, "this build has no CUDA backend");
    /* integer p.V: asked for, or AUTO in decode where the ISA has the SIMD kernel */
    const vq_value_accum va = opts ? opts->value_accum : VQ_VALUE_ACCUM_AUTO;
    if (va == VQ_VALUE_ACCUM_INT8 || (va == VQ_VALUE_ACCUM_AUTO && !prefill && vq_attn_kernels_for(ctx->isa)->cb8_fast))
        vq_attn_codebook_values_use_int8(&vb); /* false: the layout stays on F32 */
    vq_attn_problem p;
    vq_attn_problem_init(&p, &dm, q, out, &lse);
    p.keys = &kb;
    p.values = &vb;
    p.causal = opts && opts->causal;
    p.num_splits = opts ? opts->num_splits : 0;
    return vq_attn_run(ctx, &p);
}

vq_status vq_rabitq_fused_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *q_scale,
                                 const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                                 const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                                 const vq_rabitq_attend_opts *opts)
{
    VQ_ENTER(ctx);
    return attend(ctx, q, q_scale, NULL, k_bits, k_mag, k_const, v_idx, v_cents, out, opts);
}

vq_status vq_rabitq_prefill_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *scale,
                                   const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                                   const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                                   const vq_rabitq_attend_opts *opts)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, opts && (opts->score != VQ_RABITQ_SCORE_HAMMING || opts->causal || opts->lse_out),
                 VQ_ERR_INVALID_ARGUMENT,
                 "opts->score, opts->causal and opts->lse_out must keep their defaults (prefill is exact, not causal, "
                 "and gives no log-sum-exp)");
    VQ_RETURN_IF(ctx, scale == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'scale' is NULL");
    return attend(ctx, q, NULL, scale, k_bits, k_mag, k_const, v_idx, v_cents, out, opts);
}
