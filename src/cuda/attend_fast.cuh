/* attend_fast.cuh — the fast split-KV decode skeleton: D equal to the kernel's
 * compile-time width (64, 128 or 256), so every stride is a constant and the
 * per-token work is only the format's arithmetic. attend_skeleton.cuh keeps
 * the general kernel for the other shapes.
 *
 * Grid (nsplit, Hkv * row_chunks, B), 4 warps; a CTA owns up to R query rows
 * of one kv head (GQA group x Sq) and one split of the kv axis, so the cache
 * is read once for all its rows. Each warp walks 32-token tiles:
 *   loads:   the key row of lane i's token and the lane's value chunks of the
 *            tile are issued first, then the format's per-tile setup (KIVI
 *            folds the key group's scales into the query), so a tile waits for
 *            one memory latency;
 *   keys:    lane i scores token t0 + i for every row;
 *   softmax: warp max per row; the accumulators are rescaled only when a
 *            row's running max moved (warp-uniform branch);
 *   values:  a lane owns CPL consecutive channels of one token per step
 *            (CPL = 32 for one row, fewer for more rows: registers), loads them
 *            with one 4-16 byte load, and adds p * v_hat.
 * Partial states (m, l, acc) of the split go to global scratch in the log2
 * domain; attend_merge.cu combines the splits (bench/NOTES.md, v5). */
#ifndef VQ_CUDA_ATTEND_FAST_CUH
#define VQ_CUDA_ATTEND_FAST_CUH

#include "cuda/attend_skeleton.cuh"

namespace vqcu {

/* Value channels per lane for R rows: R * CPL accumulators per thread. */
template <int R>
struct FastCpl {
    static constexpr int value = R == 1 ? 32 : R <= 4 ? 16 : 8;
};

/* Shared memory of the fast skeleton. The format's own shared memory (its
 * constructor gets it) may alias red_acc: the skeleton writes red_acc only
 * after the last tile and a barrier. */
template <int D, int R>
struct FastSmem {
    float q[R][D];
    float p[kWarps][R][32];
    float red_m[kWarps][R], red_l[kWarps][R];
};

/* The decode body over a format policy Fmt with:
 *   CPL                            value channels per lane (FastCpl<R>)
 *   KRow, VPre                     a token's key row, a lane's value chunk
 *   prepare(q_smem, rows)          once per CTA, q in shared memory (f32)
 *   tile_setup(warp, t0)           per tile, after its loads were issued
 *   key_load(t, KRow&), score(KRow, s[R])   log2-domain scores of token t
 *   value_load(t, VPre&)           the lane's chunk (channels cidx*CPL..) of token t
 *   value_apply(VPre, p[R], acc, accz)
 *                                  acc[r][j] += p[r] * v_hat(t, cidx*CPL + j); a term
 *                                  common to the lane's CPL channels may go to accz[r] */
template <class Fmt, int D, int R>
__device__ __forceinline__ void fast_split(const vq_cu_attend_common &c, Fmt &fmt, FastSmem<D, R> &sm,
                                           float *red_acc)
{
    constexpr int CPL = Fmt::CPL;
    constexpr int LPT = D / CPL;    /* lanes per token in the value phase */
    constexpr int TPS = 32 / LPT;   /* tokens per value step */
    constexpr int NSTEP = 32 / TPS; /* value steps per tile */
    /* value chunks prefetched at once: the whole tile unless that passes ~48 registers */
    constexpr int VREGS = (int)(sizeof(typename Fmt::VPre) / 4);
    constexpr int VB = NSTEP * VREGS <= 48 ? NSTEP : 48 / VREGS >= 8 ? 8 : 48 / VREGS >= 4 ? 4 : 2;

    const int split = blockIdx.x, b = blockIdx.z;
    const int hkv = blockIdx.y / c.row_chunks, chunk = blockIdx.y % c.row_chunks;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const Rows<R> rw = cta_rows<R>(c, b, hkv, chunk);

    for (int i = threadIdx.x; i < R * D; i += kThreads) {
        const int r = i / D, d = i % D;
        sm.q[r][d] = r < rw.n ? load_f(c.q, rw.out[r] * D + d, c.q_f16) : 0.0f;
    }
    __syncthreads();
    fmt.prepare(&sm.q[0][0], rw);
    __syncthreads();

    int lim_max = -1;
#pragma unroll
    for (int r = 0; r < R; r++) lim_max = max(lim_max, rw.lim[r]);
    const int t_begin = split * c.split_len;
    const int t_end = min(min(c.Skv, t_begin + c.split_len), lim_max + 1);

    float m_run[R], l_lane[R], acc[R][CPL], accz[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        m_run[r] = -INFINITY;
        l_lane[r] = 0.0f;
        accz[r] = 0.0f;
#pragma unroll
        for (int j = 0; j < CPL; j++) acc[r][j] = 0.0f;
    }
    const int slot = lane / LPT; /* the token of the step this lane serves */

    for (int t0 = t_begin + 32 * warp; t0 < t_end; t0 += 32 * kWarps) {
        /* tokens past t_end load their valid neighbour and get p = 0 */
        const int last = t_end - 1, t = t0 + lane;
        typename Fmt::KRow kr;
        fmt.key_load(min(t, last), kr);
        typename Fmt::VPre vp[VB];
#pragma unroll
        for (int k = 0; k < VB; k++) fmt.value_load(min(t0 + slot + k * TPS, last), vp[k]);
        fmt.tile_setup(warp, t0);

        float s[R];
        fmt.score(kr, s);
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (t > last || t > rw.lim[r]) s[r] = -INFINITY;
            const float m_new = fmaxf(m_run[r], warp_max(s[r]));
            const float pr = s[r] == -INFINITY ? 0.0f : exp2f(s[r] - m_new);
            if (m_new != m_run[r]) {
                /* m_run == -inf: nothing seen yet, the state is zero */
                const float alpha = m_run[r] == -INFINITY ? 0.0f : exp2f(m_run[r] - m_new);
                l_lane[r] *= alpha;
                accz[r] *= alpha;
#pragma unroll
                for (int j = 0; j < CPL; j++) acc[r][j] *= alpha;
            }
            l_lane[r] += pr;
            sm.p[warp][r][lane] = pr;
            m_run[r] = m_new;
        }
        __syncwarp();
#pragma unroll
        for (int b0 = 0; b0 < NSTEP; b0 += VB) {
            if (b0 > 0) {
#pragma unroll
                for (int k = 0; k < VB; k++) fmt.value_load(min(t0 + slot + (b0 + k) * TPS, last), vp[k]);
            }
#pragma unroll
            for (int k = 0; k < VB; k++) {
                float p[R];
#pragma unroll
                for (int r = 0; r < R; r++) p[r] = sm.p[warp][r][slot + (b0 + k) * TPS];
                fmt.value_apply(vp[k], p, acc, accz);
            }
        }
        __syncwarp();
    }
    /* lanes serving different tokens hold partial sums of the same channels */
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            float v = acc[r][j] + accz[r];
#pragma unroll
            for (int o = LPT; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            acc[r][j] = v;
        }
        l_lane[r] = warp_sum(l_lane[r]);
    }
    __syncthreads(); /* the format's shared memory is free: red_acc may alias it */
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            sm.red_m[warp][r] = m_run[r];
            sm.red_l[warp][r] = l_lane[r];
        }
    }
    if (slot == 0) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int j = 0; j < CPL; j++) red_acc[(warp * R + r) * D + lane * CPL + j] = acc[r][j];
    }
    __syncthreads();

    for (int i = threadIdx.x; i < R * D; i += kThreads) {
        const int r = i / D, d = i % D;
        if (r >= rw.n) continue;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; w++) M = fmaxf(M, sm.red_m[w][r]);
        float a = 0.0f, l = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; w++) {
            const float f = M == -INFINITY ? 0.0f : exp2f(sm.red_m[w][r] - M);
            a += f * red_acc[(w * R + r) * D + d];
            l += f * sm.red_l[w][r];
        }
        const int64_t slot_i = rw.out[r] * c.nsplit + split;
        c.part_acc[slot_i * D + d] = a;
        if (d == 0) {
            c.part_m[slot_i] = M;
            c.part_l[slot_i] = l;
        }
    }
}

/* Loads the n bytes (4, 8, 16 or 32; n-aligned) at p into w[]. */
template <int NWORDS>
__device__ __forceinline__ void load_words(const uint8_t *p, uint32_t (&w)[NWORDS])
{
    if constexpr (NWORDS == 1) {
        w[0] = __ldg((const uint32_t *)p);
    } else if constexpr (NWORDS == 2) {
        const uint2 v = __ldg((const uint2 *)p);
        w[0] = v.x; w[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < NWORDS / 4; i++) {
            const uint4 v = __ldg((const uint4 *)p + i);
            w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
        }
    }
}

/* Instances (D, R) of a fast kernel, chosen at run time: D must be 64, 128 or
 * 256 (the caller checks vq_cu_fast_decode_shape). */
template <template <int, int> class Launch>
inline int dispatch_fast(int D, int rows, const void *params, void *stream, int *occupancy)
{
    const int n = rows < VQ_CU_ROWS_MAX ? rows : VQ_CU_ROWS_MAX;
    const int R = n <= 1 ? 1 : n <= 4 ? 4 : 8;
#define VQ_CU_CASE(DD, RR)                                                                                  \
    if (D == DD && R == RR)                                                                                 \
        return occupancy ? Launch<DD, RR>::occupancy(params, occupancy) : Launch<DD, RR>::run(params, stream);
    VQ_CU_CASE(64, 1) VQ_CU_CASE(64, 4) VQ_CU_CASE(64, 8)
    VQ_CU_CASE(128, 1) VQ_CU_CASE(128, 4) VQ_CU_CASE(128, 8)
    VQ_CU_CASE(256, 1) VQ_CU_CASE(256, 4) VQ_CU_CASE(256, 8)
#undef VQ_CU_CASE
    return (int)cudaErrorInvalidValue;
}

} /* namespace vqcu */

#endif
