/* attend_decode_kivi.cuh — split-KV decode attention over a KIVI
 * group-affine cache (vq_kivi_fused_attend on CUDA).
 *
 * k_hat[t,c] = code*ks[t/g,c] + kz[t/g,c]. When g % 32 == 0 a warp tile of 32
 * tokens lies in one key group, so the group's scale is folded into the query
 * once per group: q.k_hat = sum_c code_c*(q_c*ks_c) + sum_c q_c*kz_c, and the
 * per-token work is one FMA per code and row. Otherwise each code is decoded
 * with its own group's scale (correct, slower). Codes become floats as
 * 1 + code/2^bits (code_1p: a shift and a LOP3), the 2^bits and the 1 folded
 * into the coefficients.
 * v_hat[t,c] = code*vs[t,c/g] + vz[t,c/g]; with g % 8 == 0 a lane's 8 channels
 * share one group, so p*vz is accumulated once per token and chunk. */
#ifndef VQ_CUDA_ATTEND_DECODE_KIVI_CUH
#define VQ_CUDA_ATTEND_DECODE_KIVI_CUH

#include "cuda/attend_skeleton.cuh"

namespace vqcu {

template <int BITS> struct ChunkT;
template <> struct ChunkT<2> { typedef uint16_t T; };
template <> struct ChunkT<4> { typedef uint32_t T; };
template <> struct ChunkT<8> { typedef uint2 T; };

/* 8 codes of BITS bits from a chunk word. */
/* Code j (0..7) of a value chunk as 1 + code * 2^-BITS. */
template <int BITS, class T>
__device__ __forceinline__ float chunk_1p(const T &raw, int j)
{
    if constexpr (BITS == 8) return code_1p<8>(j < 4 ? raw.x : raw.y, 8 * (j % 4));
    else return code_1p<BITS>((uint32_t)raw, BITS * j);
}

template <int BITS, int DMAX, int R>
struct AffinePolicy {
    static constexpr int NW = DMAX * BITS / 32;  /* words of a key row */
    static constexpr float kTwoB = (float)(1 << BITS);
    struct KRow { uint32_t w[NW]; };
    struct VPre {
        typename ChunkT<BITS>::T raw;  /* 8 codes */
        float sv, zv;                  /* the chunk's scale and zero (g % 8 == 0) */
        int t;
    };
    const vq_cu_kivi_params &p;
    const uint8_t *kc, *vc;
    const void *ks, *kz, *vs, *vz;               /* offsets in elements below */
    int64_t ks_off, vs_off;
    int D, g, GV, kRB, vRB;
    int vgrp;           /* value group of this lane's 8 channels (g % 8 == 0) */
    bool fold;
    float *qs;          /* [kWarps][R][DMAX] q * k_scale * 2^BITS of the current group */
    int cur_grp;
    float qz[R];        /* sum_c q_c * (k_zero_c - k_scale_c * 2^BITS) of the current group */

    __device__ AffinePolicy(const vq_cu_kivi_params &pp, float *smem, int b, int hkv) : p(pp), qs(smem)
    {
        const vq_cu_attend_common &c = p.c;
        D = c.D;
        g = p.group;
        GV = (D + g - 1) / g;
        kRB = D * BITS / 8;
        vRB = kRB;
        const int64_t bh = (int64_t)b * c.Hkv + hkv;
        const int GK = (c.Skv + g - 1) / g;
        kc = p.k_codes + bh * c.Skv * kRB;
        vc = p.v_codes + bh * c.Skv * vRB;
        ks = p.k_scale; kz = p.k_zero; vs = p.v_scale; vz = p.v_zero;
        ks_off = bh * GK * D;
        vs_off = bh * c.Skv * GV;
        fold = g % 32 == 0;
        cur_grp = -1;
        /* the lane's value chunk, clamped as the skeleton clamps it */
        vgrp = 8 * min((int)(threadIdx.x & 31) % (DMAX / 8), D / 8 - 1) / g;
#pragma unroll
        for (int r = 0; r < R; r++) qz[r] = 0.0f;
    }

    __device__ void prepare(float *q, const Rows<R> &)
    {
        for (int i = threadIdx.x; i < R * DMAX; i += kThreads) q[i] *= p.qmul;
        for (int i = threadIdx.x; i < kWarps * R * DMAX; i += kThreads) qs[i] = 0.0f;
    }

    /* g % 32 == 0: the warp tile lies in one key group; fold its scale into q. */
    __device__ void tile_begin(int warp, int t0, const float *q)
    {
        if (!fold) return;
        const int grp = t0 / g;
        if (grp == cur_grp) return;
        cur_grp = grp;
        const int lane = threadIdx.x & 31;
        float part[R];
#pragma unroll
        for (int r = 0; r < R; r++) part[r] = 0.0f;
        float *qw = qs + warp * R * DMAX;
        for (int d = lane; d < D; d += 32) {
            const float s = load_f(ks, ks_off + (int64_t)grp * D + d, p.scale_f16) * kTwoB;
            const float z = load_f(kz, ks_off + (int64_t)grp * D + d, p.scale_f16);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float qv = q[r * DMAX + d];
                qw[r * DMAX + d] = qv * s;
                part[r] = fmaf(qv, z - s, part[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) qz[r] = warp_sum(part[r]);
        __syncwarp();
    }

    __device__ void key_load(int t, KRow &kr) const { load_row<NW>(kc + (int64_t)t * kRB, kRB, kr.w); }

    __device__ void score(int warp, int t, const KRow &kr, const float *q, float (&s)[R]) const
    {
        if (fold) {
            /* sum_c (1 + code_c/2^B) * q_c*ks_c*2^B + qz = sum_c q_c*(code_c*ks_c + kz_c) */
            const float4 *qw = (const float4 *)(qs + warp * R * DMAX);
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = qz[r];
#pragma unroll
            for (int c4 = 0; c4 < DMAX / 4; c4++) {
                float cf[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int bit = (4 * c4 + j) * BITS;
                    cf[j] = code_1p<BITS>(kr.w[bit >> 5], bit & 31);
                }
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float4 v = qw[r * (DMAX / 4) + c4];
                    s[r] = fmaf(cf[0], v.x, fmaf(cf[1], v.y, fmaf(cf[2], v.z, fmaf(cf[3], v.w, s[r]))));
                }
            }
            return;
        }
        const int64_t gbase = ks_off + (int64_t)(t / g) * D;
#pragma unroll
        for (int r = 0; r < R; r++) s[r] = 0.0f;
#pragma unroll
        for (int d = 0; d < DMAX; d++) {
            if (d < D) {
                const float kh = fmaf(code_f(bits_at(kr.w, d * BITS, BITS)), load_f(ks, gbase + d, p.scale_f16),
                                      load_f(kz, gbase + d, p.scale_f16));
#pragma unroll
                for (int r = 0; r < R; r++) s[r] = fmaf(q[r * DMAX + d], kh, s[r]);
            }
        }
    }

    __device__ void value_load(int t, int cidx, VPre &v) const
    {
        v.raw = __ldg((const typename ChunkT<BITS>::T *)(vc + (int64_t)t * vRB + cidx * BITS));
        v.t = t;
        if (g % 8 == 0) {
            const int64_t si = vs_off + (int64_t)t * GV + vgrp;
            v.sv = load_f(vs, si, p.v_scale_f16);
            v.zv = load_f(vz, si, p.v_scale_f16);
        }
    }

    __device__ void value_apply(const VPre &v, const float (&pr)[R], float (&acc)[R][8], float (&accz)[R]) const
    {
        if (g % 8 == 0) {
            /* p*(code*sv + zv) = (p*sv*2^B)*(1 + code/2^B) + p*(zv - sv*2^B) */
            const float sv = v.sv * kTwoB, zv = v.zv - sv;
            float f[8];
#pragma unroll
            for (int j = 0; j < 8; j++) f[j] = chunk_1p<BITS>(v.raw, j);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float a = pr[r] * sv;
                accz[r] = fmaf(pr[r], zv, accz[r]);
#pragma unroll
                for (int j = 0; j < 8; j++) acc[r][j] = fmaf(a, f[j], acc[r][j]);
            }
            return;
        }
        const int64_t srow = vs_off + (int64_t)v.t * GV;
        const int cidx = min((int)(threadIdx.x & 31) % (DMAX / 8), D / 8 - 1);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int grp = (8 * cidx + j) / g;
            const float code = (chunk_1p<BITS>(v.raw, j) - 1.0f) * kTwoB; /* exact */
            const float vh = fmaf(code, load_f(vs, srow + grp, p.v_scale_f16), load_f(vz, srow + grp, p.v_scale_f16));
#pragma unroll
            for (int r = 0; r < R; r++) acc[r][j] = fmaf(pr[r], vh, acc[r][j]);
        }
    }
};

template <int BITS, int DMAX, int R>
__global__ void __launch_bounds__(kThreads) kivi_decode_kernel(const vq_cu_kivi_params p)
{
    __shared__ __align__(16) float fsm[kWarps * R * DMAX];
    const int hkv = blockIdx.y / p.c.row_chunks;
    AffinePolicy<BITS, DMAX, R> f(p, fsm, blockIdx.z, hkv);
    decode_split<AffinePolicy<BITS, DMAX, R>, DMAX, R>(p.c, f, fsm);
}

/* One translation unit per code width (attend_decode_kivi_b{2,4,8}.cu), so
 * that the instances compile in parallel. */
template <int BITS>
struct AffineLaunchBits {
    template <int DMAX, int R>
    struct L {
        static int run(const void *params, void *stream)
        {
            const vq_cu_kivi_params &p = *(const vq_cu_kivi_params *)params;
            kivi_decode_kernel<BITS, DMAX, R><<<decode_grid(p.c), kThreads, 0, (cudaStream_t)stream>>>(p);
            return (int)cudaGetLastError();
        }
        static int occupancy(const void *, int *out) { return occupancy_of(kivi_decode_kernel<BITS, DMAX, R>, out); }
    };
};

} /* namespace vqcu */

#define VQ_CU_KIVI_LAUNCHER(BITS)                                                                     \
    extern "C" int vq_cu_launch_kivi_decode_b##BITS(const vq_cu_kivi_params *p, void *stream,      \
                                                      int *occupancy)                                   \
    {                                                                                                   \
        return vqcu::dispatch_instance<vqcu::AffineLaunchBits<BITS>::L>(vqcu::decode_dmax(p->c.D),     \
                                                                        p->c.rows, p, stream, occupancy); \
    }

#endif
