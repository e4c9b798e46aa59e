/* attn_arith.c — which arithmetic the bound formats run (veloxquant.h:
 * vq_key_scores, vq_value_accum): the one place that turns a caller's
 * AUTO / F32 / INT8 into the formats' integer switches, for every entry
 * point that binds formats (vq_fused_sdpa, vq_kivi_fused_attend,
 * the cache), through the formats' own use_int8 switches, which know
 * where their integer path is faster (AUTO) or applies at all (INT8). */
#include "attention/attn_formats.h"

void vq_attn_choose_arith(const vq_ctx *ctx, vq_attn_keys *keys, vq_attn_values *values, vq_key_scores ks,
                          vq_value_accum va)
{
    const vq_attn_kernels *kern = vq_attn_kernels_for(ctx->isa);
    if (ks != VQ_KEY_SCORES_F32 && keys->ops->use_int8) /* false: the layout stays on F32 */
        keys->ops->use_int8(keys, kern, ks == VQ_KEY_SCORES_INT8);
    if (va != VQ_VALUE_ACCUM_F32 && values->ops->use_int8)
        values->ops->use_int8(values, kern, va == VQ_VALUE_ACCUM_INT8);
}
