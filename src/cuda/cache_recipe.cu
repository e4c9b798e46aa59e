/* cache_recipe.cu — the KV cache's per-channel kernels (recipe_launch.h):
 * the exact transforms applied to appended rows and to queries, the value
 * mean added back and the log-sum-exp moved back to the untransformed scores
 * after a recipe attend (with the sinks merged in, for the rows past them),
 * and the f16 <-> f32 conversion of the TurboQuant windows' scales. Each computes in f32 in the CPU cache's order of
 * operations (cache_recipe.c), so a row is transformed and rounded to f16 to
 * the same bits on both backends. */
#include "cuda/codec_common.cuh"
#include "cuda/recipe_launch.h"

static __global__ void recipe_group_rows_kernel(vq_cu_recipe_rows r, int64_t n)
{
    const int64_t H = r.H, T = r.T, D = r.D, per = (int64_t)r.n * H * T * D;
    VQ_CU_GRID_STRIDE(k, n) {
        const int half = k >= per;
        const int64_t q = k - half * per, i = q / (H * T * D), h = (q / (T * D)) % H, t = (q / D) % T, e = q % D;
        const vq_cu_recipe_seq sq = r.seqs[i];
        /* selects, not an index into the parameter arrays (which would copy them to the stack) */
        const void *x = half ? r.x[1] : r.x[0];
        const int64_t s0 = half ? r.xs[1][0] : r.xs[0][0], s1 = half ? r.xs[1][1] : r.xs[0][1];
        const int64_t s2 = half ? r.xs[1][2] : r.xs[0][2];
        float v = vq_cu_load(x, r.f16, sq.b * s0 + h * s1 + (r.ns + t) * s2 + e);
        if (sq.xf) {
            v = v - sq.xf[half * H * D + h * D + e];
            if (half == 0) v = v * sq.xf[2 * H * D + h * D + e];
        }
        static_cast<__half *>(half ? r.dst[1] : r.dst[0])[q] = __float2half_rn(v);
    }
}

extern "C" int vq_cu_recipe_group_rows(const vq_cu_recipe_rows *r, void *stream)
{
    const int64_t n = 2 * (int64_t)r->n * r->H * r->T * r->D;
    if (n == 0) return 0;
    recipe_group_rows_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(*r, n);
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

static __global__ void recipe_group_query_kernel(vq_cu_recipe_group g, int64_t n, float *gq)
{
    const int64_t Hkv = g.Hq / g.G, T = g.T, D = g.D;
    VQ_CU_GRID_STRIDE(k, n) {
        const int64_t gi = k / (g.Hq * T * D), h = (k / (T * D)) % g.Hq, t = (k / D) % T, e = k % D;
        const vq_cu_recipe_seq sq = g.seqs[gi];
        const float v = vq_cu_load(g.q, g.q_f16, sq.b * g.qs[0] + h * g.qs[1] + (g.ns + t) * g.qs[2] + e);
        gq[k] = g.smooth && sq.xf ? v / sq.xf[2 * Hkv * D + (h / g.G) * D + e] : v;
    }
}

extern "C" int vq_cu_recipe_group_query(const vq_cu_recipe_group *g, float *gq, void *stream)
{
    const int64_t n = (int64_t)g->n_g * g->Hq * g->T * g->D;
    if (n == 0) return 0;
    recipe_group_query_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(*g, n, gq);
    return vq_cu_launched();
}

/* The sinks a row may see: VQ_CACHE_MAX_SINK_TOKENS (veloxquant.h). */
#define RECIPE_MAX_SINK 1024

static __global__ void recipe_group_merge_kernel(vq_cu_recipe_group g, const float *gq, const float *go,
                                                 const float *gl)
{
    __shared__ double red[32];
    __shared__ double sc[RECIPE_MAX_SINK];
    const int64_t row = blockIdx.x, T = g.T, D = g.D, Hkv = g.Hq / g.G;
    const int64_t gi = row / (g.Hq * T), h = (row / T) % g.Hq, t = row % T, hk = h / g.G;
    const vq_cu_recipe_seq sq = g.seqs[gi];
    const float *qs = gq + row * D, *po = go + row * D;
    const double plse = gl[row];
    const int64_t held = sq.sink ? min(sq.n_sink, (int64_t)RECIPE_MAX_SINK) : 0;
    /* the row's tokens end at its position + 1 (causal) or n_tok; a sliding
     * window sees the sinks [j0, n) only, those among its newest W tokens
     * (merge_rows) */
    const int64_t end = g.causal ? sq.n_tok - g.Sq + g.ns + t + 1 : sq.n_tok;
    const int64_t n = max((int64_t)0, min(end, held)), w0 = end - g.W;
    const int64_t j0 = g.W > 0 && w0 > 0 ? min(w0, n) : 0;
    const __half *K = n > j0 ? (const __half *)sq.sink + hk * g.S * D : nullptr;
    const __half *V = n > j0 ? (const __half *)sq.sink + (Hkv + hk) * g.S * D : nullptr;
    /* the sinks' scores in double, as merge_rows: scale * sum_c qs_c k_c */
    double mx = plse;
    for (int64_t j = j0; j < n; j++) {
        double d = 0.0;
        for (int64_t e = threadIdx.x; e < D; e += blockDim.x) d += (double)qs[e] * (double)__half2float(K[j * D + e]);
        d = vq_cu_block_sum(d, red) * g.scale;
        if (threadIdx.x == 0) sc[j] = d;
        mx = fmax(mx, d);
    }
    __syncthreads();
    /* out = (e^lse o_pages + sum_j e^s_j v_j) / (e^lse + sum_j e^s_j); no sink: the pages' row */
    const double wc = n > j0 ? exp(plse - mx) : 1.0;
    double sum = wc;
    for (int64_t j = j0; j < n; j++) sum += exp(sc[j] - mx);
    const float *mv = g.center_values && sq.xf ? sq.xf + Hkv * D + hk * D : nullptr;
    for (int64_t e = threadIdx.x; e < D; e += blockDim.x) {
        float o = po[e];
        if (n > j0) {
            double acc = wc * (double)po[e];
            for (int64_t j = j0; j < n; j++) acc += exp(sc[j] - mx) * (double)__half2float(V[j * D + e]);
            o = (float)(acc / sum);
        }
        if (mv) o += mv[e];
        vq_cu_store(g.out, g.out_f16, sq.b * g.os[0] + h * g.os[1] + (g.ns + t) * g.os[2] + e, o);
    }
    if (g.lse == nullptr) return;
    /* q.(k - mk) = q.k - q.mk for every key of the row: the lse of the untransformed scores */
    const float *mk = g.center_keys && sq.xf ? sq.xf + hk * D : nullptr;
    double d = 0.0;
    for (int64_t e = threadIdx.x; mk && e < D; e += blockDim.x)
        d += (double)vq_cu_load(g.q, g.q_f16, sq.b * g.qs[0] + h * g.qs[1] + (g.ns + t) * g.qs[2] + e) * (double)mk[e];
    d = vq_cu_block_sum(d, red);
    if (threadIdx.x == 0) {
        double l = n > j0 ? mx + log(sum) : plse;
        if (mk) l += d * g.scale;
        g.lse[sq.b * g.ls[0] + h * g.ls[1] + (g.ns + t) * g.ls[2]] = (float)l;
    }
}

extern "C" int vq_cu_recipe_group_merge(const vq_cu_recipe_group *g, const float *gq, const float *go, const float *gl,
                                        void *stream)
{
    const int64_t rows = (int64_t)g->n_g * g->Hq * g->T;
    if (rows == 0) return 0;
    recipe_group_merge_kernel<<<(unsigned)rows, 128, 0, (cudaStream_t)stream>>>(*g, gq, go, gl);
    return vq_cu_launched();
}

/* The host's conversions bit for bit (the hardware ones make every NaN
 * canonical), so a device cache stores the CPU cache's bytes. Element x of
 * row r is at src + r * sp and dst + r * dp. */
static __global__ void convert_kernel(const void *src, bool src_f16, int64_t sp, void *dst, bool dst_f16, int64_t dp,
                                      int64_t width, int64_t n)
{
    VQ_CU_GRID_STRIDE(k, n)
    {
        const int64_t r = k / width, x = k - r * width, i = r * sp + x, o = r * dp + x;
        const float v = src_f16 ? vq_cu_half_bits_to_float(static_cast<const uint16_t *>(src)[i])
                                : static_cast<const float *>(src)[i];
        if (dst_f16) static_cast<uint16_t *>(dst)[o] = vq_cu_float_to_half_bits(v);
        else static_cast<float *>(dst)[o] = v;
    }
}

extern "C" int vq_cu_convert(const void *src, bool src_f16, int64_t src_pitch, void *dst, bool dst_f16,
                             int64_t dst_pitch, int64_t width, int64_t rows, void *stream)
{
    const int64_t n = width * rows;
    if (n == 0) return 0;
    convert_kernel<<<vq_cu_blocks(n, 256), 256, 0, (cudaStream_t)stream>>>(src, src_f16, src_pitch, dst, dst_f16,
                                                                           dst_pitch, width, n);
    return vq_cu_launched();
}
