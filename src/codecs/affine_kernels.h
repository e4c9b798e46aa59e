/* affine_kernels.h — the hot loops of the KIVI group-affine codec, one table
 * per instruction set (scalar versions in affine_kernels.c, overwritten by
 * src/cpu/avx2/affine_avx2.c and src/cpu/avx512/affine_avx512.c). Every
 * kernel works on one row of d channels in f32; the drivers in affine.c do the
 * dtype conversion, grouping and threading. All ISAs compute bit-identical
 * codes (IEEE division, round-half-to-even) and identical decodes (no FMA). */
#ifndef VQ_AFFINE_KERNELS_H
#define VQ_AFFINE_KERNELS_H

#include "core/core.h"

typedef struct vq_affine_kernels {
    /* x [d] -> mn[c] = min(mn[c], x[c]), mx[c] = max(mx[c], x[c]). */
    void (*minmax_update)(const float *x, int64_t d, float *mn, float *mx);
    /* x, scale, zero [d] -> codes [d] = clamp(round((x - zero) / scale), 0, maxq),
     * 0 where scale == 0 (a flat group) or the quotient is NaN. */
    void (*encode_row)(const float *x, const float *scale, const float *zero, int64_t d, float maxq,
                       uint8_t *codes);
    /* codes, scale, zero [d] -> out [d] = codes * scale + zero. */
    void (*decode_row)(const uint8_t *codes, const float *scale, const float *zero, int64_t d, float *out);
} vq_affine_kernels;

/* The table for `isa` (always valid: scalar entries where the ISA has none). */
const vq_affine_kernels *vq_affine_kernels_for(vq_isa isa);

void vq_affine_kernels_init_avx2(vq_affine_kernels *k);
void vq_affine_kernels_init_avx512(vq_affine_kernels *k);

#endif /* VQ_AFFINE_KERNELS_H */
