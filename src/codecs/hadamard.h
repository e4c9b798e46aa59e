/* hadamard.h — the randomized Walsh-Hadamard rotation on f32 rows, for every
 * codec that rotates before quantizing (TurboQuant, RaBitQ, attention).
 *
 * rot(x)    = H_D (diag ⊙ x) / sqrt(D)
 * rot^-1(y) = diag ⊙ (H_D y) / sqrt(D)
 * with H_D the Sylvester Hadamard matrix, D a power of two, diag ±1 (NULL =
 * ones). O(D log D) per row through the ISA kernel table. */
#ifndef VQ_HADAMARD_H
#define VQ_HADAMARD_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "row_tasks.h"

/* rows [n_rows, d] f32, rotated in place (rot, or rot^-1 when inverse).
 * d a power of two (any size; asserted), diag [d] or NULL. Single-threaded
 * and allocation-free, so callers parallelise over rows themselves. Uses
 * ctx->isa only. */
void vq_rotate_rows(const vq_ctx *ctx, float *rows, int64_t n_rows, int64_t d, const float *diag, bool inverse);

/* Largest D the rotating codecs accept (one row per CUDA block). */
#define VQ_HADAMARD_MAX_D 1024

/* Validates the rotation arguments shared by every rotating codec: the last
 * dimension D of x (already checked by vq_check_tensor) is a power of two
 * (else VQ_ERR_INVALID_ARGUMENT) and <= VQ_HADAMARD_MAX_D (else
 * VQ_ERR_UNSUPPORTED); diag, when not NULL, is [D] f32. Sets *d_out = D. */
vq_status vq_check_rotation(vq_ctx *ctx, const DLTensor *x, const char *x_name, const DLTensor *diag,
                            int64_t *d_out);

/* ---- kernel table ---- */

/* One row [d] in place: rot (inverse false) or rot^-1 (inverse true). */
typedef void (*vq_rotate_row_fn)(float *row, int64_t d, const float *diag, bool inverse);

typedef struct vq_hadamard_kernels {
    vq_rotate_row_fn rotate_row;
} vq_hadamard_kernels;

/* The table for `isa` (always complete: scalar entries where no better one). */
const vq_hadamard_kernels *vq_hadamard_kernels_for(vq_isa isa);

/* Per-ISA entries, in src/cpu/<isa>/hadamard_<isa>.c. */
void vq_rotate_row_scalar(float *row, int64_t d, const float *diag, bool inverse);
#ifdef VQ_HAVE_AVX2
void vq_rotate_row_avx2(float *row, int64_t d, const float *diag, bool inverse);
#endif
#ifdef VQ_HAVE_AVX512
void vq_rotate_row_avx512(float *row, int64_t d, const float *diag, bool inverse);
#endif
#ifdef VQ_HAVE_NEON
void vq_rotate_row_neon(float *row, int64_t d, const float *diag, bool inverse);
#endif

/* 1/sqrt(d), rounded once from float64 so every ISA applies the same factor. */
static inline float vq_hadamard_norm(int64_t d)
{
    return (float)(1.0 / sqrt((double)d));
}

#endif /* VQ_HADAMARD_H */
