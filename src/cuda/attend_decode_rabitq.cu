/* attend_decode_rabitq.cu — split-KV decode attention over a RaBitQ cache
 * (vq_rabitq_fused_attend on CUDA): 1-bit keys, codebook values.
 *
 * Hamming score: s = (D - 2*popcount(sign(q) ^ k_bits)) * q_scale * k_mag + k_const.
 * Exact score:   s = (sum_j q_j sign_j) * q_scale * k_mag + k_const, computed as
 *                2 * sum_{bit j set} q_j - sum_j q_j (one FMA per bit and row).
 * Values: v_hat = v_cents[idx] (* v_scale[t]); the centroid table sits in shared
 * memory, where up to 32 distinct centroids hit distinct banks. */
#include "cuda/attend_skeleton.cuh"

namespace vqcu {

template <int DMAX, int R>
struct RabitqSmem {
    float cents[256];
    uint32_t qb[R][DMAX / 32];  /* sign bits of the queries */
    float qsum[R];
};

template <bool EXACT, bool PACKED, int DMAX, int R>
struct RabitqPolicy {
    static constexpr int NW = DMAX / 32;
    struct KRow {
        uint32_t w[NW];
        float mag, kc;
    };
    struct VPre {
        uint2 raw;  /* 8 nibbles in .x, or 8 bytes */
        float vs;
    };
    const vq_cu_rabitq_params &p;
    RabitqSmem<DMAX, R> &sm;
    const uint8_t *kb, *vi;
    const float *kmag, *kconst, *vscale;
    int D, kRB, vRB;
    float qsc[R];  /* q_scale * log2(e) per row */

    __device__ RabitqPolicy(const vq_cu_rabitq_params &pp, RabitqSmem<DMAX, R> &s, int b, int hkv)
        : p(pp), sm(s)
    {
        const vq_cu_attend_common &c = p.c;
        D = c.D;
        kRB = D / 8;
        vRB = p.v_packed ? D / 2 : D;
        const int64_t bh = ((int64_t)b * c.Hkv + hkv) * c.Skv;
        kb = p.k_bits + bh * kRB;
        vi = p.v_idx + bh * vRB;
        kmag = p.k_mag + bh;
        kconst = p.k_const ? p.k_const + bh : nullptr;
        vscale = p.v_scale ? p.v_scale + bh : nullptr;
    }

    __device__ void prepare(float *q, const Rows<R> &rw)
    {
#pragma unroll
        for (int r = 0; r < R; r++) qsc[r] = r < rw.n ? __ldg(p.q_scale + rw.out[r]) * kLog2e : 0.0f;
        for (int i = threadIdx.x; i < 256; i += kThreads)
            sm.cents[i] = __ldg(p.v_cents + min(i, p.n_cents - 1));
        for (int i = threadIdx.x; i < R * NW; i += kThreads) {
            const int r = i / NW, w = i % NW;
            uint32_t bits = 0;
            for (int j = 0; j < 32; j++) {
                const int d = 32 * w + j;
                if (d < D && q[r * DMAX + d] >= 0.0f) bits |= 1u << j;
            }
            sm.qb[r][w] = bits;
        }
        for (int r = threadIdx.x; r < R; r += kThreads) {
            float s = 0.0f;
            for (int d = 0; d < D; d++) s += q[r * DMAX + d];
            sm.qsum[r] = s;
        }
    }

    __device__ void tile_begin(int, int, const float *) {}

    __device__ void key_load(int t, KRow &kr) const
    {
        load_row<NW>(kb + (int64_t)t * kRB, kRB, kr.w);
        kr.mag = __ldg(kmag + t);
        /* exact scores: q . (+-mag) mixes +inf and -inf, NaN on the CPU */
        if constexpr (EXACT) kr.mag = isfinite(kr.mag) ? kr.mag : NAN;
        kr.kc = kconst ? __ldg(kconst + t) * kLog2e : 0.0f;
    }

    __device__ void score(int, int, const KRow &kr, const float *q, float (&s)[R]) const
    {
        if constexpr (EXACT) {
            /* f_j = 1 + bit_j/2: sum_j q_j sign_j = 2 sum q_j bit_j - sum q_j = 4 sum q_j f_j - 5 sum q_j */
            float dot[R];
#pragma unroll
            for (int r = 0; r < R; r++) dot[r] = 0.0f;
            const float4 *q4 = (const float4 *)q;
#pragma unroll
            for (int c4 = 0; c4 < DMAX / 4; c4++) {
                float bf[4];
#pragma unroll
                for (int j = 0; j < 4; j++) bf[j] = code_1p<1>(kr.w[(4 * c4 + j) >> 5], (4 * c4 + j) & 31);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float4 v = q4[r * (DMAX / 4) + c4];
                    dot[r] = fmaf(bf[0], v.x, fmaf(bf[1], v.y, fmaf(bf[2], v.z, fmaf(bf[3], v.w, dot[r]))));
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = fmaf((4.0f * dot[r] - 5.0f * sm.qsum[r]) * qsc[r], kr.mag, kr.kc);
        } else {
#pragma unroll
            for (int r = 0; r < R; r++) {
                int ham = 0;
#pragma unroll
                for (int i = 0; i < NW; i++) ham += __popc(sm.qb[r][i] ^ kr.w[i]);
                /* bits past D are 0 on both sides */
                s[r] = fmaf((float)(D - 2 * ham) * qsc[r], kr.mag, kr.kc);
            }
        }
    }

    __device__ void value_load(int t, int cidx, VPre &v) const
    {
        if constexpr (PACKED) v.raw.x = __ldg((const uint32_t *)(vi + (int64_t)t * vRB + 4 * cidx));
        else v.raw = __ldg((const uint2 *)(vi + (int64_t)t * vRB + 8 * cidx));
        v.vs = vscale ? __ldg(vscale + t) : 1.0f;
    }

    __device__ void value_apply(const VPre &x, const float (&pr)[R], float (&acc)[R][8], float (&)[R]) const
    {
        float v[8];
        if constexpr (PACKED) {
#pragma unroll
            for (int j = 0; j < 8; j++) v[j] = sm.cents[(x.raw.x >> (4 * j)) & 15u];
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                v[j] = sm.cents[(x.raw.x >> (8 * j)) & 255u];
                v[4 + j] = sm.cents[(x.raw.y >> (8 * j)) & 255u];
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float a = pr[r] * x.vs;
#pragma unroll
            for (int j = 0; j < 8; j++) acc[r][j] = fmaf(a, v[j], acc[r][j]);
        }
    }
};

template <bool EXACT, bool PACKED, int DMAX, int R>
__global__ void __launch_bounds__(kThreads) rabitq_decode_kernel(const vq_cu_rabitq_params p)
{
    __shared__ __align__(16) float fsm[kWarps * R * DMAX];
    __shared__ RabitqSmem<DMAX, R> rs;
    const int hkv = blockIdx.y / p.c.row_chunks;
    RabitqPolicy<EXACT, PACKED, DMAX, R> f(p, rs, blockIdx.z, hkv);
    decode_split<RabitqPolicy<EXACT, PACKED, DMAX, R>, DMAX, R>(p.c, f, fsm);
}

template <int DMAX, int R>
struct RabitqLaunch {
    static int run(const void *params, void *stream)
    {
        const vq_cu_rabitq_params &p = *(const vq_cu_rabitq_params *)params;
        const dim3 grid = decode_grid(p.c);
        cudaStream_t st = (cudaStream_t)stream;
        if (p.exact && p.v_packed) rabitq_decode_kernel<true, true, DMAX, R><<<grid, kThreads, 0, st>>>(p);
        else if (p.exact) rabitq_decode_kernel<true, false, DMAX, R><<<grid, kThreads, 0, st>>>(p);
        else if (p.v_packed) rabitq_decode_kernel<false, true, DMAX, R><<<grid, kThreads, 0, st>>>(p);
        else rabitq_decode_kernel<false, false, DMAX, R><<<grid, kThreads, 0, st>>>(p);
        return (int)cudaGetLastError();
    }
    static int occupancy(const void *params, int *out)
    {
        const vq_cu_rabitq_params &p = *(const vq_cu_rabitq_params *)params;
        if (p.exact && p.v_packed) return occupancy_of(rabitq_decode_kernel<true, true, DMAX, R>, out);
        if (p.exact) return occupancy_of(rabitq_decode_kernel<true, false, DMAX, R>, out);
        if (p.v_packed) return occupancy_of(rabitq_decode_kernel<false, true, DMAX, R>, out);
        return occupancy_of(rabitq_decode_kernel<false, false, DMAX, R>, out);
    }
};

} /* namespace vqcu */

extern "C" int vq_cu_launch_rabitq_decode(const vq_cu_rabitq_params *p, void *stream, int *occupancy)
{
    return vqcu::dispatch_instance<vqcu::RabitqLaunch>(vqcu::decode_dmax(p->c.D), p->c.rows, p, stream, occupancy);
}
