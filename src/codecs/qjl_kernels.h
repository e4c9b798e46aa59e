/* qjl_kernels.h — the hot loops of the QJL sign-sketch codec, one table per
 * instruction set (scalar versions in qjl_kernels.c, overwritten by
 * src/cpu/avx2/qjl_avx2.c and src/cpu/avx512/qjl_avx512.c). Sign streams use
 * the library's u32 bit order: element j is bit j % 32 of word j / 32. */
#ifndef VQ_QJL_KERNELS_H
#define VQ_QJL_KERNELS_H

#include "core/core.h"

/* Column granule of the projection kernels: the sketch width is padded to it. */
#define VQ_QJL_COLS 16

typedef struct vq_qjl_kernels {
    /* S [m, d], x [n, d] -> out [n, m] = x S^T (out[r, j] = S_j . x_r): one
     * dot product per output, for a few rows (queries). f32 accumulation;
     * ISAs differ in summation order and FMA use. */
    void (*project)(const float *S, int64_t m, int64_t d, const float *x, int64_t n, float *out);
    /* The same product for many rows (keys), as a register-tiled GEMM:
     * St [d, m_pad] (S transposed, zero columns past m, m_pad % VQ_QJL_COLS
     * == 0), out [n, m_pad]. */
    void (*project_t)(const float *St, int64_t m_pad, int64_t d, const float *x, int64_t n, float *out);
    /* p [m] -> words [ceil(m/32)]: bit j = (p_j >= 0); unused high bits 0. */
    void (*signs_to_bits)(const float *p, int64_t m, uint32_t *words);
    /* v [m], words [ceil(m/32)] -> sum_j v_j * (bit j ? +1 : -1). */
    float (*signed_sum)(const float *v, const uint32_t *words, int64_t m);
} vq_qjl_kernels;

/* The table for `isa` (always valid: scalar entries where the ISA has none). */
const vq_qjl_kernels *vq_qjl_kernels_for(vq_isa isa);

void vq_qjl_kernels_init_avx2(vq_qjl_kernels *k);
void vq_qjl_kernels_init_avx512(vq_qjl_kernels *k);

#endif /* VQ_QJL_KERNELS_H */
