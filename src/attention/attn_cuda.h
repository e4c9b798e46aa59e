/* attn_cuda.h — the attention entry points a CUDA ctx runs: implemented by
 * the CUDA backend (src/cuda), called by the public functions of this module
 * after validation. They take exactly the arguments of the public vq_<name>
 * and check only what is specific to the backend (alignment, D limits);
 * CUDA errors become VQ_ERR_DEVICE with the error's name in the ctx message.
 * Only built with the CUDA backend (VQ_WITH_CUDA). */
#ifndef VQ_ATTN_CUDA_H
#define VQ_ATTN_CUDA_H

#include "core/core.h"

vq_status vq_cuda_kivi_fused_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes,
                                             const DLTensor *k_scale, const DLTensor *k_zero,
                                             const DLTensor *v_codes, const DLTensor *v_scale,
                                             const DLTensor *v_zero, int group_size, float scale, int nsg,
                                             DLTensor *out, const vq_scalar_attend_opts *opts);
vq_status vq_cuda_rabitq_fused_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *q_scale,
                                      const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                                      const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                                      const vq_rabitq_attend_opts *opts);
vq_status vq_cuda_rabitq_prefill_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *scale,
                                        const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                                        const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                                        const vq_rabitq_attend_opts *opts);
/* vq_fused_sdpa (and vq_turboquant_fused_rvq_decode_attend through it), after
 * the CPU-side validation and format binding (cuda_sdpa.c, sdpa_prep.cu, the keys_*.cu instances of kv_decode.cuh). */
vq_status vq_cuda_fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                             const vq_encoded_values *values, float scale, const DLTensor *mask, DLTensor *out,
                             const vq_attend_opts *opts);

/* Mixed-width KIVI keys (VQ_KEY_KIVI_MIX, formats/format_kivi_mix.h) have no
 * public vq_keys_format: the cache hands them to vq_cuda_fused_sdpa (and the
 * paged call) as this extension of vq_encoded_keys, base.format
 * VQ_CUDA_KEYS_KIVI_MIX and the base first, so the CUDA key-format registry
 * reads them as any format. codes [B,Hkv,Skv,RB] u8, scale and zero
 * [B,Hkv,ceil(Skv/g),D] f16, mask [B,Hkv,ceil(Skv/g),D/8] u8; wide = W. */
#define VQ_CUDA_KEYS_KIVI_MIX 9
typedef struct vq_cuda_kivi_mix_keys {
    vq_encoded_keys base;
    const DLTensor *codes, *scale, *zero, *mask;
    int bits, bits2, group_size, wide;
} vq_cuda_kivi_mix_keys;

/* RaBitQ keys scored by the Hamming estimate on raw queries (the cache's
 * default RaBitQ score, cache/cache_formats.c: s = (D - 2 popcount(sign(rot
 * q) XOR bits)) * scale * ||rot q||_1 / D * mag) have no public
 * vq_keys_format either: the cache hands them to vq_cuda_fused_sdpa as the
 * tensors of VQ_KEYS_RABITQ (vq_encoded_keys.rabitq) under this format. */
#define VQ_CUDA_KEYS_RABITQ_HAMMING 10

/* vq_attention_merge after validation (strided views accepted). */
vq_status vq_cuda_attention_merge(vq_ctx *ctx, const DLTensor *out_a, const DLTensor *lse_a, const DLTensor *out_b,
                                  const DLTensor *lse_b, DLTensor *out, DLTensor *lse_out);

#endif
