/* attn_values_encoded.c — vq_encoded_values: validates the member named by
 * `format` (messages name it, "values.kivi.codes") and binds it with the
 * value format's binder. */
#include "attention/attn_formats.h"

/* values.kivi: codes [B,Hkv,Skv,D*bits/8] u8 (bits 2/4/8), scale/zero
 * [B,Hkv,Skv,ceil(D/g)] f32/f16 of one dtype */
static vq_status bind_kivi(vq_ctx *ctx, const vq_encoded_values *v, const vq_attn_dims *dims, vq_attn_values *out)
{
    const int bits = v->kivi.bits;
    const int64_t g = v->kivi.group_size;
    VQ_RETURN_IF(ctx, bits != 2 && bits != 4 && bits != 8, VQ_ERR_INVALID_ARGUMENT,
                 "values.kivi.bits must be 2, 4 or 8 (the packing of the codes), got %d", bits);
    VQ_RETURN_IF(ctx, g < 1, VQ_ERR_INVALID_ARGUMENT, "values.kivi.group_size must be >= 1, got %lld", (long long)g);
    VQ_FORWARD_IF_ERROR(
        vq_attn_check_per_token(ctx, v->kivi.codes, "values.kivi.codes", VQ_DTM_U8, dims, dims->D * bits / 8));
    const int64_t GV = vq_ceil_div(dims->D, g);
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, v->kivi.scale, "values.kivi.scale", VQ_DTM_F16_F32, dims, GV));
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, v->kivi.zero, "values.kivi.zero",
                                                VQ_DTM(vq_dtype_of(v->kivi.scale)), dims, GV));
    return vq_attn_bind_values_kivi(ctx, v->kivi.codes, v->kivi.scale, v->kivi.zero, bits, g, dims, out);
}

/* values.codebook: idx [B,Hkv,Skv,D] or [B,Hkv,Skv,D/2] u8, cents [n] f32,
 * scale [B,Hkv,Skv] f32 or NULL */
static vq_status bind_codebook(vq_ctx *ctx, const vq_encoded_values *v, const vq_attn_dims *dims,
                               vq_attn_values *out)
{
    const DLTensor *idx = v->codebook.idx, *cents = v->codebook.cents;
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, idx, "values.codebook.idx", VQ_DTM_U8, dims, -1));
    VQ_RETURN_IF(ctx, idx->shape[3] != dims->D && idx->shape[3] != dims->D / 2, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'values.codebook.idx': last dim %lld must be D = %lld (one index per byte) or D/2 = %lld "
                 "(nibble-packed)",
                 (long long)idx->shape[3], (long long)dims->D, (long long)(dims->D / 2));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cents, "values.codebook.cents", VQ_DTM_F32, 1, 1));
    const int64_t nc = cents->shape[0], cap = idx->shape[3] == dims->D ? 256 : 16;
    VQ_RETURN_IF(ctx, nc > cap, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'values.codebook.cents': %lld centroids, at most %lld for this index layout", (long long)nc,
                 (long long)cap);
    if (v->codebook.scale)
        VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, v->codebook.scale, "values.codebook.scale", VQ_DTM_F32, dims, 0));
    return vq_attn_bind_values_codebook(ctx, idx, cents, v->codebook.scale, false, dims, out);
}

vq_status vq_attn_bind_values(vq_ctx *ctx, const vq_encoded_values *values, const vq_attn_dims *dims,
                              vq_attn_values *out)
{
    VQ_RETURN_IF(ctx, values == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'values' is NULL");
    switch (values->format) {
    case VQ_VALUES_F16: return vq_attn_bind_values_f16(ctx, values->f16.values, "values.f16.values", dims, out);
    case VQ_VALUES_KIVI: return bind_kivi(ctx, values, dims, out);
    case VQ_VALUES_CODEBOOK: return bind_codebook(ctx, values, dims, out);
    case VQ_VALUES_TURBO: return vq_attn_bind_values_turbo(ctx, values, dims, out);
    }
    return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT,
                   "argument 'values': unknown format %d (expected VQ_VALUES_F16..VQ_VALUES_TURBO)",
                   (int)values->format);
}
