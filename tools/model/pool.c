/* pool.c — a small persistent thread pool: the caller is thread 0, n - 1
 * workers wait on a generation counter. One job at a time (the forward pass
 * is a sequence of parallel steps). */
#include <pthread.h>
#include <stdlib.h>

#include "vqm.h"

struct vqm_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    uint64_t generation;
    int pending;
    bool quit;
    void (*fn)(void *, int, int);
    void *arg;
};

typedef struct worker_arg {
    vqm_pool *p;
    int index;
} worker_arg;

static worker_arg *worker_args(vqm_pool *p) { return (worker_arg *)(void *)(p->threads + p->n); }

static void *worker(void *a)
{
    const worker_arg *w = a;
    vqm_pool *p = w->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        void (*fn)(void *, int, int) = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(arg, w->index, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

vq_status vqm_pool_create(int n, vqm_pool **out)
{
    *out = NULL;
    if (n < 1) return VQ_ERR_INVALID_ARGUMENT;
    vqm_pool *p = calloc(1, sizeof *p);
    /* thread handles then their arguments, one allocation */
    if (p != NULL) p->threads = calloc((size_t)n, sizeof(pthread_t) + sizeof(worker_arg));
    if (p == NULL || p->threads == NULL) {
        free(p);
        return VQ_ERR_OUT_OF_MEMORY;
    }
    p->n = n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int i = 1; i < n; i++) {
        worker_args(p)[i] = (worker_arg){p, i};
        if (pthread_create(&p->threads[i], NULL, worker, &worker_args(p)[i]) != 0) {
            p->n = i; /* join the ones started */
            vqm_pool_free(p);
            return VQ_ERR_OUT_OF_MEMORY;
        }
    }
    *out = p;
    return VQ_OK;
}

void vqm_pool_free(vqm_pool *p)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int vqm_pool_size(const vqm_pool *p) { return p->n; }

void vqm_pool_run(vqm_pool *p, void (*fn)(void *arg, int i, int n), void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
