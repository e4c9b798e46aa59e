/* turboquant_scalar.c — the readable scalar-quantizer kernels every ISA must
 * match bit for bit (same f32 product x * mul, same comparisons). */
#include "codecs/turboquant_kernels.h"

/* Branchless binary search over the padded boundaries: after step s the
 * answer's bits above s are known. */
void vq_quantize_row_scalar(const float *x, int64_t n, float mul, const vq_boundaries *q, uint8_t *idx)
{
    for (int64_t j = 0; j < n; j++) {
        const float v = x[j] * mul;
        int i = 0;
        for (int step = (1 << q->log2_levels) >> 1; step > 0; step >>= 1) i += v > q->b[i + step - 1] ? step : 0;
        idx[j] = (uint8_t)i;
    }
}

void vq_gather_row_scalar(const uint8_t *idx, int64_t n, const float *cents, uint8_t mask, float scale,
                          bool accumulate, float *out)
{
    for (int64_t j = 0; j < n; j++) {
        const float c = scale * cents[idx[j] & mask];
        out[j] = accumulate ? out[j] + c : c;
    }
}

double vq_sumsq_scalar(const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t j = 0; j < n; j++) s += (double)x[j] * x[j];
    return s;
}
