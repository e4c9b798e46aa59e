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
 * domain; attend_merge.cu combines the splits (bench/NOTES.md, v5).
 *
 * Loads, two ways (a template flag; VQ_CUDA_DECODE_STAGED picks, see
 * cuda_attend.c):
 *   direct (default): each lane loads what it needs of the tile from global
 *           memory into registers, so a warp has one tile in flight;
 *   staged: each warp copies its next kStages - 1 tiles into shared memory
 *           with cp.async (16-byte chunks, whole per-token streams of the
 *           tile) while it computes the current one, so a warp keeps several
 *           tiles in flight without spending registers on them. Measured on
 *           the H200 it is 5-25 % slower except for the lowest-occupancy
 *           case (RaBitQ with GQA, 8 warps per SM), where it is 19 % faster:
 *           these kernels are bound by issue, not by memory latency
 *           (bench/NOTES.md, v6).
 * A format describes its per-token streams (keys, magnitudes, values, value
 * scales) as segments; the loads read a TileView of them, which points into
 * global memory (direct) or into the warp's stage (staged). */
#ifndef VQ_CUDA_ATTEND_FAST_CUH
#define VQ_CUDA_ATTEND_FAST_CUH

#include "cuda/attend_skeleton.cuh"

namespace vqcu {

/* Value channels per lane for R rows: R * CPL accumulators per thread. */
template <int R>
struct FastCpl {
    static constexpr int value = R == 1 ? 32 : R <= 4 ? 16 : 8;
};

/* CTAs per SM the register allocation must allow (__launch_bounds__). Only
 * the lean four-row instance (RaBitQ Hamming with nibble values: 128
 * registers without spilling, 16 warps per SM instead of 12) is capped:
 * measured on the H200 it gains 1.37x at B = 1, Hkv 8, 128K; capping the
 * other four-row instances at 168 registers won 10-20 % at B = 8 but lost
 * 26-33 % at B = 1 (spills, more splits), so they are left alone
 * (bench/NOTES.md, v7). */
template <int R, bool LEAN = false>
struct FastMinCtas {
    static constexpr int value = R == 4 && LEAN ? 4 : 0; /* 0: none (the compiler's own choice) */
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

/* Stages per warp when staged. */
constexpr int kStages = 3;

/* Where the tile's token 0 is in each of a format's NSEG per-token streams. */
template <int NSEG>
struct TileView {
    const uint8_t *p[NSEG];
};

/* A load of T from global memory through the read-only path, or from shared. */
template <class T, bool GLOBAL>
__device__ __forceinline__ T ld(const void *p)
{
    if constexpr (GLOBAL) return __ldg((const T *)p);
    else return *(const T *)p;
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* Bytes of shared memory a stream of `cap` bytes per token takes in a stage:
 * 32 tokens plus up to 15 bytes of alignment slack. */
__host__ __device__ constexpr int stage_slot(int cap) { return (32 * cap + 16 + 15) / 16 * 16; }

/* All lanes: copies the 32 tokens [t0, t0 + 32) of a stream (bpt bytes per
 * token, `ntok` tokens from `ptr`) into dst in 16-byte chunks aligned in
 * global memory, zero-filling what lies past the stream's end; token t0
 * lands at dst + (address of token t0 & 15), which view_of recomputes. Bytes
 * before ptr that the aligned first chunk reads belong to the same tensor (its
 * base is 16-byte aligned). */
__device__ __forceinline__ void stage_stream(uint8_t *dst, const uint8_t *ptr, int bpt, int t0, int ntok, int lane)
{
    const uint8_t *start = ptr + (int64_t)t0 * bpt, *end = ptr + (int64_t)ntok * bpt;
    const int shift = (int)((uintptr_t)start & 15);
    const uint8_t *a0 = start - shift;
    const int nchunks = (shift + 32 * bpt + 15) >> 4;
    for (int i = lane; i < nchunks; i += 32) {
        const uint8_t *src = a0 + 16 * i;
        const int64_t rem = end - src;
        const int nb = rem >= 16 ? 16 : rem > 0 ? (int)rem : 0;
        cp_async16(dst + 16 * i, nb > 0 ? src : ptr, nb);
    }
}

/* The decode body over a format policy Fmt with:
 *   CPL                            value channels per lane (FastCpl<R>)
 *   KRow, VPre                     a token's key row, a lane's value chunk
 *   NSEG, cap(s)                   its per-token streams and their largest bytes per token
 *   seg_ptr(s), seg_bpt(s), ntok   stream s from token kv_base(b, hkv) (nullptr: absent),
 *                                  its bytes per token, its tokens (Skv)
 *   prepare(q_smem, rows)          once per CTA, q in shared memory (f32)
 *   tile_setup(warp, off)          per tile, after its loads were issued; off =
 *                                  kv_offset(t0): the tile's token 0 from the
 *                                  format's stream pointers (t0 unless paged)
 *   key_load<G>(view, j, KRow&), score(KRow, s[R])   log2-domain scores of token t0 + j
 *                                  (G: the view points to global memory)
 *   value_load<G>(view, j, VPre&)  the lane's chunk (channels cidx*CPL..) of token t0 + j
 *   value_apply(VPre, p[R], acc, accz)
 *                                  acc[r][j] += p[r] * v_hat(t, cidx*CPL + j); a term
 *                                  common to the lane's CPL channels may go to accz[r] */
template <class Fmt, int D, int R, bool STAGED>
__device__ __forceinline__ void fast_split(const vq_cu_attend_common &c, Fmt &fmt, FastSmem<D, R> &sm,
                                           float *red_acc, uint8_t *stage)
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

    unsigned qbad = 0; /* the formats quantise q, so a non-finite element would not reach the scores */
    for (int i = threadIdx.x; i < R * D; i += kThreads) {
        const int r = i / D, d = i % D;
        const float v = r < rw.n ? load_f(c.q, rw.out[r] * D + d, c.q_f16) : 0.0f;
        sm.q[r][d] = v;
        qbad |= (unsigned)!isfinite(v) << r;
    }
    qbad = cta_rows_nonfinite<R>(qbad);
    fmt.prepare(&sm.q[0][0], rw);
    __syncthreads();

    int lim_max = -1;
#pragma unroll
    for (int r = 0; r < R; r++) lim_max = max(lim_max, rw.lim[r]);
    const int t_begin = split * c.split_len;
    const int t_end = min(min(kv_len(c, b), t_begin + c.split_len), lim_max + 1);

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

    constexpr int NSEG = Fmt::NSEG;
    constexpr int SB = Fmt::stage_bytes(); /* one stage */
    /* the view of tile t0 (token tok of the streams): into global memory,
     * or into its stage (not paged: the host never stages a paged launch) */
    auto view_of = [&](int t0, int64_t tok) {
        TileView<NSEG> v;
        int off = 0;
#pragma unroll
        for (int sg = 0; sg < NSEG; sg++) {
            const uint8_t *ptr = fmt.seg_ptr(sg);
            const int bpt = fmt.seg_bpt(sg);
            if constexpr (STAGED) {
                const uint8_t *buf = stage + (warp * kStages + (t0 - t_begin) / (32 * kWarps) % kStages) * SB;
                v.p[sg] = ptr ? buf + off + (int)((uintptr_t)(ptr + (int64_t)t0 * bpt) & 15) : nullptr;
            } else {
                v.p[sg] = ptr ? ptr + tok * bpt : nullptr;
            }
            off += stage_slot(Fmt::cap(sg));
        }
        return v;
    };
    /* staged: issue tile t0's copies (an empty group past the split, so the
     * group count stays in step) */
    auto issue = [&](int t0) {
        if constexpr (STAGED) {
            if (t0 < t_end) {
                uint8_t *buf = stage + (warp * kStages + (t0 - t_begin) / (32 * kWarps) % kStages) * SB;
                int off = 0;
#pragma unroll
                for (int sg = 0; sg < NSEG; sg++) {
                    const uint8_t *ptr = fmt.seg_ptr(sg);
                    if (ptr) stage_stream(buf + off, ptr, fmt.seg_bpt(sg), t0, fmt.ntok, lane);
                    off += stage_slot(Fmt::cap(sg));
                }
            }
            cp_async_commit();
        }
    };
    const int t_first = t_begin + 32 * warp;
#pragma unroll
    for (int k = 0; k < kStages - 1; k++) issue(t_first + k * 32 * kWarps);

    /* paged: the page id of the warp's next tile is loaded a tile ahead (see kv_decode.cuh) */
    int64_t off_next = t_first < t_end ? kv_offset(c, b, hkv, t_first) : 0;
    for (int t0 = t_first; t0 < t_end; t0 += 32 * kWarps) {
        /* tokens past t_end load their valid neighbour and get p = 0 */
        const int last = t_end - 1, t = t0 + lane;
        if constexpr (STAGED) {
            issue(t0 + (kStages - 1) * 32 * kWarps);
            cp_async_wait<kStages - 1>();
            __syncwarp(); /* every lane's copies of this tile have landed */
        }
        const int64_t off = off_next;
        if (t0 + 32 * kWarps < t_end) off_next = kv_offset(c, b, hkv, t0 + 32 * kWarps);
        const TileView<NSEG> view = view_of(t0, off);
        typename Fmt::KRow kr;
        fmt.template key_load<!STAGED>(view, min(t, last) - t0, kr);
        typename Fmt::VPre vp[VB];
#pragma unroll
        for (int k = 0; k < VB; k++) fmt.template value_load<!STAGED>(view, min(t0 + slot + k * TPS, last) - t0, vp[k]);
        fmt.tile_setup(warp, off);

        float s[R];
        fmt.score(kr, s);
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (t > last || row_hides(rw, r, t)) s[r] = -INFINITY;
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
                for (int k = 0; k < VB; k++)
                    fmt.template value_load<!STAGED>(view, min(t0 + slot + (b0 + k) * TPS, last) - t0, vp[k]);
            }
#pragma unroll
            for (int k = 0; k < VB; k++) {
                float p[R];
#pragma unroll
                for (int r = 0; r < R; r++) p[r] = sm.p[warp][r][slot + (b0 + k) * TPS];
                fmt.value_apply(vp[k], p, acc, accz);
            }
        }
        __syncwarp(); /* staged: the stage is free for the copy issued next */
    }
    if constexpr (STAGED) cp_async_wait<0>(); /* no copy may land after the CTA ends */
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
        if ((qbad >> r) & 1u) l_lane[r] = NAN; /* the merge makes a row with a NaN l all NaN */
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

    store_split_state<R>(c, rw, split, sm.red_m, sm.red_l, red_acc, D);
}

/* Loads the 4*NWORDS bytes at p (aligned to min(16, 4*NWORDS)) into w[]. */
template <int NWORDS, bool G>
__device__ __forceinline__ void load_words(const uint8_t *p, uint32_t (&w)[NWORDS])
{
    if constexpr (NWORDS == 1) {
        w[0] = ld<uint32_t, G>(p);
    } else if constexpr (NWORDS == 2) {
        const uint2 v = ld<uint2, G>(p);
        w[0] = v.x; w[1] = v.y;
    } else {
#pragma unroll
        for (int i = 0; i < NWORDS / 4; i++) {
            const uint4 v = ld<uint4, G>(p + 16 * i);
            w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
        }
    }
}

/* Shared memory a staged instance may use in all (Hopper and Ampere allow
 * 227 / 163 KB per CTA with opt-in); larger instances load directly. */
constexpr int kStageSmemMax = 160 * 1024;

/* Lets `kernel` take `dyn` bytes of dynamic shared memory (past the 48 KB
 * default); a cudaError_t. */
template <class K>
inline int allow_dyn(K kernel, int dyn)
{
    return (int)cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn);
}


} /* namespace vqcu */

#endif
