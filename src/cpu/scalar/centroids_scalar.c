/* centroids_scalar.c — portable vector-quantization kernels (see codecs/centroids.h):
 * the reference every ISA version must agree with. Centroids are visited in
 * blocks of 8 columns of the transposed codebook so the compiler can keep the
 * block in registers; ties keep the lower index because only a strictly
 * smaller distance replaces the best. */
#include <math.h>

#include "codecs/centroids.h"

enum { BLOCK = 8 };

/* x [n], cbt [n, ld] -> argmin_c ||x - cbt[:, c]||^2 over c < C. */
static int32_t nearest_scalar(const float *x, const float *cbt, int32_t C, int64_t ld, int32_t n)
{
    float best = INFINITY;
    int32_t best_c = 0;
    for (int32_t c0 = 0; c0 < C; c0 += BLOCK) {
        float acc[BLOCK] = {0};
        for (int32_t j = 0; j < n; j++) {
            const float *row = cbt + j * ld + c0;
            for (int l = 0; l < BLOCK; l++) {
                const float d = x[j] - row[l];
                acc[l] += d * d;
            }
        }
        for (int l = 0; l < BLOCK && c0 + l < C; l++)
            if (acc[l] < best) { best = acc[l]; best_c = c0 + l; }
    }
    return best_c;
}

/* x [n], cbt [n, ld] -> out[c] = x . cbt[:, c] for c < C. */
static void dots_scalar(const float *x, const float *cbt, int32_t C, int64_t ld, int32_t n, float *out)
{
    for (int32_t c0 = 0; c0 < C; c0 += BLOCK) {
        float acc[BLOCK] = {0};
        for (int32_t j = 0; j < n; j++) {
            const float *row = cbt + j * ld + c0;
            for (int l = 0; l < BLOCK; l++) acc[l] += x[j] * row[l];
        }
        for (int l = 0; l < BLOCK && c0 + l < C; l++) out[c0 + l] = acc[l];
    }
}

/* codes [R] -> out [D]: the format's own decoder is the scalar kernel. */
static void commvq_decode_scalar(const vq_commvq_layout *L, const void *codes, const float *codebook, float scale,
                                 const float *cos_row, const float *sin_row, float *out)
{
    vq_commvq_decode_token(L, codes, codebook, scale, cos_row, sin_row, out);
}

void vq_centroids_kernels_init_scalar(vq_centroids_kernels *k)
{
    k->nearest = nearest_scalar;
    k->dots = dots_scalar;
    k->commvq_decode = commvq_decode_scalar;
}
