/* cache_cuda.h — vq_cache_attend on a CUDA ctx (cache_cuda.c). Internal;
 * only built with the CUDA backend. */
#ifndef VQ_CACHE_CUDA_H
#define VQ_CACHE_CUDA_H

#include "cache/cache_internal.h"

/* q, out (and lse, or NULL) validated by vq_cache_attend; sls[i] the layer
 * state of the i-th sequence, slots[i] its index in c->seqs. */
vq_status vq_cache_attend_cuda(vq_cache *c, int layer, int n_seq, vq_cache_seq_layer *const *sls, const int *slots,
                               const DLTensor *q,
                               DLTensor *out, DLTensor *lse, float scale, bool causal, int64_t Sq);

/* Frees what vq_cache_attend_cuda made (the device page tables). */
void vq_cache_cuda_release(vq_cache *c);

/* ---- device encoders of the cache methods (src/cuda/cuda_cache_codecs.c),
 * each writing the bytes the host code writes on a CPU ctx; device pointers,
 * enqueued on the ctx's stream ---- */

/* vq_cache_row_rms on device rows x [rows][D] f16. */
vq_status vq_cuda_cache_row_rms(vq_ctx *ctx, const uint16_t *x, int64_t rows, int64_t D, float *s, float *xn);
/* vq_cache_scales_to_f16 on device arrays. */
vq_status vq_cuda_cache_scales_to_f16(vq_ctx *ctx, const float *from, uint16_t *to, int64_t n);
/* vq_cache_kivi_mix_encode's arguments (device views) for KIVI_MIX keys. */
vq_status vq_cuda_kivi_mix_encode(vq_ctx *ctx, const vq_key_config *kc, int64_t Hkv, int64_t D, const DLTensor *k,
                                  DLTensor *codes, DLTensor *scale, DLTensor *zero, DLTensor *mask);

#endif
