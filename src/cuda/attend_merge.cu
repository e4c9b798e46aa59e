/* attend_merge.cu — the merges of attention partial states.
 *
 * merge_kernel: the split-KV partial states of every query row (log2 domain):
 * M = max_s m_s, out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s, and
 * when asked the row's natural-log log-sum-exp ln 2 * (M + log2 L). One CTA
 * per row; a row that saw no key (all masked) gets zeros (whatever its
 * accumulators hold) and lse -inf. With a window (vq_cu_window: the KV
 * cache's f16 residual tokens of a decode row, from its first token inside
 * the row's sliding window), the kernel attends it itself
 * (attend_window) and folds its state in after the rotation back, so a paged
 * decode step costs one attention launch and this one.
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

/* Block-wide max and sum over the merge kernel's 128 threads (red: 4 floats
 * of shared memory; ends with every thread holding the result). */
__device__ __forceinline__ float block_max128(float x, float *red)
{
    x = warp_max(x);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
    __syncthreads();
    return fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
}
__device__ __forceinline__ float block_sum128(float x, float *red)
{
    x = warp_sum(x);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
    __syncthreads();
    return (red[0] + red[1]) + (red[2] + red[3]);
}

/* The window's online-softmax state of one decode row (log2 domain):
 * m, l and the unnormalised acc[d] for the thread's channels d = tid, tid +
 * 128. Up to 128 tokens at a time: a warp scores a token (lanes over D, two
 * channels each per step), so the score of even a single token (KIVI's
 * partial key group) costs D / 64 dependent steps, not D; then thread i
 * takes token i's score into the softmax. */
struct WindowState {
    float m, l, acc[2];
};

__device__ WindowState attend_window(const vq_cu_attend_common &c, const vq_cu_window &w, int64_t row, float *qv,
                                     float *pw, float *red)
{
    const int D = c.D, b = (int)(row / c.Hq), hq = (int)(row % c.Hq), hkv = hq / (c.Hq / c.Hkv);
    const int n = w.n[b], lo = w.lo[b]; /* tokens below lo are outside a sliding window: never read */
    const int warp = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
    const __half *K = (const __half *)w.kv[b] + (int64_t)hkv * w.cap * D;
    const __half *V = (const __half *)w.kv[b] + ((int64_t)c.Hkv + hkv) * w.cap * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) qv[d] = load_f(c.q, row * D + d, c.q_f16) * w.qmul;
    __syncthreads();
    WindowState st = {-INFINITY, 0.0f, {0.0f, 0.0f}};
    for (int t0 = max(lo, 0); t0 < n; t0 += 128) {
        const int nt = min(128, n - t0);
        for (int j = warp; j < nt; j += 4) {
            const __half *k = K + (int64_t)(t0 + j) * D;
            float a = 0.0f;
            for (int d = 2 * lane; d < D; d += 64) {
                const float2 kf = __half22float2(*(const __half2 *)(k + d));
                a = fmaf(qv[d], kf.x, fmaf(qv[d + 1], kf.y, a));
            }
            a = warp_sum(a);
            if (lane == 0) pw[j] = a;
        }
        __syncthreads();
        const float s = (int)threadIdx.x < nt ? pw[threadIdx.x] : -INFINITY;
        const float m_new = fmaxf(st.m, block_max128(s, red)); /* its barriers: every score is read */
        const float p = s == -INFINITY ? 0.0f : exp2f(s - m_new);
        const float alpha = st.m == -INFINITY ? 0.0f : exp2f(st.m - m_new);
        pw[threadIdx.x] = p;
        st.l = st.l * alpha + block_sum128(p, red); /* its barriers publish pw */
        st.m = m_new;
        for (int i = 0; i < 2; i++) {
            const int d = (int)threadIdx.x + 128 * i;
            if (d >= D) break;
            float a = st.acc[i] * alpha;
            for (int j = 0; j < nt; j++) a = fmaf(pw[j], __half2float(V[(int64_t)(t0 + j) * D + d]), a);
            st.acc[i] = a;
        }
        __syncthreads(); /* pw is rewritten by the next 128 tokens */
    }
    return st;
}

template <bool WIN>
__global__ void __launch_bounds__(128) merge_kernel(const __grid_constant__ vq_cu_attend_common c,
                                                    const __grid_constant__ vq_cu_window w, void *out, int out_f16,
                                                    float *lse)
{
    const int64_t row = blockIdx.x;
    const int ns = c.nsplit;
    const float *m = c.part_m + row * ns, *l = c.part_l + row * ns;
    float M = -INFINITY;
    for (int s = 0; s < ns; s++) M = fmaxf(M, m[s]);
    float L = 0.0f;
    bool nan = false; /* a NaN score (NaN query or key): the row is NaN, as on the CPU */
    for (int s = 0; s < ns; s++) {
        L += M == -INFINITY ? 0.0f : exp2f(m[s] - M) * l[s];
        nan |= isnan(l[s]);
    }
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    __shared__ float rowv[256], qv[256], pw[128], red[4];
    for (int d = threadIdx.x; d < c.D; d += blockDim.x) {
        float a = 0.0f;
        for (int s = 0; s < ns; s++) {
            const float f = M == -INFINITY ? 0.0f : exp2f(m[s] - M);
            a = fmaf(f, c.part_acc[(row * ns + s) * c.D + d], a);
        }
        /* L == 0: no split saw a token (every score -inf): the row is 0 even
         * where a masked token's NaN value left 0 * NaN in an accumulator */
        rowv[d] = nan ? NAN : L == 0.0f ? 0.0f : a * inv;
    }
    if (c.rot_back) {
        __syncthreads();
        vq_cu_rotate_row(rowv, c.D, c.rot_diag, true); /* block-wide, ends with a barrier */
    }
    if constexpr (WIN) {
        /* rowv holds the pages' normalised output (rotated back): weight it
         * by L against the window's state, both at the joint max */
        const WindowState ws = attend_window(c, w, row, qv, pw, red);
        const float Mt = fmaxf(M, ws.m);
        const float fp = M == -INFINITY ? 0.0f : exp2f(M - Mt) * L;
        const float fw = ws.m == -INFINITY ? 0.0f : exp2f(ws.m - Mt);
        const float den = fp + fw * ws.l, dinv = den > 0.0f ? 1.0f / den : 0.0f;
        nan |= isnan(ws.l);
        for (int i = 0; i < 2; i++) {
            const int d = (int)threadIdx.x + 128 * i;
            if (d < c.D) rowv[d] = nan ? NAN : den > 0.0f ? (fp * rowv[d] + fw * ws.acc[i]) * dinv : 0.0f;
        }
        M = Mt;
        L = den;
    }
    if (lse && threadIdx.x == 0)
        lse[row] = nan ? NAN : L > 0.0f ? (M + log2f(L)) * 0.6931471805599453f : -INFINITY;
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

extern "C" int vq_cu_launch_merge_window(const vq_cu_attend_common *c, const vq_cu_window *w, void *out, int out_f16,
                                         float *lse, void *stream)
{
    const unsigned rows = (unsigned)((int64_t)c->B * c->Hq * c->Sq);
    if (w) vqcu::merge_kernel<true><<<rows, 128, 0, (cudaStream_t)stream>>>(*c, *w, out, out_f16, lse);
    else vqcu::merge_kernel<false><<<rows, 128, 0, (cudaStream_t)stream>>>(*c, vq_cu_window{}, out, out_f16, lse);
    return (int)cudaGetLastError();
}

extern "C" int vq_cu_launch_merge(const vq_cu_attend_common *c, void *out, int out_f16, float *lse, void *stream)
{
    return vq_cu_launch_merge_window(c, NULL, out, out_f16, lse, stream);
}

extern "C" int vq_cu_launch_pair_merge(const vq_cu_pair_merge *p, void *stream)
{
    const int64_t rows = (int64_t)p->B * p->H * p->S;
    if (rows == 0) return 0;
    vqcu::pair_kernel<<<(unsigned)rows, 128, 0, (cudaStream_t)stream>>>(*p);
    return (int)cudaGetLastError();
}
