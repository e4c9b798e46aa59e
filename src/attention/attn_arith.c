/* attn_arith.c — which arithmetic the bound formats run (veloxquant.h:
 * vq_key_scores, vq_value_accum): the one place that turns a caller's
 * AUTO / F32 / INT8 into the formats' integer switches, for every entry
 * point that binds formats (vq_fused_sdpa, vq_scalar_fused_decode_attend,
 * the cache). AUTO takes an integer path only where the ctx's ISA runs it
 * as a SIMD kernel and the layout was measured faster on it. */
#include "attention/attn_formats.h"

void vq_attn_choose_arith(const vq_ctx *ctx, vq_attn_keys *keys, vq_attn_values *values, vq_key_scores ks,
                          vq_value_accum va)
{
    if (ks != VQ_KEY_SCORES_F32) vq_attn_affine_keys_use_int8(keys); /* false: the layout stays on F32 */
    const vq_attn_kernels *kern = vq_attn_kernels_for(ctx->isa);
    /* the TurboQuant widths AUTO takes: those measured faster than the f32
     * path (bench/results/cache_cpu.md; 3-bit words only where they turn
     * into nibbles in SIMD code; 1-bit ones go through the generic unpack) */
    const unsigned widths = 1u << 2 | 1u << 4 | (kern->nibbles3_fast ? 1u << 3 : 0u);
    if (ks == VQ_KEY_SCORES_INT8 || (ks == VQ_KEY_SCORES_AUTO && kern->cbqk8_fast))
        vq_attn_turbo_keys_use_int8(keys, ks == VQ_KEY_SCORES_AUTO ? widths : ~0u); /* false: stays F32 */
    /* AUTO: integer p.V only where it is a SIMD kernel (faster, bench/results/cpu.md) */
    if (va == VQ_VALUE_ACCUM_INT8 || (va == VQ_VALUE_ACCUM_AUTO && kern->pv8_fast))
        vq_attn_affine_values_use_int8(values); /* false: not KIVI, or a layout that stays on F32 */
    if (va == VQ_VALUE_ACCUM_INT8 || (va == VQ_VALUE_ACCUM_AUTO && kern->cb8_fast))
        vq_attn_turbo_values_use_int8(values, va == VQ_VALUE_ACCUM_AUTO ? widths : ~0u); /* false: stays F32 */
}
