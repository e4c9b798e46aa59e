/* rabitq_kernels.h — the hot loops of the RaBitQ codec, one table per
 * instruction set (scalar versions in rabitq_kernels.c, overwritten by
 * src/cpu/avx2/rabitq_avx2.c and src/cpu/avx512/rabitq_avx512.c). Sign bits
 * use the u8 stream order of format_rabitq.h. */
#ifndef VQ_RABITQ_KERNELS_H
#define VQ_RABITQ_KERNELS_H

#include "core/core.h"

typedef struct vq_rabitq_kernels {
    /* y [d] (d % 8 == 0) -> bits [d/8] (bit j = y_j >= 0), *l1 = sum |y_j|,
     * *l2 = sum y_j^2, both accumulated in float64 so every ISA agrees to
     * rounding. */
    void (*sign_norms)(const float *y, int64_t d, uint8_t *bits, double *l1, double *l2);
    /* popcount(a XOR b) over n bytes. */
    int64_t (*hamming)(const uint8_t *a, const uint8_t *b, int64_t n);
} vq_rabitq_kernels;

/* The table for `isa` (always valid: scalar entries where the ISA has none). */
const vq_rabitq_kernels *vq_rabitq_kernels_for(vq_isa isa);

void vq_rabitq_kernels_init_avx2(vq_rabitq_kernels *k);
void vq_rabitq_kernels_init_avx512(vq_rabitq_kernels *k);

#endif /* VQ_RABITQ_KERNELS_H */
