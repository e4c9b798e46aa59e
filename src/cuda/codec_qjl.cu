/* codec_qjl.cu — QJL sign sketches on CUDA: the encoder (one key per block,
 * the key in shared memory; lane l of a warp projects row 32w + l of S and a
 * ballot makes word w), the symmetric estimator (one thread per key) and the
 * asymmetric score (each block projects its query once into shared memory,
 * then one thread per key sums the signed projections). */
#include "cuda/codec_common.cuh"
#include "formats/format_common.h"

#define VQ_CU_PI 3.14159265358979323846

/* keys [rows, d], S [m, d] -> bits [rows, words]: bit j = ((S k)_j >= 0). */
static __global__ void qjl_encode_kernel(const void *keys, bool f16, int64_t rows, int64_t d, const float *S,
                                         int64_t m, int64_t words, uint32_t *bits)
{
    extern __shared__ float x[];
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        vq_cu_load_row(keys, f16, r, d, x);
        __syncthreads();
        for (int64_t w = threadIdx.x / 32; w < words; w += warps) {
            const int64_t j = w * 32 + lane;
            float p = 0.0f;
            if (j < m)
                for (int64_t k = 0; k < d; k++) p = fmaf(S[j * d + k], x[k], p);
            const uint32_t word = __ballot_sync(0xffffffffu, j < m && p >= 0.0f);
            if (lane == 0) bits[r * words + w] = word;
        }
        __syncthreads();
    }
}

extern "C" int vq_cu_qjl_encode(const DLTensor *keys, const DLTensor *projection, DLTensor *bits, void *stream)
{
    const int64_t d = vq_cu_last(keys), rows = vq_cu_numel(keys) / d, m = projection->shape[0];
    const int64_t words = vq_cu_last(bits);
    const int threads = 32 * (int)(words < 8 ? words : 8);
    qjl_encode_kernel<<<vq_cu_row_blocks(rows), threads, (size_t)d * sizeof(float), (cudaStream_t)stream>>>(
        vq_cu_ptr<const void>(keys), vq_cu_is_f16(keys), rows, d, vq_cu_ptr<const float>(projection), m, words,
        vq_cu_ptr<uint32_t>(bits));
    return vq_cu_launched();
}

/* out[l, i] = cos(pi * ham / m) (* qnorm[l]) (* knorm[l, i]), ham over the
 * first m bits of query l and key (l, i); one thread per key. */
static __global__ void qjl_inner_kernel(const uint32_t *qbits, const uint32_t *kbits, int64_t n_queries, int64_t n,
                                        int64_t m, const float *qnorm, const float *knorm, float *out)
{
    const int64_t words = (m + 31) / 32;
    const uint32_t last = (m & 31) ? (1u << (m & 31)) - 1u : 0xffffffffu;
    VQ_CU_GRID_STRIDE(k, n_queries * n) {
        const int64_t l = k / n;
        const uint32_t *a = qbits + l * words, *b = kbits + k * words;
        int ham = 0;
        for (int64_t w = 0; w + 1 < words; w++) ham += __popc(a[w] ^ b[w]);
        ham += __popc((a[words - 1] ^ b[words - 1]) & last);
        float v = __fmul_rn((float)cos(VQ_CU_PI / (double)m * (double)ham), qnorm ? qnorm[l] : 1.0f);
        if (knorm) v = __fmul_rn(v, knorm[k]);
        out[k] = v;
    }
}

extern "C" int vq_cu_qjl_inner_product(const DLTensor *query_bits, const DLTensor *key_bits, int sketch_dim,
                                       const DLTensor *query_norm, const DLTensor *key_norm, DLTensor *out,
                                       void *stream)
{
    const int64_t n = key_bits->shape[key_bits->ndim - 2], total = vq_cu_numel(out);
    qjl_inner_kernel<<<vq_cu_blocks(total, 256), 256, 0, (cudaStream_t)stream>>>(
        vq_cu_ptr<const uint32_t>(query_bits), vq_cu_ptr<const uint32_t>(key_bits), total / n, n, sketch_dim,
        query_norm ? vq_cu_ptr<const float>(query_norm) : nullptr,
        key_norm ? vq_cu_ptr<const float>(key_norm) : nullptr, vq_cu_ptr<float>(out));
    return vq_cu_launched();
}

enum { SCORE_KEYS = 256 };  /* keys per block of the score kernel (one per thread) */

/* Block (l, chunk): sq = S q_l in shared memory (a warp per row of S, lanes
 * along D), then out[l, i] = sqrt(pi/2)/m * knorm * sum_j sq_j sign_j for the
 * chunk's keys, summed in j order as the CPU scalar kernel does. */
static __global__ void qjl_score_kernel(const void *query, bool f16, int64_t d, const float *S, int64_t m,
                                        const uint32_t *kbits, const float *knorm, int64_t n, int64_t chunks,
                                        float *out)
{
    extern __shared__ float sh[];
    float *q = sh, *sq = sh + d;
    const int64_t l = blockIdx.x / chunks, i = (blockIdx.x % chunks) * SCORE_KEYS + threadIdx.x;
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    vq_cu_load_row(query, f16, l, d, q);
    __syncthreads();
    for (int64_t j = threadIdx.x / 32; j < m; j += warps) {
        float p = 0.0f;
        for (int64_t k = lane; k < d; k += 32) p = fmaf(S[j * d + k], q[k], p);
        for (int o = 16; o > 0; o >>= 1) p += __shfl_xor_sync(0xffffffffu, p, o);
        if (lane == 0) sq[j] = p;
    }
    __syncthreads();
    if (i >= n) return;
    const int64_t key = l * n + i, words = (m + 31) / 32;
    const uint32_t *b = kbits + key * words;
    float acc = 0.0f;
    for (int64_t j = 0; j < m; j++) acc = __fadd_rn(acc, vq_bit_u32(b, j) ? sq[j] : -sq[j]);
    const float c = (float)(sqrt(VQ_CU_PI / 2.0) / (double)m);
    out[key] = __fmul_rn(__fmul_rn(c, knorm[key]), acc);
}

extern "C" int vq_cu_qjl_score(const DLTensor *query, const DLTensor *projection, const DLTensor *key_bits,
                               const DLTensor *key_norm, DLTensor *out, void *stream)
{
    const int64_t d = vq_cu_last(query), m = projection->shape[0], n = key_bits->shape[key_bits->ndim - 2];
    const int64_t n_queries = vq_cu_numel(query) / d, chunks = (n + SCORE_KEYS - 1) / SCORE_KEYS;
    qjl_score_kernel<<<(unsigned)(n_queries * chunks), SCORE_KEYS, (size_t)(m + d) * sizeof(float),
                       (cudaStream_t)stream>>>(vq_cu_ptr<const void>(query), vq_cu_is_f16(query), d,
                                               vq_cu_ptr<const float>(projection), m,
                                               vq_cu_ptr<const uint32_t>(key_bits), vq_cu_ptr<const float>(key_norm),
                                               n, chunks, vq_cu_ptr<float>(out));
    return vq_cu_launched();
}
