/* turboquant_kernels.h — the scalar-quantizer hot loops shared by the
 * TurboQuant codecs (scalar, Hadamard, RVQ) and the codebook value encoder:
 * nearest centroid through sorted boundaries, centroid gather, sum of squares.
 * One table per ISA, always complete (scalar entries where no better one). */
#ifndef VQ_TURBOQUANT_KERNELS_H
#define VQ_TURBOQUANT_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* Decision boundaries of a scalar quantizer with n + 1 <= 256 ascending
 * centroids, padded with +inf to 2^log2_levels - 1 entries so a branchless
 * binary search of log2_levels steps needs no bounds checks. The nearest
 * centroid of v (ties to the lower index) is the number of b[k] < v. */
typedef struct vq_boundaries {
    float b[256];
    int n;            /* real boundaries: centroids - 1 */
    int log2_levels;  /* smallest L with 2^L >= n + 1 */
    /* Two-level search for W-lane SIMD (W = 8, 16), when 2^L >= 2W: the
     * levels form W groups of G = 2^L / W; the W - 1 boundaries b[(k+1)G - 1]
     * closing each group pick the group g by counting, then the G - 1
     * boundaries inside g, fine_W[t * W + g] = b[g G + t], are fetched for
     * each lane by a register permute and counted. No memory gathers. */
    float fine8[256];
    float fine16[256];
} vq_boundaries;

/* From n ascending boundaries (n in 0..255). */
void vq_boundaries_init(vq_boundaries *q, const float *bounds, int n);

/* idx[j] = #{k : x[j] * mul > b[k]} for j < n; NaN gives 0. */
typedef void (*vq_quantize_row_fn)(const float *x, int64_t n, float mul, const vq_boundaries *q, uint8_t *idx);
/* out[j] = scale * cents[idx[j] & mask] (+ out[j] when accumulate). */
typedef void (*vq_gather_row_fn)(const uint8_t *idx, int64_t n, const float *cents, uint8_t mask, float scale,
                                 bool accumulate, float *out);
/* sum of x[j]^2 over j < n, accumulated in float64. */
typedef double (*vq_sumsq_fn)(const float *x, int64_t n);

typedef struct vq_turbo_kernels {
    vq_quantize_row_fn quantize_row;
    vq_gather_row_fn gather_row;
    vq_sumsq_fn sumsq;
} vq_turbo_kernels;

const vq_turbo_kernels *vq_turbo_kernels_for(vq_isa isa);

/* Per-ISA entries, in src/cpu/<isa>/turboquant_<isa>.c. */
void vq_quantize_row_scalar(const float *x, int64_t n, float mul, const vq_boundaries *q, uint8_t *idx);
void vq_gather_row_scalar(const uint8_t *idx, int64_t n, const float *cents, uint8_t mask, float scale,
                          bool accumulate, float *out);
double vq_sumsq_scalar(const float *x, int64_t n);
#ifdef VQ_HAVE_AVX2
void vq_turbo_kernels_init_avx2(vq_turbo_kernels *k);
#endif
#ifdef VQ_HAVE_AVX512
void vq_turbo_kernels_init_avx512(vq_turbo_kernels *k);
#endif
#ifdef VQ_HAVE_NEON
void vq_turbo_kernels_init_neon(vq_turbo_kernels *k);
#endif

#endif /* VQ_TURBOQUANT_KERNELS_H */
