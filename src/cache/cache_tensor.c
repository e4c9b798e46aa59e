/* cache_tensor.c — a caller's tensor (k, v, positions), checked as the
 * attention entry points check theirs (vq_check_tensor_view: any
 * non-negative outer strides, the last dim contiguous), as base + strides. */
#include "cache/cache_tensor.h"

vq_status vq_cache_check_tensor(vq_cache *c, const DLTensor *t, const char *name, unsigned dtypes, int ndim,
                                const int64_t *shape, vq_cache_tensor *out)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(c->ctx, t, name, dtypes, ndim, ndim));
    VQ_FORWARD_IF_ERROR(vq_check_shape(c->ctx, t, name, ndim, shape));
    const vq_dtype dt = vq_dtype_of(t);
    *out = (vq_cache_tensor){.base = (char *)vq_data(t), .dt = dt, .esz = (int64_t)vq_dtype_size(dt)};
    for (int i = 0; i < ndim; i++) {
        out->shape[i] = t->shape[i];
        out->stride[i] = vq_stride(t, i);
    }
    return VQ_OK;
}
