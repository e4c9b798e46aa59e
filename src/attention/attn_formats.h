/* attn_formats.h — the key and value formats the skeleton knows, and the
 * validation every attention entry point shares. Internal. */
#ifndef VQ_ATTN_FORMATS_H
#define VQ_ATTN_FORMATS_H

#include "attention/attn_skeleton.h"

/* Validates the tensors every attention call has and derives its sizes:
 * q [B,Hq,Sq,D] f16/f32 named q_name, a cache tensor [B,Hkv,Skv,...] whose
 * first three dims give Hkv and Skv (dtype checked by the caller), out
 * [B,Hq,Sq,D] f16/f32. Checks Hq % Hkv == 0, D % 8 == 0 (INVALID_ARGUMENT)
 * and D <= 256 (UNSUPPORTED). */
vq_status vq_attn_check_common(vq_ctx *ctx, const DLTensor *q, const char *q_name, const DLTensor *cache,
                               const char *cache_name, const DLTensor *out, vq_attn_dims *dims);

/* A [B,Hkv,Skv] (or with a trailing per-token axis `last`, when last > 0)
 * tensor of dtype mask: checks its shape against dims. */
vq_status vq_attn_check_per_token(vq_ctx *ctx, const DLTensor *t, const char *name, unsigned dtypes,
                                  const vq_attn_dims *dims, int64_t last);

/* Element type of a float tensor for the plain kernels. */
vq_attn_elt vq_attn_elt_of(const DLTensor *t);

/* Key formats: validate the format's tensors against dims (writing nothing)
 * and bind them. `scale` multiplies every score. */
vq_status vq_attn_bind_keys_plain(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims,
                                  float scale, vq_attn_keys *out);

/* Value formats. values [B,Hkv,Skv,D] f16/f32. */
vq_status vq_attn_bind_values_plain(vq_ctx *ctx, const DLTensor *values, const char *name,
                                    const vq_attn_dims *dims, vq_attn_values *out);

#endif /* VQ_ATTN_FORMATS_H */
