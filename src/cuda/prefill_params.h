/* prefill_params.h — launch parameters of the CUDA RaBitQ prefill kernel
 * (vq_rabitq_prefill_attend), read by the C host glue and by nvcc. Device
 * pointers already offset (byte_offset applied); shapes as ints. */
#ifndef VQ_CUDA_PREFILL_PARAMS_H
#define VQ_CUDA_PREFILL_PARAMS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Query row r of kv head hkv (0 <= r < rows = G * Sq) is query head
 * hkv * G + r / Sq at position r % Sq, G = Hq / Hkv: a CTA takes 256 (128)
 * consecutive rows of one kv head, so with GQA it may span query heads and
 * every decoded K/V tile serves all of them. */
typedef struct vq_cu_prefill_params {
    int B, Hq, Hkv, Sq, Skv, D;
    int G;                     /* Hq / Hkv */
    int rows;                  /* G * Sq */
    const void *q;             /* [B,Hq,Sq,D] f16 or f32 */
    int q_f16;
    const float *scale;        /* [1], device memory: read by the kernel */
    const uint8_t *k_bits;     /* [B,Hkv,Skv,D/8] */
    const float *k_mag;        /* [B,Hkv,Skv] */
    const float *k_const;      /* [B,Hkv,Skv] or NULL */
    const uint8_t *v_idx;      /* [B,Hkv,Skv,D/2] nibble-packed */
    const float *v_cents;      /* [n_cents], 1..16 */
    int n_cents;
    const float *v_scale;      /* [B,Hkv,Skv] or NULL */
    void *out;                 /* [B,Hq,Sq,D] f16 or f32 */
    int out_f16;
} vq_cu_prefill_params;

/* Largest head dimension the kernel takes (D is padded to 64, 128 or 256). */
#define VQ_CU_PREFILL_MAX_D 256
/* Most query rows per CTA (256 for D <= 128, 128 for larger D). */
#define VQ_CU_PREFILL_ROWS 256

/* Enqueues the kernel on `stream`; returns a cudaError_t as int. */
int vq_cu_launch_rabitq_prefill(const vq_cu_prefill_params *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif
