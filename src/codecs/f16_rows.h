/* f16_rows.h — f16 <-> f32 row conversion for the codecs' CPU drivers, one
 * table per instruction set (F16C on AVX2, AVX-512F), because converting
 * f16 inputs one element at a time costs more than the codecs themselves.
 * Every entry rounds to nearest even exactly as vq_f32_to_f16 does. */
#ifndef VQ_F16_ROWS_H
#define VQ_F16_ROWS_H

#include <string.h>

#include "core/core.h"

typedef struct vq_f16_kernels {
    void (*to_f32)(const uint16_t *src, int64_t n, float *dst);    /* src [n] f16 -> dst [n] */
    void (*from_f32)(const float *src, int64_t n, uint16_t *dst);  /* src [n] -> dst [n] f16 */
} vq_f16_kernels;

/* The table for `isa` (always valid). */
const vq_f16_kernels *vq_f16_kernels_for(vq_isa isa);

void vq_f16_kernels_init_avx2(vq_f16_kernels *k);
void vq_f16_kernels_init_avx512(vq_f16_kernels *k);

/* src [n] of dtype dt (f32/f16/bf16) -> dst [n] f32. */
static inline void vq_rows_to_f32(const vq_f16_kernels *k, const void *src, vq_dtype dt, int64_t n, float *dst)
{
    if (dt == VQ_DT_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else if (dt == VQ_DT_F16) k->to_f32((const uint16_t *)src, n, dst);
    else vq_row_to_f32(src, dt, n, dst);
}

/* src [n] f32 -> dst [n] of dtype dt (f32/f16/bf16). */
static inline void vq_rows_from_f32(const vq_f16_kernels *k, const float *src, int64_t n, vq_dtype dt, void *dst)
{
    if (dt == VQ_DT_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else if (dt == VQ_DT_F16) k->from_f32(src, n, (uint16_t *)dst);
    else vq_row_from_f32(src, n, dt, dst);
}

#endif /* VQ_F16_ROWS_H */
