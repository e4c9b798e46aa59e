/* cuda_ctx.c — CUDA device discovery, per-context state (device properties,
 * device scratch), the mapping of CUDA errors to statuses, and the backend's
 * hooks for the ctx (vq_cuda_backend_ops, core/backend.h) (host C). */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include <stdint.h>

#include "cuda/cuda_backend.h"

/* What a CUDA ctx owns (ctx->cuda). */
typedef struct vq_cuda_state {
    int sm_count;          /* multiprocessors, for sizing split-KV grids */
    void *scratch;         /* device memory, grown by vq_cuda_scratch */
    size_t scratch_size;
} vq_cuda_state;

static bool cuda_available(void)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    (void)cudaGetLastError(); /* no driver / no device: clear the error, report false */
    return e == cudaSuccess && n > 0;
}

vq_status vq_cuda_check(vq_ctx *ctx, int err, const char *what)
{
    const cudaError_t e = (cudaError_t)err;
    if (e == cudaSuccess) return VQ_OK;
    (void)cudaGetLastError(); /* clear non-sticky errors so the next call starts clean */
    const vq_status s = e == cudaErrorMemoryAllocation ? VQ_ERR_OUT_OF_MEMORY : VQ_ERR_DEVICE;
    return vq_fail(ctx, s, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

static vq_status cuda_ctx_init(vq_ctx *ctx)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return vq_fail(ctx, VQ_ERR_BACKEND_UNAVAILABLE, "cuda:%d: no CUDA device is visible", ctx->device);
    }
    if (ctx->device >= n)
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "cfg->device is %d (cuda:%d), but %d device(s) are visible",
                       ctx->device, ctx->device, n);
    vq_cuda_state *st = calloc(1, sizeof *st);
    if (st == NULL) return vq_fail(ctx, VQ_ERR_OUT_OF_MEMORY, "out of memory for the CUDA state of cuda:%d", ctx->device);
    ctx->cuda = st;
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    VQ_FORWARD_IF_ERROR(vq_cuda_check(
        ctx, cudaDeviceGetAttribute(&st->sm_count, cudaDevAttrMultiProcessorCount, ctx->device),
        "cudaDeviceGetAttribute(MultiProcessorCount)"));
    return VQ_OK;
}

static void cuda_ctx_release(vq_ctx *ctx)
{
    vq_cuda_state *st = ctx->cuda;
    if (st->scratch != NULL && cudaSetDevice(ctx->device) == cudaSuccess) {
        /* work still queued on the ctx's stream may use the scratch */
        (void)cudaStreamSynchronize((cudaStream_t)ctx->stream);
        (void)cudaFree(st->scratch);
    }
    (void)cudaGetLastError();
    free(st);
    ctx->cuda = NULL;
}

vq_status vq_cuda_begin(vq_ctx *ctx)
{
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == ctx->device) return VQ_OK;
    return vq_cuda_check(ctx, cudaSetDevice(ctx->device), "cudaSetDevice");
}

vq_status vq_cuda_scratch(vq_ctx *ctx, size_t bytes, void **out)
{
    vq_cuda_state *st = ctx->cuda;
    *out = NULL;
    if (bytes > st->scratch_size) {
        const size_t rounded = (bytes + 255) & ~(size_t)255;
        /* the old buffer may still be read by queued kernels: cudaFree waits */
        if (st->scratch != NULL) {
            VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream),
                                              "cudaStreamSynchronize before growing the scratch"));
            VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, cudaFree(st->scratch), "cudaFree(scratch)"));
            st->scratch = NULL;
            st->scratch_size = 0;
        }
        void *p = NULL;
        VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, cudaMalloc(&p, rounded), "cudaMalloc(scratch)"));
        st->scratch = p;
        st->scratch_size = rounded;
    }
    *out = st->scratch;
    return VQ_OK;
}

int vq_cuda_sm_count(const vq_ctx *ctx) { return ((const vq_cuda_state *)ctx->cuda)->sm_count; }

vq_status vq_cuda_check_aligned16(vq_ctx *ctx, const DLTensor *const *ts, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        VQ_RETURN_IF(ctx, ts[i] != NULL && ((uintptr_t)vq_data(ts[i]) & 15) != 0, VQ_ERR_UNSUPPORTED,
                     "the CUDA backend needs 16-byte aligned tensors ('%s' is not)", names[i]);
    return VQ_OK;
}

vq_status vq_cuda_synchronize(vq_ctx *ctx)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    return vq_cuda_check(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream), "cudaStreamSynchronize");
}

const vq_backend_ops *vq_cuda_backend_ops(void)
{
    static const vq_backend_ops ops = {
        .available = cuda_available,
        .ctx_init = cuda_ctx_init,
        .ctx_release = cuda_ctx_release,
        .synchronize = vq_cuda_synchronize,
        .malloc = vq_cuda_malloc,
        .free = vq_cuda_free,
        .copy2d = vq_cuda_copy2d,
        .upload = vq_cuda_upload,
        .download = vq_cuda_download,
        .zero = vq_cuda_zero,
    };
    return &ops;
}
