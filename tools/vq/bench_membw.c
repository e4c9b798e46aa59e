/* bench_membw.c — the machine's streaming read bandwidth, and the pass that
 * evicts the caches before a cold timed call. Every thread reads its own
 * slice of a buffer several times the last-level cache, as 8 interleaved
 * streams of the widest vector loads the CPU has: one scalar stream per
 * thread reached 21-24 GB/s on a 2-core Xeon
 * guest whose f32 SDPA read its 2 GB at 25 GB/s; 8 streams of 512-bit loads
 * reach 32 there (bench/results/cpu.md). A denominator below what a kernel
 * can reach makes every "% of the read bandwidth" too kind. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_attention.h"

enum { STREAMS = 8, ALIGN = 64, MAX_THREADS = 256 };

typedef uint64_t (*sum_fn)(const uint8_t *p, size_t n);

/* The sum of n bytes at p (n a multiple of STREAMS * ALIGN, p aligned to
 * ALIGN) read as STREAMS streams of W-byte vectors, one accumulator each:
 * the loop is bound by the loads in flight, not by add latency. */
#define DEFINE_SUM(name, W, attr)                                                    \
    attr static uint64_t name(const uint8_t *p, size_t n)                            \
    {                                                                                \
        typedef uint64_t vec __attribute__((vector_size(W)));                        \
        const size_t q = n / STREAMS;                                                \
        vec acc[STREAMS];                                                            \
        memset(acc, 0, sizeof acc);                                                  \
        for (size_t i = 0; i < q; i += W)                                            \
            for (int k = 0; k < STREAMS; k++) acc[k] += *(const vec *)(p + k * q + i); \
        uint64_t s = 0;                                                              \
        for (int k = 0; k < STREAMS; k++)                                            \
            for (int j = 0; j < (int)(W / 8); j++) s += acc[k][j];                   \
        return s;                                                                    \
    }

DEFINE_SUM(sum_16, 16, )
#if defined(__x86_64__) && defined(__GNUC__)
DEFINE_SUM(sum_avx2, 32, __attribute__((target("avx2"))))
DEFINE_SUM(sum_avx512, 64, __attribute__((target("avx512f"))))
#endif

static sum_fn widest_sum(int *bits)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) return *bits = 512, sum_avx512;
    if (__builtin_cpu_supports("avx2")) return *bits = 256, sum_avx2;
#endif
    return *bits = 128, sum_16;
}

struct vqb_stream {
    vq_ctx *ctx; /* whose threads run the passes; NULL: pthreads of our own */
    uint8_t *buf;
    size_t slice; /* bytes per thread, a multiple of STREAMS * ALIGN */
    int threads, load_bits;
    sum_fn sum;
    double best, best_cpu; /* GB/s of the fastest pass so far (wall; per CPU second) */
    int64_t passes;
};

typedef struct slice_job {
    sum_fn sum;
    const uint8_t *p;
    size_t n;
    uint64_t result;
} slice_job;

static void *run_slice(void *arg)
{
    slice_job *j = arg;
    j->result = j->sum(j->p, j->n);
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

/* The last-level cache in bytes (0 when the system does not say). */
static size_t llc_bytes(void)
{
    long n = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    n = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (n <= 0) {
        FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
        char unit = 'B';
        if (f != NULL) {
            if (fscanf(f, "%ld%c", &n, &unit) < 1) n = -1;
            fclose(f);
        }
        if (n > 0 && (unit == 'K' || unit == 'k')) n <<= 10;
        if (n > 0 && (unit == 'M' || unit == 'm')) n <<= 20;
    }
    return n > 0 ? (size_t)n : 0;
}

size_t vqb_stream_bytes(void)
{
    const size_t floor = (size_t)1 << 30, llc4 = 4 * llc_bytes();
    size_t bytes = llc4 > floor ? llc4 : floor;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes > (size_t)pages * (size_t)page / 4) bytes = (size_t)pages * (size_t)page / 4;
    return bytes;
}

vqb_stream *vqb_stream_create(int threads, size_t bytes, vq_ctx *ctx)
{
    if (ctx != NULL) threads = vq_ctx_num_threads(ctx);
    if (threads < 1 || threads > MAX_THREADS) return NULL;
    const size_t unit = (size_t)STREAMS * ALIGN, slice = bytes / (size_t)threads / unit * unit;
    if (slice == 0) return NULL;
    vqb_stream *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->buf = aligned_alloc(ALIGN, slice * (size_t)threads);
    if (s->buf == NULL) {
        free(s);
        return NULL;
    }
    memset(s->buf, 1, slice * (size_t)threads); /* every page touched before timing */
    s->ctx = ctx;
    s->slice = slice;
    s->threads = threads;
    s->sum = widest_sum(&s->load_bits);
    return s;
}

void vqb_stream_free(vqb_stream *s)
{
    if (s == NULL) return;
    free(s->buf);
    free(s);
}

size_t vqb_stream_size(const vqb_stream *s) { return s->slice * (size_t)s->threads; }
int vqb_stream_load_bits(const vqb_stream *s) { return s->load_bits; }

static void run_slice_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    run_slice((slice_job *)arg + task);
}

bool vqb_stream_pass(vqb_stream *s)
{
    slice_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    for (int t = 0; t < s->threads; t++) jobs[t] = (slice_job){s->sum, s->buf + s->slice * (size_t)t, s->slice, 0};
    const double t0 = vqb_now(), c0 = vqb_cpu_now();
    int started = 0;
    if (s->ctx != NULL && vq_ctx_parallel_for(s->ctx, s->threads, run_slice_task, jobs) == VQ_OK) started = s->threads;
    for (; s->ctx == NULL && started < s->threads; started++)
        if (pthread_create(&th[started], NULL, run_slice, &jobs[started]) != 0) break;
    volatile uint64_t sink = 0; /* the sums are used, so the loads stay */
    for (int t = 0; t < started; t++) {
        if (s->ctx == NULL) pthread_join(th[t], NULL);
        sink += jobs[t].result;
    }
    (void)sink;
    if (started < s->threads) return false;
    const double gb = (double)vqb_stream_size(s) / 1e9;
    const double wall = vqb_now() - t0, cpu = (vqb_cpu_now() - c0) / s->threads;
    if (wall > 0 && gb / wall > s->best) s->best = gb / wall;
    if (cpu > 0 && gb / cpu > s->best_cpu) s->best_cpu = gb / cpu;
    s->passes++;
    return true;
}

double vqb_stream_best(const vqb_stream *s, double *per_cpu, int64_t *passes)
{
    if (per_cpu != NULL) *per_cpu = s->best_cpu;
    if (passes != NULL) *passes = s->passes;
    return s->best;
}

double vqb_read_bandwidth(int threads, size_t bytes, double *per_cpu)
{
    if (per_cpu != NULL) *per_cpu = 0.0;
    vqb_stream *s = vqb_stream_create(threads, bytes, NULL);
    if (s == NULL) return 0.0;
    for (int pass = 0; pass < 5; pass++) vqb_stream_pass(s);
    const double bw = vqb_stream_best(s, per_cpu, NULL);
    vqb_stream_free(s);
    return bw;
}
