/* hadamard_scalar.c — the readable rotation kernel every ISA must match. */
#include "codecs/hadamard.h"

/* row [d] in place. Butterfly stages h = 1, 2, 4, ... (they commute, so any
 * order gives H_d); the 1/sqrt(d) factor (and diag, for the inverse) is
 * applied after the last stage. */
void vq_rotate_row_scalar(float *row, int64_t d, const float *diag, bool inverse)
{
    if (!inverse && diag != NULL)
        for (int64_t j = 0; j < d; j++) row[j] *= diag[j];
    for (int64_t h = 1; h < d; h <<= 1) {
        for (int64_t i = 0; i < d; i += 2 * h) {
            for (int64_t j = i; j < i + h; j++) {
                const float a = row[j], b = row[j + h];
                row[j] = a + b;
                row[j + h] = a - b;
            }
        }
    }
    const float s = vq_hadamard_norm(d);
    if (inverse && diag != NULL)
        for (int64_t j = 0; j < d; j++) row[j] *= s * diag[j];
    else
        for (int64_t j = 0; j < d; j++) row[j] *= s;
}
