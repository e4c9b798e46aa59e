/* kmeans.h — k-means on host arrays, shared by vq_kmeans and the CommVQ
 * trainer. */
#ifndef VQ_KMEANS_H
#define VQ_KMEANS_H

#include "core/core.h"

/* Bytes of ctx scratch vq_kmeans_run needs for N samples of d channels and C
 * centroids (reserve it first to fail before writing anything). */
size_t vq_kmeans_scratch_bytes(int64_t N, int64_t d, int64_t C);

/* x [N, d] -> cents [C, d] (1 <= C <= N): k-means++ seeding from the library
 * PRNG seeded with `seed`, then up to `iters` Lloyd rounds (stopping early
 * once no assignment changes). An empty cluster keeps its centroid. The same
 * seed on the same ISA gives the same centroids whatever the thread count.
 * Uses the ctx scratch and thread pool; VQ_ERR_OUT_OF_MEMORY before writing
 * cents if the scratch cannot grow. */
vq_status vq_kmeans_run(vq_ctx *ctx, const float *x, int64_t N, int64_t d, int64_t C, int iters, uint64_t seed,
                        float *cents);

#endif /* VQ_KMEANS_H */
