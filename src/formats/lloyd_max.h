/* lloyd_max.h — the Lloyd-Max (MSE-optimal) scalar quantizers of N(0,1),
 * shared by every codec that quantizes rotated, normalised coordinates. */
#ifndef VQ_LLOYD_MAX_H
#define VQ_LLOYD_MAX_H

/* Tables for bits = 1..8 (NULL outside): 2^bits centroids ascending, and the
 * 2^bits - 1 boundaries (midpoints of adjacent centroids). Computed once, on
 * first use, by Newton-accelerated Lloyd iteration in float64 to ~1e-13;
 * thread-safe; valid for the life of the process. The f32 tables are the f64
 * tables rounded to nearest. */
const float *vq_lloyd_max_centroids(int bits);
const float *vq_lloyd_max_boundaries(int bits);
const double *vq_lloyd_max_centroids_f64(int bits);
const double *vq_lloyd_max_boundaries_f64(int bits);

#endif /* VQ_LLOYD_MAX_H */
