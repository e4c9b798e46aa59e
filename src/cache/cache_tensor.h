/* cache_tensor.h — a caller's tensor, checked, as base + strides. Internal. */
#ifndef VQ_CACHE_TENSOR_H
#define VQ_CACHE_TENSOR_H

#include "cache/cache_internal.h"

typedef struct vq_cache_tensor {
    char *base;          /* data + byte_offset */
    vq_dtype dt;
    int64_t esz;
    int64_t shape[4];
    int64_t stride[4];   /* elements; the last is 1 */
} vq_cache_tensor;

/* t must have rank ndim, shape[i] (where >= 0), a dtype in `dtypes`, live on
 * the cache's device, strides >= 0 with the last dim contiguous. Strides
 * are in elements (0 for an axis of size 1). */
vq_status vq_cache_check_tensor(vq_cache *c, const DLTensor *t, const char *name, unsigned dtypes, int ndim,
                                const int64_t *shape, vq_cache_tensor *out);

/* Address of element (i, j, k, 0) of a rank-4 (or (i, j) of rank-2) tensor. */
static inline char *vq_cache_at(const vq_cache_tensor *t, int64_t i, int64_t j, int64_t k)
{
    return t->base + (i * t->stride[0] + j * t->stride[1] + k * t->stride[2]) * t->esz;
}

#endif
