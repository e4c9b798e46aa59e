/* cuda_copies.c — the cache's batched device copies (vq_cache_copies_begin
 * in cache_internal.h): queued on the host, run by one copy_jobs launch.
 *
 * The order of the copies is kept by construction: a queued copy never
 * reads or writes what another queued copy writes (copy_jobs runs them all
 * at once), so a copy that would is preceded by a flush. The check is on
 * each copy's byte span, first row to last, which is conservative for
 * pitched copies (two interleaved copies of one block flush where they
 * need not); the cache's batches copy disjoint blocks. */
#include <stdint.h>
#include <stdlib.h>

#include "cache/cache_cuda.h"
#include "cuda/copy_jobs.h"
#include "cuda/cuda_backend.h"

/* The bytes [lo, hi) a copy of height rows touches on one side. */
static void span(const unsigned char *p, int64_t pitch, int64_t width, int64_t height, uintptr_t *lo, uintptr_t *hi)
{
    *lo = (uintptr_t)p;
    *hi = (uintptr_t)p + (uintptr_t)((height - 1) * pitch + width);
}

static bool overlaps(uintptr_t a0, uintptr_t a1, uintptr_t b0, uintptr_t b1) { return a0 < b1 && b0 < a1; }

/* Whether copy j must wait for queued copy q: it reads or writes what q
 * writes, or writes what q reads. */
static bool depends(const vq_cu_copy_job *j, const vq_cu_copy_job *q)
{
    uintptr_t js0, js1, jd0, jd1, qs0, qs1, qd0, qd1;
    span(j->src, j->spitch, j->width, j->height, &js0, &js1);
    span(j->dst, j->dpitch, j->width, j->height, &jd0, &jd1);
    span(q->src, q->spitch, q->width, q->height, &qs0, &qs1);
    span(q->dst, q->dpitch, q->width, q->height, &qd0, &qd1);
    return overlaps(js0, js1, qd0, qd1) || overlaps(jd0, jd1, qd0, qd1) || overlaps(jd0, jd1, qs0, qs1);
}

vq_status vq_cache_cuda_queue_copy(vq_cache *c, void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height)
{
    vq_cache_copies *q = &c->copies;
    const vq_cu_copy_job j = {.src = src, .dst = dst, .spitch = (int64_t)spitch, .dpitch = (int64_t)dpitch,
                              .width = (int64_t)width, .height = (int64_t)height};
    /* a grid row per copied row: taller copies go alone, as before */
    if (height > 65535) {
        VQ_FORWARD_IF_ERROR(vq_cache_copies_flush(c));
        return c->ctx->ops->copy2d(c->ctx, dst, dpitch, src, spitch, width, height);
    }
    if (q->jobs == NULL) {
        q->jobs = malloc(sizeof(vq_cu_copy_job) * VQ_CACHE_COPIES_MAX);
        VQ_RETURN_IF(c->ctx, q->jobs == NULL, VQ_ERR_OUT_OF_MEMORY, "out of host memory for %d device copies",
                     VQ_CACHE_COPIES_MAX);
    }
    /* a full queue runs: the dependency check below is linear in its length, and a long prefill's
     * commit queues a copy per page and stream of every sequence */
    bool run = q->n == VQ_CACHE_COPIES_MAX;
    const vq_cu_copy_job *jobs = q->jobs;
    for (int i = 0; i < q->n && !run; i++) run = depends(&j, &jobs[i]);
    if (run) VQ_FORWARD_IF_ERROR(vq_cache_copies_flush(c));
    ((vq_cu_copy_job *)q->jobs)[q->n++] = j;
    if ((int64_t)height > q->max_height) q->max_height = (int64_t)height;
    return VQ_OK;
}

vq_status vq_cache_cuda_flush_copies(vq_cache *c)
{
    vq_cache_copies *q = &c->copies;
    const int n = q->n;
    const int64_t h = q->max_height;
    if (n == 0) return VQ_OK;
    /* the queue is taken first: growing the device list flushes (and finds it empty) */
    q->n = 0;
    q->max_height = 0;
    const size_t bytes = sizeof(vq_cu_copy_job) * (size_t)n;
    void *dev = vq_cache_stage_buf(c, &q->dev, bytes);
    if (dev == NULL) return VQ_ERR_OUT_OF_MEMORY;
    /* stream-ordered: the previous flush's launch has read the list before this upload lands */
    VQ_FORWARD_IF_ERROR(vq_cuda_upload_async(c->ctx, dev, q->jobs, bytes));
    return vq_cuda_check(c->ctx, vq_cu_launch_copy_jobs(dev, n, h, c->ctx->stream), "device copies launch");
}
