/* codec_bitpack.cu — vq_bit_pack / vq_bit_unpack on CUDA: the u32 stream of
 * formats/format_bitpack.h. Packing computes each output word on its own
 * thread (the elements overlapping it, straddlers included), so no word is
 * written twice and nothing is read-modify-written; unpacking gives each
 * element its own thread through the format's decoder. */
#include "cuda/codec_common.cuh"
#include "formats/format_bitpack.h"

/* idx [rows, n] -> out [rows, words]: one thread per output word. */
template <class T>
static __global__ void bit_pack_kernel(const T *idx, int64_t rows, int64_t n, int64_t words, int bits, uint32_t *out)
{
    const uint32_t mask = vq_bitpack_mask(bits);
    VQ_CU_GRID_STRIDE(k, rows * words) {
        const int64_t r = k / words, w = k % words, s0 = w * 32;
        const int64_t i0 = s0 / bits, i_end = (s0 + 32 + bits - 1) / bits;  /* elements overlapping the word */
        const T *row = idx + r * n;
        uint32_t word = 0;
        for (int64_t i = i0; i < i_end && i < n; i++) {
            const uint64_t v = (uint64_t)((uint32_t)row[i] & mask);
            const int64_t shift = i * bits - s0;
            word |= (uint32_t)(shift >= 0 ? v << shift : v >> -shift);
        }
        out[k] = word;
    }
}

/* packed [rows, words] -> out [rows, n]: one thread per element. */
template <class T>
static __global__ void bit_unpack_kernel(const uint32_t *packed, int64_t rows, int64_t n, int64_t words, int bits,
                                         T *out)
{
    VQ_CU_GRID_STRIDE(k, rows * n) {
        const int64_t r = k / n, i = k % n;
        out[k] = (T)vq_bitpack_get(packed + r * words, i, bits);
    }
}

extern "C" int vq_cu_bit_pack(const DLTensor *idx, int bits, DLTensor *out, void *stream)
{
    const int64_t n = vq_cu_last(idx), rows = vq_cu_numel(idx) / n, words = vq_cu_last(out);
    const unsigned blocks = vq_cu_blocks(rows * words, 256);
    cudaStream_t st = (cudaStream_t)stream;
    uint32_t *o = vq_cu_ptr<uint32_t>(out);
    switch (vq_cu_elem_bytes(idx)) {
    case 1: bit_pack_kernel<<<blocks, 256, 0, st>>>(vq_cu_ptr<const uint8_t>(idx), rows, n, words, bits, o); break;
    case 2: bit_pack_kernel<<<blocks, 256, 0, st>>>(vq_cu_ptr<const uint16_t>(idx), rows, n, words, bits, o); break;
    default: bit_pack_kernel<<<blocks, 256, 0, st>>>(vq_cu_ptr<const int32_t>(idx), rows, n, words, bits, o); break;
    }
    return vq_cu_launched();
}

extern "C" int vq_cu_bit_unpack(const DLTensor *packed, int bits, int64_t n, DLTensor *out, void *stream)
{
    const int64_t words = vq_cu_last(packed), rows = vq_cu_numel(out) / n;
    const unsigned blocks = vq_cu_blocks(rows * n, 256);
    cudaStream_t st = (cudaStream_t)stream;
    const uint32_t *p = vq_cu_ptr<const uint32_t>(packed);
    if (vq_cu_elem_bytes(out) == 1)
        bit_unpack_kernel<<<blocks, 256, 0, st>>>(p, rows, n, words, bits, vq_cu_ptr<uint8_t>(out));
    else
        bit_unpack_kernel<<<blocks, 256, 0, st>>>(p, rows, n, words, bits, vq_cu_ptr<int32_t>(out));
    return vq_cu_launched();
}
