/* bench_membw.c — the machine's streaming read bandwidth, measured the way a
 * decode kernel reads its cache: every thread sums its own slice of a buffer
 * much larger than the last-level cache. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_attention.h"

typedef struct slice {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} slice;

/* Four independent sums so the loop is load-bound, not add-latency-bound;
 * p and n in locals, or every load through p could alias s->n. */
static void *sum_slice(void *arg)
{
    slice *s = arg;
    const uint64_t *p = s->p;
    const size_t n = s->n;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    s->sum = a + b + c + d;
    return NULL;
}

double vqb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double vqb_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double vqb_read_bandwidth(int threads, size_t bytes, double *per_cpu)
{
    double cpu_dummy;
    if (per_cpu == NULL) per_cpu = &cpu_dummy; /* the CPU-time figure is optional */
    *per_cpu = 0.0;
    const size_t n = bytes / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof(uint64_t));
    if (buf == NULL || threads < 1) {
        free(buf);
        return 0.0;
    }
    memset(buf, 1, n * sizeof(uint64_t)); /* touch every page before timing */
    slice sl[256];
    pthread_t th[256];
    if (threads > 256) threads = 256;
    double best = 0.0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        const double t0 = vqb_now(), c0 = vqb_cpu_now();
        for (int t = 0; t < threads; t++) {
            sl[t] = (slice){buf + n / (size_t)threads * (size_t)t, n / (size_t)threads, 0};
            pthread_create(&th[t], NULL, sum_slice, &sl[t]);
        }
        for (int t = 0; t < threads; t++) {
            pthread_join(th[t], NULL);
            sink += sl[t].sum;
        }
        const double gb = (double)(n / (size_t)threads * (size_t)threads * sizeof(uint64_t)) / 1e9;
        const double gbs = gb / (vqb_now() - t0), gbc = gb / ((vqb_cpu_now() - c0) / threads);
        if (gbs > best) best = gbs;
        if (gbc > *per_cpu) *per_cpu = gbc;
    }
    (void)sink;
    free(buf);
    return best;
}
