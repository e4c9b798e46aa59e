/* turboquant.h — internals shared by the TurboQuant codecs (turboquant.c,
 * turboquant_rvq.c) and by attention code that encodes or decodes rows. */
#ifndef VQ_TURBOQUANT_H
#define VQ_TURBOQUANT_H

#include "core/core.h"
#include "hadamard.h"
#include "turboquant_kernels.h"

/* Quantizes one rotated row y [d] to idx [d] against `cents` (2^bits
 * Lloyd-Max centroids, boundaries q) and returns its scale:
 * ||y|| / sqrt(d), idx = nearest centroid of y / scale; a zero row gets
 * scale 0 and the index nearest 0. norm_correct: the scale becomes
 * ||y||^2 / <c[idx], y> when that dot is positive. */
float vq_turbo_quantize_rotated(const vq_turbo_kernels *k, const float *y, int64_t d, const vq_boundaries *q,
                                const float *cents, bool norm_correct, uint8_t *idx);

/* CPU driver of the element-wise quantizers (x [...] f16/f32, any shape):
 * idx_out [...] u8 = number of q's boundaries below x, mapped through
 * remap[256] when not NULL. Validated arguments only. */
vq_status vq_turbo_quantize_elements(vq_ctx *ctx, const DLTensor *x, const vq_boundaries *q, const uint8_t *remap,
                                     DLTensor *idx_out);

/* The Lloyd-Max boundaries of `bits` (1..8) as a search table. */
void vq_turbo_boundaries(int bits, vq_boundaries *q);

/* Checks a per-row scalar tensor `t` (f32) for rows of x [..., D]: shape
 * x.shape[:-1], or [1] when x is 1-D. */
vq_status vq_check_row_scalars(vq_ctx *ctx, const DLTensor *t, const char *name, const DLTensor *x,
                               const char *x_name);

/* Checks bits in 1..8 ("name must be in 1..8"). */
vq_status vq_check_bits8(vq_ctx *ctx, int bits, const char *name);

/* Checks one stage's codes for rows x [..., D]: idx [..., D] u8 (x's shape)
 * and scale as vq_check_row_scalars. */
vq_status vq_check_turbo_codes(vq_ctx *ctx, const DLTensor *idx, const char *idx_name, const DLTensor *scale,
                               const char *scale_name, const DLTensor *x, const char *x_name);

/* ---- the row driver shared by the Hadamard and RVQ codecs ---- */

/* One quantization stage: its codes, scales and Lloyd-Max table. */
typedef struct vq_turbo_stage {
    uint8_t *idx;       /* [n_rows, d] */
    float *scale;       /* [n_rows] */
    vq_boundaries q;
    const float *cents; /* 2^bits centroids */
    uint8_t mask;       /* 2^bits - 1: indices are masked, never read out of bounds */
} vq_turbo_stage;

void vq_turbo_stage_init(vq_turbo_stage *st, int bits, const DLTensor *idx, const DLTensor *scale);

typedef struct vq_turbo_rows_job {
    const vq_turbo_kernels *k;
    const vq_row_kernels *cv;     /* row conversions */
    vq_rotate_row_fn rotate;
    void *rows;             /* [n_rows, d]: the encoder's input, or the decoder's output */
    vq_dtype rows_dt;       /* f32 or f16 */
    const float *diag;      /* [d] or NULL */
    int64_t n_rows, d, rows_per_task;
    vq_turbo_stage stage[2];
    bool norm_correct;
    float *scratch;         /* [threads, d] */
} vq_turbo_rows_job;

/* Sets kernels, row split and scratch, then runs fn over row blocks. */
vq_status vq_turbo_run_rows(vq_ctx *ctx, vq_turbo_rows_job *j, bool need_scratch, vq_task_fn fn);
/* Row r of the rows as f32 in this thread's buffer. */
float *vq_turbo_load_row(const vq_turbo_rows_job *j, int64_t r, int thread);
/* Where to build output row r: the row itself (f32) or the thread's buffer. */
float *vq_turbo_out_row(const vq_turbo_rows_job *j, int64_t r, int thread);
/* Rotates y (from vq_turbo_out_row) back with rot^-1 and stores row r. */
void vq_turbo_store_row(const vq_turbo_rows_job *j, int64_t r, float *y);

#endif /* VQ_TURBOQUANT_H */
