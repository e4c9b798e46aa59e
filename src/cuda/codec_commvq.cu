/* codec_commvq.cu — vq_commvq_decode on CUDA (layout:
 * formats/format_commvq.h): one thread per RoPE pair of one token sums the
 * pair's two channels over the R stages, scales and rotates them. Codes and
 * positions are clamped by the format's helpers (the host cannot screen
 * device memory), and the arithmetic is the format decoder's, without FMA. */
#include "cuda/codec_common.cuh"
#include "formats/format_commvq.h"

struct commvq_geom {
    vq_commvq_layout L;
    int64_t rows, H, S, P;
    bool pos_per_batch;
};

/* indices [rows, R] -> out [rows, D]; thread k = (row, pair i). */
static __global__ void commvq_decode_kernel(commvq_geom g, const void *idx, const float *cb, const float *cos_f,
                                            const float *sin_f, const int32_t *pos, const float *scale, void *out,
                                            bool f16)
{
    const int64_t half = g.L.D / 2;
    VQ_CU_GRID_STRIDE(k, g.rows * half) {
        const int64_t row = k / half, b = row / (g.H * g.S), s = row % g.S;
        const int32_t i = (int32_t)(k % half);
        int32_t ia, ib;
        vq_rope_pair(g.L.rope, g.L.D, i, &ia, &ib);
        const char *codes = static_cast<const char *>(idx) + row * g.L.R * g.L.idx_bytes;
        float xa = 0.0f, xb = 0.0f;
        for (int32_t r = 0; r < g.L.R; r++) {
            const float *cent = cb + ((int64_t)r * g.L.C + vq_commvq_code(&g.L, codes, r)) * g.L.D;
            xa = __fadd_rn(xa, cent[ia]);
            xb = __fadd_rn(xb, cent[ib]);
        }
        const float sc = scale ? scale[row] : 1.0f;
        xa = __fmul_rn(xa, sc);
        xb = __fmul_rn(xb, sc);
        const int64_t p = vq_commvq_position(pos[(g.pos_per_batch ? b * g.S : 0) + s], g.P);
        const float c = cos_f[p * half + i], sn = sin_f[p * half + i];
        vq_cu_store(out, f16, row * g.L.D + ia, __fsub_rn(__fmul_rn(xa, c), __fmul_rn(xb, sn)));
        vq_cu_store(out, f16, row * g.L.D + ib, __fadd_rn(__fmul_rn(xa, sn), __fmul_rn(xb, c)));
    }
}

extern "C" int vq_cu_commvq_decode(const DLTensor *indices, const DLTensor *codebook, const DLTensor *cos_freqs,
                                    const DLTensor *sin_freqs, const DLTensor *positions, const DLTensor *scale,
                                    int rope, DLTensor *out, void *stream)
{
    commvq_geom g;
    g.L.R = (int32_t)indices->shape[3];
    g.L.C = (int32_t)codebook->shape[1];
    g.L.D = (int32_t)out->shape[3];
    g.L.idx_bytes = vq_cu_elem_bytes(indices);
    g.L.rope = rope;
    g.H = indices->shape[1];
    g.S = indices->shape[2];
    g.rows = indices->shape[0] * g.H * g.S;
    g.P = cos_freqs->shape[0];
    g.pos_per_batch = positions->ndim == 2;
    commvq_decode_kernel<<<vq_cu_blocks(g.rows * (g.L.D / 2), 256), 256, 0, (cudaStream_t)stream>>>(
        g, vq_cu_ptr<const void>(indices), vq_cu_ptr<const float>(codebook), vq_cu_ptr<const float>(cos_freqs),
        vq_cu_ptr<const float>(sin_freqs), vq_cu_ptr<const int32_t>(positions),
        scale ? vq_cu_ptr<const float>(scale) : nullptr, vq_cu_ptr<void>(out), vq_cu_is_f16(out));
    return vq_cu_launched();
}

/* Greedy residual encoder: one warp per token, its residual [D] in shared
 * memory; stage r picks the centroid nearest the residual
 * (vq_cu_warp_nearest) and subtracts it. */
static __global__ void commvq_encode_kernel(const void *keys, bool f16, int64_t rows, int64_t D, const float *cb,
                                            int32_t R, int32_t C, void *idx, int idx_bytes)
{
    extern __shared__ float sh[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    float *res = sh + warp * D;
    for (int64_t row = (int64_t)blockIdx.x * warps + warp; row < rows; row += (int64_t)gridDim.x * warps) {
        for (int64_t j = lane; j < D; j += 32) res[j] = vq_cu_load(keys, f16, row * D + j);
        __syncwarp();
        for (int32_t r = 0; r < R; r++) {
            const float *stage = cb + (int64_t)r * C * D;
            const int32_t best_c = vq_cu_warp_nearest(res, stage, D, C);
            if (lane == 0) {
                const int64_t at = row * R + r;
                if (idx_bytes == 1) static_cast<uint8_t *>(idx)[at] = (uint8_t)best_c;
                else if (idx_bytes == 2) static_cast<uint16_t *>(idx)[at] = (uint16_t)best_c;
                else static_cast<int32_t *>(idx)[at] = best_c;
            }
            for (int64_t j = lane; j < D; j += 32) res[j] = __fsub_rn(res[j], stage[(int64_t)best_c * D + j]);
            __syncwarp();
        }
    }
}

extern "C" int vq_cu_commvq_encode(const DLTensor *keys, const DLTensor *codebook, DLTensor *indices, void *stream)
{
    const int64_t D = keys->shape[3], rows = vq_cu_numel(keys) / D;
    const int warps = D > VQ_CU_NEAREST_MAX_DIM / 8 ? 1 : 8;
    commvq_encode_kernel<<<vq_cu_blocks(rows, warps), 32 * warps, (size_t)warps * D * sizeof(float),
                           (cudaStream_t)stream>>>(vq_cu_ptr<const void>(keys), vq_cu_is_f16(keys), rows, D,
                                                   vq_cu_ptr<const float>(codebook), (int32_t)codebook->shape[0],
                                                   (int32_t)codebook->shape[1], vq_cu_ptr<void>(indices),
                                                   vq_cu_elem_bytes(indices));
    return vq_cu_launched();
}
