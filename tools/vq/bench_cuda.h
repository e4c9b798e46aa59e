/* bench_cuda.h — what the CUDA benchmarks of `vq bench attention --backend
 * cuda` share (bench_attention_cuda.c, bench_sdpa_cuda.c, bench_sdpa_mix_cuda.c): device tensors of
 * pseudo-random data, the copy-bandwidth ceiling, a median helper. Built only
 * with VQ_TOOL_CUDA. */
#ifndef VQ_TOOL_BENCH_CUDA_H
#define VQ_TOOL_BENCH_CUDA_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "report.h"
#include "veloxquant.h"

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_));    \
            exit(VQ_EXIT_FAILURE);                                                               \
        }                                                                                        \
    } while (0)

/* A device tensor of up to 4 dims (trailing 0 dims dropped). */
typedef struct dten {
    DLTensor t;
    int64_t shape[4];
} dten;

static const DLDataType F32 = {kDLFloat, 32, 1}, F16 = {kDLFloat, 16, 1}, U8 = {kDLUInt, 8, 1};
static const DLDataType U32 = {kDLUInt, 32, 1}, I32 = {kDLInt, 32, 1};

/* qsort comparator of floats. */
int vqb_cu_cmp_f(const void *a, const void *b);
/* Fills device memory with pseudo-random data (never zeros). kind 0: random
 * bytes; 1: f16 in [0.05, 0.3); 2: f32 in about (-1.7, 1.7); 3: f32 in
 * [0.5, 1). Past 64 MB the first 64 MB repeat. */
void vqb_cu_fill_random(void *d, size_t bytes, int kind);
/* Allocates x [a,b,c,d] of dt on the device and fills it (kind as above). */
DLTensor *vqb_cu_dnew(dten *x, DLDataType dt, int64_t a, int64_t b, int64_t c, int64_t d, int kind);
size_t vqb_cu_dbytes(const DLTensor *t);
/* Device-to-device copy bandwidth (bytes read + written per second). */
double vqb_cu_copy_bw(void);
/* The fields every decode row of the JSON report has: the shape, the bytes
 * read, the median seconds, the bandwidth and its fraction of copy's (bw). */
void vqb_cu_report_shape(vqr *rep, int B, int Hq, int Hkv, int Skv, int D, double bytes, double sec, double bw);
/* vq_fused_sdpa over every key format (f16 values) and the f16 control at the
 * decode shapes of the table, filtered like it (0: all); --json rows to rep
 * when it is not NULL. */
void vqb_bench_sdpa_cuda(vq_ctx *ctx, double bw, int quick, int only_skv, int only_hkv, vqr *rep);
/* The key formats only the KV cache holds (mixed-width KIVI keys) and their
 * controls, through a CUDA cache's decode attend at the same shapes and
 * filters (bench_sdpa_mix_cuda.c). */
void vqb_bench_sdpa_mix_cuda(vq_ctx *ctx, double bw, int quick, int only_skv, int only_hkv, vqr *rep);

#endif
