/* pool.c — the runtime's parallel steps on the library's own threads
 * (vq_ctx_parallel_for): one set of threads for the matrix products and the
 * cache's attention, so neither pool's waiting threads take the cores the
 * other's need (two pools on 2 cores left one of them idle half of a decode
 * step: 11.1 ms per token by the wall clock for 11.6 CPU-ms). */
#include <stdlib.h>

#include "vqm.h"

struct vqm_pool {
    vq_ctx *ctx;
    int n;
};

vq_status vqm_pool_create(vq_ctx *ctx, vqm_pool **out)
{
    *out = NULL;
    if (ctx == NULL) return VQ_ERR_INVALID_ARGUMENT;
    vqm_pool *p = malloc(sizeof *p);
    if (p == NULL) return VQ_ERR_OUT_OF_MEMORY;
    *p = (vqm_pool){ctx, vq_ctx_num_threads(ctx)};
    *out = p;
    return VQ_OK;
}

void vqm_pool_free(vqm_pool *p) { free(p); }

int vqm_pool_size(const vqm_pool *p) { return p->n; }

typedef struct part_job {
    void (*fn)(void *, int, int);
    void *arg;
    int n;
} part_job;

static void run_part(void *arg, int64_t task, int thread)
{
    (void)thread; /* the part index, not the thread, picks a part's state */
    const part_job *j = arg;
    j->fn(j->arg, (int)task, j->n);
}

void vqm_pool_run(vqm_pool *p, void (*fn)(void *arg, int i, int n), void *arg)
{
    part_job j = {fn, arg, p->n};
    /* cannot fail: p->ctx and run_part are set, and the forward pass never
     * runs inside a task */
    (void)vq_ctx_parallel_for(p->ctx, p->n, run_part, &j);
}
