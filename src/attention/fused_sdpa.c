/* fused_sdpa.c — vq_fused_sdpa: validate, bind the key format and the value
 * format, run the skeleton. One line per key format in `binders`; value
 * formats bind in attn_values_encoded.c. The body is vq_attn_fused_sdpa,
 * shared with vq_turboquant_fused_rvq_decode_attend. */
#include <math.h>

#include "attention/attn_formats.h"
#ifdef VQ_WITH_CUDA
#include "attention/attn_cuda.h"
#endif

typedef vq_status (*keys_binder)(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                 vq_attn_keys *out);

static const keys_binder binders[] = {
    [VQ_KEYS_F16] = vq_attn_bind_keys_f16,
    [VQ_KEYS_TURBO] = vq_attn_bind_keys_turbo,
    [VQ_KEYS_TURBO_RVQ] = vq_attn_bind_keys_rvq,
    [VQ_KEYS_KIVI] = vq_attn_bind_keys_kivi_encoded,
    [VQ_KEYS_RABITQ] = vq_attn_bind_keys_rabitq_rotated,
    [VQ_KEYS_QJL] = vq_attn_bind_keys_qjl,
    [VQ_KEYS_VECINFER] = vq_attn_bind_keys_vecinfer,
    [VQ_KEYS_COMMVQ] = vq_attn_bind_keys_commvq,
};

vq_status vq_attn_bind_keys(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                            vq_attn_keys *out)
{
    VQ_RETURN_IF(ctx, keys == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'keys' is NULL");
    const int fmt = (int)keys->format;
    VQ_RETURN_IF(ctx, fmt < 0 || fmt >= (int)(sizeof binders / sizeof binders[0]) || binders[fmt] == NULL,
                 VQ_ERR_INVALID_ARGUMENT, "argument 'keys': unknown format %d (expected VQ_KEYS_F16..VQ_KEYS_COMMVQ)",
                 fmt);
    return binders[fmt](ctx, keys, dims, scale, out);
}

/* mask [B or 1, Hq or 1, Sq, Skv] f32/f16 (a view) -> its strides (0 = broadcast) */
static vq_status check_mask(vq_ctx *ctx, const DLTensor *mask, const vq_attn_dims *dm, vq_attn_problem *p)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, mask, "mask", VQ_DTM_F16_F32, 4, 4));
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
    p->mask_sb = vq_stride(mask, 0);
    p->mask_sh = vq_stride(mask, 1);
    p->mask_si = vq_stride(mask, 2);
    return VQ_OK;
}

/* The first [B,Hkv,Skv,...] tensor of a value format: the one whose leading
 * shape vq_attn_check_common reads. */
static const DLTensor *values_lead(const vq_encoded_values *v)
{
    switch (v->format) {
    case VQ_VALUES_F16: return v->f16.values;
    case VQ_VALUES_KIVI: return v->kivi.codes;
    case VQ_VALUES_CODEBOOK: return v->codebook.idx;
    case VQ_VALUES_TURBO: return v->turbo.idx;
    default: return NULL;
    }
}

#ifdef VQ_WITH_CUDA
/* The CUDA kernels read compact tensors only (for now): every tensor of the
 * call must be (only the members of the two formats in use are read). */
static vq_status cuda_compact(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *k,
                              const vq_encoded_values *v, const DLTensor *mask, const DLTensor *out)
{
    const DLTensor *t[12] = {queries, out, mask};
    const char *n[12] = {"queries", "out", "mask"};
    int c = 3;
#define VQ_ADD(tensor, name) (t[c] = (tensor), n[c++] = (name))
    switch (k->format) {
    case VQ_KEYS_F16: VQ_ADD(k->f16.keys, "keys.f16.keys"); break;
    case VQ_KEYS_TURBO: VQ_ADD(k->turbo.idx, "keys.turbo.idx"), VQ_ADD(k->turbo.scale, "keys.turbo.scale"); break;
    case VQ_KEYS_TURBO_RVQ:
        VQ_ADD(k->rvq.idx1, "keys.rvq.idx1"), VQ_ADD(k->rvq.scale1, "keys.rvq.scale1");
        VQ_ADD(k->rvq.idx2, "keys.rvq.idx2"), VQ_ADD(k->rvq.scale2, "keys.rvq.scale2");
        break;
    case VQ_KEYS_KIVI:
        VQ_ADD(k->kivi.codes, "keys.kivi.codes"), VQ_ADD(k->kivi.scale, "keys.kivi.scale");
        VQ_ADD(k->kivi.zero, "keys.kivi.zero");
        break;
    case VQ_KEYS_RABITQ:
        VQ_ADD(k->rabitq.bits, "keys.rabitq.bits"), VQ_ADD(k->rabitq.mag, "keys.rabitq.mag");
        VQ_ADD(k->rabitq.cnst, "keys.rabitq.cnst");
        break;
    case VQ_KEYS_QJL: VQ_ADD(k->qjl.bits, "keys.qjl.bits"), VQ_ADD(k->qjl.norm, "keys.qjl.norm"); break;
    case VQ_KEYS_VECINFER: VQ_ADD(k->vecinfer.idx, "keys.vecinfer.idx"); break;
    case VQ_KEYS_COMMVQ:
        VQ_ADD(k->commvq.idx, "keys.commvq.idx"), VQ_ADD(k->commvq.positions, "keys.commvq.positions");
        VQ_ADD(k->commvq.scale, "keys.commvq.scale");
        break;
    }
    switch (v->format) {
    case VQ_VALUES_F16: VQ_ADD(v->f16.values, "values.f16.values"); break;
    case VQ_VALUES_KIVI:
        VQ_ADD(v->kivi.codes, "values.kivi.codes"), VQ_ADD(v->kivi.scale, "values.kivi.scale");
        VQ_ADD(v->kivi.zero, "values.kivi.zero");
        break;
    case VQ_VALUES_CODEBOOK:
        VQ_ADD(v->codebook.idx, "values.codebook.idx"), VQ_ADD(v->codebook.scale, "values.codebook.scale");
        break;
    case VQ_VALUES_TURBO: VQ_ADD(v->turbo.idx, "values.turbo.idx"), VQ_ADD(v->turbo.scale, "values.turbo.scale"); break;
    }
#undef VQ_ADD
    return vq_attn_require_compact(ctx, t, n, c);
}
#endif

vq_status vq_attn_fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                             const vq_encoded_values *values, float scale, const DLTensor *mask, DLTensor *out,
                             const vq_attend_opts *opts)
{
    VQ_RETURN_IF(ctx, values == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'values' is NULL");
    const DLTensor *lead = values_lead(values);
    VQ_RETURN_IF(ctx, lead == NULL && values->format >= VQ_VALUES_F16 && values->format <= VQ_VALUES_TURBO,
                 VQ_ERR_INVALID_ARGUMENT, "argument 'values': the tensors of format %d are NULL", (int)values->format);
    VQ_RETURN_IF(ctx, lead == NULL, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'values': unknown format %d (expected VQ_VALUES_F16..VQ_VALUES_TURBO)",
                 (int)values->format);
    vq_attn_dims dm;
    VQ_FORWARD_IF_ERROR(vq_attn_check_common(ctx, queries, "queries", lead, "values", out, &dm));
    VQ_RETURN_IF(ctx, !isfinite(scale), VQ_ERR_INVALID_ARGUMENT, "argument 'scale' must be finite, got %g",
                 (double)scale);
    VQ_RETURN_IF(ctx, opts && opts->num_splits < 0, VQ_ERR_INVALID_ARGUMENT,
                 "opts->num_splits must be >= 0, got %d", opts->num_splits);
    const vq_key_scores ks = opts ? opts->key_scores : VQ_KEY_SCORES_AUTO;
    const vq_value_accum va = opts ? opts->value_accum : VQ_VALUE_ACCUM_AUTO;
    VQ_RETURN_IF(ctx, (unsigned)ks > (unsigned)VQ_KEY_SCORES_INT8, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'opts->key_scores': expected VQ_KEY_SCORES_AUTO, _F32 or _INT8, got %d", (int)ks);
    VQ_RETURN_IF(ctx, (unsigned)va > (unsigned)VQ_VALUE_ACCUM_INT8, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'opts->value_accum': expected VQ_VALUE_ACCUM_AUTO, _F32 or _INT8, got %d", (int)va);
    vq_attn_view lse;
    VQ_FORWARD_IF_ERROR(vq_attn_check_lse(ctx, opts ? opts->lse_out : NULL, "opts->lse_out", &dm, &lse));
    vq_attn_keys kb;
    vq_attn_values vb;
    VQ_FORWARD_IF_ERROR(vq_attn_bind_keys(ctx, keys, &dm, scale, &kb));
    VQ_FORWARD_IF_ERROR(vq_attn_bind_values(ctx, values, &dm, &vb));
    /* AUTO is F32 here: the function's f32 results unless the caller asks */
    vq_attn_choose_arith(ctx, &kb, &vb, ks == VQ_KEY_SCORES_AUTO ? VQ_KEY_SCORES_F32 : ks,
                         va == VQ_VALUE_ACCUM_AUTO ? VQ_VALUE_ACCUM_F32 : va);
    vq_attn_problem p;
    vq_attn_problem_init(&p, &dm, queries, out, &lse);
    p.keys = &kb;
    p.values = &vb;
    p.causal = opts ? opts->causal : false;
    p.num_splits = opts ? opts->num_splits : 0;
    if (mask) VQ_FORWARD_IF_ERROR(check_mask(ctx, mask, &dm, &p));
    /* CUDA dispatch point: the binders above touched no tensor data (device
     * pointers on a CUDA ctx), only shapes, dtypes and scalars. */
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) {
        VQ_FORWARD_IF_ERROR(cuda_compact(ctx, queries, keys, values, mask, out));
        VQ_FORWARD_IF_ERROR(vq_attn_require_compact(ctx, (const DLTensor *[]){opts ? opts->lse_out : NULL},
                                                    (const char *[]){"opts->lse_out"}, 1));
        return vq_cuda_fused_sdpa(ctx, queries, keys, values, scale, mask, out, opts);
    }
#else
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED, "this build has no CUDA backend");
#endif
    return vq_attn_run(ctx, &p);
}

vq_status vq_fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                        const vq_encoded_values *values, float scale, const DLTensor *mask, DLTensor *out,
                        const vq_attend_opts *opts)
{
    VQ_ENTER(ctx);
    return vq_attn_fused_sdpa(ctx, queries, keys, values, scale, mask, out, opts);
}

bool vq_fused_sdpa_supports_shape(int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim)
{
    return batch > 0 && heads > 0 && seq_len > 0 && head_dim > 0 && head_dim % 8 == 0 && head_dim <= 256;
}
