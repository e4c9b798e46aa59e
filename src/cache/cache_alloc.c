/* cache_alloc.c — memory on the cache's device: host memory for a CPU ctx,
 * device memory through the ctx's backend hooks (ctx->ops, core/backend.h)
 * otherwise. Device copies are enqueued on the ctx's stream (device to
 * device) and do not synchronise. */
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "cache/cache_internal.h"
#ifdef VQ_WITH_CUDA
#include "cache/cache_cuda.h"
#endif

void *vq_cache_mem_alloc(vq_cache *c, size_t bytes)
{
    if (bytes == 0) bytes = 64;
    if (c->ctx->ops) {
        void *p = NULL;
        return c->ctx->ops->malloc(c->ctx, bytes, &p) == VQ_OK ? p : NULL;
    }
    /* 64-byte aligned: the kernels load whole cache lines */
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (p == NULL) (void)vq_fail(c->ctx, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes", bytes);
    return p;
}

/* Host pool chunks of 2 MB and more sit on 2 MB boundaries, rounded up to
 * 2 MB, and ask Linux for transparent huge pages (a no-op where THP is off or
 * always on). Attention streams a chunk's rows head by head: with 4 KB pages
 * every 4 KB of every stream is a TLB miss, and on the development VM the
 * bandwidth-bound f16 decode over a pool ran 8-10 % behind the same kernel
 * over freshly malloc'd tensors; on huge pages the gap closed
 * (bench/results/cache_cpu.md). */
void *vq_cache_mem_alloc_pool(vq_cache *c, size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (c->cuda || bytes < huge || bytes > SIZE_MAX - huge) return vq_cache_mem_alloc(c, bytes);
    const size_t n = (bytes + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, n);
    if (p == NULL) return vq_cache_mem_alloc(c, bytes); /* sets the message on failure */
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(p, n, MADV_HUGEPAGE); /* advice only: failure leaves 4 KB pages */
#endif
    return p;
}

void vq_cache_mem_free(vq_cache *c, void *p)
{
    if (p == NULL) return;
    if (c->ctx->ops) {
        (void)vq_cache_copies_flush(c); /* a queued copy may read or write p */
        c->ctx->ops->free(c->ctx, p);
        return;
    }
    free(p);
}

vq_status vq_cache_mem_copy2d(vq_cache *c, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height)
{
    if (width == 0 || height == 0) return VQ_OK;
#ifdef VQ_WITH_CUDA
    if (c->cuda && c->copies.open) return vq_cache_cuda_queue_copy(c, dst, dpitch, src, spitch, width, height);
#endif
    if (c->ctx->ops) return c->ctx->ops->copy2d(c->ctx, dst, dpitch, src, spitch, width, height);
    for (size_t r = 0; r < height; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return VQ_OK;
}

void vq_cache_copies_begin(vq_cache *c) { c->copies.open++; }

vq_status vq_cache_copies_flush(vq_cache *c)
{
#ifdef VQ_WITH_CUDA
    if (c->copies.n > 0) return vq_cache_cuda_flush_copies(c);
#else
    (void)c;
#endif
    return VQ_OK;
}

vq_status vq_cache_copies_end(vq_cache *c, vq_status st)
{
    const vq_status f = vq_cache_copies_flush(c);
    if (c->copies.open > 0) c->copies.open--;
    return st != VQ_OK ? st : f;
}

vq_status vq_cache_mem_zero(vq_cache *c, void *dst, size_t bytes)
{
    VQ_FORWARD_IF_ERROR(vq_cache_copies_flush(c));
    if (c->ctx->ops) return c->ctx->ops->zero(c->ctx, dst, bytes);
    memset(dst, 0, bytes);
    return VQ_OK;
}

vq_status vq_cache_mem_upload(vq_cache *c, void *dst, const void *src, size_t bytes)
{
    VQ_FORWARD_IF_ERROR(vq_cache_copies_flush(c));
    if (c->ctx->ops) return c->ctx->ops->upload(c->ctx, dst, src, bytes);
    memcpy(dst, src, bytes);
    return VQ_OK;
}

void *vq_cache_stage(vq_cache *c, size_t bytes) { return vq_cache_stage_buf(c, &c->stage, bytes); }

void *vq_cache_stage_buf(vq_cache *c, vq_cache_buf *b, size_t bytes)
{
    if (bytes == 0) bytes = 64; /* never NULL for an empty request */
    if (bytes <= b->size) return b->p;
    /* grow by half again, so that slowly growing prefills do not allocate each call */
    const size_t want = bytes + bytes / 2;
    /* device work queued on the stream (or a queued copy) may still read the old buffer */
    if (c->ctx->ops && b->p && (vq_cache_copies_flush(c) != VQ_OK || c->ctx->ops->synchronize(c->ctx) != VQ_OK))
        return NULL;
    vq_cache_mem_free(c, b->p);
    b->p = vq_cache_mem_alloc(c, want);
    b->size = b->p ? want : 0;
    return b->p;
}

void *vq_cache_host_scratch(vq_cache *c, int which, size_t bytes)
{
    vq_cache_buf *b = &c->host[which];
    if (bytes == 0) bytes = 64;
    if (bytes <= b->size) return b->p;
    const size_t want = bytes + bytes / 2;
    free(b->p);
    b->p = aligned_alloc(64, (want + 63) & ~(size_t)63);
    b->size = b->p ? want : 0;
    if (b->p == NULL) (void)vq_fail(c->ctx, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of host scratch", want);
    return b->p;
}

void vq_cache_view(const vq_cache *c, DLTensor *t, int64_t *shape, int ndim, vq_dtype dt, void *p)
{
    static const DLDataType types[VQ_DT_COUNT] = {
        [VQ_DT_F32] = {kDLFloat, 32, 1}, [VQ_DT_F16] = {kDLFloat, 16, 1}, [VQ_DT_BF16] = {kDLBfloat, 16, 1},
        [VQ_DT_U8] = {kDLUInt, 8, 1},    [VQ_DT_U16] = {kDLUInt, 16, 1},  [VQ_DT_I32] = {kDLInt, 32, 1},
        [VQ_DT_U32] = {kDLUInt, 32, 1}};
    *t = (DLTensor){.data = p,
                    .device = {c->cuda ? kDLCUDA : kDLCPU, c->cuda ? c->ctx->device : 0},
                    .ndim = ndim,
                    .dtype = types[dt],
                    .shape = shape,
                    .strides = NULL,
                    .byte_offset = 0};
}

vq_status vq_cache_forward(vq_ctx *ctx, vq_status s, const char *fn)
{
    ctx->fn = fn;
    if (s == VQ_OK) return s;
    char inner[sizeof ctx->last_error];
    memcpy(inner, ctx->last_error, sizeof inner);
    return vq_fail(ctx, s, "%s", inner);
}
