/* cuda_mem.c — device memory for objects that outlive one call (the KV
 * cache's pools, tables and staging): allocation and the copies between
 * them, enqueued on the ctx's stream (host C over the runtime API). */
#include <cuda_runtime_api.h>

#include "cuda/cuda_backend.h"

vq_status vq_cuda_malloc(vq_ctx *ctx, size_t bytes, void **out)
{
    *out = NULL;
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    return vq_cuda_check(ctx, cudaMalloc(out, bytes), "cudaMalloc");
}

void vq_cuda_free(vq_ctx *ctx, void *p)
{
    if (p == NULL || vq_cuda_begin(ctx) != VQ_OK) return;
    /* queued kernels may still read p: cudaFree waits for the device */
    (void)cudaFree(p);
    (void)cudaGetLastError();
}

vq_status vq_cuda_copy2d(vq_ctx *ctx, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    return vq_cuda_check(ctx,
                         cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice,
                                           (cudaStream_t)ctx->stream),
                         "cudaMemcpy2DAsync");
}

vq_status vq_cuda_upload(vq_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    /* synchronous: src is the caller's host memory, which may be freed on return */
    return vq_cuda_check(ctx, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy(host to device)");
}

vq_status vq_cuda_download(vq_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    /* appends and attends are queued on the stream: wait, then copy */
    VQ_FORWARD_IF_ERROR(vq_cuda_synchronize(ctx));
    return vq_cuda_check(ctx, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(device to host)");
}

vq_status vq_cuda_upload_async(vq_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    return vq_cuda_check(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)ctx->stream),
                         "cudaMemcpyAsync(host to device)");
}

vq_status vq_cuda_zero(vq_ctx *ctx, void *dst, size_t bytes)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    return vq_cuda_check(ctx, cudaMemsetAsync(dst, 0, bytes, (cudaStream_t)ctx->stream), "cudaMemsetAsync");
}
