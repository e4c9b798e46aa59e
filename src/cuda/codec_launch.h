/* codec_launch.h — the CUDA codec launchers (src/cuda/codec_*.cu) as seen
 * from the host glue (cuda_codecs.c). Read by the C compiler and by nvcc.
 *
 * Every launcher takes tensors the public entry point has already validated
 * (shapes, dtypes, device), enqueues its kernels on `stream` and returns the
 * cudaError_t of the launch as an int (0 = cudaSuccess). None synchronises.
 * Data-dependent checks the CPU path makes by reading inputs (an index >= C,
 * a position >= P) cannot read device memory from the host: the kernels clamp
 * instead, as the decoders of src/formats/ do. */
#ifndef VQ_CUDA_CODEC_LAUNCH_H
#define VQ_CUDA_CODEC_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A scalar quantizer of at most 256 levels, passed to kernels by value:
 * boundaries b padded with +inf to 2^log2_levels - 1 entries (the nearest
 * level of v is the number of b[k] < v, ties going lower), the levels c, and
 * the mask applied to codes before they index c. */
typedef struct vq_cu_levels {
    float b[256];
    float c[256];
    int32_t log2_levels;
    uint32_t mask;
} vq_cu_levels;

/* bitpack */
int vq_cu_bit_pack(const DLTensor *idx, int bits, DLTensor *out, void *stream);
int vq_cu_bit_unpack(const DLTensor *packed, int bits, int64_t n, DLTensor *out, void *stream);

/* Hadamard and the TurboQuant codecs; d = last dimension, rows = numel / d. */
int vq_cu_hadamard(const DLTensor *x, const DLTensor *diag, bool inverse, DLTensor *out, void *stream);
/* x [...] -> idx [...]: the level of each element (scalar codec). */
int vq_cu_levels_quantize(const DLTensor *x, const vq_cu_levels *q, DLTensor *idx, void *stream);
/* idx [...] -> out [...] = c[idx & mask] * scale. */
int vq_cu_levels_dequantize(const DLTensor *idx, const vq_cu_levels *q, float scale, DLTensor *out, void *stream);
/* x [..., D] -> rot -> stage 1 (idx1, scale1) and, when q2 is not NULL, the
 * residual's stage 2 (idx2, scale2). norm_correct applies to one stage only. */
int vq_cu_turbo_encode(const DLTensor *x, const DLTensor *diag, const vq_cu_levels *q1, bool norm_correct,
                       DLTensor *idx1, DLTensor *scale1, const vq_cu_levels *q2, DLTensor *idx2, DLTensor *scale2,
                       void *stream);
/* (idx1, scale1) (+ (idx2, scale2) when q2 is not NULL) -> rot^-1 -> out. */
int vq_cu_turbo_decode(const DLTensor *idx1, const DLTensor *scale1, const vq_cu_levels *q1, const DLTensor *idx2,
                       const DLTensor *scale2, const vq_cu_levels *q2, const DLTensor *diag, DLTensor *out,
                       void *stream);

/* Scalar codebook encoder: cents [n] on the device, tables built per block. */
int vq_cu_codebook_quantize(const DLTensor *x, const DLTensor *cents, DLTensor *idx, void *stream);

/* KIVI affine; keys: groups of g tokens per channel, else g channels per token. */
int vq_cu_kivi_quantize(bool keys, const DLTensor *x, int bits, int g, DLTensor *codes, DLTensor *scale,
                          DLTensor *zero, void *stream);
int vq_cu_kivi_dequantize(bool keys, const DLTensor *codes, const DLTensor *scale, const DLTensor *zero, int bits,
                            int g, DLTensor *out, void *stream);

/* RaBitQ; unbiased selects VQ_RABITQ_MAG_UNBIASED. */
int vq_cu_rabitq_encode(const DLTensor *keys, const DLTensor *diag, bool unbiased, DLTensor *k_bits,
                        DLTensor *k_mag, void *stream);
int vq_cu_rabitq_hamming_score(const DLTensor *qbits, const DLTensor *bits, const DLTensor *cx,
                               const DLTensor *scale, DLTensor *out, void *stream);
int vq_cu_rabitq_pack_values(const DLTensor *v_idx, DLTensor *out, void *stream);

/* QJL. qjl_score needs (m + D) floats of shared memory per block. */
int vq_cu_qjl_encode(const DLTensor *keys, const DLTensor *projection, DLTensor *bits, void *stream);
int vq_cu_qjl_inner_product(const DLTensor *query_bits, const DLTensor *key_bits, int sketch_dim,
                            const DLTensor *query_norm, const DLTensor *key_norm, DLTensor *out, void *stream);
int vq_cu_qjl_score(const DLTensor *query, const DLTensor *projection, const DLTensor *key_bits,
                    const DLTensor *key_norm, DLTensor *out, void *stream);
#define VQ_CU_QJL_SCORE_MAX_FLOATS 12288

/* VecInfer product VQ; keys_out may be NULL in encode. The encoder keeps a
 * subspace slice of D/M floats per warp in shared memory: D/M at most
 * VQ_CU_NEAREST_MAX_DIM. */
#define VQ_CU_NEAREST_MAX_DIM 8192
int vq_cu_vecinfer_encode(const DLTensor *keys, const DLTensor *codebook, const DLTensor *smooth, DLTensor *idx,
                          DLTensor *keys_out, void *stream);
int vq_cu_vecinfer_dequant(const DLTensor *idx, const DLTensor *codebook, const DLTensor *smooth,
                           DLTensor *keys_out, void *stream);
int vq_cu_vecinfer_query_lut(const DLTensor *queries, const DLTensor *codebook, const DLTensor *smooth,
                             DLTensor *lut, void *stream);

/* CommVQ; rope is a vq_rope_layout, scale may be NULL. */
int vq_cu_commvq_decode(const DLTensor *indices, const DLTensor *codebook, const DLTensor *cos_freqs,
                         const DLTensor *sin_freqs, const DLTensor *positions, const DLTensor *scale, int rope,
                         DLTensor *out, void *stream);
/* Greedy residual encoder: one warp per token with its residual [D] in shared
 * memory, D at most VQ_CU_NEAREST_MAX_DIM. */
int vq_cu_commvq_encode(const DLTensor *keys, const DLTensor *codebook, DLTensor *indices, void *stream);

/* The cache encoders' per-token quantity (codec_rows.cu): s[r] = RMS of
 * row r of x [rows, d] f16 and, when xn is not NULL, xn = x / s (0 where s
 * is 0). */
int vq_cu_row_rms(const uint16_t *x, int64_t rows, int d, float *s, float *xn, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* VQ_CUDA_CODEC_LAUNCH_H */
