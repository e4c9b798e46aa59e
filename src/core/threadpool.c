/* threadpool.c — a small persistent pthread pool. The caller works as thread
 * 0; workers sleep on a condition variable between jobs and take tasks from a
 * shared atomic counter, so uneven tasks balance themselves. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core.h"

struct vq_threadpool {
    int num_threads;               /* including the caller */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t generation;           /* bumped per job */
    int busy;                      /* workers still inside the current job */
    bool stopping;
    /* the current job */
    vq_task_fn fn;
    void *arg;
    int64_t n_tasks;
    _Atomic int64_t next;
};

typedef struct worker_arg { vq_threadpool *pool; int thread; } worker_arg;

static void run_tasks(vq_threadpool *p, int thread)
{
    for (;;) {
        const int64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->n_tasks) break;
        p->fn(p->arg, t, thread);
    }
}

static void *worker_main(void *varg)
{
    worker_arg *wa = varg;
    vq_threadpool *p = wa->pool;
    const int thread = wa->thread;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stopping && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stopping) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p, thread);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

vq_threadpool *vq_threadpool_create(int num_threads)
{
    vq_threadpool *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->num_threads = num_threads < 1 ? 1 : num_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (p->num_threads > 1) {
        p->workers = calloc((size_t)p->num_threads - 1, sizeof *p->workers);
        if (p->workers == NULL) { vq_threadpool_free(p); return NULL; }
        for (int i = 1; i < p->num_threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            bool started = false;
            if (wa != NULL) {
                wa->pool = p;
                wa->thread = i;
                started = pthread_create(&p->workers[i - 1], NULL, worker_main, wa) == 0;
            }
            if (!started) {
                free(wa);
                p->num_threads = i; /* keep the workers that did start */
                break;
            }
        }
    }
    return p;
}

void vq_threadpool_free(vq_threadpool *p)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->num_threads && p->workers; i++) pthread_join(p->workers[i - 1], NULL);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

void vq_parallel_for(vq_ctx *ctx, int64_t n_tasks, vq_task_fn fn, void *arg)
{
    vq_threadpool *p = ctx->pool;
    if (n_tasks <= 0) return;
    if (p == NULL || p->num_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++) fn(arg, t, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    p->busy = p->num_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int vq_threadpool_size(const vq_threadpool *p) { return p ? p->num_threads : 1; }
