/* bench_attention.h — pieces shared by the files of `vq bench attention`. */
#ifndef VQ_BENCH_ATTENTION_H
#define VQ_BENCH_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"

/* Monotonic seconds; CPU seconds of the whole process (all threads). */
double vqb_now(void);
double vqb_cpu_now(void);
/* The streaming read bandwidth (bench_membw.c): each thread reads its slice
 * of one buffer as 8 streams of the widest vector loads the CPU has. A pass
 * over a buffer of vqb_stream_bytes() also evicts the caches, so the bench
 * times a cold call after one, as a decode step meets its cache.
 *
 * vqb_stream_bytes: max(1 GiB, 4 x the last-level cache), at most a quarter
 * of physical memory. vqb_stream_create: the passes run on ctx's threads
 * (threads is then the ctx's count), so a timed call after one finds them
 * awake as a decode step does; ctx NULL: on `threads` pthreads of their
 * own. NULL when threads is outside
 * [1, 256], bytes is under one slice unit, or memory is short.
 * vqb_stream_pass: one pass (false: a thread did not start); the best
 * pass's GB/s so far is vqb_stream_best's, wall time, *per_cpu = bytes /
 * (CPU seconds / threads): what the threads reach while they run, when
 * other work shares the cores (per_cpu and passes may be NULL). */
typedef struct vqb_stream vqb_stream;
size_t vqb_stream_bytes(void);
vqb_stream *vqb_stream_create(int threads, size_t bytes, vq_ctx *ctx);
void vqb_stream_free(vqb_stream *s);
bool vqb_stream_pass(vqb_stream *s);
double vqb_stream_best(const vqb_stream *s, double *per_cpu, int64_t *passes);
size_t vqb_stream_size(const vqb_stream *s);   /* bytes one pass reads */
int vqb_stream_load_bits(const vqb_stream *s); /* 128, 256 or 512 */
/* Best of 5 passes over `bytes` with `threads` threads (GB/s, wall; per_cpu
 * as above); 0 (and *per_cpu 0) when the stream cannot be made. */
double vqb_read_bandwidth(int threads, size_t bytes, double *per_cpu);

/* The core clock in GHz with `threads` threads busy at once (each running
 * 512-bit FMA chains: cycles per second of its own CPU time, the mean over
 * the threads); 0 where the probe does not run (not x86-64 AVX-512). */
double vqb_clock_ghz(int threads);

/* An owned CPU tensor of up to 4 dims, 64-byte aligned. */
typedef struct vqb_tensor {
    DLTensor t;
    int64_t shape[4];
} vqb_tensor;

/* Allocates (uninitialised); false on out-of-memory. */
bool vqb_alloc(vqb_tensor *x, DLDataType dt, int ndim, const int64_t *shape);
void vqb_release(vqb_tensor *x);
size_t vqb_bytes(const vqb_tensor *x);
/* Fills with cheap pseudo-random data: floats in (-1, 1), bytes uniform. */
void vqb_fill(vqb_tensor *x, uint64_t seed);

/* Calls fn(arg, i) for i in [0, n) over `threads` pthreads (blocks of i). */
void vqb_parallel(int threads, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg);

/* The options of `vq bench attention --backend cuda` (parsed with the CPU
 * ones in bench_attention.c). */
typedef struct vqb_cuda_args {
    bool b1;         /* batch 1 only, no split sweep */
    bool json;
    int format;      /* 0 all, 1 kivi, 2 rabitq hamming, 3 rabitq exact, 4 the cache's rows
                        (bench_sdpa_mix_cuda.c: mixed-width KIVI keys and their controls) */
    int64_t skv;     /* only this Skv; 0 = all */
    int64_t hkv;     /* only this Hkv; 0 = all */
} vqb_cuda_args;

/* `vq bench attention --backend cuda` (bench_attention_cuda.c): the GPU
 * decode benchmark; an error message when built without CUDA. argc/argv
 * are recorded in the JSON report. */
int vqb_bench_attention_cuda(const vqb_cuda_args *a, int argc, char **argv);

#endif
