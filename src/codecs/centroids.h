/* centroids.h — vector-quantization kernels shared by VecInfer (product VQ), CommVQ
 * (additive VQ) and k-means: nearest-centroid search, query-centroid dot
 * products (look-up tables) and the CommVQ gather + RoPE row decoder.
 *
 * Centroid searches run over a transposed codebook: a group of C centroids of
 * n channels, [C, n], is stored as cbt [n, ld] with centroid c in column c and
 * zero columns up to ld (C rounded up to VQ_CENTROIDS_PAD). A SIMD lane then holds
 * one centroid, so every n (2 or 256) vectorizes the same way. */
#ifndef VQ_CENTROIDS_H
#define VQ_CENTROIDS_H

#include "core/core.h"
#include "formats/format_commvq.h"

/* Column padding of a transposed codebook: a multiple of every kernel's block
 * (4 x 8 lanes for AVX2, 2 x 16 for AVX-512). */
#define VQ_CENTROIDS_PAD 32

typedef struct vq_centroids_kernels {
    /* x [n], cbt [n, ld] (C <= ld columns used): the c < C minimising
     * ||x - cbt[:, c]||^2; ties go to the lower index. */
    int32_t (*nearest)(const float *x, const float *cbt, int32_t C, int64_t ld, int32_t n);
    /* x [n], cbt [n, ld]: out[c] = x . cbt[:, c] for c < C (out [C]). */
    void (*dots)(const float *x, const float *cbt, int32_t C, int64_t ld, int32_t n, float *out);
    /* One CommVQ token (see format_commvq.h): codes [R] -> out [D] =
     * RoPE(scale * sum_r codebook[r, codes[r]]) with this position's rows. */
    void (*commvq_decode)(const vq_commvq_layout *L, const void *codes, const float *codebook, float scale,
                          const float *cos_row, const float *sin_row, float *out);
} vq_centroids_kernels;

/* The table for an ISA: always complete (scalar where nothing better). */
const vq_centroids_kernels *vq_centroids_kernels_for(vq_isa isa);

void vq_centroids_kernels_init_scalar(vq_centroids_kernels *k);
#ifdef VQ_HAVE_AVX2
void vq_centroids_kernels_init_avx2(vq_centroids_kernels *k);
#endif
#ifdef VQ_HAVE_AVX512
void vq_centroids_kernels_init_avx512(vq_centroids_kernels *k);
#endif

/* Position of the first code outside [0, C) in codes [n] (u8/u16/i32), or
 * -1. A branch-free screen first, so the common all-valid case streams. */
int64_t vq_centroids_find_bad_code(const void *codes, vq_dtype dt, int64_t n, int64_t C);

/* Leading dimension of a transposed group of C centroids. */
static inline int64_t vq_centroids_ld(int64_t C) { return vq_ceil_div(C, VQ_CENTROIDS_PAD) * VQ_CENTROIDS_PAD; }

/* cb [G, C, n] -> cbt [G, n, ld] with ld = vq_centroids_ld(C), padding zeroed;
 * groups in parallel. Must not run inside a vq_parallel_for task. */
void vq_centroids_transpose(vq_ctx *ctx, const float *cb, int64_t G, int64_t C, int64_t n, float *cbt);

/* Scratch of one call, from vq_ctx_scratch: a transposed codebook of
 * cbt_floats and one row of row_floats per thread. */
typedef struct vq_centroids_work {
    float *cbt;
    float *rows;
    int64_t row_stride;
} vq_centroids_work;

/* VQ_ERR_OUT_OF_MEMORY (with a message) when the scratch cannot grow. */
vq_status vq_centroids_work_alloc(vq_ctx *ctx, int64_t cbt_floats, int64_t row_floats, vq_centroids_work *w);
static inline float *vq_centroids_row(const vq_centroids_work *w, int thread) { return w->rows + thread * w->row_stride; }

/* Splits `rows` independent rows of about `row_cost` flops each into tasks
 * of *chunk rows for vq_parallel_for: a few tasks per thread, so uneven
 * tasks balance, but none so small that waking a thread costs more than the
 * task (a single-token call runs inline). Returns the number of tasks. */
int64_t vq_centroids_tasks(const vq_ctx *ctx, int64_t rows, int64_t row_cost, int64_t *chunk);
/* One past the last row of task `task` (its first row is task * chunk). */
static inline int64_t vq_centroids_task_end(int64_t task, int64_t chunk, int64_t rows)
{
    return (task + 1) * chunk < rows ? (task + 1) * chunk : rows;
}

#endif /* VQ_CENTROIDS_H */
