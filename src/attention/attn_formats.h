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

/* lse [B,Hq,Sq] f32 (an output view), or NULL: its view (base NULL when
 * absent). */
vq_status vq_attn_check_lse(vq_ctx *ctx, const DLTensor *lse, const char *name, const vq_attn_dims *dims,
                            vq_attn_view *view);

/* What a CUDA context cannot take yet: any of the n tensors (NULL entries
 * skipped) that is not compact -> VQ_ERR_UNSUPPORTED naming it. */
vq_status vq_attn_require_compact(vq_ctx *ctx, const DLTensor *const *tensors, const char *const *names, int n);

/* A problem over validated q/out [B,Hq,Sq,D] and an lse view; the caller
 * fills keys, values, causal, splits, mask. */
void vq_attn_problem_init(vq_attn_problem *p, const vq_attn_dims *dims, const DLTensor *q, const DLTensor *out,
                          const vq_attn_view *lse);

/* A [B,Hkv,Skv] (or with a trailing per-token axis `last`, when last != 0; -1 = any size)
 * tensor of dtype mask: checks its shape against dims. */
vq_status vq_attn_check_per_token(vq_ctx *ctx, const DLTensor *t, const char *name, unsigned dtypes,
                                  const vq_attn_dims *dims, int64_t last);

/* Asks for the `bytes` at p ahead of use (prefetcht0, one per 64-byte line).
 * The KIVI integer kernels take it for their six streams two blocks ahead:
 * at 64K tokens their compute no longer hides the hardware prefetcher's
 * restarts at every 4 KB page of each stream (bench/results/cpu.md). So do
 * the RaBitQ keys (two streams, 20 B per token); not the RaBitQ value
 * indices (64 B per token), which the hardware prefetcher streams better
 * alone (attn_values_codebook.c, fused_block). */
static inline void vq_attn_prefetch(const void *p, int64_t bytes)
{
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)p + off, 0, 3);
}

/* Tokens ahead of the block being scored that the KIVI integer paths and
 * the RaBitQ keys prefetch. */
#define VQ_ATTN_PREFETCH_AHEAD (2 * VQ_ATTN_BN)

/* Blocks of a run of nb from token t0 whose prefetch ranges
 * (VQ_ATTN_PREFETCH_AHEAD tokens ahead, one block long) lie within Skv: the
 * pf_nb of the fused block kernels' runs (KIVI and RaBitQ alike). */
static inline int64_t vq_attn_prefetch_blocks(int64_t t0, int64_t nb, int64_t Skv)
{
    const int64_t room = Skv - VQ_ATTN_BN - VQ_ATTN_PREFETCH_AHEAD - t0;
    const int64_t n = room < 0 ? 0 : room / VQ_ATTN_BN + 1;
    return n < nb ? n : nb;
}

/* Element type of a float tensor for the plain kernels. */
vq_attn_elt vq_attn_elt_of(const DLTensor *t);

/* Key formats: validate the format's tensors against dims (writing nothing)
 * and bind them. `scale` multiplies every score. */
vq_status vq_attn_bind_keys_f16(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims,
                                  float scale, vq_attn_keys *out);

/* Affine (KIVI) codes [B,Hkv,Skv,D*bits/8] u8: resolves bits (0 = detect
 * from the last dim: D -> 8, D/2 -> 4, D/4 -> 2) into *layout_bits. */
vq_status vq_attn_kivi_layout(vq_ctx *ctx, const DLTensor *codes, const char *name, const vq_attn_dims *dims,
                                int bits, int *layout_bits);

/* KIVI keys: codes as above, scale/zero [B,Hkv,ceil(Skv/g),D] f32/f16 (one
 * dtype). Reusable for vq_fused_sdpa's VQ_KEYS_KIVI. */
vq_status vq_attn_bind_keys_kivi(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale, const DLTensor *zero,
                                   int bits, int64_t g, const vq_attn_dims *dims, float softmax_scale,
                                   vq_attn_keys *out);

/* The arithmetic of bound keys and values as ks and va ask (the rules of
 * vq_key_scores / vq_value_accum in veloxquant.h): unless F32, each format's
 * use_int8 switch (vq_attn_key_ops / vq_attn_value_ops) is called with the
 * ctx's kernels, asked = INT8; under AUTO each format takes its integer
 * path only where it measured faster (KIVI and mixed keys: wherever the
 * layout allows; TurboQuant keys and values, KIVI values: where the ISA has
 * the SIMD kernel, and TurboQuant widths by vq_attn_turbo_auto_widths).
 * Formats without a switch, and layouts the integer kernels do not take,
 * stay as bound. ks and va must be valid enum values. */
void vq_attn_choose_arith(const vq_ctx *ctx, vq_attn_keys *keys, vq_attn_values *values, vq_key_scores ks,
                          vq_value_accum va);

/* Bound KIVI keys on integer scores with 2-bit codes, D = 128 and g = 32
 * (one group per block): fills the key half of b for the run of `count`
 * whole blocks (VQ_ATTN_KIVI_INT8_N tokens each) from block blk (with the
 * ranges of a later block that score() would prefetch, their steps, and
 * pf_nb from these keys' Skv). False, filling nothing, for any other keys
 * (what the fused block kernel does not take). */
bool vq_attn_kivi_keys_kivi_int8(const vq_attn_keys *keys, const vq_attn_block *blk, int64_t count,
                               vq_attn_kivi_int8_block *b);

/* Switches bound codebook values (vq_attn_bind_values_codebook) to integer
 * p.V (kern->codebook_pv8; reads the centroids, so CPU data only). Returns
 * false, changing nothing, where the kernel does not apply: D != 128, more
 * than 16 centroids, or a centroid that is not finite. With RaBitQ Hamming
 * keys of that layout (vq_attn_rabitq_keys_block), nibble-packed contiguous
 * indices, no v_scale and up to four rows per kv head, runs of whole blocks
 * then go to one kern->rabitq_block call each where the ISA has one; the
 * same environment switches as for KIVI (VQ_ATTN_UNFUSED=1,
 * VQ_ATTN_ONE_BLOCK=1) keep the separate kernels or one call per block. */
bool vq_attn_codebook_values_use_int8(vq_attn_values *values);

/* RaBitQ 1-bit keys: bits [B,Hkv,Skv,D/8] u8, mag and cnst (nullable)
 * [B,Hkv,Skv] f32. Hamming: s = (D - 2 ham(sign q, bits)) * q_scale * mag + cnst;
 * exact: s = (q . sign) * q_scale * mag + cnst. q_scale per row comes from
 * q_scale_t [B,Hq,Sq] f32 (validated by the caller) or, when that is NULL,
 * from the one float at q_scale_one (read only when the kernel runs). */
vq_status vq_attn_bind_keys_rabitq(vq_ctx *ctx, const DLTensor *bits, const DLTensor *mag, const DLTensor *cnst,
                                   bool exact, const DLTensor *q_scale_t, const float *q_scale_one,
                                   const vq_attn_dims *dims, vq_attn_keys *out);

/* Bound RaBitQ keys on Hamming scores with D = 128, contiguous bit rows
 * and per-token f32 magnitudes (and constants): fills the key half of b for
 * the run of `count` whole blocks from block blk (the ranges of a later
 * block that score() would prefetch, their steps, pf_nb from these keys'
 * Skv), and *qb / *ldq, *ldqs for the prepared rows qp (sign bytes at qp + 1,
 * the scale at qp[0]). False, filling nothing, for any other keys. */
bool vq_attn_rabitq_keys_block(const vq_attn_keys *keys, const vq_attn_block *blk, int64_t count,
                               vq_attn_rabitq_block *b, int64_t *ldq, int64_t *ldqs);

/* The key formats of vq_encoded_keys beyond plain keys (vq_fused_sdpa's
 * binders table), each validating keys-><member> with messages that name it
 * ("keys.turbo.idx"). Hadamard formats (turbo, rvq, rabitq) need D a power of
 * two and rotate each query row once (q . x_hat = rot(q) . y_hat). */
vq_status vq_attn_bind_keys_turbo(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                  vq_attn_keys *out);
vq_status vq_attn_bind_keys_rvq(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                vq_attn_keys *out);
vq_status vq_attn_bind_keys_rabitq_rotated(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims,
                                           float scale, vq_attn_keys *out);
vq_status vq_attn_bind_keys_kivi_encoded(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims,
                                           float scale, vq_attn_keys *out);
vq_status vq_attn_bind_keys_qjl(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                vq_attn_keys *out);
vq_status vq_attn_bind_keys_vecinfer(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                               vq_attn_keys *out);
vq_status vq_attn_bind_keys_commvq(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                                   vq_attn_keys *out);

/* Any vq_encoded_keys / vq_encoded_values: validates the member named by
 * its format against dims (writing nothing) and binds it. */
vq_status vq_attn_bind_keys(vq_ctx *ctx, const vq_encoded_keys *keys, const vq_attn_dims *dims, float scale,
                            vq_attn_keys *out);
vq_status vq_attn_bind_values(vq_ctx *ctx, const vq_encoded_values *values, const vq_attn_dims *dims,
                              vq_attn_values *out);

/* vq_fused_sdpa after VQ_ENTER (so entry points built on it report their own
 * name): validate, bind keys->format and values->format, run. */
vq_status vq_attn_fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                             const vq_encoded_values *values, float scale, const DLTensor *mask, DLTensor *out,
                             const vq_attend_opts *opts);

/* Value formats. values [B,Hkv,Skv,D] f16/f32. */
vq_status vq_attn_bind_values_f16(vq_ctx *ctx, const DLTensor *values, const char *name,
                                    const vq_attn_dims *dims, vq_attn_values *out);

/* KIVI values: codes [B,Hkv,Skv,D*bits/8] u8, scale/zero [B,Hkv,Skv,ceil(D/g)]. */
vq_status vq_attn_bind_values_kivi(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                     const DLTensor *zero, int bits, int64_t g, const vq_attn_dims *dims,
                                     vq_attn_values *out);

/* TurboQuant values (values->turbo): accumulated in the rotated basis,
 * rotated back by the ops' finish(). */
vq_status vq_attn_bind_values_turbo(vq_ctx *ctx, const vq_encoded_values *values, const vq_attn_dims *dims,
                                    vq_attn_values *out);

/* Codebook values: idx [B,Hkv,Skv,D] u8 or nibble-packed [B,Hkv,Skv,D/2]
 * (packed_only: only the latter), cents [n_cents] f32 (1..256; packed needs
 * <= 16), vscale [B,Hkv,Skv] f32 or NULL. */
vq_status vq_attn_bind_values_codebook(vq_ctx *ctx, const DLTensor *idx, const DLTensor *cents,
                                       const DLTensor *vscale, bool packed_only, const vq_attn_dims *dims,
                                       vq_attn_values *out);

#endif /* VQ_ATTN_FORMATS_H */
