/* attend_fast_affine.cuh — the fast KIVI decode kernel (vq_scalar_fused_decode_attend
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
#ifndef VQ_CUDA_ATTEND_FAST_AFFINE_CUH
#define VQ_CUDA_ATTEND_FAST_AFFINE_CUH

#include "cuda/attend_fast.cuh"
#include "cuda/attend_int8q.cuh"

namespace vqcu {

template <bool F16>
__device__ __forceinline__ float ld_scale(const void *p, int64_t i)
{
    if constexpr (F16) return __half2float(__ldg((const __half *)p + i));
    else return __ldg((const float *)p + i);
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

    const uint8_t *kc, *vc;
    const void *ks, *kz, *vs, *vz;
    int64_t ks_base, vs_base;   /* element offsets of this (b, kv head) */
    int g, GV, vgrp, cidx;
    uint32_t *qw;               /* [kWarps][R][3][NX] quantised q*ks of the warp's group */
    const float *q;             /* [R][D] q * qmul (shared) */
    int cur_grp;
    float qmul;                 /* softmax scale * log2(e) */
    float qstep[R], qbias[R];

    __device__ AffineFast(const vq_cu_affine_params &p, uint32_t *smem, int b, int hkv) : qw(smem)
    {
        const vq_cu_attend_common &c = p.c;
        g = p.group;
        GV = (D + g - 1) / g;
        const int64_t bh = (int64_t)b * c.Hkv + hkv;
        const int GK = (c.Skv + g - 1) / g;
        kc = p.k_codes + bh * c.Skv * RB;
        vc = p.v_codes + bh * c.Skv * RB;
        ks = p.k_scale; kz = p.k_zero; vs = p.v_scale; vz = p.v_zero;
        ks_base = bh * GK * D;
        vs_base = bh * c.Skv * GV;
        cidx = (threadIdx.x & 31) % LPT;
        vgrp = cidx * CPL / g;
        cur_grp = -1;
        qmul = p.qmul;
    }

    __device__ void prepare(float *qs, const Rows<R> &)
    {
        for (int i = threadIdx.x; i < R * D; i += kThreads) qs[i] *= qmul;
        q = qs;
    }

    /* Folds the tile's key group into the warp's quantised query (g % 32 == 0:
     * a tile never straddles two groups). */
    __device__ void tile_setup(int warp, int t0)
    {
        const int grp = t0 / g;
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
                    part[r] = fmaf(qv, zr, part[r]);
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

    __device__ void key_load(int t, KRow &kr) const { load_words<NW>(kc + (int64_t)t * RB, kr.w); }

    __device__ void score(const KRow &kr, float (&s)[R]) const
    {
        const int warp = threadIdx.x >> 5;
#pragma unroll
        for (int r = 0; r < R; r++)
            s[r] = fmaf(qstep[r], q_dot<BITS, NW>(kr.w, qw + ((warp * R + r) * 3) * NX), qbias[r]);
    }

    __device__ void value_load(int t, VPre &v) const
    {
        const uint8_t *p = vc + (int64_t)t * RB + cidx * VCB;
        if constexpr (VCB == 2) v.w[0] = __ldg((const uint16_t *)p);
        else load_words<VW>(p, v.w);
        const int64_t si = vs_base + (int64_t)t * GV + vgrp;
        v.s = ld_scale<F16S>(vs, si);
        v.z = ld_scale<F16S>(vz, si);
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

template <int BITS, bool F16S, int D, int R>
__global__ void __launch_bounds__(kThreads) affine_fast_kernel(const vq_cu_affine_params p)
{
    __shared__ FastSmem<D, R> sm;
    __shared__ __align__(16) float big[kWarps * R * D]; /* the warps' quantised queries, then red_acc */
    const int hkv = blockIdx.y / p.c.row_chunks;
    AffineFast<BITS, F16S, D, R> f(p, (uint32_t *)big, blockIdx.z, hkv);
    fast_split<AffineFast<BITS, F16S, D, R>, D, R>(p.c, f, sm, big);
}

template <int BITS>
struct AffineFastBits {
    template <int D, int R>
    struct L {
        static int run(const void *params, void *stream)
        {
            const vq_cu_affine_params &p = *(const vq_cu_affine_params *)params;
            const dim3 grid = decode_grid(p.c);
            if (p.scale_f16) affine_fast_kernel<BITS, true, D, R><<<grid, kThreads, 0, (cudaStream_t)stream>>>(p);
            else affine_fast_kernel<BITS, false, D, R><<<grid, kThreads, 0, (cudaStream_t)stream>>>(p);
            return (int)cudaGetLastError();
        }
        static int occupancy(const void *params, int *out)
        {
            const vq_cu_affine_params &p = *(const vq_cu_affine_params *)params;
            return p.scale_f16 ? occupancy_of(affine_fast_kernel<BITS, true, D, R>, out)
                               : occupancy_of(affine_fast_kernel<BITS, false, D, R>, out);
        }
    };
};

} /* namespace vqcu */

#define VQ_CU_AFFINE_FAST_LAUNCHER(BITS)                                                                \
    extern "C" int vq_cu_launch_affine_fast_b##BITS(const vq_cu_affine_params *p, void *stream,        \
                                                    int *occupancy)                                     \
    {                                                                                                   \
        return vqcu::dispatch_fast<vqcu::AffineFastBits<BITS>::L>(p->c.D, p->c.rows, p, stream,        \
                                                                  occupancy);                           \
    }

#endif
