/* bench_clock.c — the core clock the decode kernels run at, measured on all
 * the bench's threads at once: the instruction floors of bench/results/cpu.md
 * are in core cycles, the bench measures CPU time, and on a shared (or
 * virtual) machine the clock with every thread busy is not the one a
 * single-threaded probe sees, nor the same for the whole run. */
#include <pthread.h>
#include <time.h>

#include "bench_attention.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "fma_chains.h"

enum { PROBE_ITERS = 2000000 }; /* 24M FMAs per thread: ~4 ms at 3 GHz */

typedef struct probe {
    double ghz;
} probe;

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* cycles = FMAs / 2 (fma_chains.h), per second of this thread's CPU time
 * (time it was descheduled does not count); the best of three passes. */
static void *run_probe(void *arg)
{
    probe *pr = arg;
    double best = 0.0;
    for (int pass = 0; pass < 3; pass++) {
        const double t0 = thread_cpu();
        vq_fma_chains(PROBE_ITERS);
        const double ghz = (double)PROBE_ITERS * 12 / 2 / (thread_cpu() - t0) * 1e-9;
        best = ghz > best ? ghz : best;
    }
    pr->ghz = best;
    return NULL;
}

#endif

double vqb_clock_ghz(int threads)
{
#if defined(__x86_64__) && defined(__GNUC__)
    enum { MAX_THREADS = 256 };
    if (threads < 1 || threads > MAX_THREADS || !__builtin_cpu_supports("avx512f")) return 0.0;
    pthread_t th[MAX_THREADS];
    probe pr[MAX_THREADS];
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&th[started], NULL, run_probe, &pr[started]) != 0) break;
    double sum = 0.0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        sum += pr[i].ghz;
    }
    return started == threads ? sum / threads : 0.0;
#else
    (void)threads;
    return 0.0;
#endif
}
