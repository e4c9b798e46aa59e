/* codec_turbo.cu — the rotation and the scalar quantizers on CUDA:
 * vq_hadamard, the TurboQuant scalar, Hadamard and RVQ codecs, and the scalar
 * codebook encoder. Row kernels give one row of D <= 1024 to a block, held in
 * shared memory through rotation, norms and quantization; element-wise
 * kernels are grid-stride loops. The level tables (Lloyd-Max or codebook
 * midpoints) are copied into shared memory once per block. */
#include "cuda/codec_common.cuh"

/* A level table in shared memory. */
struct levels_smem {
    float b[256];
    float c[256];
};

static __device__ void copy_levels(const vq_cu_levels &q, levels_smem *s)
{
    for (int k = threadIdx.x; k < 256; k += blockDim.x) {
        s->b[k] = q.b[k];
        s->c[k] = q.c[k];
    }
}

/* The tables of one or two stages, then a barrier. */
static __device__ void copy_stages(const vq_cu_levels &q1, const vq_cu_levels &q2, bool two, levels_smem *t1,
                                   levels_smem *t2)
{
    copy_levels(q1, t1);
    if (two) copy_levels(q2, t2);
    __syncthreads();
}

/* ---- vq_hadamard ---- */

/* x [rows, d] -> out [rows, d] (may alias: a row is read whole before written). */
static __global__ void hadamard_kernel(const void *x, bool x_f16, int64_t rows, int64_t d, const float *diag,
                                       bool inverse, void *out, bool out_f16)
{
    extern __shared__ double smem[];
    float *row = reinterpret_cast<float *>(smem + 32);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        vq_cu_load_row(x, x_f16, r, d, row);
        vq_cu_rotate_row(row, d, diag, inverse);
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) vq_cu_store(out, out_f16, r * d + j, row[j]);
        __syncthreads();
    }
}

extern "C" int vq_cu_hadamard(const DLTensor *x, const DLTensor *diag, bool inverse, DLTensor *out, void *stream)
{
    const int64_t d = vq_cu_last(x), rows = vq_cu_numel(x) / d;
    hadamard_kernel<<<vq_cu_row_blocks(rows), vq_cu_row_threads(d), vq_cu_row_smem(d), (cudaStream_t)stream>>>(
        vq_cu_ptr<const void>(x), vq_cu_is_f16(x), rows, d, diag ? vq_cu_ptr<const float>(diag) : nullptr, inverse,
        vq_cu_ptr<void>(out), vq_cu_is_f16(out));
    return vq_cu_launched();
}

/* ---- scalar codec: element-wise ---- */

/* x [n] -> idx [n] = level of x (the CPU multiplies by 1.0f: the same value). */
static __global__ void levels_quantize_kernel(const void *x, bool f16, int64_t n,
                                              const __grid_constant__ vq_cu_levels q, uint8_t *idx)
{
    __shared__ levels_smem t;
    copy_levels(q, &t);
    __syncthreads();
    VQ_CU_GRID_STRIDE(i, n) idx[i] = (uint8_t)vq_cu_level_of(t.b, q.log2_levels, vq_cu_load(x, f16, i));
}

/* idx [n] -> out [n] = scale * c[idx & mask]. */
static __global__ void levels_dequantize_kernel(const uint8_t *idx, int64_t n, const __grid_constant__ vq_cu_levels q,
                                                float scale, void *out, bool f16)
{
    __shared__ levels_smem t;
    copy_levels(q, &t);
    __syncthreads();
    VQ_CU_GRID_STRIDE(i, n) vq_cu_store(out, f16, i, __fmul_rn(scale, t.c[idx[i] & q.mask]));
}

extern "C" int vq_cu_levels_quantize(const DLTensor *x, const vq_cu_levels *q, DLTensor *idx, void *stream)
{
    const int64_t n = vq_cu_numel(x);
    levels_quantize_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(
        vq_cu_ptr<const void>(x), vq_cu_is_f16(x), n, *q, vq_cu_ptr<uint8_t>(idx));
    return vq_cu_launched();
}

extern "C" int vq_cu_levels_dequantize(const DLTensor *idx, const vq_cu_levels *q, float scale, DLTensor *out,
                                       void *stream)
{
    const int64_t n = vq_cu_numel(idx);
    levels_dequantize_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(
        vq_cu_ptr<const uint8_t>(idx), n, *q, scale, vq_cu_ptr<void>(out), vq_cu_is_f16(out));
    return vq_cu_launched();
}

/* ---- scalar codebook encoder ---- */

/* x [n] -> idx [n]: nearest of cents [nc] (ascending, repeats allowed). Each
 * block's first thread builds the tables of codecs/codebook.c: the distinct
 * values' midpoints (rounded once from float64) and, per distinct value, its
 * lowest index. Cents that are not finite or not ascending are not detected
 * here (the host cannot read them); indices stay within [0, nc). */
static __global__ void codebook_quantize_kernel(const void *x, bool f16, int64_t n, const float *cents, int nc,
                                                uint8_t *idx)
{
    __shared__ float b[256];
    __shared__ uint8_t lut[256];
    __shared__ int log2_levels;
    if (threadIdx.x == 0) {
        int distinct = 0;
        for (int i = 0; i < nc; i++) {
            if (i > 0 && cents[i] == cents[i - 1]) continue;
            if (distinct > 0) b[distinct - 1] = (float)(0.5 * ((double)cents[lut[distinct - 1]] + (double)cents[i]));
            lut[distinct++] = (uint8_t)i;
        }
        for (int k = distinct - 1; k < 256; k++) b[k] = __int_as_float(0x7f800000);  /* +inf padding */
        int l = 0;
        while ((1 << l) < distinct) l++;
        log2_levels = l;
    }
    __syncthreads();
    VQ_CU_GRID_STRIDE(i, n) idx[i] = lut[vq_cu_level_of(b, log2_levels, vq_cu_load(x, f16, i))];
}

extern "C" int vq_cu_codebook_quantize(const DLTensor *x, const DLTensor *cents, DLTensor *idx, void *stream)
{
    const int64_t n = vq_cu_numel(x);
    /* fewer, fuller blocks: each one builds its tables serially first */
    codebook_quantize_kernel<<<vq_cu_blocks(n, 256 * 16), 256, 0, (cudaStream_t)stream>>>(
        vq_cu_ptr<const void>(x), vq_cu_is_f16(x), n, vq_cu_ptr<const float>(cents), (int)cents->shape[0],
        vq_cu_ptr<uint8_t>(idx));
    return vq_cu_launched();
}

/* ---- Hadamard codec and two-stage RVQ: one row per block ---- */

/* Quantizes the rotated row y [d] (shared) against table t: writes idx [d]
 * and returns the scale (vq_turbo_quantize_rotated). With `residual`, y
 * becomes y - scale * c[idx]. Every thread returns the same scale. */
static __device__ float quantize_stage(float *y, int64_t d, const levels_smem *t, int log2_levels, bool norm_correct,
                                       bool residual, uint8_t *idx, double *red)
{
    double ss = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) ss += (double)y[j] * (double)y[j];
    ss = vq_cu_block_sum(ss, red);
    float scale = (float)sqrt(ss / (double)d);
    const float mul = scale > 0.0f ? 1.0f / scale : 0.0f;
    double dot = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        const int lvl = vq_cu_level_of(t->b, log2_levels, __fmul_rn(y[j], mul));
        idx[j] = (uint8_t)lvl;
        if (norm_correct) dot += (double)t->c[lvl] * (double)y[j];
        if (residual) y[j] = __fadd_rn(y[j], __fmul_rn(-scale, t->c[lvl]));
    }
    if (norm_correct) {
        dot = vq_cu_block_sum(dot, red);
        if (dot > 0.0) scale = (float)(ss / dot);
    }
    __syncthreads();  /* the residual is complete before anyone reads it */
    return scale;
}

/* x [rows, d] -> rot -> (idx1, scale1) [, residual -> (idx2, scale2)]. */
static __global__ void turbo_encode_kernel(const void *x, bool f16, int64_t rows, int64_t d, const float *diag,
                                           const __grid_constant__ vq_cu_levels q1, bool norm_correct, uint8_t *idx1,
                                           float *scale1, const __grid_constant__ vq_cu_levels q2, bool two,
                                           uint8_t *idx2, float *scale2)
{
    __shared__ levels_smem t1, t2;
    extern __shared__ double smem[];
    float *y = reinterpret_cast<float *>(smem + 32);
    copy_stages(q1, q2, two, &t1, &t2);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        vq_cu_load_row(x, f16, r, d, y);
        vq_cu_rotate_row(y, d, diag, false);
        const float a = quantize_stage(y, d, &t1, q1.log2_levels, norm_correct, two, idx1 + r * d, smem);
        float b = 0.0f;
        if (two) b = quantize_stage(y, d, &t2, q2.log2_levels, false, false, idx2 + r * d, smem);
        if (threadIdx.x == 0) {
            scale1[r] = a;
            if (two) scale2[r] = b;
        }
    }
}

/* (idx1, scale1) [+ (idx2, scale2)] -> y_hat -> rot^-1 -> out [rows, d]. */
static __global__ void turbo_decode_kernel(const uint8_t *idx1, const float *scale1,
                                           const __grid_constant__ vq_cu_levels q1, const uint8_t *idx2,
                                           const float *scale2, const __grid_constant__ vq_cu_levels q2, bool two,
                                           const float *diag, int64_t rows, int64_t d, void *out, bool f16)
{
    __shared__ levels_smem t1, t2;
    extern __shared__ double smem[];
    float *y = reinterpret_cast<float *>(smem + 32);
    copy_stages(q1, q2, two, &t1, &t2);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float a = scale1[r], b = two ? scale2[r] : 0.0f;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
            float v = __fmul_rn(a, t1.c[idx1[r * d + j] & q1.mask]);
            if (two) v = __fadd_rn(v, __fmul_rn(b, t2.c[idx2[r * d + j] & q2.mask]));
            y[j] = v;
        }
        vq_cu_rotate_row(y, d, diag, true);
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) vq_cu_store(out, f16, r * d + j, y[j]);
        __syncthreads();
    }
}

extern "C" int vq_cu_turbo_encode(const DLTensor *x, const DLTensor *diag, const vq_cu_levels *q1, bool norm_correct,
                                  DLTensor *idx1, DLTensor *scale1, const vq_cu_levels *q2, DLTensor *idx2,
                                  DLTensor *scale2, void *stream)
{
    const int64_t d = vq_cu_last(x), rows = vq_cu_numel(x) / d;
    const bool two = q2 != nullptr;
    turbo_encode_kernel<<<vq_cu_row_blocks(rows), vq_cu_row_threads(d), vq_cu_row_smem(d), (cudaStream_t)stream>>>(
        vq_cu_ptr<const void>(x), vq_cu_is_f16(x), rows, d, diag ? vq_cu_ptr<const float>(diag) : nullptr, *q1,
        norm_correct, vq_cu_ptr<uint8_t>(idx1), vq_cu_ptr<float>(scale1), two ? *q2 : *q1, two,
        two ? vq_cu_ptr<uint8_t>(idx2) : nullptr, two ? vq_cu_ptr<float>(scale2) : nullptr);
    return vq_cu_launched();
}

extern "C" int vq_cu_turbo_decode(const DLTensor *idx1, const DLTensor *scale1, const vq_cu_levels *q1,
                                  const DLTensor *idx2, const DLTensor *scale2, const vq_cu_levels *q2,
                                  const DLTensor *diag, DLTensor *out, void *stream)
{
    const int64_t d = vq_cu_last(out), rows = vq_cu_numel(out) / d;
    const bool two = q2 != nullptr;
    turbo_decode_kernel<<<vq_cu_row_blocks(rows), vq_cu_row_threads(d), vq_cu_row_smem(d), (cudaStream_t)stream>>>(
        vq_cu_ptr<const uint8_t>(idx1), vq_cu_ptr<const float>(scale1), *q1,
        two ? vq_cu_ptr<const uint8_t>(idx2) : nullptr, two ? vq_cu_ptr<const float>(scale2) : nullptr,
        two ? *q2 : *q1, two, diag ? vq_cu_ptr<const float>(diag) : nullptr, rows, d, vq_cu_ptr<void>(out),
        vq_cu_is_f16(out));
    return vq_cu_launched();
}
