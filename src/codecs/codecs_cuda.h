/* codecs_cuda.h — the codecs on a CUDA context: implemented by the CUDA
 * backend (src/cuda/cuda_codecs.c), declared here by the module they serve, so
 * that codecs include nothing of src/cuda. Each vq_cuda_<name> takes
 * exactly the arguments of the public vq_<name> and is called by it once
 * every argument has been validated (docs/INTERNALS.md); it enqueues the
 * kernels of src/cuda/codec_*.cu on the ctx's stream and returns without
 * synchronising. A launch failure becomes VQ_ERR_DEVICE (or
 * VQ_ERR_OUT_OF_MEMORY) with the CUDA error's name in the ctx message.
 *
 * What differs from the CPU path, because the host cannot read device memory:
 * data-dependent checks are not made. Indices >= C and positions outside
 * [0, P) are clamped (vq_vecinfer_dequant, vq_commvq_decode), and cents that
 * are not finite or not ascending are not detected (vq_codebook_quantize). */
#ifndef VQ_CODECS_CUDA_H
#define VQ_CODECS_CUDA_H

#include "core/core.h"

vq_status vq_cuda_bit_pack(vq_ctx *ctx, const DLTensor *idx, int bits, DLTensor *out);
vq_status vq_cuda_bit_unpack(vq_ctx *ctx, const DLTensor *packed, int bits, int64_t original_length, DLTensor *out);
vq_status vq_cuda_hadamard(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, bool inverse, DLTensor *out);

vq_status vq_cuda_turboquant_scalar_quantize(vq_ctx *ctx, const DLTensor *x, int bits, DLTensor *idx_out);
vq_status vq_cuda_turboquant_scalar_dequantize(vq_ctx *ctx, const DLTensor *idx, int bits, float scale,
                                               DLTensor *out);
vq_status vq_cuda_turboquant_hadamard_quantize(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, int bits,
                                               DLTensor *idx_out, DLTensor *scale_out, const vq_turboquant_opts *opts);
vq_status vq_cuda_turboquant_hadamard_dequantize(vq_ctx *ctx, const DLTensor *idx, const DLTensor *scale,
                                                 const DLTensor *diag, int bits, DLTensor *out);
vq_status vq_cuda_turboquant_rvq_encode(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, int b1, int b2,
                                        DLTensor *idx1_out, DLTensor *scale1_out, DLTensor *idx2_out,
                                        DLTensor *scale2_out);
vq_status vq_cuda_turboquant_rvq_decode(vq_ctx *ctx, const DLTensor *idx1, const DLTensor *scale1,
                                        const DLTensor *idx2, const DLTensor *scale2, const DLTensor *diag, int b1,
                                        int b2, DLTensor *out);

vq_status vq_cuda_kivi_quantize_keys(vq_ctx *ctx, const DLTensor *k, int bits, int group_size, DLTensor *codes_out,
                                       DLTensor *scale_out, DLTensor *zero_out);
vq_status vq_cuda_kivi_quantize_values(vq_ctx *ctx, const DLTensor *v, int bits, int group_size,
                                         DLTensor *codes_out, DLTensor *scale_out, DLTensor *zero_out);
vq_status vq_cuda_kivi_dequantize_keys(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                         const DLTensor *zero, int bits, int group_size, DLTensor *out);
vq_status vq_cuda_kivi_dequantize_values(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                           const DLTensor *zero, int bits, int group_size, DLTensor *out);

vq_status vq_cuda_rabitq_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *diag, DLTensor *k_bits_out,
                                DLTensor *k_mag_out, const vq_rabitq_encode_opts *opts);
vq_status vq_cuda_rabitq_hamming_score(vq_ctx *ctx, const DLTensor *qbits, const DLTensor *bits, const DLTensor *cx,
                                       const DLTensor *scale, DLTensor *out);
vq_status vq_cuda_rabitq_pack_values(vq_ctx *ctx, const DLTensor *v_idx, DLTensor *out);
vq_status vq_cuda_codebook_quantize(vq_ctx *ctx, const DLTensor *x, const DLTensor *cents, DLTensor *idx_out);

vq_status vq_cuda_qjl_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *projection, DLTensor *bits_out);
vq_status vq_cuda_qjl_inner_product(vq_ctx *ctx, const DLTensor *query_bits, const DLTensor *key_bits, int head_dim,
                                    int sketch_dim, DLTensor *out, const vq_qjl_inner_product_opts *opts);
/* Needs m + D <= 12288 (the projected query and the query in shared memory),
 * else VQ_ERR_UNSUPPORTED. */
vq_status vq_cuda_qjl_score(vq_ctx *ctx, const DLTensor *query, const DLTensor *projection, const DLTensor *key_bits,
                            const DLTensor *key_norm, DLTensor *out);

/* The encoders need D/M <= 8192, else VQ_ERR_UNSUPPORTED. */
vq_status vq_cuda_vecinfer_quantize(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook,
                                    const DLTensor *smooth, int num_subspaces, DLTensor *idx_out);
vq_status vq_cuda_vecinfer_dequant(vq_ctx *ctx, const DLTensor *idx, const DLTensor *codebook,
                                   const DLTensor *smooth, DLTensor *keys_out);
vq_status vq_cuda_vecinfer_encode_decode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook,
                                         const DLTensor *smooth, int num_subspaces, DLTensor *idx_out,
                                         DLTensor *keys_out);
vq_status vq_cuda_vecinfer_query_lut(vq_ctx *ctx, const DLTensor *queries, const DLTensor *codebook,
                                     const DLTensor *smooth, DLTensor *lut_out);

vq_status vq_cuda_commvq_decode(vq_ctx *ctx, const DLTensor *indices, const DLTensor *codebook,
                                 const DLTensor *cos_freqs, const DLTensor *sin_freqs, const DLTensor *positions,
                                 DLTensor *out, const vq_commvq_opts *opts);
/* Needs D <= 8192, else VQ_ERR_UNSUPPORTED. */
vq_status vq_cuda_commvq_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook, DLTensor *indices_out);

#endif /* VQ_CUDA_CODECS_H */
