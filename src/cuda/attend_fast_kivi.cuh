/* attend_fast_kivi.cuh — the fast KIVI decode kernel (vq_kivi_fused_attend
 * on CUDA when D is 64, 128 or 256 and g % 32 == 0).
 *
 * Keys: k_hat[t,c] = code*ks[t/g,c] + kz[t/g,c]. A 32-token tile lies in one
 * key group, so per group q.k_hat = sum_c code_c * (q_c ks_c) + sum_c q_c kz_c:
 * the warp folds the group's scales into the query once, quantises q*ks to
 * 22-bit integers (attend_int8q.cuh) and scores each token with three DP4A per
 * four codes instead of a convert and an FMA per code.
 * Values: v_hat[t,c] = code*vs[t,c/g] + vz[t,c/g]; a lane's CPL channels share
 * one group (g % 32 == 0), so p*vz goes to accz once per token and the codes
 * become floats as 1 + code/2^BITS (code_1p: a shift and a LOP3). */
#ifndef VQ_CUDA_ATTEND_FAST_KIVI_CUH
#define VQ_CUDA_ATTEND_FAST_KIVI_CUH

#include <climits>

#include "cuda/attend_fast.cuh"
#include "cuda/attend_int8q.cuh"

namespace vqcu {

/* Element i of a f16 (F16) or f32 array, through the read-only path when G. */
template <bool F16, bool G = true>
__device__ __forceinline__ float ld_scale(const void *p, int64_t i)
{
    if constexpr (F16) return __half2float(ld<__half, G>((const __half *)p + i));
    else return ld<float, G>((const float *)p + i);
}

template <int BITS, bool F16S, int D, int R>
struct AffineFast {
    static constexpr int CPL = FastCpl<R>::value;
    static constexpr int LPT = D / CPL;
    static constexpr int RB = D * BITS / 8;     /* bytes of a key or value row */
    static constexpr int NW = RB / 4;           /* words of a key row */
    static constexpr int NX = D / 4;            /* query words per plane */
    static constexpr int VCB = CPL * BITS / 8;  /* bytes of a lane's value chunk: 2..32 */
    static constexpr int VW = VCB < 4 ? 1 : VCB / 4;
    static constexpr float kTwoB = (float)(1 << BITS);
    using CB = CodeBytes<BITS>;

    struct KRow { uint32_t w[NW]; };
    struct VPre {
        uint32_t w[VW];
        float s, z;
    };
    /* per-token streams: key codes, value codes, value scales, value zeros */
    static constexpr int NSEG = 4;
    static constexpr int ES = F16S ? 2 : 4;   /* bytes of a scale */
    __host__ __device__ static constexpr int cap(int s) { return s < 2 ? RB : D / 32 * ES; }
    __host__ __device__ static constexpr int stage_bytes()
    {
        return stage_slot(cap(0)) + stage_slot(cap(1)) + stage_slot(cap(2)) + stage_slot(cap(3));
    }

    const uint8_t *kc, *vc;
    const void *ks, *kz, *vs, *vz;
    int64_t ks_base, vs_base;   /* element offsets of this (b, kv head) */
    int g, GV, vgrp, cidx, ntok;
    uint32_t *qw;               /* [kWarps][R][3][NX] quantised q*ks of the warp's group */
    const float *q;             /* [R][D] q * qmul (shared) */
    int64_t cur_grp;
    float qmul;                 /* softmax scale * log2(e) */
    float qstep[R], qbias[R];

    __device__ AffineFast(const vq_cu_kivi_params &p, uint32_t *smem, int b, int hkv) : qw(smem)
    {
        const vq_cu_attend_common &c = p.c;
        g = p.group;
        GV = (D + g - 1) / g;
        const int64_t bh = (int64_t)b * c.Hkv + hkv, t0 = kv_base(c, b, hkv);
        const int GK = (c.Skv + g - 1) / g;
        kc = p.k_codes + t0 * RB;
        vc = p.v_codes + t0 * RB;
        ks = p.k_scale; kz = p.k_zero; vs = p.v_scale; vz = p.v_zero;
        /* key groups: [B,Hkv,GK,D], or paged [pages][Hkv][P/g][D], whose group
         * of flattened token i is i / g (g divides P) */
        ks_base = c.pg.pages == nullptr ? bh * GK * D : 0;
        vs_base = t0 * GV;
        cidx = (threadIdx.x & 31) % LPT;
        vgrp = cidx * CPL / g;
        cur_grp = -1;
        qmul = p.qmul;
        ntok = c.Skv;
    }

    __device__ const uint8_t *seg_ptr(int s) const
    {
        return s == 0 ? kc : s == 1 ? vc
             : (const uint8_t *)(s == 2 ? vs : vz) + vs_base * ES;
    }
    __device__ int seg_bpt(int s) const { return s < 2 ? RB : GV * ES; }

    __device__ void prepare(float *qs, const Rows<R> &)
    {
        for (int i = threadIdx.x; i < R * D; i += kThreads) qs[i] *= qmul;
        q = qs;
    }

    /* Folds the tile's key group into the warp's quantised query (g % 32 == 0:
     * a tile never straddles two groups); off: the tile's token 0 from ks_base. */
    __device__ void tile_setup(int warp, int64_t off)
    {
        const int64_t grp = off <= INT_MAX ? (int64_t)((int)off / g) : off / g; /* 32-bit division where it fits */
        if (grp == cur_grp) return;
        cur_grp = grp;
        const int lane = threadIdx.x & 31;
        constexpr int XPL = NX < 32 ? 1 : NX / 32; /* query words per lane */
        float v[XPL][R][4], amax[R], part[R];
#pragma unroll
        for (int r = 0; r < R; r++) amax[r] = part[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < XPL; k++) {
            const int x = lane + 32 * k;
            const bool on = x < NX;
#pragma unroll
            for (int b = 0; b < 4; b++) {
                const int ch = on ? CB::channel(x, b) : 0;
                const float sc = on ? ld_scale<F16S>(ks, ks_base + (int64_t)grp * D + ch) : 0.0f;
                const float zr = on ? ld_scale<F16S>(kz, ks_base + (int64_t)grp * D + ch) : 0.0f;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float qv = q[r * D + ch];
                    v[k][r][b] = qv * sc;
                    amax[r] = fmaxf(amax[r], fabsf(v[k][r][b]));
                    /* + 0 * (q * scale): a NaN or inf scale, which the integer
                     * query would lose, reaches the scores through qbias */
                    part[r] = fmaf(v[k][r][b], 0.0f, fmaf(qv, zr, part[r]));
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            float inv;
            q_steps(warp_max(amax[r]), inv, qstep[r]);
            qbias[r] = warp_sum(part[r]);
#pragma unroll
            for (int k = 0; k < XPL; k++) {
                const int x = lane + 32 * k;
                if (x < NX) q_store_word(v[k][r], inv, qw + ((warp * R + r) * 3) * NX + x, NX);
            }
        }
        __syncwarp();
    }

    template <bool G>
    __device__ void key_load(const TileView<NSEG> &v, int j, KRow &kr) const
    {
        load_words<NW, G>(v.p[0] + j * RB, kr.w);
    }

    __device__ void score(const KRow &kr, float (&s)[R]) const
    {
        const int warp = threadIdx.x >> 5;
#pragma unroll
        for (int r = 0; r < R; r++)
            s[r] = fmaf(qstep[r], q_dot<BITS, NW>(kr.w, qw + ((warp * R + r) * 3) * NX), qbias[r]);
    }

    template <bool G>
    __device__ void value_load(const TileView<NSEG> &tv, int j, VPre &v) const
    {
        const uint8_t *p = tv.p[1] + j * RB + cidx * VCB;
        if constexpr (VCB == 2) v.w[0] = ld<uint16_t, G>(p);
        else load_words<VW, G>(p, v.w);
        const int si = j * GV + vgrp;
        v.s = ld_scale<F16S, G>(tv.p[2], si);
        v.z = ld_scale<F16S, G>(tv.p[3], si);
    }

    /* p*(code*s + z) = (p*s*2^B)*(1 + code/2^B) + p*(z - s*2^B) */
    __device__ void value_apply(const VPre &v, const float (&p)[R], float (&acc)[R][CPL], float (&accz)[R]) const
    {
        const float sv = v.s * kTwoB, zv = v.z - sv;
        float f[CPL];
#pragma unroll
        for (int j = 0; j < CPL; j++) f[j] = code_1p<BITS>(v.w[j * BITS / 32], (j * BITS) % 32);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float a = p[r] * sv;
            accz[r] = fmaf(p[r], zv, accz[r]);
#pragma unroll
            for (int j = 0; j < CPL; j++) acc[r][j] = fmaf(a, f[j], acc[r][j]);
        }
    }
};

template <int BITS, bool F16S, int D, int R, bool STAGED>
__global__ void __launch_bounds__(kThreads, FastMinCtas<R>::value) kivi_fast_kernel(const __grid_constant__ vq_cu_kivi_params p)
{
    using F = AffineFast<BITS, F16S, D, R>;
    __shared__ FastSmem<D, R> sm;
    __shared__ __align__(16) float big[kWarps * R * D]; /* the warps' quantised queries, then red_acc */
    extern __shared__ __align__(16) uint8_t stage[]; /* kWarps * kStages * stage_bytes() when STAGED */
    const int hkv = blockIdx.y / p.c.row_chunks;
    F f(p, (uint32_t *)big, blockIdx.z, hkv);
    fast_split<F, D, R, STAGED>(p.c, f, sm, big, stage);
}

/* The instance for p, staged or direct. */
template <int BITS, bool F16S, int D, int R>
inline int kivi_fast_go(const vq_cu_kivi_params &p, void *stream, int *occupancy)
{
    constexpr int dyn = kWarps * kStages * AffineFast<BITS, F16S, D, R>::stage_bytes();
    constexpr bool can = dyn + (int)sizeof(FastSmem<D, R>) + kWarps * R * D * 4 <= kStageSmemMax;
    if (can && p.c.staged) {
        auto k = kivi_fast_kernel<BITS, F16S, D, R, can>;
        const int e = allow_dyn(k, dyn);
        if (e) return e;
        if (occupancy) return occupancy_of(k, occupancy, dyn);
        k<<<decode_grid(p.c), kThreads, dyn, (cudaStream_t)stream>>>(p);
    } else {
        auto k = kivi_fast_kernel<BITS, F16S, D, R, false>;
        if (occupancy) return occupancy_of(k, occupancy);
        k<<<decode_grid(p.c), kThreads, 0, (cudaStream_t)stream>>>(p);
    }
    return (int)cudaGetLastError();
}

template <int BITS>
struct AffineFastBits {
    template <int D, int R>
    struct L {
        static int go(const void *params, void *stream, int *occupancy)
        {
            const vq_cu_kivi_params &p = *(const vq_cu_kivi_params *)params;
            return p.scale_f16 ? kivi_fast_go<BITS, true, D, R>(p, stream, occupancy)
                               : kivi_fast_go<BITS, false, D, R>(p, stream, occupancy);
        }
        static int run(const void *params, void *stream) { return go(params, stream, nullptr); }
        static int occupancy(const void *params, int *out) { return go(params, nullptr, out); }
    };
};

} /* namespace vqcu */

#define VQ_CU_KIVI_FAST_LAUNCHER(BITS)                                                                \
    extern "C" int vq_cu_launch_kivi_fast_b##BITS(const vq_cu_kivi_params *p, void *stream,        \
                                                    int *occupancy)                                     \
    {                                                                                                   \
        return vqcu::dispatch_instance<vqcu::AffineFastBits<BITS>::L>(p->c.D, p->c.rows, p, stream,     \
                                                                  occupancy);                           \
    }

#endif
