/* threadpool.c — a small persistent pthread pool. The caller works as thread
 * 0; workers take tasks from a shared atomic counter, so uneven tasks balance
 * themselves. Between jobs a worker spins a short while (vq_spin_wait) before
 * it sleeps on a condition variable, and so does the caller waiting for the
 * workers: a decode step is many short jobs, and a sleeping thread's wake-up
 * (a futex, and under a hypervisor an IPI to a halted vCPU) costs more than
 * most of them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core.h"

enum { DEFAULT_SPIN_US = 100 };

struct vq_threadpool {
    int num_threads;               /* including the caller */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    _Atomic uint64_t generation;   /* bumped per job (under mu; read outside it by the spin) */
    _Atomic int busy;              /* workers still inside the current job */
    bool stopping;
    /* the current job */
    vq_task_fn fn;
    void *arg;
    int64_t n_tasks;
    _Atomic int64_t next;
    int64_t spin_ns;               /* how long a waiting thread spins before it sleeps */
};

/* The pool's threads' own flag: a task that calls vq_parallel_for again gets
 * an error, not a deadlock. */
static _Thread_local bool in_task;

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until *gen differs from seen or spin_ns have passed (the caller then
 * sleeps, checking again under the mutex). The clock is read every 64
 * pauses: a pause is 10-150 cycles by CPU model, so no fixed count fits. */
static void spin_while_equal(const vq_threadpool *p, _Atomic uint64_t *gen, uint64_t seen)
{
    const int64_t t0 = p->spin_ns > 0 ? now_ns() : 0;
    for (int i = 1; p->spin_ns > 0; i++) {
        if (atomic_load_explicit(gen, memory_order_acquire) != seen) return;
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 > p->spin_ns) return;
    }
}

/* The same wait for the caller: until no worker is inside the job. */
static void spin_while_busy(const vq_threadpool *p)
{
    const int64_t t0 = p->spin_ns > 0 ? now_ns() : 0;
    for (int i = 1; p->spin_ns > 0; i++) {
        if (atomic_load_explicit(&p->busy, memory_order_acquire) == 0) return;
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 > p->spin_ns) return;
    }
}

typedef struct worker_arg { vq_threadpool *pool; int thread; } worker_arg;

static void run_tasks(vq_threadpool *p, int thread)
{
    for (;;) {
        const int64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->n_tasks) break;
        in_task = true;
        p->fn(p->arg, t, thread);
        in_task = false;
    }
}

bool vq_threadpool_in_task(void) { return in_task; }

static void *worker_main(void *varg)
{
    worker_arg *wa = varg;
    vq_threadpool *p = wa->pool;
    const int thread = wa->thread;
    free(wa);
    uint64_t seen = 0;
    for (;;) {
        spin_while_equal(p, &p->generation, seen);
        pthread_mutex_lock(&p->mu);
        while (!p->stopping && atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->mu);
        const bool stop = p->stopping;
        seen = atomic_load(&p->generation);
        pthread_mutex_unlock(&p->mu);
        if (stop) break;
        run_tasks(p, thread);
        if (atomic_fetch_sub(&p->busy, 1) == 1) { /* the last one out wakes a sleeping caller */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

vq_threadpool *vq_threadpool_create(int num_threads)
{
    vq_threadpool *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->num_threads = num_threads < 1 ? 1 : num_threads;
    const char *spin = getenv("VQ_SPIN_US");
    const long us = spin != NULL && *spin ? strtol(spin, NULL, 10) : DEFAULT_SPIN_US;
    p->spin_ns = us > 0 ? (int64_t)(us < 1000000 ? us : 1000000) * 1000 : 0;
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
        in_task = true;
        for (int64_t t = 0; t < n_tasks; t++) fn(arg, t, 0);
        in_task = false;
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    atomic_store(&p->busy, p->num_threads - 1);
    atomic_fetch_add(&p->generation, 1); /* publishes the job to spinning workers */
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0);
    spin_while_busy(p);
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->busy) > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int vq_threadpool_size(const vq_threadpool *p) { return p ? p->num_threads : 1; }
