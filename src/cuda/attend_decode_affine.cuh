/* attend_decode_affine.cuh — split-KV decode attention over a KIVI
 * group-affine cache (vq_scalar_fused_decode_attend on CUDA).
 *
 * k_hat[t,c] = code*ks[t/g,c] + kz[t/g,c]. When g % 32 == 0 a warp tile of 32
 * tokens lies in one key group, so the group's scale is folded into the query
 * once per group: q.k_hat = sum_c code_c*(q_c*ks_c) + sum_c q_c*kz_c, and the
 * per-token work is one FMA per code and row. Otherwise each code is decoded
 * with its own group's scale (correct, slower).
 * v_hat[t,c] = code*vs[t,c/g] + vz[t,c/g]; with g % 8 == 0 a lane's 8 channels
 * share one group, so p*vz is accumulated once per token and chunk. */
#ifndef VQ_CUDA_ATTEND_DECODE_AFFINE_CUH
#define VQ_CUDA_ATTEND_DECODE_AFFINE_CUH

#include "cuda/attend_skeleton.cuh"

namespace vqcu {

template <int BITS> struct ChunkT;
template <> struct ChunkT<2> { typedef uint16_t T; };
template <> struct ChunkT<4> { typedef uint32_t T; };
template <> struct ChunkT<8> { typedef uint2 T; };

/* 8 codes of BITS bits from a chunk word. */
template <int BITS>
__device__ __forceinline__ void chunk_codes(const uint8_t *p, float (&code)[8])
{
    if constexpr (BITS == 8) {
        const uint2 v = __ldg((const uint2 *)p);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            code[j] = code_f((v.x >> (8 * j)) & 255u);
            code[4 + j] = code_f((v.y >> (8 * j)) & 255u);
        }
    } else {
        const uint32_t v = (uint32_t)__ldg((const typename ChunkT<BITS>::T *)p);
#pragma unroll
        for (int j = 0; j < 8; j++) code[j] = code_f((v >> (BITS * j)) & ((1u << BITS) - 1u));
    }
}

template <int BITS, int DMAX, int R>
struct AffinePolicy {
    static constexpr int NW = DMAX * BITS / 32;  /* words of a key row */
    const vq_cu_affine_params &p;
    const uint8_t *kc, *vc;
    const void *ks, *kz, *vs, *vz;               /* offsets in elements below */
    int64_t ks_off, vs_off;
    int D, g, GV, kRB, vRB;
    bool fold;
    float *qs;          /* [kWarps][R][DMAX] folded queries of the current group */
    int cur_grp;
    float qz[R];

    __device__ AffinePolicy(const vq_cu_affine_params &pp, float *smem, int b, int hkv) : p(pp), qs(smem)
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
#pragma unroll
        for (int r = 0; r < R; r++) qz[r] = 0.0f;
    }

    __device__ void prepare(float *q, const Rows<R> &)
    {
        for (int i = threadIdx.x; i < R * DMAX; i += kThreads) q[i] *= p.qmul;
        for (int i = threadIdx.x; i < kWarps * R * DMAX; i += kThreads) qs[i] = 0.0f;
    }

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
            const float s = load_f(ks, ks_off + (int64_t)grp * D + d, p.scale_f16);
            const float z = load_f(kz, ks_off + (int64_t)grp * D + d, p.scale_f16);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float qv = q[r * DMAX + d];
                qw[r * DMAX + d] = qv * s;
                part[r] = fmaf(qv, z, part[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) qz[r] = warp_sum(part[r]);
        __syncwarp();
    }

    __device__ void score(int warp, int t, const float *q, float (&s)[R])
    {
        uint32_t w[NW];
        load_row<NW>(kc + (int64_t)t * kRB, kRB, w);
        if (fold) {
            const float4 *qw = (const float4 *)(qs + warp * R * DMAX);
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = qz[r];
#pragma unroll
            for (int c4 = 0; c4 < DMAX / 4; c4++) {
                float cf[4];
#pragma unroll
                for (int j = 0; j < 4; j++) cf[j] = code_f(bits_at(w, (4 * c4 + j) * BITS, BITS));
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
                const float kh = fmaf(code_f(bits_at(w, d * BITS, BITS)), load_f(ks, gbase + d, p.scale_f16),
                                      load_f(kz, gbase + d, p.scale_f16));
#pragma unroll
                for (int r = 0; r < R; r++) s[r] = fmaf(q[r * DMAX + d], kh, s[r]);
            }
        }
    }

    __device__ void value(int t, int cidx, const float (&pr)[R], float (&acc)[R][8], float (&accz)[R])
    {
        float code[8];
        chunk_codes<BITS>(vc + (int64_t)t * vRB + cidx * BITS, code);
        const int64_t srow = vs_off + (int64_t)t * GV;
        if (g % 8 == 0) {
            const int grp = 8 * cidx / g;
            const float sv = load_f(vs, srow + grp, p.v_scale_f16);
            const float zv = load_f(vz, srow + grp, p.v_scale_f16);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float a = pr[r] * sv;
                accz[r] = fmaf(pr[r], zv, accz[r]);
#pragma unroll
                for (int j = 0; j < 8; j++) acc[r][j] = fmaf(a, code[j], acc[r][j]);
            }
            return;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int grp = (8 * cidx + j) / g;
            const float vh = fmaf(code[j], load_f(vs, srow + grp, p.v_scale_f16), load_f(vz, srow + grp, p.v_scale_f16));
#pragma unroll
            for (int r = 0; r < R; r++) acc[r][j] = fmaf(pr[r], vh, acc[r][j]);
        }
    }
};

template <int BITS, int DMAX, int R>
__global__ void __launch_bounds__(kThreads) affine_decode_kernel(const vq_cu_affine_params p)
{
    __shared__ __align__(16) float fsm[kWarps * R * DMAX];
    const int hkv = blockIdx.y / p.c.row_chunks;
    AffinePolicy<BITS, DMAX, R> f(p, fsm, blockIdx.z, hkv);
    decode_split<AffinePolicy<BITS, DMAX, R>, DMAX, R>(p.c, f, fsm);
}

/* One translation unit per code width (attend_decode_affine_b{2,4,8}.cu), so
 * that the instances compile in parallel. */
template <int BITS>
struct AffineLaunchBits {
    template <int DMAX, int R>
    struct L {
        static int run(const void *params, void *stream)
        {
            const vq_cu_affine_params &p = *(const vq_cu_affine_params *)params;
            affine_decode_kernel<BITS, DMAX, R><<<decode_grid(p.c), kThreads, 0, (cudaStream_t)stream>>>(p);
            return (int)cudaGetLastError();
        }
    };
};

} /* namespace vqcu */

#define VQ_CU_AFFINE_LAUNCHER(BITS)                                                                     \
    extern "C" int vq_cu_launch_affine_decode_b##BITS(const vq_cu_affine_params *p, void *stream)      \
    {                                                                                                   \
        return vqcu::dispatch_dmax_r<vqcu::AffineLaunchBits<BITS>::L>(p->c.D, p->c.rows, p, stream); \
    }

#endif
