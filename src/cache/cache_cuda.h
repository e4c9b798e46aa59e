/* cache_cuda.h — the KV cache on a CUDA ctx: vq_cache_attend
 * (src/cuda/cuda_cache.c), the sink tokens and transforms
 * (src/cuda/cuda_recipe.c). Internal; only built with the CUDA backend. */
#ifndef VQ_CACHE_CUDA_H
#define VQ_CACHE_CUDA_H

#include "cache/cache_internal.h"
#include "cache/cache_tensor.h"

/* q, out (and lse, or NULL) validated by vq_cache_attend; sls[i] the layer
 * state of the i-th sequence, slots[i] its index in c->seqs. */
vq_status vq_cache_attend_cuda(vq_cache *c, int layer, int n_seq, vq_cache_seq_layer *const *sls, const int *slots,
                               const DLTensor *q,
                               DLTensor *out, DLTensor *lse, float scale, bool causal, int64_t Sq);

/* Frees what vq_cache_attend_cuda made (the device page tables). */
void vq_cache_cuda_release(vq_cache *c);

/* ---- batched device copies (cuda_copies.c; vq_cache_copies_begin) ---- */

/* Queues one copy of vq_cache_mem_copy2d in the open batch (running the
 * queue first where the copy depends on a queued one). */
vq_status vq_cache_cuda_queue_copy(vq_cache *c, void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height);
/* Runs the queued copies: their list uploaded, one copy_jobs launch. */
vq_status vq_cache_cuda_flush_copies(vq_cache *c);

/* ---- sink tokens and transforms on a CUDA cache (cuda_recipe.c) ---- */

/* The page path of vq_cache_recipe_append: tokens [ns[i], m) of every
 * sequence i with ns[i] < m of kv[0], kv[1] (checked device f16 views
 * [n_seq,Hkv,m,D]) transformed by its tables tab[i] (host [3][Hkv*D]: its
 * own when tab[i] == sls[i]->xf, read from their device copy; tables being
 * fitted are uploaded to staging; NULL: none) into f16 staging, then
 * appended by vq_cache_append_tokens for ids[0..n_in). */
vq_status vq_cache_recipe_append_cuda(vq_cache *c, int layer, int n_seq, vq_cache_seq_layer *const *sls,
                                      const int64_t *ns, const float *const *tab, const vq_cache_tensor *kv, int64_t m,
                                      int n_in, const int64_t *ids);
/* vq_cache_recipe_attend on a CUDA cache (after the public entry point's
 * checks of layer, n_seq and seq_ids): the same rows, sinks and merges as
 * the CPU cache, through the page path, vq_fused_sdpa over the sinks,
 * vq_attention_merge and the per-channel kernels. */
vq_status vq_cache_recipe_attend_cuda(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *q,
                                      DLTensor *out, const vq_cache_attend_opts *opts);
/* n elements of cache memory from dtype sdt to ddt (f16 and f32), on the
 * ctx's stream, bit for bit as the host's vq_f32_to_f16 / vq_f16_to_f32
 * (NaN payloads too): the TurboQuant windows' scales (cache_window.c) and
 * the f16 scales of TurboQuant values (vq_cache_round_scales). */
vq_status vq_cache_cuda_convert(vq_cache *c, const void *src, vq_dtype sdt, void *dst, vq_dtype ddt, int64_t n);
/* The same over rows x width elements, row r at src + r * src_pitch and dst
 * + r * dst_pitch (elements): f32 appends rounded into the f16 staging. */
vq_status vq_cache_cuda_convert_rows(vq_cache *c, const void *src, vq_dtype sdt, int64_t src_pitch, void *dst,
                                     vq_dtype ddt, int64_t dst_pitch, int64_t width, int64_t rows);

/* ---- device encoders of the cache methods, each writing the bytes the
 * host code writes on a CPU ctx; device pointers, enqueued on the ctx's
 * stream ---- */

/* A key method's whole encoder on the device (vq_cache_method.encode's job:
 * x [1,Hkv,T,D] f16, the staging views outs in the order the method's layout
 * added its streams), for a method whose host encoder does not run there
 * because no public codec writes its bytes. */
typedef vq_status (*vq_cache_device_encoder)(vq_ctx *ctx, const vq_key_config *kc, const DLTensor *x,
                                             DLTensor *const *outs);
/* Key method m's device encoder, declared by its CUDA key format
 * (src/cuda/keys_registry.h); NULL when the method's own encoder runs on
 * the device through the public codecs. */
vq_cache_device_encoder vq_cache_cuda_key_encoder(int m);
/* vq_cache_row_rms on device rows x [rows][D] f16 (cuda_cache_codecs.c): the
 * quantity behind the QJL key norms and the CODEBOOK value scales. */
vq_status vq_cuda_cache_row_rms(vq_ctx *ctx, const uint16_t *x, int64_t rows, int64_t D, float *s, float *xn);

#endif
