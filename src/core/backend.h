/* backend.h — what a device backend gives the library: the hooks a ctx of
 * that backend calls (vq_backend_ops, a small table) and nothing else of the
 * backend's internals. src/core and the modules above it reach a device only
 * through ctx->ops; the backend (src/cuda) implements the table and the
 * kernel entry points declared by the modules it serves
 * (codecs/codecs_cuda.h, attention/attn_cuda.h, cache/cache_cuda.h), so no
 * module includes a header of src/cuda (docs/INTERNALS.md, "Dependencies").
 *
 * Every function returns a vq_status and describes failures on the ctx.
 * Copies are enqueued on the ctx's stream unless stated. */
#ifndef VQ_CORE_BACKEND_H
#define VQ_CORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "veloxquant.h"

typedef struct vq_ctx vq_ctx;

typedef struct vq_backend_ops {
    /* a device of this backend can be opened */
    bool (*available)(void);
    /* selects the ctx's device and creates its state (ctx->device_state) */
    vq_status (*ctx_init)(vq_ctx *ctx);
    void (*ctx_release)(vq_ctx *ctx);
    /* waits for everything queued on the ctx's stream */
    vq_status (*synchronize)(vq_ctx *ctx);
    /* Device memory that outlives a call (the KV cache's pools, tables and
     * staging). free waits for the device and ignores errors. */
    vq_status (*malloc)(vq_ctx *ctx, size_t bytes, void **out);
    void (*free)(vq_ctx *ctx, void *p);
    /* device to device, pitched (as cudaMemcpy2DAsync) */
    vq_status (*copy2d)(vq_ctx *ctx, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t height);
    /* host to device; returns when src may be reused */
    vq_status (*upload)(vq_ctx *ctx, void *dst, const void *src, size_t bytes);
    /* device to host after the queued work; returns when dst holds the bytes */
    vq_status (*download)(vq_ctx *ctx, void *dst, const void *src, size_t bytes);
    vq_status (*zero)(vq_ctx *ctx, void *dst, size_t bytes);
} vq_backend_ops;

#ifdef VQ_WITH_CUDA
/* The CUDA backend's table (src/cuda/cuda_ctx.c). */
const vq_backend_ops *vq_cuda_backend_ops(void);
#endif

#endif
