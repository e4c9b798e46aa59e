/* codec_common.cuh — what the CUDA codec kernels share: DLTensor access on
 * the host side of a launcher, f16/f32 element access, grid sizing, block
 * reductions and the Hadamard rotation of one row held in shared memory.
 *
 * Arithmetic that the CPU kernels do as separate IEEE operations (no FMA) is
 * written with __fmul_rn / __fadd_rn here, so that nvcc does not contract it
 * and the two backends agree bit for bit where the CPU scalar path does. */
#ifndef VQ_CUDA_CODEC_COMMON_CUH
#define VQ_CUDA_CODEC_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/codec_launch.h"

/* ---- host side: tensors already validated by the public entry point ---- */

/* Data pointer with byte_offset applied. */
template <class T> static inline T *vq_cu_ptr(const DLTensor *t)
{
    return reinterpret_cast<T *>(static_cast<char *>(t->data) + t->byte_offset);
}

static inline int64_t vq_cu_numel(const DLTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static inline int64_t vq_cu_last(const DLTensor *t) { return t->shape[t->ndim - 1]; }

/* Float tensors are f16 or f32 here (bf16 is rejected before dispatch). */
static inline bool vq_cu_is_f16(const DLTensor *t) { return t->dtype.code == kDLFloat && t->dtype.bits == 16; }

/* Element size in bytes of an integer tensor (u8 1, u16 2, i32/u32 4). */
static inline int vq_cu_elem_bytes(const DLTensor *t) { return t->dtype.bits / 8; }

/* Blocks for a grid-stride loop over n items: enough to fill the card, capped
 * so the grid stays within limits whatever n. */
static inline unsigned vq_cu_blocks(int64_t n, int threads)
{
    const int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

/* Blocks for one-row-per-block kernels (grid-stride over rows). */
static inline unsigned vq_cu_row_blocks(int64_t rows) { return (unsigned)(rows > 65536 ? 65536 : rows); }

/* Threads of a row kernel over rows of d elements: one per pair of
 * elements (a butterfly), between one warp and 512. */
static inline int vq_cu_row_threads(int64_t d)
{
    const int64_t t = d / 2;
    return t < 32 ? 32 : (t > 512 ? 512 : (int)t);
}

/* Dynamic shared memory of a row kernel: 32 doubles for vq_cu_block_sum,
 * then the row [d] as f32. */
static inline size_t vq_cu_row_smem(int64_t d) { return 32 * sizeof(double) + (size_t)d * sizeof(float); }

static inline int vq_cu_launched(void) { return (int)cudaGetLastError(); }

/* ---- device side ---- */

#define VQ_CU_GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ float vq_cu_load(const void *base, bool f16, int64_t i)
{
    return f16 ? __half2float(static_cast<const __half *>(base)[i]) : static_cast<const float *>(base)[i];
}

static __device__ __forceinline__ void vq_cu_store(void *base, bool f16, int64_t i, float v)
{
    if (f16) static_cast<__half *>(base)[i] = __float2half_rn(v);
    else static_cast<float *>(base)[i] = v;
}

/* The nearest level of v: the number of padded boundaries b[k] < v, by the
 * branchless binary search of the CPU scalar kernel (NaN gives 0). */
static __device__ __forceinline__ int vq_cu_level_of(const float *b, int log2_levels, float v)
{
    int i = 0;
    for (int step = (1 << log2_levels) >> 1; step > 0; step >>= 1) i += v > b[i + step - 1] ? step : 0;
    return i;
}

/* Sum of v over the block; every thread gets the result. `red` holds 32
 * doubles of shared memory; the call begins and ends with a barrier so it
 * may be used back to back. */
static __device__ double vq_cu_block_sum(double v, double *red)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < warps; w++) s += red[w];  /* same order in every thread */
    return s;
}

/* row [d] in shared memory, rotated in place by the whole block: rot(x) =
 * H (diag ⊙ x) / sqrt(d), or rot^-1(y) = diag ⊙ (H y) / sqrt(d). The stages
 * and the final scaling are those of the CPU scalar kernel, element for
 * element. Ends with a barrier. */
static __device__ void vq_cu_rotate_row(float *row, int64_t d, const float *diag, bool inverse)
{
    if (!inverse && diag != nullptr)
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) row[j] = __fmul_rn(row[j], diag[j]);
    __syncthreads();
    for (int64_t h = 1; h < d; h <<= 1) {
        for (int64_t p = threadIdx.x; p < d / 2; p += blockDim.x) {
            const int64_t j = (p / h) * 2 * h + p % h;  /* p-th butterfly of this stage */
            const float a = row[j], b = row[j + h];
            row[j] = __fadd_rn(a, b);
            row[j + h] = __fsub_rn(a, b);
        }
        __syncthreads();
    }
    const float s = (float)(1.0 / sqrt((double)d));  /* vq_hadamard_norm */
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        row[j] = __fmul_rn(row[j], inverse && diag != nullptr ? __fmul_rn(s, diag[j]) : s);
    __syncthreads();
}

/* The c < C minimising ||x - cents[c]||^2 (x [n] in shared memory, cents
 * [C, n]), ties to the lower index, by the calling warp (all 32 lanes):
 * lanes scan c = lane, lane + 32, ..., summing in channel order without FMA
 * as the CPU scalar kernel does, then a warp argmin. Every lane gets the
 * answer; the warp has finished reading x when it returns. */
static __device__ int32_t vq_cu_warp_nearest(const float *x, const float *cents, int64_t n, int32_t C)
{
    const int lane = threadIdx.x % 32;
    float best = __int_as_float(0x7f800000);
    int32_t best_c = 0;
    for (int32_t c = lane; c < C; c += 32) {
        float acc = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            const float diff = __fsub_rn(x[j], cents[c * n + j]);
            acc = __fadd_rn(acc, __fmul_rn(diff, diff));
        }
        if (acc < best) {
            best = acc;
            best_c = c;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int32_t oc = __shfl_xor_sync(0xffffffffu, best_c, o);
        if (ob < best || (ob == best && oc < best_c)) {
            best = ob;
            best_c = oc;
        }
    }
    __syncwarp();
    return best_c;
}

/* binary16 <-> binary32 bit for bit as the host's vq_half_to_float /
 * vq_float_to_half (src/core/half.c), NaN payloads included, so that the
 * device encoders store the bytes the CPU ones do (the hardware conversions
 * round the same but make every NaN canonical). */
static __device__ __forceinline__ float vq_cu_half_bits_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
    return __half2float(__ushort_as_half(h)); /* finite: exact either way */
}

static __device__ __forceinline__ uint16_t vq_cu_float_to_half_bits(float f)
{
    const uint32_t u = __float_as_uint(f), abs = u & 0x7fffffffu;
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7c00u | 0x200u | ((abs >> 13) & 0x3ffu));
    return __half_as_ushort(__float2half_rn(f)); /* round to nearest even, overflow to inf: as the host */
}

/* Loads row r of x [rows, d] (f16/f32) into shared row [d] as f32. No barrier. */
static __device__ __forceinline__ void vq_cu_load_row(const void *x, bool f16, int64_t r, int64_t d, float *row)
{
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) row[j] = vq_cu_load(x, f16, r * d + j);
}

#endif /* VQ_CUDA_CODEC_COMMON_CUH */
