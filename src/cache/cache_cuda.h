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

#endif
