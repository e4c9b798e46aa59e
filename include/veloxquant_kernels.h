/*
 * veloxquant_kernels.h — the kernel primitives of veloxquant: utilities,
 * codecs and attention over caller-owned compressed tensors (sections 2-4 of
 * the documentation that starts in veloxquant.h, whose conventions hold
 * here: status codes, tensors, bit order, rotation, non-finite inputs).
 *
 * Most users want the cache of veloxquant.h, which is built from these and
 * picks the fast paths itself. These are for engines that keep their own
 * layout of compressed keys and values and want the codecs and the fused
 * attention over it. Include <veloxquant.h>, which includes this file.
 */
#ifndef VELOXQUANT_KERNELS_H
#define VELOXQUANT_KERNELS_H

#ifndef VELOXQUANT_H
#error "include <veloxquant.h>, which includes veloxquant_kernels.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* =========================================================================
 * 2. Utilities
 * ========================================================================= */

/* IEEE binary16 and bfloat16 conversion, round-half-to-even, NaN and
 * infinities preserved, f16 subnormals exact. */
VQ_API uint16_t vq_f32_to_f16(float x);
VQ_API float vq_f16_to_f32(uint16_t h);
VQ_API uint16_t vq_f32_to_bf16(float x);
VQ_API float vq_bf16_to_f32(uint16_t h);

/* The portable PRNG: SplitMix64 seeding xoshiro256**. The same seed gives the
 * same stream on every platform and backend. */
typedef struct vq_rng { uint64_t s[4]; } vq_rng;
VQ_API void vq_rng_seed(vq_rng *rng, uint64_t seed);
VQ_API uint64_t vq_rng_next(vq_rng *rng);
/* Uniform in [0, 1) with 53 random bits. */
VQ_API double vq_rng_uniform(vq_rng *rng);
/* Standard normal by the Box-Muller transform (one draw per two uniforms). */
VQ_API double vq_rng_normal(vq_rng *rng);

/* Fills out[0..d) with ±1.0f: out[i] = +1 when the top bit of the i-th draw of
 * the stream seeded with `seed` is 0, else -1. The default Hadamard diagonal.
 * Host memory. Errors: VQ_ERR_INVALID_ARGUMENT (out NULL, d < 1). */
VQ_API vq_status vq_random_signs(uint64_t seed, int64_t d, float *out);

/* The MSE-optimal (Lloyd-Max) quantizer of the standard normal N(0,1) with
 * 2^bits levels, bits = 1..8: centroids_out[0..2^bits) ascending and, when
 * not NULL, boundaries_out[0..2^bits - 1) (midpoints of adjacent centroids).
 * Tables are computed by the library's own Lloyd iteration (Newton-
 * accelerated, float64) to 1e-9. Their MSE is 0.3634, 0.1175, 0.03455,
 * 0.009501 for bits = 1..4 (Max 1960 printed 0.03454 and 0.009497).
 * Errors: VQ_ERR_INVALID_ARGUMENT (bits outside 1..8, centroids_out NULL). */
VQ_API vq_status vq_lloyd_max_codebook(int bits, float *centroids_out, float *boundaries_out);

/* =========================================================================
 * 3. Codecs
 *
 * On a CUDA context every encoder and decoder below runs on the device,
 * enqueued on the context's stream, with the same results as on the CPU (to
 * the accuracy of the conventions above). The trainers (vq_lloyd_max_fit,
 * vq_kmeans, vq_commvq_train, vq_vecinfer_smooth_factors) run on CPU
 * contexts only and return VQ_ERR_UNSUPPORTED on a CUDA context: train on
 * host tensors, then copy the result to the device. The host cannot read
 * device memory, so the checks that the CPU path makes by reading the data
 * (an index >= C, a position >= P) are not made on CUDA: the kernels clamp
 * instead, as noted per function.
 * ========================================================================= */

/* ---- Bit packing ----
 *
 * vq_bit_pack: idx [..., N] u8/u16/i32, bits 1..16, out [..., ceil(N*bits/32)]
 * u32. Element i occupies stream bits [i*bits, (i+1)*bits); stream bit s is bit
 * s % 32 of word s / 32; elements may straddle words; unused high bits of the
 * last word are 0. Values are masked to their low `bits` bits.
 *
 * vq_bit_unpack: packed [..., W] u32 with W == ceil(original_length*bits/32),
 * out [..., original_length] i32 or u8 (u8 needs bits <= 8). Exact inverse. */
VQ_API vq_status vq_bit_pack(vq_ctx *ctx, const DLTensor *idx, int bits, DLTensor *out);
VQ_API vq_status vq_bit_unpack(vq_ctx *ctx, const DLTensor *packed, int bits, int64_t original_length,
                        DLTensor *out);

/* ---- Hadamard rotation ----
 * x [..., D] f16/f32, D a power of two <= 1024; diag [D] f32 ±1 or NULL;
 * out [..., D] f16/f32 (may be the same tensor as x). inverse false: out =
 * rot(x); inverse true: out = rot^-1(x). O(D log D) per row.
 * Errors: D not a power of two -> VQ_ERR_INVALID_ARGUMENT; D > 1024 ->
 * VQ_ERR_UNSUPPORTED (the same rule for every rotating codec below). */
VQ_API vq_status vq_hadamard(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, bool inverse,
                      DLTensor *out);

/* ---- TurboQuant scalar codec ----
 * vq_turboquant_scalar_quantize: x [...] f16/f32 (any shape), idx_out [...]
 * u8 (same shape): idx = nearest Lloyd-Max centroid of x (bits 1..8).
 * vq_turboquant_scalar_dequantize: idx [...] u8, out [...] f16/f32 (same
 * shape) = centroid[idx] * scale.
 * idx values >= 2^bits are masked to bits (documented; no out-of-range read). */
VQ_API vq_status vq_turboquant_scalar_quantize(vq_ctx *ctx, const DLTensor *x, int bits, DLTensor *idx_out);
VQ_API vq_status vq_turboquant_scalar_dequantize(vq_ctx *ctx, const DLTensor *idx, int bits, float scale,
                                          DLTensor *out);

/* Options of the Hadamard quantizer. */
typedef struct vq_turboquant_opts {
    /* false (the default): scale = ||y||_2 / sqrt(D).
     * true: scale = ||y||^2 / <c[idx], y> (idx chosen with the default scale),
     * so <y_hat, y> = ||y||^2 and inner products with y_hat are not shrunk by
     * about (1 - MSE). Falls back to the default scale when <c[idx], y> <= 0. */
    bool norm_correct;
} vq_turboquant_opts;

/* vq_turboquant_hadamard_quantize: x [..., D] f16/f32 (D a power of two
 * <= 1024), diag [D] f32 or NULL, bits 1..8, idx_out [..., D] u8,
 * scale_out [...] f32 (the leading dimensions of x; [1] when x is 1-D).
 * y = rot(x); scale = ||y||_2 / sqrt(D); idx = nearest centroid of y / scale.
 * A zero vector gets scale 0 and the idx of the centroid nearest 0
 * (2^(bits-1) - 1, ties going lower).
 * vq_turboquant_hadamard_dequantize: idx [..., D] u8, scale [...] f32 as
 * above, out [..., D] f16/f32 = rot^-1(scale * centroid[idx]); idx values
 * >= 2^bits are masked to bits.
 * Errors: D not a power of two -> VQ_ERR_INVALID_ARGUMENT; D > 1024 ->
 * VQ_ERR_UNSUPPORTED. */
VQ_API vq_status vq_turboquant_hadamard_quantize(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, int bits,
                                          DLTensor *idx_out, DLTensor *scale_out,
                                          const vq_turboquant_opts *opts);
VQ_API vq_status vq_turboquant_hadamard_dequantize(vq_ctx *ctx, const DLTensor *idx, const DLTensor *scale,
                                            const DLTensor *diag, int bits, DLTensor *out);

/* Two-stage residual codec (TurboQuant RVQ).
 * x [..., D] f16/f32; idx1_out, idx2_out [..., D] u8; scale1_out, scale2_out
 * [...] f32 (shaped as scale_out above); b1, b2 in 1..8. Stage 1 is exactly
 * vq_turboquant_hadamard_quantize with b1 bits (no norm_correct);
 * r = y - scale1 * c_b1[idx1]; scale2 = ||r||_2 / sqrt(D); idx2 = nearest
 * c_b2 of r / scale2. Decode: x_hat = rot^-1(scale1 * c_b1[idx1] +
 * scale2 * c_b2[idx2]), out [..., D] f16/f32. */
VQ_API vq_status vq_turboquant_rvq_encode(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, int b1, int b2,
                                   DLTensor *idx1_out, DLTensor *scale1_out, DLTensor *idx2_out,
                                   DLTensor *scale2_out);
VQ_API vq_status vq_turboquant_rvq_decode(vq_ctx *ctx, const DLTensor *idx1, const DLTensor *scale1,
                                   const DLTensor *idx2, const DLTensor *scale2, const DLTensor *diag,
                                   int b1, int b2, DLTensor *out);

/* ---- Group-affine (KIVI) quantizers ----
 * Keys, per channel over groups of g tokens: k [B,H,S,D] f16/f32,
 * codes [B,H,S,D] u8 (one code per byte) or [B,H,S,D*bits/8] u8 (bit-packed
 * along D in the library's bit order; bits 2 or 4, D*bits % 8 == 0),
 * scale, zero [B,H,ceil(S/g),D] f32 or f16.
 * Values, per token over groups of g channels: v [B,H,S,D], codes as above,
 * scale, zero [B,H,S,ceil(D/g)] f32 or f16.
 * zero = min, scale = (max - min) / (2^bits - 1), code = round((x - zero) /
 * scale) clamped to [0, 2^bits - 1]; scale 0 and codes 0 when max == min.
 * With f16 scale/zero the codes are computed against the f16-rounded scale and
 * zero, so that decoding reproduces what was encoded.
 * bits: 1..8 for one-code-per-byte, 2 or 4 (or 8) when packed. g >= 1.
 * Dequantizers: x_hat = code * scale + zero, out f16/f32. The code layout
 * is detected from the codes' last dimension; one-per-byte codes are read
 * whole (a byte >= 2^bits is not masked), as the attention kernels read them.
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULL, rank other than 4, dtype, shapes
 * that disagree, bits outside 1..8, group_size < 1, a codes last dimension
 * that is neither D nor a valid packed D*bits/8). */
VQ_API vq_status vq_kivi_quantize_keys(vq_ctx *ctx, const DLTensor *k, int bits, int group_size,
                                  DLTensor *codes_out, DLTensor *scale_out, DLTensor *zero_out);
VQ_API vq_status vq_kivi_quantize_values(vq_ctx *ctx, const DLTensor *v, int bits, int group_size,
                                    DLTensor *codes_out, DLTensor *scale_out, DLTensor *zero_out);
VQ_API vq_status vq_kivi_dequantize_keys(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                    const DLTensor *zero, int bits, int group_size, DLTensor *out);
VQ_API vq_status vq_kivi_dequantize_values(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                      const DLTensor *zero, int bits, int group_size, DLTensor *out);

/* ---- RaBitQ: 1-bit keys ---- */

typedef enum vq_rabitq_mag {
    /* k_mag = ||y||_1 / D: the L1 magnitude, the best L2 fit
     * k_mag * sign(y) of y. Shrinks every logit by about 2/pi. */
    VQ_RABITQ_MAG_L1 = 0,
    /* k_mag = ||y||_2^2 / ||y||_1: makes the exact score an unbiased estimate of
     * q.k over the random rotation (RaBitQ's estimator). */
    VQ_RABITQ_MAG_UNBIASED = 1
} vq_rabitq_mag;

typedef struct vq_rabitq_encode_opts {
    vq_rabitq_mag mag;  /* default VQ_RABITQ_MAG_L1 */
} vq_rabitq_encode_opts;

/* keys [..., N, D] f16/f32 raw (pre-rotation), diag [D] f32 ±1 (NULL = ones),
 * k_bits_out [..., N, D/8] u8, k_mag_out [..., N] f32. y = rot(x); bit j =
 * (y_j >= 0); k_mag per opts->mag. D a power of two, 8 <= D <= 1024.
 * A zero key gets all bits 1 and k_mag 0. Errors: VQ_ERR_INVALID_ARGUMENT
 * (D not a power of two or not a multiple of 8, shapes, dtypes, opts->mag),
 * VQ_ERR_UNSUPPORTED (D > 1024). The unbiasedness holds for a Haar rotation;
 * with the randomized Hadamard (random diag) it holds closely for keys whose
 * energy is spread, less so for keys dominated by a few channels (measured:
 * -4.5% for two 6x outlier channels at D = 64). */
VQ_API vq_status vq_rabitq_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *diag, DLTensor *k_bits_out,
                           DLTensor *k_mag_out, const vq_rabitq_encode_opts *opts);

/* One query against N candidates: qbits [D/8] u8,
 * bits [N, D/8] u8, cx [N] f32, scale [1] f32, out [N] f32;
 * out[i] = popcount(qbits XOR bits[i]) * scale + cx[i] (lower = closer). */
VQ_API vq_status vq_rabitq_hamming_score(vq_ctx *ctx, const DLTensor *qbits, const DLTensor *bits,
                                  const DLTensor *cx, const DLTensor *scale, DLTensor *out);

/* v_idx [..., 2n] u8 -> out [..., n] u8: out = (v_idx[2i] & 15) |
 * ((v_idx[2i+1] & 15) << 4). Low nibble = even element. */
VQ_API vq_status vq_rabitq_pack_values(vq_ctx *ctx, const DLTensor *v_idx, DLTensor *out);

/* Scalar codebook value encoder: x [...] f16/f32, cents [n] f32 ascending
 * (repeats allowed), 1 <= n <= 256, idx_out [...] u8 (x's shape): nearest
 * centroid (ties to lower index). cents that are not finite or not ascending
 * give VQ_ERR_INVALID_ARGUMENT (on CUDA they are not checked, and give
 * unspecified indices in [0, n)). */
VQ_API vq_status vq_codebook_quantize(vq_ctx *ctx, const DLTensor *x, const DLTensor *cents, DLTensor *idx_out);

/* 1-D Lloyd-Max / k-means on samples [N] f16/f32: n_cents in 1..256 (N >=
 * n_cents), iters >= 1 rounds, cents_out [n_cents] f32 ascending.
 * Initialised at the sample quantiles (i + 0.5) / n_cents; an empty cell
 * keeps its previous centroid (a sample on a midpoint belongs to the lower
 * cell). Deterministic. Non-finite samples give VQ_ERR_INVALID_ARGUMENT.
 * Scratch: 12 bytes per sample, kept by the ctx. A trainer: CPU contexts
 * only (VQ_ERR_UNSUPPORTED on CUDA). */
VQ_API vq_status vq_lloyd_max_fit(vq_ctx *ctx, const DLTensor *samples, int n_cents, int iters, DLTensor *cents_out);

/* ---- QJL sign sketches ---- */

/* Fills out[0..m*d) (row-major [m, d]) with i.i.d. N(0,1) drawn by
 * vq_rng_normal from `seed`. Host memory.
 * Errors: VQ_ERR_INVALID_ARGUMENT (out NULL, m < 1, d < 1). */
VQ_API vq_status vq_qjl_projection(uint64_t seed, int64_t m, int64_t d, float *out);

/* keys [..., D] f16/f32, projection [m, D] f32, bits_out [..., ceil(m/32)]
 * u32: bit j = ((S k)_j >= 0); unused high bits of the last word are 0. */
VQ_API vq_status vq_qjl_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *projection, DLTensor *bits_out);

typedef struct vq_qjl_inner_product_opts {
    const DLTensor *query_norm; /* [...] f32 or NULL: multiplies out by ||q|| */
    const DLTensor *key_norm;   /* [..., N] f32 or NULL: multiplies out by ||k|| */
} vq_qjl_inner_product_opts;

/* Symmetric estimator: query_bits [..., W] u32, key_bits [..., N, W] u32,
 * W == ceil(sketch_dim/32), out [..., N] f32 = cos(pi * ham / m) with ham the
 * Hamming distance over the first m = sketch_dim bits (times the norms given
 * in opts: query_norm [...] = query_bits' shape without its last axis, or [1]
 * for a rank-1 query_bits; key_norm [..., N]). head_dim is the D the sketches
 * came from (checked > 0; the estimator itself does not need it). */
VQ_API vq_status vq_qjl_inner_product(vq_ctx *ctx, const DLTensor *query_bits, const DLTensor *key_bits,
                               int head_dim, int sketch_dim, DLTensor *out,
                               const vq_qjl_inner_product_opts *opts);

/* Asymmetric unbiased estimator (the QJL paper): query [..., D] f16/f32,
 * projection [m, D] f32, key_bits [..., N, ceil(m/32)] u32, key_norm [..., N]
 * f32, out [..., N] f32 = sqrt(pi/2)/m * ||k|| * sum_j (S q)_j * sign_j.
 * On CUDA m + D must be at most 12288, else VQ_ERR_UNSUPPORTED. */
VQ_API vq_status vq_qjl_score(vq_ctx *ctx, const DLTensor *query, const DLTensor *projection,
                       const DLTensor *key_bits, const DLTensor *key_norm, DLTensor *out);

/* ---- VecInfer product VQ ----
 * codebook [M, C, D/M] f32 shared by all heads, or [Hkv, M, C, D/M] per head;
 * smooth [D] f32 > 0 or [Hkv, D]; C <= 65536. Smoothed key k' = k / s.
 * Indices are u8 (C <= 256) or u16. */

/* keys [B,H,S,D] f16/f32, idx_out [B,H,S,M] u8/u16:
 * idx[m] = argmin_c || k'[m-th slice] - codebook[m, c] ||^2.
 * On CUDA D/M must be at most 8192, else VQ_ERR_UNSUPPORTED. */
VQ_API vq_status vq_vecinfer_quantize(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook,
                               const DLTensor *smooth, int num_subspaces, DLTensor *idx_out);
/* idx [B,H,S,M], keys_out [B,H,S,D] f16/f32 = concat_m codebook[m, idx[m]] ⊙ s.
 * Indices >= C give VQ_ERR_INVALID_ARGUMENT with nothing written (on CUDA
 * they read centroid C - 1 instead). */
VQ_API vq_status vq_vecinfer_dequant(vq_ctx *ctx, const DLTensor *idx, const DLTensor *codebook,
                              const DLTensor *smooth, DLTensor *keys_out);
/* Both outputs of the two functions above from one pass. */
VQ_API vq_status vq_vecinfer_encode_decode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook,
                                    const DLTensor *smooth, int num_subspaces, DLTensor *idx_out,
                                    DLTensor *keys_out);
/* queries [B,H,D] or [B,H,Sq,D] f16/f32, lut_out [B,H,M,C] or [B,H,Sq,M,C] f32:
 * lut[m,c] = (q ⊙ s)[m-th slice] . codebook[m,c], so q.k_hat = sum_m
 * lut[m, idx[m]] (asymmetric MIPS). With per-head codebooks H must equal Hkv. */
VQ_API vq_status vq_vecinfer_query_lut(vq_ctx *ctx, const DLTensor *queries, const DLTensor *codebook,
                                const DLTensor *smooth, DLTensor *lut_out);
/* Smooth factors from calibration keys [N, D] f16/f32: s_c = sqrt(max_t |k[t,c]|),
 * and 1 where a channel is all zero. smooth_out [D] f32. A trainer: CPU
 * contexts only (VQ_ERR_UNSUPPORTED on CUDA). */
VQ_API vq_status vq_vecinfer_smooth_factors(vq_ctx *ctx, const DLTensor *keys, DLTensor *smooth_out);

/* k-means with k-means++ initialisation (seeded by `seed`) and Lloyd rounds:
 * samples [N, d] f32, 1 <= C <= N, iters >= 0 rounds after the init,
 * centroids_out [C, d] f32. An empty cluster keeps its centroid; rounds stop
 * early once no assignment changes. With iters = 0 the centroids are the
 * k-means++ seeds (samples, all distinct while distinct samples remain). The
 * same seed gives the same centroids on a given CPU instruction set whatever
 * the thread count. A trainer: CPU contexts only (VQ_ERR_UNSUPPORTED on
 * CUDA). */
VQ_API vq_status vq_kmeans(vq_ctx *ctx, const DLTensor *samples, int C, int iters, uint64_t seed,
                    DLTensor *centroids_out);

/* ---- CommVQ: additive codebooks, RoPE applied at decode ---- */

typedef enum vq_rope_layout {
    VQ_ROPE_HALF = 0,        /* pairs (i, i + D/2): Hugging Face / NeoX */
    VQ_ROPE_INTERLEAVED = 1  /* pairs (2i, 2i + 1): GPT-J / Meta */
} vq_rope_layout;

typedef struct vq_commvq_opts {
    vq_rope_layout rope;    /* default VQ_ROPE_HALF */
    const DLTensor *scale;  /* [B,H,S] f32 per-token scale, or NULL (= 1) */
} vq_commvq_opts;

/* indices [B,H,S,R] u8/u16/i32, codebook [R,C,D] f32, cos_freqs and sin_freqs
 * [P, D/2] f32, positions [S] or [B,S] i32 in [0, P), out [B,H,S,D] f16/f32
 * (D even):
 * k = scale * sum_r codebook[r, idx_r]; out = RoPE(k, position), where pair i
 * at position p rotates by (cos_freqs[p,i], sin_freqs[p,i]):
 * (a, b) -> (a cos - b sin, a sin + b cos). Indices >= C or positions
 * outside [0, P) give VQ_ERR_INVALID_ARGUMENT with nothing written (on CUDA
 * they are clamped to [0, C) and [0, P) instead). */
VQ_API vq_status vq_commvq_decode(vq_ctx *ctx, const DLTensor *indices, const DLTensor *codebook,
                            const DLTensor *cos_freqs, const DLTensor *sin_freqs, const DLTensor *positions,
                            DLTensor *out, const vq_commvq_opts *opts);

/* Residual k-means trainer on pre-RoPE keys: samples [N, D] f32, R stages of C
 * centroids, codebook_out [R, C, D] f32. Stage r is vq_kmeans (seed + r) on the
 * residuals left by stages < r. A trainer: CPU contexts only
 * (VQ_ERR_UNSUPPORTED on CUDA). */
VQ_API vq_status vq_commvq_train(vq_ctx *ctx, const DLTensor *samples, int R, int C, int iters, uint64_t seed,
                           DLTensor *codebook_out);

/* Greedy residual encoder: keys [B,H,S,D] f16/f32 (pre-RoPE), codebook
 * [R,C,D] f32, indices_out [B,H,S,R] u8/u16/i32: stage r picks the centroid
 * nearest the residual of stages < r. C must fit the index dtype (u8: C <=
 * 256, u16: C <= 65536), else VQ_ERR_INVALID_ARGUMENT. On CUDA D must be at
 * most 8192, else VQ_ERR_UNSUPPORTED. */
VQ_API vq_status vq_commvq_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook,
                            DLTensor *indices_out);

/* =========================================================================
 * 4. Attention over compressed caches
 * ========================================================================= */

/* Key formats understood by vq_fused_sdpa. */
typedef enum vq_keys_format {
    VQ_KEYS_F16 = 1,       /* plain keys (f16, f32 or bf16): the uncompressed path */
    VQ_KEYS_TURBO = 2,     /* TurboQuant Hadamard scalar codes */
    VQ_KEYS_TURBO_RVQ = 3, /* TurboQuant two-stage residual codes */
    VQ_KEYS_KIVI = 4,    /* KIVI per-channel group affine codes */
    VQ_KEYS_RABITQ = 5,    /* 1-bit RaBitQ signs + magnitude */
    VQ_KEYS_QJL = 6,       /* QJL sign sketch + norm */
    VQ_KEYS_VECINFER = 7,        /* VecInfer product VQ */
    VQ_KEYS_COMMVQ = 8     /* CommVQ additive codes, RoPE applied per token */
} vq_keys_format;

/* The tensors of the f16, KIVI and VecInfer key formats (vq_encoded_keys). */
typedef struct vq_f16_key_tensors {
    const DLTensor *keys;  /* [B,Hkv,Skv,D] f16/f32/bf16 */
} vq_f16_key_tensors;

typedef struct vq_kivi_key_tensors {
    const DLTensor *codes; /* [B,Hkv,Skv,D] u8, or [B,Hkv,Skv,D*bits/8] u8 packed */
    const DLTensor *scale; /* [B,Hkv,ceil(Skv/g),D] f32/f16 */
    const DLTensor *zero;  /* same shape and dtype as scale */
    int bits;              /* 2, 4 or 8 when packed; code width when not (1..8; such
                              codes are read as whole bytes, as the encoder writes them) */
    int group_size;        /* g, tokens per group */
} vq_kivi_key_tensors;

typedef struct vq_vecinfer_key_tensors {
    const DLTensor *idx;      /* [B,Hkv,Skv,M] u8/u16 */
    const DLTensor *codebook; /* [M,C,D/M] or [Hkv,M,C,D/M] f32 */
    const DLTensor *smooth;   /* [D] or [Hkv,D] f32 */
} vq_vecinfer_key_tensors;

/* A compressed key cache: `format` plus the tensors of that format (only the
 * member named by `format` is read; zero-initialise the rest). All leading
 * shapes are [B, Hkv, Skv]; the kernel reads no pointer after it returns.
 * Codes stored as u32 bit-packed streams (vq_bit_pack, packed along D) are
 * recognised by their dtype.
 * Hadamard formats (turbo, rvq, rabitq) keep keys in the rotated basis
 * y = rot(k): they need D a power of two (else VQ_ERR_INVALID_ARGUMENT), and
 * each query row is rotated once, since q . k_hat = rot(q) . y_hat. turbo and
 * rvq codes are masked to their bit width, as the dequantizers do. */
typedef struct vq_encoded_keys {
    vq_keys_format format;
    union {
        vq_f16_key_tensors f16;
        vq_f16_key_tensors plain; /* the earlier name, deprecated */
    };
    struct {
        const DLTensor *idx;   /* [B,Hkv,Skv,D] u8, or [B,Hkv,Skv,ceil(D*bits/32)] u32 packed */
        const DLTensor *scale; /* [B,Hkv,Skv] f32 or f16 */
        const DLTensor *diag;  /* [D] f32 ±1, or NULL (ones) */
        int bits;              /* 1..8 */
    } turbo;
    struct {
        const DLTensor *idx1, *scale1;  /* stage 1: as turbo.idx / turbo.scale with b1 bits, scale1 f32 only */
        const DLTensor *idx2, *scale2;  /* stage 2: as turbo.idx / turbo.scale with b2 bits: scale2 f32 or
                                           f16 */
        const DLTensor *diag;           /* [D] f32 ±1, or NULL */
        int b1, b2;                     /* 1..8 each */
    } rvq;
    union {
        vq_kivi_key_tensors kivi; /* k_hat = code * scale + zero (as vq_kivi_fused_attend) */
        vq_kivi_key_tensors affine; /* the earlier name, deprecated */
    };
    struct {
        const DLTensor *bits;  /* [B,Hkv,Skv,D/8] u8 signs of rot(k) */
        const DLTensor *mag;   /* [B,Hkv,Skv] f32 */
        const DLTensor *cnst;  /* [B,Hkv,Skv] f32 additive score term, or NULL */
        const DLTensor *diag;  /* [D] f32 ±1 used at encode time, or NULL */
    } rabitq;                  /* score: scale * (rot(q) . sign) * mag + cnst (exact query;
                                  cnst is not multiplied by scale, as in vq_rabitq_fused_attend) */
    struct {
        const DLTensor *bits;       /* [B,Hkv,Skv,ceil(m/32)] u32 */
        const DLTensor *norm;       /* [B,Hkv,Skv] f32, ||k|| */
        const DLTensor *projection; /* [m, D] f32 */
    } qjl;                          /* score: scale * vq_qjl_score's asymmetric estimator,
                                       sqrt(pi/2)/m * norm * sum_j (S q)_j sign_j; m = rows of S */
    union {
        vq_vecinfer_key_tensors vecinfer; /* score: scale * sum_m lut[m, idx[m]] (tables built once per
                                      query row; when C > Skv the tokens are decoded instead);
                                      indices >= C read centroid C - 1 (never out of bounds) */
        vq_vecinfer_key_tensors pq; /* the earlier name, deprecated */
    };
    struct {
        const DLTensor *idx;       /* [B,Hkv,Skv,R] u8/u16/i32 */
        const DLTensor *codebook;  /* [R,C,D] f32 */
        const DLTensor *cos_freqs; /* [P, D/2] f32 */
        const DLTensor *sin_freqs; /* [P, D/2] f32 */
        const DLTensor *positions; /* [Skv] or [B,Skv] i32 */
        const DLTensor *scale;     /* [B,Hkv,Skv] f32 or NULL */
        vq_rope_layout rope;
    } commvq;                      /* k_hat = RoPE(scale * sum_r codebook[r, idx_r]) at the token's
                                      position (vq_commvq_decode), decoded per block of tokens;
                                      codes outside [0, C) read the nearest valid centroid;
                                      positions outside [0, P) give VQ_ERR_INVALID_ARGUMENT */
} vq_encoded_keys;

/* Value formats understood by vq_fused_sdpa. */
typedef enum vq_values_format {
    VQ_VALUES_F16 = 1,    /* plain values (f16 or f32): the uncompressed path */
    VQ_VALUES_KIVI = 2,   /* KIVI per-token group affine codes */
    VQ_VALUES_CODEBOOK = 3, /* scalar codebook indices (RaBitQ caches' 4-bit Lloyd-Max nibbles) */
    VQ_VALUES_TURBO = 4     /* TurboQuant Hadamard scalar codes */
} vq_values_format;

/* The tensors of the f16 and KIVI value formats (vq_encoded_values). */
typedef struct vq_f16_value_tensors {
    const DLTensor *values;  /* [B,Hkv,Skv,D] f16/f32 */
} vq_f16_value_tensors;

typedef struct vq_kivi_value_tensors {
    const DLTensor *codes;  /* [B,Hkv,Skv,D] u8 (one code per byte), or [B,Hkv,Skv,D*bits/8] packed */
    const DLTensor *scale;  /* [B,Hkv,Skv,ceil(D/g)] f32/f16 */
    const DLTensor *zero;   /* same shape and dtype as scale */
    int bits;               /* 2, 4 or 8 (the packing of codes; 8 = one per byte) */
    int group_size;         /* g, channels per group */
} vq_kivi_value_tensors;

/* A compressed value cache: `format` plus the tensors of that format (only
 * the member named by `format` is read; zero-initialise the rest). Leading
 * shapes are [B, Hkv, Skv], as the keys'. Any key format combines with any
 * value format in one vq_fused_sdpa call. */
typedef struct vq_encoded_values {
    vq_values_format format;
    union {
        vq_f16_value_tensors f16;
        vq_f16_value_tensors plain; /* the earlier name, deprecated */
    };
    union {
        vq_kivi_value_tensors kivi; /* v_hat[t,c] = code * scale[t,c/g] + zero[t,c/g] (vq_kivi_quantize_values) */
        vq_kivi_value_tensors affine; /* the earlier name, deprecated */
    };
    struct {
        const DLTensor *idx;    /* [B,Hkv,Skv,D] u8, or nibble-packed [B,Hkv,Skv,D/2] u8 */
        const DLTensor *cents;  /* [n_cents] f32, 1..256 (<= 16 when packed) */
        const DLTensor *scale;  /* [B,Hkv,Skv] f32 per-token scale, or NULL */
    } codebook;                 /* v_hat[t,c] = cents[min(idx, n_cents - 1)] * scale[t] */
    struct {
        const DLTensor *idx;    /* [B,Hkv,Skv,D] u8, or [B,Hkv,Skv,ceil(D*bits/32)] u32 packed */
        const DLTensor *scale;  /* [B,Hkv,Skv] f32 or f16 */
        const DLTensor *diag;   /* [D] f32 ±1 used at encode time, or NULL (ones) */
        int bits;               /* 1..8 */
    } turbo;                    /* v_hat = rot^-1(scale * c_bits[idx]) (vq_turboquant_hadamard_dequantize);
                                   D a power of two; accumulated in the rotated basis and rotated back
                                   once per output row */
} vq_encoded_values;

/* The vq_encoded_values of plain values v (a convenience for the common case). */
static inline vq_encoded_values vq_f16_values(const DLTensor *v)
{
    vq_encoded_values e = {VQ_VALUES_F16, {{v}}, {{0, 0, 0, 0, 0}}, {0, 0, 0}, {0, 0, 0, 0}};
    return e;
}

/* How the CPU KIVI decode kernel computes q . k_hat.
 *
 * VQ_KEY_SCORES_INT8 (what VQ_KEY_SCORES_AUTO picks for 2- and 4-bit codes
 * with D = 64, 128, 192 or 256; other layouts run F32): per query row and per key group met in a
 * block of 32 tokens, x = (scale * q) * k_scale[group] (f32) is quantised
 * once to int8, xq_c = rint(x_c / step) with step = max_c |x_c| / 127, and
 * every token of the group is scored with exact integer dots (AVX-512 VNNI
 * vpdpbusd, AVX2 vpmaddubsw/vpmaddwd, NEON sdot or smull; all ISAs give the
 * same integers):  s = step * sum_c xq_c code_c + sum_c (scale * q_c) k_zero_c.
 * Error bound. |x_c - step * xq_c| <= step / 2 for every c (round to nearest,
 * |x_c| / step <= 127 so no clamping), hence, against the same sum in exact
 * arithmetic,
 *   |s_int8 - s| <= (step / 2) * sum_c code_c = max_c |x_c| / 254 * sum_c code_c,
 * plus the f32 rounding of the two products and the zero term (a few ulp of
 * their magnitudes). Relative to the largest score term, max|x| * max code
 * * D, that is at most 1/254 (0.4%); rounding errors of random sign make
 * the typical error about sqrt(D) times smaller. The softmax then moves each
 * probability by at most a factor exp(2 eps), eps the largest score error of
 * the row, so each output channel moves by at most (exp(2 eps) - 1) times the
 * largest |v_hat - out| of that channel. A group whose max_c |x_c| is below
 * 127 / FLT_MAX (~3.7e-37: 127 / max overflows) quantises to 0, its integer
 * term dropped (at most 3.7e-37 * sum_c code_c). tests/unit/test_attention_kivi.c
 * checks the score bound per score on every ISA, and checks the outputs
 * against a float64 reference that rounds the query the same way.
 * TurboQuant and RVQ keys (VQ_KEYS_TURBO, VQ_KEYS_TURBO_RVQ and the cache's
 * VQ_KEY_TURBO / _RVQ pages at D = 128, every stage of at most 4 bits;
 * INT8 where asked, and the cache's AUTO on CPUs with AVX2 or AVX-512
 * VNNI for 2-, 3- and 4-bit codes in u32 words, as for the values below):
 * the rotated, scaled query row qp is
 * rounded once per call, qstep = amax / 127 with amax = max_c |qp_c|, xq_c
 * = rint(qp_c / qstep); each stage's Lloyd-Max centroids once, cstep = C /
 * 127 with C = max_i |c_i|, cq_i = rint(c_i / cstep) (as the codebook
 * values below); per token j and stage,
 *   s_int8 = (qstep * cstep * scale_j) * sum_c xq_c * cq[idx_jc]
 * with the integer sum exact, the stages' terms added in f32. Error bound:
 * per stage |s_int8 - s| <= scale_j * ((qstep / 2) sum_c |c[idx_jc]| +
 * (amax + qstep / 2) * D * cstep / 2) <= scale_j * amax * D * C * (2 +
 * 1/254) / 254, about 0.8 % of the largest score term scale_j * amax * D * C
 * (errors of random sign make the typical error ~sqrt(D) times smaller);
 * the outputs then move as the softmax rule above says.
 * tests/unit/test_attention_turbo_qk8.c checks the bound on every ISA and the
 * float64 integer formulation. NEON has a dot-product kernel (ARMv8.2
 * sdot; the scalar one on ARMv8.0) that INT8 runs; AUTO stays F32 there
 * (not measured against the f32 path on an ARM machine).
 * VQ_KEY_SCORES_F32: the float path, q . k_hat in f32 (relative error ~1e-6),
 * codes expanded to floats in registers; slower (bench/results/cpu.md).
 * CUDA contexts ignore this field: their DP4A path splits the query into
 * three int8 planes (22 bits), error ~2^-21 of max|x| per unit of code. */
typedef enum vq_key_scores {
    VQ_KEY_SCORES_AUTO = 0,
    VQ_KEY_SCORES_F32 = 1,
    VQ_KEY_SCORES_INT8 = 2
} vq_key_scores;

/* How the CPU affine decode kernel (and vq_rabitq_fused_attend's codebook
 * values, below) accumulates p . v_hat.
 *
 * VQ_VALUE_ACCUM_INT8 (what VQ_VALUE_ACCUM_AUTO picks on CPUs with AVX-512
 * VNNI and VBMI or with AVX2, for 2-bit values with group_size 32 at D = 128;
 * every other case runs F32): per query row, block of 32 tokens j and value group gi,
 * the weights w_j = p_j * v_scale[j][gi] (f32, p_j = exp(s_j - m) <= 1 the
 * unnormalised probabilities) are rounded once to int8,
 * wq_j = rint(w_j / step) with step = max_j |w_j| / 127, and
 *   sum_j p_j v_hat[j][c] = step * sum_j wq_j code[j][c] + sum_j p_j v_zero[j][gi]
 * with the integer dot exact (AVX-512 vpdpbusd: 4 tokens x 16 channels per
 * instruction; AVX2 vpmaddubsw: 2 tokens x 16 channels; the scalar kernel is the reference other ISAs run when INT8
 * is asked for). Error bound. |w_j - step * wq_j| <= step / 2, hence per
 * block b and channel c, against the same sum in exact arithmetic,
 *   |err_b,c| <= (step / 2) * sum_{j in b} code[j][c] <= max_{j in b} |w_j| * 3 * n_b / 254,
 * and the output, which divides by d = sum_j p_j, moves by at most
 * sum_b |err_b,c| / d plus f32 rounding. As d >= sum_b max_{j in b} p_j, a
 * cache whose |v_scale| is at most S moves each output channel by at most
 * 3 * 32 * S / 254 = 0.38 S in the worst case (all rounding errors of one
 * sign); with errors of random sign the typical error is about
 * (S / 254) * sqrt(sum_j (code p_j)^2) / d, ~1e-3 S or less on the test
 * caches (the 2-bit code step itself is S). tests/unit/test_attention_kivi.c
 * checks the bound per output on every ISA and the typical error.
 * Codebook values (vq_rabitq_fused_attend, D = 128, at most 16 centroids):
 * the centroids are rounded once per call, cq_i = rint(cents_i / cstep) with
 * cstep = C / 127, C = max_i |cents_i|, and per query row and block of 32
 * tokens w_j = p_j * v_scale[j] (1 without v_scale) are rounded as above,
 * except that a row's block without a negative w_j (always without v_scale,
 * or with v_scale >= 0) takes uint8 weights: step = max_j |w_j| / 255,
 * wq_j = rint(w_j / step) in [0, 255], half the int8 step. So
 *   sum_j p_j v_hat[j][c] = step * cstep * sum_j wq_j cq[idx[j][c]]
 * (the integer dot exact, vpdpbusd; scalar reference elsewhere when INT8 is
 * asked for). Error bound. With |w_j - step wq_j| <= step / 2 and
 * |cents_i - cstep cq_i| <= cstep / 2, per block b and channel c
 *   |err_b,c| <= sum_{j in b} ((step / 2) |cents[idx]| + (|w_j| + step / 2) cstep / 2),
 * and dividing by d (>= sum_b max_{j in b} p_j, and = sum_j p_j) a cache with
 * |v_scale| <= S moves each output channel by at most
 * C S (32 / 254 + 1 / 254 + 32 / (4 * 127^2)) = 0.131 C S plus f32 rounding
 * (worst case: every rounding error of one sign; with uint8 weights the
 * weight terms halve, 0.067 C S). The centroid part
 * (cstep / 2 per centroid, <= C S / 254) is a fixed bias per centroid; the
 * weight part mostly averages out: typically ~1e-3 C S (0.4-2.6e-3 on the
 * test caches; a 4-bit codebook's own spacing is ~C / 8). Weights far below
 * the step round to 0 (errors of one sign), the part of the error that
 * grows with Skv. tests/unit/test_attention_rabitq.c checks the bound
 * per output on every ISA, the float64 integer formulation, and the typical
 * error of the weight rounding.
 * TurboQuant values (VQ_VALUES_TURBO at D = 64, 128 or 256 with bits <= 4, and
 * the cache's TurboQuant value pages; INT8 where asked, and what the cache's
 * AUTO picks on the CPUs above for 2-, 3- and 4-bit codes in u32 words;
 * 3-bit ones only where they turn into nibbles in SIMD code, AVX2 and
 * up: in scalar code that costs more than the integer sums save): the
 * codebook formulation with the bits'
 * Lloyd-Max centroids as cents and the tokens' scales as v_scale, summed in
 * the rotated basis, where the bound above holds per rotated channel (C =
 * 1.51, 2.15, 2.73 for 2, 3, 4 bits; S the largest |scale|). The rotation
 * back is orthonormal: it keeps the error's L2 norm over the D channels, so
 * an output channel moves by at most sqrt(D) times that bound (0.131 * 11.3
 * C S at D = 128; errors of random sign stay ~1e-3 C S per channel).
 * tests/unit/test_attention_turbo_pv8.c checks both on every ISA.
 * Both: a row's block whose largest |w_j| is below L / FLT_MAX (L = 127,
 * or 255 for uint8 weights: < 7.5e-37, where L / max|w| overflows) rounds
 * to 0; as d >= 1 that moves the output by less than 2.4e-35 times the
 * largest value.
 * VQ_VALUE_ACCUM_F32: f32 FMAs of the decoded codes (relative error ~1e-6).
 * CUDA contexts ignore this field. */
typedef enum vq_value_accum {
    VQ_VALUE_ACCUM_AUTO = 0,
    VQ_VALUE_ACCUM_F32 = 1,
    VQ_VALUE_ACCUM_INT8 = 2
} vq_value_accum;

/* Options shared by the attention kernels. */
typedef struct vq_attend_opts {
    /* Sq > 1: query i sees kv positions <= Skv - Sq + i (the new tokens are
     * the last Sq of the cache). */
    bool causal;
    /* Parallel splits of the kv axis per (batch, kv head); 0 = automatic. */
    int num_splits;
    /* Optional output [B,Hq,Sq] f32: per query row, the natural-log
     * log-sum-exp of its scaled and masked scores over the tokens it sees,
     * log(sum_t exp(s_t)); -inf for a row that sees no token. With it, the
     * outputs of attention over disjoint token sets merge exactly
     * (vq_attention_merge). NULL = not computed. */
    DLTensor *lse_out;
    /* CPU arithmetic (see vq_key_scores and vq_value_accum above): key_scores
     * for VQ_KEYS_KIVI, VQ_KEYS_TURBO and VQ_KEYS_TURBO_RVQ keys,
     * value_accum for VQ_VALUES_KIVI and VQ_VALUES_TURBO values. 0 = AUTO, which here is
     * F32: vq_fused_sdpa keeps its f32 results unless asked, while the cache,
     * the decode engine, defaults to the integer kernels
     * (vq_cache_attend_opts). INT8 on a layout its kernels do not take runs
     * F32. Values outside the enums give VQ_ERR_INVALID_ARGUMENT; CUDA
     * contexts ignore them. */
    vq_key_scores key_scores;
    vq_value_accum value_accum;
} vq_attend_opts;

/* out = softmax(scale * q . k_hat^T + mask) v_hat, keys and values decoded
 * in registers and never written to memory; softmax accumulates in f32.
 * queries [B,Hq,Sq,D] f16/f32 (raw, unrotated: rotations are applied to the
 * query inside), keys per vq_encoded_keys, values per vq_encoded_values
 * (vq_f16_values(&v) for plain [B,Hkv,Skv,D] f16/f32 values),
 * mask [B or 1, Hq or 1, Sq, Skv] f32/f16 additive, or NULL;
 * out [B,Hq,Sq,D] f16/f32. Rows whose every score is -inf give 0; NaN and
 * ±inf inputs follow the rule of the conventions (top of this header).
 * Every tensor with a [B, H, S] leading shape (queries, out, mask, the key
 * and value tensors, opts->lse_out) may be a strided view: any non-negative
 * strides on all axes but the last, which is contiguous (a capacity buffer's
 * first Skv tokens, a framework slice); outputs must not overlap themselves.
 * Errors: D % 8 != 0, formats' own constraints, or an output that overlaps
 * itself (see the conventions) -> VQ_ERR_INVALID_ARGUMENT; D > 256 ->
 * VQ_ERR_UNSUPPORTED.
 * On a CUDA context (device tensors) every key format with every value
 * format runs (opts->lse_out too, compact), with the same semantics, on the ctx's stream without synchronising; values, plain keys,
 * TurboQuant codes and affine codes/scales/zeros whose data (with
 * byte_offset) is not 16-byte aligned give VQ_ERR_UNSUPPORTED there (the
 * other tensors need only their element alignment). What the CPU checks by reading data cannot be
 * checked before the launch there, so the kernels clamp instead: CommVQ
 * positions outside [0, P) read table row 0 or P - 1 (the CPU gives
 * VQ_ERR_INVALID_ARGUMENT), and VECINFER / CommVQ codes clamp as on the CPU. QJL
 * with more than 1024 sketch rows (m) -> VQ_ERR_UNSUPPORTED there. */
VQ_API vq_status vq_fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                        const vq_encoded_values *values, float scale, const DLTensor *mask, DLTensor *out,
                        const vq_attend_opts *opts);

/* Merges two attention results over disjoint token sets of the same queries
 * (FlashInfer's merge_state): out_a/out_b [B,H,S,D] with their
 * log-sum-exps lse_a/lse_b [B,H,S] f32 (from opts->lse_out) ->
 * out [B,H,S,D], lse_out [B,H,S] f32:
 * out = (e^(lse_a - m) out_a + e^(lse_b - m) out_b) / (e^(lse_a - m) + e^(lse_b - m)),
 * lse_out = m + log(e^(lse_a - m) + e^(lse_b - m)), m = max(lse_a, lse_b):
 * exactly the attention over the union. out_a, out_b and out are each f16
 * or f32, independently (all eight combinations: each side is read in its
 * own dtype, the merge runs in f32, the result is rounded to out's dtype).
 * A side with lse -inf contributes nothing; both -inf give out 0, lse -inf.
 * out may be the same tensor as out_a or out_b, lse_out the same as lse_a or
 * lse_b, or NULL. Strided views are accepted as in vq_fused_sdpa.
 * Errors: shapes that disagree, a dtype not listed, or an output that
 * overlaps itself -> VQ_ERR_INVALID_ARGUMENT; D > 256 -> VQ_ERR_UNSUPPORTED.
 * NaN lse gives NaN rows. On a CUDA context: runs on the ctx's stream. */
VQ_API vq_status vq_attention_merge(vq_ctx *ctx, const DLTensor *out_a, const DLTensor *lse_a,
                                    const DLTensor *out_b, const DLTensor *lse_b, DLTensor *out,
                                    DLTensor *lse_out);

/* True iff vq_fused_sdpa accepts queries of this shape with plain keys
 * (VQ_KEYS_F16): all sizes positive, head_dim % 8 == 0 and head_dim <= 256.
 * The other key formats add their own rules on head_dim (the Hadamard
 * formats turbo, rvq and rabitq need a power of two; VECINFER needs it divisible
 * by the subspace count). */
VQ_API bool vq_fused_sdpa_supports_shape(int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim);

/* vq_fused_sdpa specialised to VQ_KEYS_TURBO_RVQ, without a mask: the query
 * is rotated once and scored against y_hat = scale1 c[idx1] + scale2 c[idx2]
 * directly. keys->format other than VQ_KEYS_TURBO_RVQ gives
 * VQ_ERR_INVALID_ARGUMENT; every other rule is vq_fused_sdpa's, including its
 * CUDA behaviour (runs on the ctx's stream without synchronising). */
VQ_API vq_status vq_turboquant_fused_rvq_decode_attend(vq_ctx *ctx, const DLTensor *queries,
                                                const vq_encoded_keys *keys, const DLTensor *values,
                                                float scale, DLTensor *out, const vq_attend_opts *opts);

/* Options of the affine decode kernel. */
typedef struct vq_scalar_attend_opts {
    bool causal;  /* as vq_attend_opts.causal */
    /* Code width when codes are bit-packed along D (2, 4 or 8); 0 = detect from
     * the codes' last dimension (D: one code per byte; D*bits/8: packed). */
    int bits;
    DLTensor *lse_out;  /* as vq_attend_opts.lse_out */
    /* Key-score arithmetic on the CPU (see vq_key_scores); 0 = AUTO. INT8 on a
     * layout the integer kernels do not take runs F32 (the same as AUTO).
     * Values outside the enum give VQ_ERR_INVALID_ARGUMENT. */
    vq_key_scores key_scores;
    /* p . v_hat arithmetic on the CPU (see vq_value_accum); 0 = AUTO. INT8 on
     * a layout the integer kernel does not take runs F32. Values outside the
     * enum give VQ_ERR_INVALID_ARGUMENT. */
    vq_value_accum value_accum;
} vq_scalar_attend_opts;

/* Attention over a KIVI group-affine cache.
 * q [B,Hq,Sq,D] f16/f32 (must be 4-D), k_codes/v_codes [B,Hkv,Skv,D] u8 (or
 * packed [.., D*bits/8]), k_scale/k_zero [B,Hkv,ceil(Skv/g),D] f32/f16,
 * v_scale/v_zero [B,Hkv,Skv,ceil(D/g)] f32/f16, out [B,Hq,Sq,D] f16/f32:
 * out = softmax(scale * q . k_hat^T) v_hat with k_hat = code*scale + zero.
 * nsg: splits of the kv axis per (b, kv head), 1..32, 0 = automatic.
 * Errors: D > 256 -> VQ_ERR_UNSUPPORTED. On a CUDA context also D % 8 != 0 or
 * a tensor whose data (with byte_offset) is not 16-byte aligned ->
 * VQ_ERR_UNSUPPORTED; runs on the ctx's stream without synchronising. */
VQ_API vq_status vq_kivi_fused_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes,
                                        const DLTensor *k_scale, const DLTensor *k_zero,
                                        const DLTensor *v_codes, const DLTensor *v_scale,
                                        const DLTensor *v_zero, int group_size, float scale, int nsg,
                                        DLTensor *out, const vq_scalar_attend_opts *opts);

typedef enum vq_rabitq_score {
    /* s = (D - 2 * popcount(sign(q) XOR k_bits)) * q_scale * k_mag + k_const: 1-bit query */
    VQ_RABITQ_SCORE_HAMMING = 0,
    /* s = (sum_j q_j * sign_j) * k_mag * q_scale + k_const: full-precision query */
    VQ_RABITQ_SCORE_EXACT = 1
} vq_rabitq_score;

typedef struct vq_rabitq_attend_opts {
    vq_rabitq_score score;     /* default VQ_RABITQ_SCORE_HAMMING */
    const DLTensor *v_scale;   /* [B,Hkv,Skv] f32 per-token value scale, or NULL */
    bool causal;               /* as vq_attend_opts.causal */
    int num_splits;            /* as vq_attend_opts.num_splits */
    DLTensor *lse_out;         /* as vq_attend_opts.lse_out (decode only; prefill: NULL) */
    /* p . v_hat arithmetic on the CPU (see vq_value_accum, "Codebook
     * values"); 0 = AUTO: INT8 in vq_rabitq_fused_attend on CPUs with AVX-512
     * VNNI and VBMI, F32 in vq_rabitq_prefill_attend. INT8 where the integer
     * kernel does not apply (D != 128, more than 16 centroids, a non-finite
     * centroid) runs F32. Values outside the enum give VQ_ERR_INVALID_ARGUMENT. */
    vq_value_accum value_accum;
} vq_rabitq_attend_opts;

/* Attention over 1-bit keys and codebook values.
 * q [B,Hq,Sq,D] f16/f32 pre-rotated, q_scale [B,Hq,Sq] f32 (fold 1/sqrt(D)
 * in), k_bits [B,Hkv,Skv,D/8] u8, k_mag [B,Hkv,Skv] f32, k_const [B,Hkv,Skv]
 * f32 or NULL (= 0), v_idx [B,Hkv,Skv,D] u8 or nibble-packed [B,Hkv,Skv,D/2]
 * u8 (detected from the shape; packed needs n_cents <= 16), v_cents [n_cents]
 * f32 (1..256), out [B,Hq,Sq,D] f16/f32. v_hat[j] = v_cents[v_idx[j]]
 * (times v_scale). Packed and unpacked values give bit-identical outputs.
 * Unpacked indices >= n_cents read centroid n_cents - 1 (clamped, never out of
 * bounds). Constraints: D % 8 == 0 (else VQ_ERR_INVALID_ARGUMENT), D <= 256
 * (else VQ_ERR_UNSUPPORTED). On a CUDA context tensors whose data (with
 * byte_offset) is not 16-byte aligned give VQ_ERR_UNSUPPORTED; runs on the
 * ctx's stream without synchronising. */
VQ_API vq_status vq_rabitq_fused_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *q_scale,
                                 const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                                 const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                                 const vq_rabitq_attend_opts *opts);

/* Prefill over a RaBitQ cache, built for large Sq: q [B,Hq,Sq,D] f16/f32,
 * scale [1] f32, k_bits/k_mag/k_const as above, v_idx nibble-packed
 * [B,Hkv,Skv,D/2] u8, v_cents [<= 16] f32, out [B,Hq,Sq,D] f16/f32.
 * s = (q . (sign * k_mag)) * scale + k_const (exact dots), every query row
 * over all Skv (no causal mask). K and V are decoded inside the tile loop and
 * never materialised. opts may carry v_scale; opts->score, causal and
 * lse_out must be left at their defaults (EXACT is implied; prefill gives no
 * log-sum-exp), else VQ_ERR_INVALID_ARGUMENT, on every context.
 * On a CUDA context (tensor cores, sm_80+ build; scale is read on the device;
 * runs on the ctx's stream without synchronising; opts->num_splits ignored):
 * q is rounded to f16 (exact for f16 q), the signs are exact, the scores and
 * the softmax are f32, and the probabilities (times v_scale) and the
 * centroids (divided by max|v_cents|, restored at the end) are rounded to f16
 * for the P.V product (f32 accumulation). Against the f32 CPU path:
 * |out - ref| <= max|v| (2^-10 + 2.2 dS + Skv 2^-24 + ~1e-5) per row, with
 * dS = scale * max k_mag * sum_j |q_j - f16(q_j)| (0 for f16 q), plus the f16
 * rounding of out. |v_scale| must stay within the f16 range (< 65504).
 * D % 8 == 0 and D <= 256 as on the CPU (D is padded to 64/128/256 inside);
 * tensors whose data (with byte_offset) is not 16-byte aligned give
 * VQ_ERR_UNSUPPORTED. */
VQ_API vq_status vq_rabitq_prefill_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *scale,
                                   const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                                   const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                                   const vq_rabitq_attend_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* VELOXQUANT_KERNELS_H */
