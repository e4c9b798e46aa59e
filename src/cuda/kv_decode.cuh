/* kv_decode.cuh — the split-KV decode skeleton of vq_fused_sdpa on CUDA,
 * specialised by a key policy and a value policy (kv_keys.cuh,
 * kv_values.cuh), as the CPU skeleton is by vq_attn_key_ops and
 * vq_attn_value_ops. Every key format x value format is one instance of
 * kv_split; the per-element format switch of the kernel it replaced is gone.
 *
 * Grid (nsplit, Hkv * row_chunks, B), 4 warps. A CTA owns up to R query rows
 * of one kv head (GQA group x Sq), so the kv head's cache is read once for
 * all of them, and one split of the kv axis. Each warp walks 32-token tiles
 * on its own (no CTA barrier in the loop):
 *   loads:   the lane's value chunks of the tile are issued first, so their
 *            latency overlaps the key work;
 *   keys:    lane i scores token t0 + i for every row straight from the
 *            compressed row (KP::score: decode and dot in registers, queries
 *            broadcast from shared memory); the additive mask and the causal
 *            limit follow;
 *   softmax: warp max per row, p = exp2(s - m); accumulators are rescaled
 *            only when a row's running max moved (warp-uniform branch);
 *   values:  a lane owns CPL consecutive channels of one token per step
 *            (CPL = 32 / 16 / 8 for 1 / 4 / 8 rows: registers) and adds
 *            p * v_hat (VP::apply).
 * W is the instance width (128 or 256); the head dim D <= W is a run-time
 * value, so queries are zero past D and policies load nothing past D.
 * Scores are in the log2 domain (the query is prepared as q * scale * log2 e
 * by the prep kernel); the split's (m, l, acc) goes to the partial-state
 * scratch, which attend_merge.cu combines.
 *
 * Key policy KP:
 *   prepare(qs, qw, rows)        once per CTA: qs [R][qw] prepared queries in
 *                                shared memory (f32); per-row constants
 *   score(tok, t, qs, s[R])      log2-domain scores of flattened token tok
 *                                (sequence position t) for every row; called
 *                                by the warp's 32 lanes together, once per
 *                                tile (warp-collective work may go here)
 *   kTileFloats (optional)       floats of shared memory the policy keeps
 *                                past the queries, at qs + R * qw (its score
 *                                takes qs as float * to write them)
 * Value policy VP<CPL>:
 *   Pre                          one lane's chunk of one token
 *   load(tok, Pre&)              issues its loads (channels base .. base+CPL)
 *   apply(Pre, p[R], acc, accz)  acc[r][j] += p[r] * v_hat; a term common to
 *                                the lane's channels may go to accz[r] */
#ifndef VQ_CUDA_KV_DECODE_CUH
#define VQ_CUDA_KV_DECODE_CUH

#include <climits>
#include <type_traits>

#include <cuda_bf16.h>

#include "cuda/attend_fast.cuh"
#include "cuda/sdpa_params.h"

namespace vqkv {

using namespace vqcu;

/* Floats per query row in shared memory: a multiple of 32 (QJL reads its
 * sketch 32 entries per sign word; float4 reads need 4). */
__host__ __device__ inline int q_stride(int qpf) { return (qpf + 31) / 32 * 32; }

/* The additive mask of the call (NULL: none), in the skeleton because every
 * key format shares it. */
struct Mask {
    const void *ptr;
    int f16;
    int64_t sb, sh;
    int Skv;
    __device__ float at(int b, int hq, int sq, int t) const
    {
        const int64_t i = b * sb + hq * sh + (int64_t)sq * Skv + t;
        return f16 ? __half2float(__ldg((const __half *)ptr + i)) : __ldg((const float *)ptr + i);
    }
};

template <int R>
struct KvSmem {
    float p[kWarps][R][32];
    float red_m[kWarps][R], red_l[kWarps][R];
};

/* The shared floats a key policy keeps past the prepared queries
 * (KP::kTileFloats; 0 when it declares none). */
template <class KP, class = void>
struct TileFloats {
    static constexpr int value = 0;
};
template <class KP>
struct TileFloats<KP, std::void_t<decltype(KP::kTileFloats)>> {
    static constexpr int value = KP::kTileFloats;
};

/* Dynamic shared memory of an instance: the prepared queries and the key
 * policy's floats (tile), aliased after the last tile by the warps'
 * accumulators (red_acc). */
template <int W, int R>
__host__ __device__ inline int dyn_floats(int qpf, int tile)
{
    const int q = R * q_stride(qpf) + tile, red = kWarps * R * W;
    return q > red ? q : red;
}

template <class KP, class VP, int W, int R>
__device__ __forceinline__ void kv_split(const vq_cu_sdpa_params &p, KP &kp, VP &vp, float *dyn)
{
    const vq_cu_attend_common &c = p.c;
    constexpr int CPL = VP::CPL;
    constexpr int LPT = W / CPL;    /* lanes per token in the value phase */
    constexpr int TPS = 32 / LPT;   /* tokens per value step */
    constexpr int NSTEP = 32 / TPS; /* value steps per tile */
    constexpr int VREGS = (int)(sizeof(typename VP::Pre) / 4);
    constexpr int VB = NSTEP * VREGS <= 48 ? NSTEP : 48 / VREGS >= 8 ? 8 : 48 / VREGS >= 4 ? 4 : 2;
    static_assert(NSTEP % VB == 0, "value batches divide the tile");
    __shared__ KvSmem<R> sm;

    const int split = blockIdx.x, b = blockIdx.z;
    const int hkv = blockIdx.y / c.row_chunks, chunk = blockIdx.y % c.row_chunks;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const Rows<R> rw = cta_rows<R>(c, b, hkv, chunk);
    const int qw = q_stride(p.qpf);
    float *qs = dyn;

    for (int i = threadIdx.x; i < R * qw; i += kThreads) {
        const int r = i / qw, d = i % qw;
        qs[i] = r < rw.n && d < p.qpf ? p.qp[rw.out[r] * p.qpf + d] : 0.0f;
    }
    __syncthreads();
    kp.prepare(qs, qw, rw);
    __syncthreads();

    int lim_max = -1, lim_min = INT_MAX, lo_min = INT_MAX, lo_max = INT_MIN;
#pragma unroll
    for (int r = 0; r < R; r++) {
        lim_max = max(lim_max, rw.lim[r]);
        if (r < rw.n) {
            lim_min = min(lim_min, rw.lim[r]);
            lo_min = min(lo_min, row_low(rw, r)), lo_max = max(lo_max, row_low(rw, r));
        }
    }
    const int t_begin = split * c.split_len;
    const int t_end = min(min(kv_len(c, b), t_begin + c.split_len), lim_max + 1);
    /* flattened index of token t of this kv head: a tile's 32 tokens are consecutive (pages hold
     * whole tiles), so one lookup per tile */
    const Mask mk = {p.mask, p.mask_f16, p.mask_sb, p.mask_sh, c.Skv};

    float m_run[R], l_lane[R], acc[R][CPL], accz[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        m_run[r] = -INFINITY;
        l_lane[r] = 0.0f;
        accz[r] = 0.0f;
#pragma unroll
        for (int j = 0; j < CPL; j++) acc[r][j] = 0.0f;
    }
    const int slot = lane / LPT; /* the token of a value step this lane serves */

    /* paged: the page id of the warp's next tile is loaded a tile ahead, so a
     * tile's key and value loads do not wait for it */
    int64_t tile0_next = t_begin + 32 * warp < t_end ? kv_token(c, b, hkv, t_begin + 32 * warp) - (t_begin + 32 * warp) : 0;
    for (int t0 = t_begin + 32 * warp; t0 < t_end; t0 += 32 * kWarps) {
        /* tokens past t_end read their valid neighbour and get p = 0 */
        const int last = t_end - 1, t = t0 + lane, tl = min(t, last);
        const int64_t tile0 = tile0_next; /* token t of the tile is tile0 + t */
        if (t0 + 32 * kWarps < t_end) tile0_next = kv_token(c, b, hkv, t0 + 32 * kWarps) - (t0 + 32 * kWarps);
        /* a tile below every row's sliding-window bound changes no state: not read (warp-uniform) */
        if (t0 + 31 < lo_min) continue;
        typename VP::Pre vpre[VB];
#pragma unroll
        for (int k = 0; k < VB; k++) vp.load(tile0 + min(t0 + slot + k * TPS, last), vpre[k]);

        float s[R];
        kp.score(tile0 + tl, tl, qs, qw, s);
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (t > last || row_hides(rw, r, t)) s[r] = -INFINITY;
            else if (mk.ptr) s[r] += kLog2e * mk.at(b, rw.hq[r], rw.sq[r], t);
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
        /* A tile past the causal limit of some rows but not of others (a
         * causal prefill's diagonal), or below some row's sliding-window
         * bound: those rows must not read the tokens they do not see at all
         * (the header's rule; p = 0 would still add 0 * NaN), so their
         * accumulators are restored after each step. Warp-uniform, and only
         * on the diagonal tiles and the tiles at the window's lower edge
         * (those wholly below it were skipped). */
        const bool ragged = (lim_min < lim_max && t0 + 31 > lim_min) || t0 < lo_max;
#pragma unroll
        for (int b0 = 0; b0 < NSTEP; b0 += VB) {
            if (b0 > 0) {
#pragma unroll
                for (int k = 0; k < VB; k++) vp.load(tile0 + min(t0 + slot + (b0 + k) * TPS, last), vpre[k]);
            }
#pragma unroll
            for (int k = 0; k < VB; k++) {
                float pk[R];
#pragma unroll
                for (int r = 0; r < R; r++) pk[r] = sm.p[warp][r][slot + (b0 + k) * TPS];
                if (!ragged) {
                    vp.apply(vpre[k], pk, acc, accz);
                } else {
                    const int tt = t0 + slot + (b0 + k) * TPS; /* this lane's token */
                    float keep[R][CPL], keepz[R];
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        keepz[r] = accz[r];
#pragma unroll
                        for (int j = 0; j < CPL; j++) keep[r][j] = acc[r][j];
                    }
                    vp.apply(vpre[k], pk, acc, accz);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        if (!row_hides(rw, r, tt)) continue;
                        accz[r] = keepz[r];
#pragma unroll
                        for (int j = 0; j < CPL; j++) acc[r][j] = keep[r][j];
                    }
                }
            }
        }
        __syncwarp(); /* sm.p is rewritten by the next tile */
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
    __syncthreads(); /* every warp is done with qs: red_acc aliases it */
    float *red_acc = dyn;
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
            for (int j = 0; j < CPL; j++) red_acc[(warp * R + r) * W + lane * CPL + j] = acc[r][j];
    }
    __syncthreads();
    store_split_state<R>(c, rw, split, sm.red_m, sm.red_l, red_acc, W);
}

/* The kernel of one (key policy, value policy, width, rows) instance. */
template <template <int, int> class KP, template <int, int> class VP, int W, int R>
__global__ void __launch_bounds__(kThreads) kv_kernel(const __grid_constant__ vq_cu_sdpa_params p)
{
    extern __shared__ __align__(16) float dyn[];
    const int b = blockIdx.z, hkv = blockIdx.y / p.c.row_chunks;
    KP<W, R> kp(p, b, hkv);
    VP<W, FastCpl<R>::value> vp(p);
    kv_split<KP<W, R>, VP<W, FastCpl<R>::value>, W, R>(p, kp, vp, dyn);
}

template <template <int, int> class KP, template <int, int> class VP, int W, int R>
inline int kv_go(const vq_cu_sdpa_params &p, void *stream, int *occupancy)
{
    auto k = kv_kernel<KP, VP, W, R>;
    const int dyn = (int)sizeof(float) * dyn_floats<W, R>(p.qpf, TileFloats<KP<W, R>>::value);
    if (dyn > 48 * 1024) {
        const int e = allow_dyn(k, dyn);
        if (e) return e;
    }
    if (occupancy) return occupancy_of(k, occupancy, dyn);
    k<<<decode_grid(p.c), kThreads, dyn, (cudaStream_t)stream>>>(p);
    return (int)cudaGetLastError();
}

} /* namespace vqkv */

#endif
