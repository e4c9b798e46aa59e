/* kivi_kernels.h — the hot loops of the KIVI group-affine codec, one table
 * per instruction set (scalar versions in kivi_kernels.c, overwritten by
 * src/cpu/avx2/kivi_avx2.c and src/cpu/avx512/kivi_avx512.c). Every
 * kernel works on one row of d channels in f32; the drivers in affine.c do the
 * dtype conversion, grouping and threading. All ISAs compute bit-identical
 * codes (IEEE division, round-half-to-even) and identical decodes (no FMA). */
#ifndef VQ_KIVI_KERNELS_H
#define VQ_KIVI_KERNELS_H

#include "core/core.h"

typedef struct vq_kivi_kernels {
    /* x [d] -> mn[c] = min(mn[c], x[c]), mx[c] = max(mx[c], x[c]). */
    void (*minmax_update)(const float *x, int64_t d, float *mn, float *mx);
    /* x, scale, zero [d] -> codes [d] = clamp(round((x - zero) / scale), 0, maxq),
     * 0 where scale == 0 (a flat group) or the quotient is NaN. */
    void (*encode_row)(const float *x, const float *scale, const float *zero, int64_t d, float maxq,
                       uint8_t *codes);
    /* codes, scale, zero [d] -> out [d] = codes * scale + zero. */
    void (*decode_row)(const uint8_t *codes, const float *scale, const float *zero, int64_t d, float *out);
} vq_kivi_kernels;

/* The table for `isa` (always valid: scalar entries where the ISA has none). */
const vq_kivi_kernels *vq_kivi_kernels_for(vq_isa isa);

void vq_kivi_kernels_init_avx2(vq_kivi_kernels *k);
void vq_kivi_kernels_init_avx512(vq_kivi_kernels *k);

#endif /* VQ_KIVI_KERNELS_H */
