/* attend_fast_rabitq.cu — the fast RaBitQ decode kernel (vq_rabitq_fused_attend
 * on CUDA when D is 64, 128 or 256): 1-bit keys, codebook values.
 *
 * Hamming score: s = (D - 2*popcount(sign(q) ^ k_bits)) * q_scale * k_mag + k_const.
 * Exact score:   s = (sum_j q_j sign_j) * q_scale * k_mag + k_const, with
 *                sum_j q_j sign_j = 2 sum_{bit j set} q_j - sum_j q_j and the
 *                first sum taken by DP4A against the 22-bit quantised query
 *                (attend_int8q.cuh; three DP4A per 4 x 8 bits).
 * Values: v_hat = v_cents[idx] (* v_scale[t]); the centroids sit in shared
 * memory, where the <= 16 distinct entries of a nibble table never conflict. */
#include "cuda/attend_fast.cuh"
#include "cuda/attend_int8q.cuh"

namespace vqcu {

template <int D, int R>
struct RabitqFastSmem {
    float cents[256];
    uint32_t qb[R][D / 32];     /* sign bits of the queries (Hamming) */
    alignas(16) uint32_t qw[R][3][D / 4]; /* quantised queries (exact; read 16 bytes at a time) */
    float qstep[R], qsum[R];
};

/* Byte offset of centroid index j of a packed (4-bit) or unpacked (8-bit) value word. */
template <int IB>
__device__ __forceinline__ uint32_t cent_off(uint32_t w, int j)
{
    constexpr uint32_t m = ((1u << IB) - 1u) << 2;
    const int sh = IB * j - 2;
    return (sh >= 0 ? w >> sh : w << -sh) & m;
}

template <bool EXACT, bool PACKED, int D, int R>
struct RabitqFast {
    static constexpr int CPL = FastCpl<R>::value;
    static constexpr int LPT = D / CPL;
    static constexpr int NW = D / 32;                 /* words of a key row */
    static constexpr int NX = D / 4;
    static constexpr int IB = PACKED ? 4 : 8;         /* bits per value index */
    static constexpr int VRB = D * IB / 8;            /* bytes of a value row */
    static constexpr int VW = CPL * IB / 32;          /* words of a lane's value chunk: 1..8 */
    struct KRow {
        uint32_t w[NW];
        float mag, kc;
    };
    struct VPre {
        uint32_t w[VW];
        float vs;
    };

    /* per-token streams: key bits, magnitude, constant, value indices, value scale */
    static constexpr int NSEG = 5;
    static constexpr int KRB = D / 8;
    __host__ __device__ static constexpr int cap(int s) { return s == 0 ? KRB : s == 3 ? VRB : 4; }
    __host__ __device__ static constexpr int stage_bytes()
    {
        return stage_slot(cap(0)) + stage_slot(cap(1)) + stage_slot(cap(2)) + stage_slot(cap(3)) + stage_slot(cap(4));
    }

    const vq_cu_rabitq_params &p;
    RabitqFastSmem<D, R> &sm;
    const uint8_t *kb, *vi;
    const float *kmag, *kconst, *vscale;
    int cidx, ntok;
    float qsc[R]; /* q_scale * log2(e) per row */

    __device__ RabitqFast(const vq_cu_rabitq_params &pp, RabitqFastSmem<D, R> &s, int b, int hkv) : p(pp), sm(s)
    {
        const vq_cu_attend_common &c = p.c;
        const int64_t bh = kv_base(c, b, hkv);
        kb = p.k_bits + bh * (D / 8);
        vi = p.v_idx + bh * VRB;
        kmag = p.k_mag + bh;
        kconst = p.k_const ? p.k_const + bh : nullptr;
        vscale = p.v_scale ? p.v_scale + bh : nullptr;
        cidx = (threadIdx.x & 31) % LPT;
        ntok = c.Skv;
    }

    __device__ const uint8_t *seg_ptr(int s) const
    {
        return s == 0 ? kb : s == 1 ? (const uint8_t *)kmag : s == 2 ? (const uint8_t *)kconst
             : s == 3 ? vi : (const uint8_t *)vscale;
    }
    __device__ static int seg_bpt(int s) { return cap(s); }

    __device__ void prepare(float *q, const Rows<R> &rw)
    {
#pragma unroll
        for (int r = 0; r < R; r++) qsc[r] = r < rw.n ? __ldg(p.q_scale + rw.out[r]) * kLog2e : 0.0f;
        for (int i = threadIdx.x; i < 256; i += kThreads) sm.cents[i] = __ldg(p.v_cents + min(i, p.n_cents - 1));
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        if constexpr (!EXACT) {
            for (int i = threadIdx.x; i < R * NW; i += kThreads) {
                const int r = i / NW, w = i % NW;
                uint32_t bits = 0;
                for (int j = 0; j < 32; j++)
                    if (q[r * D + 32 * w + j] >= 0.0f) bits |= 1u << j;
                sm.qb[r][w] = bits;
            }
        } else {
            /* warp w quantises rows w, w + 4, ...: the bit layout of CodeBytes<1> */
            using CB = CodeBytes<1>;
            for (int r = warp; r < R; r += kWarps) {
                float amax = 0.0f, sum = 0.0f;
                for (int d = lane; d < D; d += 32) {
                    amax = fmaxf(amax, fabsf(q[r * D + d]));
                    sum += q[r * D + d];
                }
                float inv, step;
                q_steps(warp_max(amax), inv, step);
                sum = warp_sum(sum);
                for (int x = lane; x < NX; x += 32) {
                    float v[4];
#pragma unroll
                    for (int b = 0; b < 4; b++) v[b] = q[r * D + CB::channel(x, b)];
                    q_store_word(v, inv, &sm.qw[r][0][x], NX);
                }
                if (lane == 0) {
                    sm.qstep[r] = step;
                    sm.qsum[r] = sum;
                }
            }
        }
    }

    __device__ void tile_setup(int, int64_t) {}

    template <bool G>
    __device__ void key_load(const TileView<NSEG> &v, int j, KRow &kr) const
    {
        load_words<NW, G>(v.p[0] + j * KRB, kr.w);
        kr.mag = ld<float, G>(v.p[1] + 4 * j);
        /* exact scores: q . (+-mag) mixes +inf and -inf, NaN on the CPU */
        if constexpr (EXACT) kr.mag = isfinite(kr.mag) ? kr.mag : NAN;
        kr.kc = v.p[2] ? ld<float, G>(v.p[2] + 4 * j) * kLog2e : 0.0f;
    }

    __device__ void score(const KRow &kr, float (&s)[R]) const
    {
#pragma unroll
        for (int r = 0; r < R; r++) {
            float dot;
            if constexpr (EXACT) {
                dot = fmaf(2.0f * sm.qstep[r], q_dot<1, NW>(kr.w, &sm.qw[r][0][0]), -sm.qsum[r]);
            } else {
                int ham = 0;
#pragma unroll
                for (int i = 0; i < NW; i++) ham += __popc(sm.qb[r][i] ^ kr.w[i]);
                dot = (float)(D - 2 * ham);
            }
            s[r] = fmaf(dot * qsc[r], kr.mag, kr.kc);
        }
    }

    template <bool G>
    __device__ void value_load(const TileView<NSEG> &tv, int j, VPre &v) const
    {
        load_words<VW, G>(tv.p[3] + j * VRB + cidx * (VW * 4), v.w);
        v.vs = tv.p[4] ? ld<float, G>(tv.p[4] + 4 * j) : 1.0f;
    }

    __device__ void value_apply(const VPre &v, const float (&p)[R], float (&acc)[R][CPL], float (&)[R]) const
    {
        constexpr int PW = 32 / IB; /* indices per word */
        const char *ct = (const char *)sm.cents;
        float x[CPL];
#pragma unroll
        for (int j = 0; j < CPL; j++) x[j] = *(const float *)(ct + cent_off<IB>(v.w[j / PW], j % PW));
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float a = p[r] * v.vs;
#pragma unroll
            for (int j = 0; j < CPL; j++) acc[r][j] = fmaf(a, x[j], acc[r][j]);
        }
    }
};

template <bool EXACT, bool PACKED, int D, int R, bool STAGED>
__global__ void __launch_bounds__(kThreads, FastMinCtas<R, PACKED && !EXACT>::value) rabitq_fast_kernel(const __grid_constant__ vq_cu_rabitq_params p)
{
    using F = RabitqFast<EXACT, PACKED, D, R>;
    constexpr int kRed = kWarps * R * D * 4, kOwn = (int)sizeof(RabitqFastSmem<D, R>);
    __shared__ FastSmem<D, R> sm;
    /* the policy's tables, then (after the last tile) the skeleton's red_acc */
    __shared__ __align__(16) unsigned char big[kRed > kOwn ? kRed : kOwn];
    extern __shared__ __align__(16) uint8_t stage[]; /* kWarps * kStages * stage_bytes() when STAGED */
    const int hkv = blockIdx.y / p.c.row_chunks;
    F f(p, *(RabitqFastSmem<D, R> *)big, blockIdx.z, hkv);
    fast_split<F, D, R, STAGED>(p.c, f, sm, (float *)big, stage);
}

/* The instance for p, staged or direct. */
template <bool EXACT, bool PACKED, int D, int R>
inline int rabitq_fast_go(const vq_cu_rabitq_params &p, void *stream, int *occupancy)
{
    constexpr int dyn = kWarps * kStages * RabitqFast<EXACT, PACKED, D, R>::stage_bytes();
    constexpr int kRed = kWarps * R * D * 4, kOwn = (int)sizeof(RabitqFastSmem<D, R>);
    constexpr bool can = dyn + (int)sizeof(FastSmem<D, R>) + (kRed > kOwn ? kRed : kOwn) <= kStageSmemMax;
    if (can && p.c.staged) {
        auto k = rabitq_fast_kernel<EXACT, PACKED, D, R, can>;
        const int e = allow_dyn(k, dyn);
        if (e) return e;
        if (occupancy) return occupancy_of(k, occupancy, dyn);
        k<<<decode_grid(p.c), kThreads, dyn, (cudaStream_t)stream>>>(p);
    } else {
        auto k = rabitq_fast_kernel<EXACT, PACKED, D, R, false>;
        if (occupancy) return occupancy_of(k, occupancy);
        k<<<decode_grid(p.c), kThreads, 0, (cudaStream_t)stream>>>(p);
    }
    return (int)cudaGetLastError();
}

template <int D, int R>
struct RabitqFastLaunch {
    static int go(const void *params, void *stream, int *occupancy)
    {
        const vq_cu_rabitq_params &p = *(const vq_cu_rabitq_params *)params;
        if (p.exact && p.v_packed) return rabitq_fast_go<true, true, D, R>(p, stream, occupancy);
        if (p.exact) return rabitq_fast_go<true, false, D, R>(p, stream, occupancy);
        if (p.v_packed) return rabitq_fast_go<false, true, D, R>(p, stream, occupancy);
        return rabitq_fast_go<false, false, D, R>(p, stream, occupancy);
    }
    static int run(const void *params, void *stream) { return go(params, stream, nullptr); }
    static int occupancy(const void *params, int *out) { return go(params, nullptr, out); }
};

} /* namespace vqcu */

extern "C" int vq_cu_launch_rabitq_fast(const vq_cu_rabitq_params *p, void *stream, int *occupancy)
{
    return vqcu::dispatch_instance<vqcu::RabitqFastLaunch>(p->c.D, p->c.rows, p, stream, occupancy);
}
