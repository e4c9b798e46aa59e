/* cache_recipe.cu — the KV cache's per-channel kernels (recipe_launch.h):
 * the exact transforms applied to appended rows and to queries, the value
 * mean added back and the log-sum-exp moved back to the untransformed scores
 * after a recipe attend, and the f16 <-> f32 conversion of the TurboQuant
 * windows' scales. Each computes in f32 in the CPU cache's order of
 * operations (cache_recipe.c), so a row is transformed and rounded to f16 to
 * the same bits on both backends. */
#include "cuda/codec_common.cuh"
#include "cuda/recipe_launch.h"

static __global__ void recipe_rows_kernel(const void *x, bool x_f16, int64_t sh, int64_t st, int64_t T, int D,
                                          const float *mean, const float *scale, int64_t n, __half *dst)
{
    VQ_CU_GRID_STRIDE(k, n) {
        const int64_t h = k / (T * D), t = (k / D) % T, e = k % D;
        float v = vq_cu_load(x, x_f16, h * sh + t * st + e);
        if (mean) v = v - mean[h * D + e];
        if (scale) v = v * scale[h * D + e];
        dst[k] = __float2half_rn(v);
    }
}

extern "C" int vq_cu_recipe_rows(const void *x, bool x_f16, int64_t sh, int64_t st, int H, int64_t T, int D,
                                 const float *mean, const float *scale, void *dst, void *stream)
{
    const int64_t n = (int64_t)H * T * D;
    recipe_rows_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(x, x_f16, sh, st, T, D, mean, scale,
                                                                               n, (__half *)dst);
    return vq_cu_launched();
}

static __global__ void recipe_query_kernel(const void *q, bool q_f16, int64_t sh, int64_t st, int64_t T, int D,
                                           int G, const float *scale, int64_t n, float *dst)
{
    VQ_CU_GRID_STRIDE(k, n) {
        const int64_t h = k / (T * D), t = (k / D) % T, e = k % D;
        const float v = vq_cu_load(q, q_f16, h * sh + t * st + e);
        dst[k] = scale ? v / scale[(h / G) * D + e] : v;
    }
}

extern "C" int vq_cu_recipe_query(const void *q, bool q_f16, int64_t sh, int64_t st, int H, int64_t T, int D, int G,
                                  const float *scale, float *dst, void *stream)
{
    const int64_t n = (int64_t)H * T * D;
    recipe_query_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(q, q_f16, sh, st, T, D, G, scale, n,
                                                                                dst);
    return vq_cu_launched();
}

/* One CTA of 128 threads per row (h, t). */
static __global__ void recipe_finish_kernel(const float *src, const float *lse_src, bool zero_empty, const void *q,
                                            bool q_f16, int64_t qsh, int64_t qst, void *out, bool out_f16,
                                            int64_t osh, int64_t ost, float *lse, int64_t lsh, int64_t lst, int64_t T,
                                            int D, int G, const float *value_mean, const float *key_mean,
                                            double scale)
{
    __shared__ double red[32];
    const int64_t row = blockIdx.x, h = row / T, t = row % T, hk = h / G;
    const float l = src ? lse_src[row] : -INFINITY;
    const bool empty = src == nullptr || (zero_empty && l == -INFINITY);
    for (int e = threadIdx.x; e < D; e += blockDim.x) {
        const float o = empty ? 0.0f : value_mean ? src[row * D + e] + value_mean[hk * D + e] : src[row * D + e];
        vq_cu_store(out, out_f16, h * osh + t * ost + e, o);
    }
    if (lse == nullptr) return;
    double d = 0.0;
    if (key_mean && !empty)
        for (int e = threadIdx.x; e < D; e += blockDim.x)
            d += (double)vq_cu_load(q, q_f16, h * qsh + t * qst + e) * (double)key_mean[hk * D + e];
    d = vq_cu_block_sum(d, red);
    if (threadIdx.x == 0) lse[h * lsh + t * lst] = empty ? -INFINITY : key_mean ? (float)((double)l + d * scale) : l;
}

extern "C" int vq_cu_recipe_finish(const float *src, const float *lse_src, bool zero_empty, const void *q, bool q_f16,
                                   int64_t qsh, int64_t qst, void *out, bool out_f16, int64_t osh, int64_t ost,
                                   float *lse, int64_t lsh, int64_t lst, int H, int64_t T, int D, int G,
                                   const float *value_mean, const float *key_mean, double scale, void *stream)
{
    const int64_t rows = (int64_t)H * T;
    if (rows == 0) return 0;
    recipe_finish_kernel<<<(unsigned)rows, 128, 0, (cudaStream_t)stream>>>(
        src, lse_src, zero_empty, q, q_f16, qsh, qst, out, out_f16, osh, ost, lse, lsh, lst, T, D, G, value_mean,
        key_mean, scale);
    return vq_cu_launched();
}

static __global__ void convert_kernel(const void *src, bool src_f16, void *dst, bool dst_f16, int64_t n)
{
    VQ_CU_GRID_STRIDE(k, n) vq_cu_store(dst, dst_f16, k, vq_cu_load(src, src_f16, k));
}

extern "C" int vq_cu_convert(const void *src, bool src_f16, void *dst, bool dst_f16, int64_t n, void *stream)
{
    if (n == 0) return 0;
    convert_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(src, src_f16, dst, dst_f16, n);
    return vq_cu_launched();
}
