/* cuda_ctx.c — CUDA device discovery and per-context state (host C). */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "cuda/cuda_backend.h"

bool vq_cuda_available(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

vq_status vq_cuda_ctx_init(vq_ctx *ctx)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return VQ_ERR_BACKEND_UNAVAILABLE;
    if (ctx->device >= n) return VQ_ERR_INVALID_ARGUMENT;
    if (cudaSetDevice(ctx->device) != cudaSuccess) return VQ_ERR_DEVICE;
    return VQ_OK;
}

void vq_cuda_ctx_release(vq_ctx *ctx) { ctx->cuda = NULL; }

vq_status vq_cuda_synchronize(vq_ctx *ctx)
{
    const cudaError_t e = cudaStreamSynchronize((cudaStream_t)ctx->stream);
    if (e != cudaSuccess)
        return vq_fail(ctx, VQ_ERR_DEVICE, "cudaStreamSynchronize failed: %s", cudaGetErrorName(e));
    return VQ_OK;
}
