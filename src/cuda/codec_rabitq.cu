/* codec_rabitq.cu — the RaBitQ codec on CUDA (layout:
 * formats/format_rabitq.h): the encoder (one row per block: rotation in
 * shared memory, one thread per sign byte, float64 norms), the Hamming
 * scorer (one thread per candidate) and the nibble packer of value indices. */
#include "cuda/codec_common.cuh"
#include "formats/format_rabitq.h"

/* keys [rows, d] -> y = rot(k) -> bits [rows, d/8], mag [rows]. */
static __global__ void rabitq_encode_kernel(const void *keys, bool f16, int64_t rows, int64_t d, const float *diag,
                                            bool unbiased, uint8_t *bits, float *mag)
{
    extern __shared__ double smem[];
    float *y = reinterpret_cast<float *>(smem + 32);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        vq_cu_load_row(keys, f16, r, d, y);
        vq_cu_rotate_row(y, d, diag, false);
        double l1 = 0.0, l2 = 0.0;
        for (int64_t byte = threadIdx.x; byte < d / 8; byte += blockDim.x) {
            uint32_t b = 0;
            for (int k = 0; k < 8; k++) {
                const float v = y[byte * 8 + k];
                b |= (uint32_t)(v >= 0.0f) << k;
                l1 += fabs((double)v);
                l2 += (double)v * (double)v;
            }
            bits[r * (d / 8) + byte] = (uint8_t)b;
        }
        l1 = vq_cu_block_sum(l1, smem);
        l2 = vq_cu_block_sum(l2, smem);
        /* rabitq.c's magnitude(): L1 = ||y||_1 / D, unbiased = ||y||^2 / ||y||_1, 0 for a zero row */
        if (threadIdx.x == 0) mag[r] = l1 == 0.0 ? 0.0f : (float)(unbiased ? l2 / l1 : l1 / (double)d);
        __syncthreads();
    }
}

extern "C" int vq_cu_rabitq_encode(const DLTensor *keys, const DLTensor *diag, bool unbiased, DLTensor *k_bits,
                                   DLTensor *k_mag, void *stream)
{
    const int64_t d = vq_cu_last(keys), rows = vq_cu_numel(keys) / d;
    rabitq_encode_kernel<<<vq_cu_row_blocks(rows), vq_cu_row_threads(d), vq_cu_row_smem(d), (cudaStream_t)stream>>>(
        vq_cu_ptr<const void>(keys), vq_cu_is_f16(keys), rows, d, diag ? vq_cu_ptr<const float>(diag) : nullptr,
        unbiased, vq_cu_ptr<uint8_t>(k_bits), vq_cu_ptr<float>(k_mag));
    return vq_cu_launched();
}

/* out[i] = popcount(qbits XOR bits[i]) * scale + cx[i], rounded as the CPU does. */
static __global__ void hamming_score_kernel(const uint8_t *qbits, const uint8_t *bits, int64_t n, int64_t nbytes,
                                            const float *cx, const float *scale, float *out)
{
    const float s = *scale;
    VQ_CU_GRID_STRIDE(i, n) {
        const int ham = vq_rabitq_hamming(qbits, bits + i * nbytes, nbytes);
        out[i] = __fadd_rn(__fmul_rn((float)ham, s), cx[i]);
    }
}

extern "C" int vq_cu_rabitq_hamming_score(const DLTensor *qbits, const DLTensor *bits, const DLTensor *cx,
                                          const DLTensor *scale, DLTensor *out, void *stream)
{
    const int64_t n = bits->shape[0], nbytes = bits->shape[1];
    hamming_score_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(
        vq_cu_ptr<const uint8_t>(qbits), vq_cu_ptr<const uint8_t>(bits), n, nbytes, vq_cu_ptr<const float>(cx),
        vq_cu_ptr<const float>(scale), vq_cu_ptr<float>(out));
    return vq_cu_launched();
}

/* v_idx [2n] -> out [n]: low nibble = even element. */
static __global__ void pack_values_kernel(const uint8_t *v_idx, int64_t n, uint8_t *out)
{
    VQ_CU_GRID_STRIDE(i, n) out[i] = vq_rabitq_pack_pair(v_idx[2 * i], v_idx[2 * i + 1]);
}

extern "C" int vq_cu_rabitq_pack_values(const DLTensor *v_idx, DLTensor *out, void *stream)
{
    const int64_t n = vq_cu_numel(out);
    pack_values_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(vq_cu_ptr<const uint8_t>(v_idx), n,
                                                                               vq_cu_ptr<uint8_t>(out));
    return vq_cu_launched();
}
