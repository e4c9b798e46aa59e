/* codec_vecinfer.cu — VecInfer product VQ on CUDA (layout:
 * formats/format_vecinfer.h). The encoder gives one warp to each (token,
 * subspace): the smoothed slice in shared memory, then vq_cu_warp_nearest.
 * The decoder and the query tables are one thread per output element.
 * Distances and dots are summed in channel order without FMA, as the CPU
 * scalar kernels do, so codes agree except at exact ties of rounding. */
#include "cuda/codec_common.cuh"
#include "formats/format_vecinfer.h"

/* Geometry: rows = B*H*S token rows of D channels, row r in head (r / S) % H. */
struct vecinfer_geom {
    int64_t rows, H, S, D;
    vq_vecinfer_layout L;
    bool cb_per_head, smooth_per_head;
};

static vecinfer_geom geom_of(const DLTensor *x, int64_t S, const DLTensor *codebook, const DLTensor *smooth, int idx_bytes)
{
    vecinfer_geom g;
    g.D = vq_cu_last(x);
    g.rows = vq_cu_numel(x) / g.D;
    g.H = x->shape[1];
    g.S = S;
    const int64_t M = codebook->shape[codebook->ndim - 3];
    g.L.M = (int32_t)M;
    g.L.dsub = (int32_t)(g.D / M);
    g.L.C = (int32_t)codebook->shape[codebook->ndim - 2];
    g.L.idx_bytes = idx_bytes;
    g.cb_per_head = codebook->ndim == 4;
    g.smooth_per_head = smooth->ndim == 2;
    return g;
}

static __device__ __forceinline__ int64_t head_of(const vecinfer_geom &g, int64_t row) { return (row / g.S) % g.H; }
/* Subspace m's centroids [C, dsub] for head h. */
static __device__ __forceinline__ const float *cents_of(const vecinfer_geom &g, const float *cb, int64_t h, int64_t m)
{
    return cb + ((g.cb_per_head ? h * g.L.M : 0) + m) * (int64_t)g.L.C * g.L.dsub;
}
static __device__ __forceinline__ const float *smooth_of(const vecinfer_geom &g, const float *s, int64_t h)
{
    return s + (g.smooth_per_head ? h * g.D : 0);
}

/* One warp per (row, m): idx = nearest centroid of (k / s)[m-th slice];
 * keys_out (when not NULL) = the centroid ⊙ s. */
static __global__ void vecinfer_encode_kernel(vecinfer_geom g, const void *keys, bool f16, const float *cb, const float *smooth,
                                        void *idx, void *keys_out, bool out_f16)
{
    extern __shared__ float sh[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int64_t dsub = g.L.dsub;
    float *xs = sh + warp * dsub;
    for (int64_t task = (int64_t)blockIdx.x * warps + warp; task < g.rows * g.L.M; task += (int64_t)gridDim.x * warps) {
        const int64_t row = task / g.L.M, m = task % g.L.M, h = head_of(g, row), c0 = m * dsub;
        const float *s = smooth_of(g, smooth, h), *cents = cents_of(g, cb, h, m);
        for (int64_t j = lane; j < dsub; j += 32) xs[j] = vq_cu_load(keys, f16, row * g.D + c0 + j) / s[c0 + j];
        __syncwarp();
        const int32_t best_c = vq_cu_warp_nearest(xs, cents, dsub, g.L.C);
        if (lane == 0) {
            if (g.L.idx_bytes == 1) static_cast<uint8_t *>(idx)[task] = (uint8_t)best_c;
            else static_cast<uint16_t *>(idx)[task] = (uint16_t)best_c;
        }
        if (keys_out != nullptr)
            for (int64_t j = lane; j < dsub; j += 32)
                vq_cu_store(keys_out, out_f16, row * g.D + c0 + j, __fmul_rn(cents[best_c * dsub + j], s[c0 + j]));
        __syncwarp();  /* xs is rewritten by the warp's next task */
    }
}

extern "C" int vq_cu_vecinfer_encode(const DLTensor *keys, const DLTensor *codebook, const DLTensor *smooth,
                                     DLTensor *idx, DLTensor *keys_out, void *stream)
{
    const vecinfer_geom g = geom_of(keys, keys->shape[2], codebook, smooth, vq_cu_elem_bytes(idx));
    const int warps = g.L.dsub > VQ_CU_NEAREST_MAX_DIM / 8 ? 1 : 8;
    const int64_t tasks = g.rows * g.L.M;
    const unsigned blocks = vq_cu_blocks(tasks, warps);
    vecinfer_encode_kernel<<<blocks, 32 * warps, (size_t)warps * g.L.dsub * sizeof(float), (cudaStream_t)stream>>>(
        g, vq_cu_ptr<const void>(keys), vq_cu_is_f16(keys), vq_cu_ptr<const float>(codebook),
        vq_cu_ptr<const float>(smooth), vq_cu_ptr<void>(idx), keys_out ? vq_cu_ptr<void>(keys_out) : nullptr,
        keys_out ? vq_cu_is_f16(keys_out) : false);
    return vq_cu_launched();
}

/* One thread per output element: codebook[m, idx[m]][j] * s (indices clamped). */
static __global__ void vecinfer_decode_kernel(vecinfer_geom g, const void *idx, const float *cb, const float *smooth, void *out,
                                        bool f16)
{
    VQ_CU_GRID_STRIDE(k, g.rows * g.D) {
        const int64_t row = k / g.D, c = k % g.D, h = head_of(g, row), m = c / g.L.dsub;
        const char *codes = static_cast<const char *>(idx) + row * g.L.M * g.L.idx_bytes;
        const uint32_t code = vq_vecinfer_code(&g.L, codes, (int32_t)m);
        const float v = cents_of(g, cb, h, m)[code * g.L.dsub + c % g.L.dsub];
        vq_cu_store(out, f16, k, __fmul_rn(v, smooth_of(g, smooth, h)[c]));
    }
}

extern "C" int vq_cu_vecinfer_dequant(const DLTensor *idx, const DLTensor *codebook, const DLTensor *smooth,
                                      DLTensor *keys_out, void *stream)
{
    const vecinfer_geom g = geom_of(keys_out, keys_out->shape[2], codebook, smooth, vq_cu_elem_bytes(idx));
    vecinfer_decode_kernel<<<vq_cu_blocks(g.rows * g.D, 256), 256, 0, (cudaStream_t)stream>>>(
        g, vq_cu_ptr<const void>(idx), vq_cu_ptr<const float>(codebook), vq_cu_ptr<const float>(smooth),
        vq_cu_ptr<void>(keys_out), vq_cu_is_f16(keys_out));
    return vq_cu_launched();
}

/* One thread per (row, m, c): lut = (q ⊙ s)[m-th slice] . codebook[m, c]. */
static __global__ void vecinfer_lut_kernel(vecinfer_geom g, const void *q, bool f16, const float *cb, const float *smooth,
                                     float *lut)
{
    const int64_t per_row = (int64_t)g.L.M * g.L.C, dsub = g.L.dsub;
    VQ_CU_GRID_STRIDE(k, g.rows * per_row) {
        const int64_t row = k / per_row, m = (k % per_row) / g.L.C, c = k % g.L.C, h = head_of(g, row);
        const float *s = smooth_of(g, smooth, h) + m * dsub, *cent = cents_of(g, cb, h, m) + c * dsub;
        const int64_t x0 = row * g.D + m * dsub;
        float acc = 0.0f;
        for (int64_t j = 0; j < dsub; j++)
            acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(vq_cu_load(q, f16, x0 + j), s[j]), cent[j]));
        lut[k] = acc;
    }
}

extern "C" int vq_cu_vecinfer_query_lut(const DLTensor *queries, const DLTensor *codebook, const DLTensor *smooth,
                                        DLTensor *lut, void *stream)
{
    const int64_t S = queries->ndim == 4 ? queries->shape[2] : 1;
    const vecinfer_geom g = geom_of(queries, S, codebook, smooth, 1);
    vecinfer_lut_kernel<<<vq_cu_blocks(g.rows * g.L.M * g.L.C, 256), 256, 0, (cudaStream_t)stream>>>(
        g, vq_cu_ptr<const void>(queries), vq_cu_is_f16(queries), vq_cu_ptr<const float>(codebook),
        vq_cu_ptr<const float>(smooth), vq_cu_ptr<float>(lut));
    return vq_cu_launched();
}
