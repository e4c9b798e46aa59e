/* cuda_backend.h — the CUDA backend as seen from the C host code. Every
 * function returns a vq_status; CUDA errors become VQ_ERR_DEVICE with the
 * CUDA error's name in the ctx message.
 *
 * The vq_cuda_<name> entry points take exactly the arguments of the public
 * vq_<name> and are called by it after validation (docs/INTERNALS.md); they
 * check only what is specific to this backend (alignment, D limits). */
#ifndef VQ_CUDA_BACKEND_H
#define VQ_CUDA_BACKEND_H

#include "attention/attn_cuda.h"
#include "core/core.h"

#include "core/backend.h"

/* The ctx hooks of vq_cuda_backend_ops (core/backend.h), also called
 * directly inside the backend. */
vq_status vq_cuda_synchronize(vq_ctx *ctx);  /* waits for the ctx's stream */

/* ---- internals shared by the host glue ---- */

/* Makes the ctx's device current on this thread (a process may hold contexts
 * on several devices). */
vq_status vq_cuda_begin(vq_ctx *ctx);
/* Maps a CUDA error code (cudaError_t as int) to a status: VQ_OK for success,
 * VQ_ERR_OUT_OF_MEMORY for allocation failures, else VQ_ERR_DEVICE; the
 * message reads "<what>: <cudaErrorName> (<description>)". */
vq_status vq_cuda_check(vq_ctx *ctx, int err, const char *what);
/* Device scratch owned by the ctx: at least `bytes`, 256-byte aligned, grown
 * (never shrunk) when too small and freed with the ctx. Only the innermost
 * launch sequence of one call may use it. */
vq_status vq_cuda_scratch(vq_ctx *ctx, size_t bytes, void **out);
/* Multiprocessors of the ctx's device. */
int vq_cuda_sm_count(const vq_ctx *ctx);
/* VQ_ERR_UNSUPPORTED naming the first of the n tensors (NULL ones skipped)
 * whose data, byte_offset included, is not 16-byte aligned: the kernels that
 * load 16 bytes at a time need it. */
vq_status vq_cuda_check_aligned16(vq_ctx *ctx, const DLTensor *const *ts, const char *const *names, int n);

/* Launches the split-KV merge of c's partial states into out and, when lse
 * is not NULL, the rows' log-sum-exps (compact [B,Hq,Sq] f32). */
struct vq_cu_attend_common;
vq_status vq_cuda_merge_splits(vq_ctx *ctx, const struct vq_cu_attend_common *c, DLTensor *out, DLTensor *lse);

/* Device memory that outlives a call (cuda_mem.c): the memory hooks of
 * vq_cuda_backend_ops. vq_cuda_free waits for the device (cudaFree) and
 * ignores errors; vq_cuda_copy2d copies device to device on the ctx's
 * stream (cudaMemcpy2DAsync pitches); vq_cuda_upload copies host to device
 * and vq_cuda_download device to host (after the queued work), returning
 * when done. */
vq_status vq_cuda_malloc(vq_ctx *ctx, size_t bytes, void **out);
void vq_cuda_free(vq_ctx *ctx, void *p);
vq_status vq_cuda_copy2d(vq_ctx *ctx, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height);
vq_status vq_cuda_upload(vq_ctx *ctx, void *dst, const void *src, size_t bytes);
vq_status vq_cuda_download(vq_ctx *ctx, void *dst, const void *src, size_t bytes);
vq_status vq_cuda_zero(vq_ctx *ctx, void *dst, size_t bytes);  /* cudaMemsetAsync on the ctx's stream */

/* ---- kernels the cache's CUDA glue (cuda_cache.c) calls ---- */

/* The KV cache's paged decode step (src/cuda/cuda_cache.c; internal, no
 * public validation before it): q and out [B,Hq,1,D] compact, B <=
 * VQ_CU_PAGED_MAX_B, lse compact [B,Hq,1] or NULL; the formats' tensors are
 * views of one pool chunk ([pages,Hkv,rows,...], cache_internal.h); batch row
 * b reads pg's pages and, when win is not NULL, its f16 window (attended by
 * the merge kernel); bd (or NULL) bounds the tokens of each row from below
 * (a sliding window: vq_cu_bound, and win->lo for the window). It takes the
 * key formats whose streams are per token (all but KIVI and COMMVQ). */
struct vq_cu_paging;
struct vq_cu_window;
struct vq_cu_bound;
vq_status vq_cuda_fused_sdpa_paged(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                                   const vq_encoded_values *values, float scale, const struct vq_cu_paging *pg,
                                   const struct vq_cu_window *win, const struct vq_cu_bound *bd, DLTensor *out,
                                   DLTensor *lse);
/* vq_cuda_fused_sdpa without a mask, each query row seeing only the tokens
 * at or above its bound bd (NULL or bd->on 0: all; batch rows <=
 * VQ_CU_PAGED_MAX_B): the KV cache's sliding windows. The tensor-core
 * skeleton does not take a bound; such a call runs on the CUDA-core ones. */
vq_status vq_cuda_fused_sdpa_bounded(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                                     const vq_encoded_values *values, float scale, DLTensor *out,
                                     const vq_attend_opts *opts, const struct vq_cu_bound *bd);
/* KIVI keys and values of one group size and bit width on the fast KIVI
 * kernel (D 64/128/256, g % 32 == 0, one scale dtype; else
 * VQ_ERR_UNSUPPORTED): vq_fused_sdpa's KIVI x KIVI pairs without a mask, and
 * the cache's paged decode (pg, win, bd as above; pg NULL: contiguous
 * [B,Hkv,Skv,...] tensors, num_splits and causal as vq_attend_opts'). */
vq_status vq_cuda_kivi_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes, const DLTensor *k_scale,
                              const DLTensor *k_zero, const DLTensor *v_codes, const DLTensor *v_scale,
                              const DLTensor *v_zero, int group_size, int bits, float scale, int num_splits,
                              bool causal, const struct vq_cu_paging *pg, const struct vq_cu_window *win,
                              const struct vq_cu_bound *bd, DLTensor *out, DLTensor *lse);
/* vq_cuda_kivi_attend's arguments that the tensor-core skeleton takes (with
 * VQ_CUDA_MMA=1 only; D = 128, g = 32, 2- or 4-bit packed codes, no causal
 * limit inside the kv axis), and the call that runs them there (cuda_sdpa.c). */
bool vq_cuda_kivi_mma_takes(const DLTensor *q, const DLTensor *k_codes, int group_size, int bits, bool causal);
vq_status vq_cuda_kivi_mma(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes, const DLTensor *k_scale,
                           const DLTensor *k_zero, const DLTensor *v_codes, const DLTensor *v_scale,
                           const DLTensor *v_zero, int group_size, int bits, float scale, int num_splits, bool causal,
                           const struct vq_cu_paging *pg, const struct vq_cu_window *win, DLTensor *out,
                           DLTensor *lse);
/* Host to device on the ctx's stream: src is read before the call returns
 * (pageable memory is staged), the copy lands in stream order. */
vq_status vq_cuda_upload_async(vq_ctx *ctx, void *dst, const void *src, size_t bytes);

#endif
