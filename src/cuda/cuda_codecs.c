/* cuda_codecs.c — host glue of the CUDA codecs (see cuda_codecs.h): builds
 * the Lloyd-Max level tables the kernels take by value, checks the limits of
 * this backend, and calls the launchers through the backend's plumbing
 * (vq_cuda_begin / vq_cuda_check). */
#include <math.h>

#include "formats/lloyd_max.h"
#include "cuda/codec_launch.h"
#include "cuda/cuda_backend.h"
#include "codecs/codecs_cuda.h"

/* Every entry point: the ctx's device current, the launch, its error as a
 * status (cuda_backend.h). */
#define LAUNCH(ctx, call)                                                \
    do {                                                                 \
        VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));                         \
        return vq_cuda_check((ctx), (call), "codec kernel launch");     \
    } while (0)

/* The Lloyd-Max quantizer of `bits` (1..8) as a kernel table. */
static vq_cu_levels lloyd_levels(int bits)
{
    vq_cu_levels q;
    const int n = 1 << bits;
    const float *b = vq_lloyd_max_boundaries(bits), *c = vq_lloyd_max_centroids(bits);
    for (int k = 0; k < 256; k++) {
        q.b[k] = k < n - 1 ? b[k] : INFINITY;
        q.c[k] = k < n ? c[k] : 0.0f;
    }
    q.log2_levels = bits;
    q.mask = (uint32_t)n - 1u;
    return q;
}

/* ---- bit packing, rotation ---- */

vq_status vq_cuda_bit_pack(vq_ctx *ctx, const DLTensor *idx, int bits, DLTensor *out)
{
    LAUNCH(ctx, vq_cu_bit_pack(idx, bits, out, ctx->stream));
}

vq_status vq_cuda_bit_unpack(vq_ctx *ctx, const DLTensor *packed, int bits, int64_t original_length, DLTensor *out)
{
    LAUNCH(ctx, vq_cu_bit_unpack(packed, bits, original_length, out, ctx->stream));
}

vq_status vq_cuda_hadamard(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, bool inverse, DLTensor *out)
{
    LAUNCH(ctx, vq_cu_hadamard(x, diag, inverse, out, ctx->stream));
}

/* ---- TurboQuant ---- */

vq_status vq_cuda_turboquant_scalar_quantize(vq_ctx *ctx, const DLTensor *x, int bits, DLTensor *idx_out)
{
    const vq_cu_levels q = lloyd_levels(bits);
    LAUNCH(ctx, vq_cu_levels_quantize(x, &q, idx_out, ctx->stream));
}

vq_status vq_cuda_turboquant_scalar_dequantize(vq_ctx *ctx, const DLTensor *idx, int bits, float scale, DLTensor *out)
{
    const vq_cu_levels q = lloyd_levels(bits);
    LAUNCH(ctx, vq_cu_levels_dequantize(idx, &q, scale, out, ctx->stream));
}

vq_status vq_cuda_turboquant_hadamard_quantize(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, int bits,
                                               DLTensor *idx_out, DLTensor *scale_out, const vq_turboquant_opts *opts)
{
    const vq_cu_levels q = lloyd_levels(bits);
    LAUNCH(ctx, vq_cu_turbo_encode(x, diag, &q, opts != NULL && opts->norm_correct, idx_out, scale_out, NULL, NULL,
                                   NULL, ctx->stream));
}

vq_status vq_cuda_turboquant_hadamard_dequantize(vq_ctx *ctx, const DLTensor *idx, const DLTensor *scale,
                                                 const DLTensor *diag, int bits, DLTensor *out)
{
    const vq_cu_levels q = lloyd_levels(bits);
    LAUNCH(ctx, vq_cu_turbo_decode(idx, scale, &q, NULL, NULL, NULL, diag, out, ctx->stream));
}

vq_status vq_cuda_turboquant_rvq_encode(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, int b1, int b2,
                                        DLTensor *idx1_out, DLTensor *scale1_out, DLTensor *idx2_out,
                                        DLTensor *scale2_out)
{
    const vq_cu_levels q1 = lloyd_levels(b1), q2 = lloyd_levels(b2);
    LAUNCH(ctx, vq_cu_turbo_encode(x, diag, &q1, false, idx1_out, scale1_out, &q2, idx2_out, scale2_out, ctx->stream));
}

vq_status vq_cuda_turboquant_rvq_decode(vq_ctx *ctx, const DLTensor *idx1, const DLTensor *scale1,
                                        const DLTensor *idx2, const DLTensor *scale2, const DLTensor *diag, int b1,
                                        int b2, DLTensor *out)
{
    const vq_cu_levels q1 = lloyd_levels(b1), q2 = lloyd_levels(b2);
    LAUNCH(ctx, vq_cu_turbo_decode(idx1, scale1, &q1, idx2, scale2, &q2, diag, out, ctx->stream));
}

/* ---- KIVI affine ---- */

vq_status vq_cuda_kivi_quantize_keys(vq_ctx *ctx, const DLTensor *k, int bits, int group_size, DLTensor *codes_out,
                                       DLTensor *scale_out, DLTensor *zero_out)
{
    LAUNCH(ctx, vq_cu_kivi_quantize(true, k, bits, group_size, codes_out, scale_out, zero_out, ctx->stream));
}

vq_status vq_cuda_kivi_quantize_values(vq_ctx *ctx, const DLTensor *v, int bits, int group_size,
                                         DLTensor *codes_out, DLTensor *scale_out, DLTensor *zero_out)
{
    LAUNCH(ctx, vq_cu_kivi_quantize(false, v, bits, group_size, codes_out, scale_out, zero_out, ctx->stream));
}

vq_status vq_cuda_kivi_dequantize_keys(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                         const DLTensor *zero, int bits, int group_size, DLTensor *out)
{
    LAUNCH(ctx, vq_cu_kivi_dequantize(true, codes, scale, zero, bits, group_size, out, ctx->stream));
}

vq_status vq_cuda_kivi_dequantize_values(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                           const DLTensor *zero, int bits, int group_size, DLTensor *out)
{
    LAUNCH(ctx, vq_cu_kivi_dequantize(false, codes, scale, zero, bits, group_size, out, ctx->stream));
}

/* ---- RaBitQ, scalar codebook ---- */

vq_status vq_cuda_rabitq_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *diag, DLTensor *k_bits_out,
                                DLTensor *k_mag_out, const vq_rabitq_encode_opts *opts)
{
    const bool unbiased = opts != NULL && opts->mag == VQ_RABITQ_MAG_UNBIASED;
    LAUNCH(ctx, vq_cu_rabitq_encode(keys, diag, unbiased, k_bits_out, k_mag_out, ctx->stream));
}

vq_status vq_cuda_rabitq_hamming_score(vq_ctx *ctx, const DLTensor *qbits, const DLTensor *bits, const DLTensor *cx,
                                       const DLTensor *scale, DLTensor *out)
{
    LAUNCH(ctx, vq_cu_rabitq_hamming_score(qbits, bits, cx, scale, out, ctx->stream));
}

vq_status vq_cuda_rabitq_pack_values(vq_ctx *ctx, const DLTensor *v_idx, DLTensor *out)
{
    LAUNCH(ctx, vq_cu_rabitq_pack_values(v_idx, out, ctx->stream));
}

vq_status vq_cuda_codebook_quantize(vq_ctx *ctx, const DLTensor *x, const DLTensor *cents, DLTensor *idx_out)
{
    LAUNCH(ctx, vq_cu_codebook_quantize(x, cents, idx_out, ctx->stream));
}

/* ---- QJL ---- */

vq_status vq_cuda_qjl_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *projection, DLTensor *bits_out)
{
    LAUNCH(ctx, vq_cu_qjl_encode(keys, projection, bits_out, ctx->stream));
}

vq_status vq_cuda_qjl_inner_product(vq_ctx *ctx, const DLTensor *query_bits, const DLTensor *key_bits, int head_dim,
                                    int sketch_dim, DLTensor *out, const vq_qjl_inner_product_opts *opts)
{
    LAUNCH(ctx, vq_cu_qjl_inner_product(query_bits, key_bits, sketch_dim, opts ? opts->query_norm : NULL,
                                        opts ? opts->key_norm : NULL, out, ctx->stream));
}

vq_status vq_cuda_qjl_score(vq_ctx *ctx, const DLTensor *query, const DLTensor *projection, const DLTensor *key_bits,
                            const DLTensor *key_norm, DLTensor *out)
{
    const int64_t m = vq_dim(projection, 0), d = vq_dim(query, -1);
    VQ_RETURN_IF(ctx, m + d > VQ_CU_QJL_SCORE_MAX_FLOATS, VQ_ERR_UNSUPPORTED,
                 "on CUDA the sketch size m = %lld plus D = %lld must be at most %d", (long long)m, (long long)d,
                 VQ_CU_QJL_SCORE_MAX_FLOATS);
    LAUNCH(ctx, vq_cu_qjl_score(query, projection, key_bits, key_norm, out, ctx->stream));
}

/* ---- VecInfer ---- */

/* The channels of a codebook [.., C, n] (D/M, or D for CommVQ) that an
 * encoder warp holds in shared memory. */
static vq_status check_dsub(vq_ctx *ctx, const DLTensor *codebook)
{
    const int64_t n = vq_dim(codebook, -1);
    VQ_RETURN_IF(ctx, n > VQ_CU_NEAREST_MAX_DIM, VQ_ERR_UNSUPPORTED,
                 "on CUDA the encoders search centroids of at most %d channels, the codebook's have %lld",
                 VQ_CU_NEAREST_MAX_DIM, (long long)n);
    return VQ_OK;
}

vq_status vq_cuda_vecinfer_quantize(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook,
                                    const DLTensor *smooth, int num_subspaces, DLTensor *idx_out)
{
    VQ_FORWARD_IF_ERROR(check_dsub(ctx, codebook));
    LAUNCH(ctx, vq_cu_vecinfer_encode(keys, codebook, smooth, idx_out, NULL, ctx->stream));
}

vq_status vq_cuda_vecinfer_encode_decode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook,
                                         const DLTensor *smooth, int num_subspaces, DLTensor *idx_out,
                                         DLTensor *keys_out)
{
    VQ_FORWARD_IF_ERROR(check_dsub(ctx, codebook));
    LAUNCH(ctx, vq_cu_vecinfer_encode(keys, codebook, smooth, idx_out, keys_out, ctx->stream));
}

vq_status vq_cuda_vecinfer_dequant(vq_ctx *ctx, const DLTensor *idx, const DLTensor *codebook,
                                   const DLTensor *smooth, DLTensor *keys_out)
{
    LAUNCH(ctx, vq_cu_vecinfer_dequant(idx, codebook, smooth, keys_out, ctx->stream));
}

vq_status vq_cuda_vecinfer_query_lut(vq_ctx *ctx, const DLTensor *queries, const DLTensor *codebook,
                                     const DLTensor *smooth, DLTensor *lut_out)
{
    LAUNCH(ctx, vq_cu_vecinfer_query_lut(queries, codebook, smooth, lut_out, ctx->stream));
}

/* ---- CommVQ ---- */

vq_status vq_cuda_commvq_decode(vq_ctx *ctx, const DLTensor *indices, const DLTensor *codebook,
                                 const DLTensor *cos_freqs, const DLTensor *sin_freqs, const DLTensor *positions,
                                 DLTensor *out, const vq_commvq_opts *opts)
{
    LAUNCH(ctx, vq_cu_commvq_decode(indices, codebook, cos_freqs, sin_freqs, positions, opts ? opts->scale : NULL,
                                     opts ? (int)opts->rope : VQ_ROPE_HALF, out, ctx->stream));
}

vq_status vq_cuda_commvq_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook, DLTensor *indices_out)
{
    VQ_FORWARD_IF_ERROR(check_dsub(ctx, codebook));
    LAUNCH(ctx, vq_cu_commvq_encode(keys, codebook, indices_out, ctx->stream));
}
