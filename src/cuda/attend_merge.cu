/* attend_merge.cu — the merges of attention partial states.
 *
 * merge_kernel: the split-KV partial states of every query row (log2 domain):
 * M = max_s m_s, out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s, and
 * when asked the row's natural-log log-sum-exp ln 2 * (M + log2 L). One CTA
 * per row; a row that saw no key (all masked) gets zeros (whatever its
 * accumulators hold) and lse -inf.
 * With c.rot_back (TurboQuant values, accumulated in the rotated basis) the
 * normalised row is rotated back, rot^-1 = diag H / sqrt(D), in shared memory.
 *
 * pair_kernel: vq_attention_merge, two results over disjoint token sets with
 * their log-sum-exps (natural log), as the CPU's attn_merge.c. One CTA per
 * row; the row's lse values are read by every thread before the barrier
 * after which lse_out (which may alias lse_a or lse_b) is written, and each
 * output element is read and written by the same thread, so out may alias
 * out_a or out_b. */
#include "cuda/attend_skeleton.cuh"
#include "cuda/codec_common.cuh" /* vq_cu_rotate_row */

namespace vqcu {

__global__ void __launch_bounds__(128) merge_kernel(const vq_cu_attend_common c, void *out, int out_f16, float *lse)
{
    const int64_t row = blockIdx.x;
    const int ns = c.nsplit;
    const float *m = c.part_m + row * ns, *l = c.part_l + row * ns;
    float M = -INFINITY;
    for (int s = 0; s < ns; s++) M = fmaxf(M, m[s]);
    float L = 0.0f;
    for (int s = 0; s < ns; s++) L += M == -INFINITY ? 0.0f : exp2f(m[s] - M) * l[s];
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    if (lse && threadIdx.x == 0) lse[row] = L > 0.0f ? (M + log2f(L)) * 0.6931471805599453f : -INFINITY;
    __shared__ float rowv[256];
    for (int d = threadIdx.x; d < c.D; d += blockDim.x) {
        float a = 0.0f;
        for (int s = 0; s < ns; s++) {
            const float f = M == -INFINITY ? 0.0f : exp2f(m[s] - M);
            a = fmaf(f, c.part_acc[(row * ns + s) * c.D + d], a);
        }
        /* L == 0: no split saw a token (every score -inf): the row is 0 even
         * where a masked token's NaN value left 0 * NaN in an accumulator */
        rowv[d] = L == 0.0f ? 0.0f : a * inv;
    }
    if (c.rot_back) {
        __syncthreads();
        vq_cu_rotate_row(rowv, c.D, c.rot_diag, true); /* block-wide, ends with a barrier */
    }
    for (int d = threadIdx.x; d < c.D; d += blockDim.x) {
        if (out_f16) ((__half *)out)[row * c.D + d] = __float2half_rn(rowv[d]);
        else ((float *)out)[row * c.D + d] = rowv[d];
    }
}

__device__ __forceinline__ const char *view_row(const vq_cu_view &v, int64_t row, int H, int S)
{
    const int64_t b = row / ((int64_t)H * S), h = row / S % H, s = row % S;
    return v.base + b * v.sb + h * v.sh + s * v.ss;
}

__device__ __forceinline__ float elt(const char *row, int f16, int d)
{
    return f16 ? __half2float(((const __half *)row)[d]) : ((const float *)row)[d];
}

__global__ void __launch_bounds__(128) pair_kernel(const vq_cu_pair_merge p)
{
    const int64_t row = blockIdx.x;
    const float la = *(const float *)view_row(p.lse_a, row, p.H, p.S);
    const float lb = *(const float *)view_row(p.lse_b, row, p.H, p.S);
    const char *a = view_row(p.a, row, p.H, p.S), *b = view_row(p.b, row, p.H, p.S);
    char *o = (char *)view_row(p.out, row, p.H, p.S);
    const float m = fmaxf(la, lb);
    const bool nan = isnan(la) || isnan(lb);
    const float wa = m == -INFINITY || nan ? 0.0f : expf(la - m), wb = m == -INFINITY || nan ? 0.0f : expf(lb - m);
    const float inv = m == -INFINITY || nan ? 0.0f : 1.0f / (wa + wb);
    __syncthreads(); /* every thread has read the lse values */
    if (p.lse_out.base && threadIdx.x == 0)
        *(float *)view_row(p.lse_out, row, p.H, p.S) = nan ? NAN : m == -INFINITY ? -INFINITY : m + logf(wa + wb);
    for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
        const float v = nan ? NAN : m == -INFINITY ? 0.0f : (wa * elt(a, p.a_f16, d) + wb * elt(b, p.b_f16, d)) * inv;
        if (p.out_f16) ((__half *)o)[d] = __float2half_rn(v);
        else ((float *)o)[d] = v;
    }
}

} /* namespace vqcu */

extern "C" int vq_cu_launch_merge(const vq_cu_attend_common *c, void *out, int out_f16, float *lse, void *stream)
{
    const unsigned rows = (unsigned)((int64_t)c->B * c->Hq * c->Sq);
    vqcu::merge_kernel<<<rows, 128, 0, (cudaStream_t)stream>>>(*c, out, out_f16, lse);
    return (int)cudaGetLastError();
}

extern "C" int vq_cu_launch_pair_merge(const vq_cu_pair_merge *p, void *stream)
{
    const int64_t rows = (int64_t)p->B * p->H * p->S;
    if (rows == 0) return 0;
    vqcu::pair_kernel<<<(unsigned)rows, 128, 0, (cudaStream_t)stream>>>(*p);
    return (int)cudaGetLastError();
}
