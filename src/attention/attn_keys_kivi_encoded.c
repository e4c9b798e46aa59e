/* attn_keys_kivi_encoded.c — VQ_KEYS_KIVI for vq_fused_sdpa: the KIVI
 * keys of vq_kivi_fused_attend (attn_keys_kivi.c), bound from
 * keys->kivi. What this file adds is the vq_encoded_keys contract:
 * affine.bits is the code width (1..8) when codes are one per byte, and the
 * packing width (2, 4 or 8) when they are bit-packed along D; messages name
 * the keys.kivi members. */
#include "attention/attn_formats.h"
#include "formats/format_kivi.h"

vq_status vq_attn_bind_keys_kivi_encoded(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims,
                                           float scale, vq_attn_keys *out)
{
    const DLTensor *codes = keys->kivi.codes, *sc = keys->kivi.scale, *ze = keys->kivi.zero;
    const int bits = keys->kivi.bits;
    const int64_t g = keys->kivi.group_size, D = dims->D;
    VQ_RETURN_IF(ctx, bits < 1 || bits > VQ_KIVI_MAX_BITS, VQ_ERR_INVALID_ARGUMENT,
                 "keys.kivi.bits must be in 1..8, got %d", bits);
    VQ_RETURN_IF(ctx, g < 1, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.group_size must be >= 1, got %lld",
                 (long long)g);
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, codes, "keys.kivi.codes", VQ_DTM_U8, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, codes, "keys.kivi.codes", 4,
                                       (const int64_t[]){dims->B, dims->Hkv, dims->Skv, -1}));
    /* one code per byte reads whole bytes: the same kernel as 8-bit packing */
    const int64_t last = codes->shape[3];
    const bool packed = last != D;
    VQ_RETURN_IF(ctx, packed && !(vq_kivi_packable_bits(bits) && last == vq_kivi_packed_row_bytes(D, bits)),
                 VQ_ERR_INVALID_ARGUMENT,
                 "argument 'keys.kivi.codes': last dim %lld is neither D = %lld (one code per byte) nor "
                 "D*bits/8 with bits 2 or 4 (bit-packed; keys.kivi.bits = %d)",
                 (long long)last, (long long)D, bits);
    const int64_t want[4] = {dims->B, dims->Hkv, vq_ceil_div(dims->Skv, g), D};
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, sc, "keys.kivi.scale", VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, sc, "keys.kivi.scale", 4, want));
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, ze, "keys.kivi.zero", VQ_DTM(vq_dtype_of(sc)), 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, ze, "keys.kivi.zero", 4, want));
    return vq_attn_bind_keys_kivi(ctx, codes, sc, ze, packed ? bits : 8, g, dims, scale, out);
}
