/* decode_mma.cuh — the split-KV decode skeleton on tensor cores (mma.sync
 * m16n8k16, f16 operands, f32 accumulators), specialised by a key policy and
 * a value policy over the layouts of src/formats/.
 *
 * Grid (nsplit, Hkv * row_chunks, B), 4 warps. A CTA owns up to 8 query rows
 * of one kv head (GQA group x Sq) and one split of the kv axis. The rows are
 * the n8 side of every mma, tokens and channels the m16 side, so no half of
 * a tile is padding for groups of up to 8 rows: a kv head's keys and values
 * are read and decoded once for all its rows, and the work per token does
 * not grow with the group. Each warp walks 32-token tiles on its own (no
 * barrier in the loop), lane (g = lane / 4, j = lane % 4):
 *   scores: S^T[32 tokens][8 rows] = K Q^T as 2 m-tiles of 16 tokens; the
 *           lane supplies the A fragments of tokens g and g + 8 of each
 *           m-tile from the channels the key policy gives quarter j (a
 *           contiguous quarter of the row: one run of 16-byte loads); the
 *           query B fragments follow the same channel order;
 *   state:  rows 2j and 2j + 1 (the C fragment's columns): running max m,
 *           partial sums l, the unnormalised output O^T (StateT:
 *           update, and the split's store through store_split_state);
 *   values: O^T += V^T P^T: the probabilities' C fragments become the B
 *           fragments of P^T by one movmatrix (8x8 transpose) each, and the
 *           value policy builds the A fragments of V^T (channel rows g and
 *           g + 8 of each m-tile, tokens 2j, 2j+1, 2j+8, 2j+9) in registers.
 * Precision: every f32 operand (the prepared query, P) is split into two
 * f16 parts, hi = f16(x) and lo = f16(x - hi), and each product is two mma,
 * so the operands carry ~22 bits; f16 cache entries are exact operands. The
 * error is then the f32 accumulation's, within the header's bound.
 *
 * Key policy KP:
 *   KP(p, b, hkv)                         per CTA
 *   channel(ks, j, e)                     the head channel of element e (0..3) of the query's
 *                                         B fragment at k-step ks, quarter j
 *   score(tile0, t0, last, q, s)          s[mt][..] += the tile's K Q^T (C fragments); the
 *                                         flattened token of t is tile0 + t; tokens past `last`
 *                                         are clamped (and masked by the skeleton)
 * Value policy VP:
 *   VP(p, b, hkv)
 *   channel(cm, r)                        the head channel of row r (0..15) of output m-tile cm
 *   apply(tile0, t0, last, pb, acc)       acc += V^T P^T of the tile (pb: B fragments of P^T) */
#ifndef VQ_CUDA_DECODE_MMA_CUH
#define VQ_CUDA_DECODE_MMA_CUH

#include <climits>

#include "cuda/attend_skeleton.cuh"
#include "cuda/sdpa_params.h"

namespace vqmma {

using namespace vqcu;

constexpr int kD = 128;          /* head dim of the instances */
constexpr int kKS = kD / 16;     /* k-steps of Q K^T */
constexpr int kRows = 8;         /* query rows per CTA: the mma's n8 side */

__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *(uint32_t *)&h; }

/* x0, x1 as the f16 pair hi and the f16 pair of what hi misses. */
__device__ __forceinline__ void split2(float x0, float x1, uint32_t &hi, uint32_t &lo)
{
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 hf = __half22float2(h);
    hi = h2_bits(h);
    lo = h2_bits(__floats2half2_rn(x0 - hf.x, x1 - hf.y));
}

/* Bytes b of x and y as the halves of one word (PRMT). */
__device__ __forceinline__ uint32_t prmt(uint32_t x, uint32_t y, uint32_t sel)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(sel));
    return r;
}

__device__ __forceinline__ void mma_t(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                      uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* The 8x8 b16 matrix held in fragment layout (lane g, j: row g, columns
 * 2j, 2j + 1), transposed in the same layout. */
__device__ __forceinline__ uint32_t transpose8(uint32_t x)
{
    uint32_t r;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
    return r;
}

/* B fragments (hi and lo) of an operand: [k-step][register]. */
template <int N>
struct BFrag {
    uint32_t hi[N][2], lo[N][2];
};

constexpr int kCM = kD / 16; /* output m-tiles of V^T P^T */

/* The online-softmax state of the lane's query rows 2j and 2j + 1 over the
 * tokens the warp has seen: running max m (log2 domain), this lane's share
 * of the sum l, the unnormalised output in the C-fragment layout of
 * V^T P^T ([cm][0], [cm][2]: row 2j; [1], [3]: row 2j + 1). */
struct StateT {
    float m[2], l[2];
    float acc[kCM][4];

    __device__ void init()
    {
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
#pragma unroll
        for (int cm = 0; cm < kCM; cm++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[cm][e] = 0.0f;
    }

    /* Folds a tile's scores s (C fragments of S^T: [mt][e] is token
     * 16mt + g + 8(e >> 1), row 2j + (e & 1); -inf where masked) into the
     * state: s becomes the probabilities, alpha the rows' rescale factors
     * (already applied to acc and l). The eight lanes of a row (same j)
     * share its m. */
    __device__ void update(float (&s)[2][4], float (&alpha)[2])
    {
        float mn[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = fmaxf(fmaxf(s[0][r], s[0][2 + r]), fmaxf(s[1][r], s[1][2 + r]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
            mn[r] = fmaxf(m[r], mx);
            /* mn == -inf: nothing seen yet in this row; the state stays zero */
            alpha[r] = mn[r] == -INFINITY ? 1.0f : exp2f(m[r] - mn[r]);
            m[r] = mn[r];
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[mt][e] = s[mt][e] == -INFINITY ? 0.0f : exp2f(s[mt][e] - mn[e & 1]);
                l[e & 1] += s[mt][e];
            }
#pragma unroll
        for (int cm = 0; cm < kCM; cm++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[cm][e] *= alpha[e & 1];
    }
};

/* The B fragments (hi, lo) of P^T for k-step mt from the C fragments x of
 * S^T (the lane's tokens g, g + 8 of rows 2j, 2j + 1): one movmatrix each. */
__device__ __forceinline__ void p_frags(const float (&x)[4], uint32_t (&hi)[2], uint32_t (&lo)[2])
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        uint32_t a, b;
        split2(x[2 * h], x[2 * h + 1], a, b);
        hi[h] = transpose8(a);
        lo[h] = transpose8(b);
    }
}

/* s += the tile's K Q^T: kp.load(tok, w) gives token tok's 16 A-fragment
 * registers (quarter j of its row), q the query's B fragments. */
template <class KP>
__device__ __forceinline__ void key_scores(const KP &kp, int64_t tile0, int t0, int last, const BFrag<kKS> &q,
                                           float (&s)[2][4])
{
    const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
        uint32_t wa[16], wb[16];
        kp.load(tile0 + min(t0 + 16 * mt + g, last), wa);
        kp.load(tile0 + min(t0 + 16 * mt + g + 8, last), wb);
        float lo[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int ks = 0; ks < kKS; ks++) {
            mma_t(s[mt], wa[2 * ks], wb[2 * ks], wa[2 * ks + 1], wb[2 * ks + 1], q.hi[ks][0], q.hi[ks][1]);
            mma_t(lo, wa[2 * ks], wb[2 * ks], wa[2 * ks + 1], wb[2 * ks + 1], q.lo[ks][0], q.lo[ks][1]);
        }
        /* an infinite key element gives an infinite hi score and inf * 0 = NaN in the lo part
         * when its query's lo is 0: the score is hi's (the header's rule: -inf excludes the token) */
#pragma unroll
        for (int e = 0; e < 4; e++) s[mt][e] += isfinite(s[mt][e]) ? lo[e] : 0.0f;
    }
}

/* Plain f16 keys as A fragments: lane (g, j) loads quarter j (channels
 * 32j .. 32j + 31, four 16-byte loads) of tokens g and g + 8 of each m-tile;
 * k-step ks takes channels 32j + 4ks .. 32j + 4ks + 3 of it. */
struct F16KeysT {
    const uint4 *k;
    BFrag<kKS> q;

    __device__ F16KeysT(const vq_cu_sdpa_params &p, int, int) : k((const uint4 *)p.k) {}

    static __device__ __forceinline__ int channel(int ks, int j, int e) { return 32 * j + 4 * ks + e; }

    /* qs: the CTA's prepared query rows (f32, shared) */
    __device__ void prepare(const float (*qs)[kD + 4])
    {
        const int g = (threadIdx.x & 31) >> 2, j = threadIdx.x & 3;
#pragma unroll
        for (int ks = 0; ks < kKS; ks++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                split2(qs[g][channel(ks, j, 2 * h)], qs[g][channel(ks, j, 2 * h + 1)], q.hi[ks][h], q.lo[ks][h]);
    }

    __device__ __forceinline__ void load(int64_t tok, uint32_t (&w)[16]) const
    {
        const uint4 *row = k + tok * (kD / 8) + 4 * (threadIdx.x & 3);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 v = __ldg(row + i);
            w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
        }
    }

    __device__ __forceinline__ void score(int64_t tile0, int t0, int last, float (&s)[2][4])
    {
        key_scores(*this, tile0, t0, last, q, s);
    }
};

/* Plain f16 values as A fragments of V^T: lane (g, j) loads channels
 * 8g .. 8g + 7 and 64 + 8g .. 64 + 8g + 7 of tokens 2j, 2j + 1, 2j + 8,
 * 2j + 9 of each 16-token step (16-byte loads; the 8 lanes of a token read
 * 128 contiguous bytes) and pairs the tokens' halves with PRMT: row r of
 * output m-tile cm is channel 8(r % 8) + cm + 64(r / 8). */
struct F16ValuesT {
    const uint4 *v;

    __device__ F16ValuesT(const vq_cu_sdpa_params &p, int, int) : v((const uint4 *)p.v) {}

    static __device__ __forceinline__ int channel(int cm, int r) { return 8 * (r % 8) + cm + 64 * (r / 8); }

    __device__ void rescale(const float (&)[2]) {}
    __device__ void finish(float (&)[kCM][4]) {}

    __device__ __forceinline__ void apply(int64_t tile0, int t0, int last, const float (&pr)[2][4],
                                          float (&acc)[kCM][4])
    {
        const int g = (threadIdx.x & 31) >> 2, j = threadIdx.x & 3;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            uint32_t bh[2], bl[2];
            p_frags(pr[kk], bh, bl);
            uint4 x[4][2]; /* tokens 2j, 2j + 1, 2j + 8, 2j + 9; channel chunk h */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int t = t0 + 16 * kk + 2 * j + (i & 1) + 8 * (i >> 1);
                const uint4 *row = v + (tile0 + min(t, last)) * (kD / 8);
                x[i][0] = __ldg(row + g);
                x[i][1] = __ldg(row + 8 + g);
                if (t > last) x[i][0] = x[i][1] = make_uint4(0, 0, 0, 0); /* p = 0 there: no 0 * inf */
            }
#pragma unroll
            for (int cm = 0; cm < kCM; cm++) {
                const int m = cm >> 1;
                const uint32_t sel = cm & 1 ? 0x7632u : 0x5410u;
                const uint32_t a0 = prmt((&x[0][0].x)[m], (&x[1][0].x)[m], sel);
                const uint32_t a1 = prmt((&x[0][1].x)[m], (&x[1][1].x)[m], sel);
                const uint32_t a2 = prmt((&x[2][0].x)[m], (&x[3][0].x)[m], sel);
                const uint32_t a3 = prmt((&x[2][1].x)[m], (&x[3][1].x)[m], sel);
                mma_t(acc[cm], a0, a1, a2, a3, bh[0], bh[1]);
                mma_t(acc[cm], a0, a1, a2, a3, bl[0], bl[1]);
            }
        }
    }
};

struct MmaSmem {
    float q[kRows][kD + 4];
    float red_m[kWarps][kRows], red_l[kWarps][kRows];
    float red_acc[kWarps * kRows * kD];
};

template <class KP, class VP>
__global__ void __launch_bounds__(kThreads) mmat_kernel(const __grid_constant__ vq_cu_sdpa_params p)
{
    const vq_cu_attend_common &c = p.c;
    __shared__ MmaSmem sm;
    const int split = blockIdx.x, b = blockIdx.z;
    const int hkv = blockIdx.y / c.row_chunks, chunk = blockIdx.y % c.row_chunks;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, j = lane & 3;
    const Rows<kRows> rw = cta_rows<kRows>(c, b, hkv, chunk);
    KP kp(p, b, hkv);
    VP vp(p, b, hkv);

    unsigned qbad = 0; /* rows whose query holds a NaN or an inf: all NaN (the header's rule) */
    for (int i = threadIdx.x; i < kRows * kD; i += kThreads) {
        const int r = i / kD, d = i % kD;
        const float v = r < rw.n ? p.qp[rw.out[r] * p.qpf + d] : 0.0f;
        sm.q[r][d] = v;
        qbad |= (unsigned)!isfinite(v) << r;
    }
    qbad = cta_rows_nonfinite<kRows>(qbad);
    kp.prepare(sm.q);

    int lim_max = -1, lim2[2] = {-1, -1};
#pragma unroll
    for (int r = 0; r < kRows; r++) {
        lim_max = max(lim_max, rw.lim[r]);
        if (r == 2 * j) lim2[0] = rw.lim[r];
        if (r == 2 * j + 1) lim2[1] = rw.lim[r];
    }
    const int t_begin = split * c.split_len;
    const int t_end = min(min(kv_len(c, b), t_begin + c.split_len), lim_max + 1);
    const int last = t_end - 1;

    StateT st;
    st.init();
    for (int t0 = t_begin + 32 * warp; t0 < t_end; t0 += 32 * kWarps) {
        /* a 32-token tile lies in one page (P is a multiple of 32) */
        const int64_t tile0 = kv_token(c, b, hkv, t0) - t0;
        float s[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[mt][e] = 0.0f;
        kp.score(tile0, t0, last, s);
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int t = t0 + 16 * mt + g + 8 * (e >> 1);
                if (t > last || t > lim2[e & 1]) s[mt][e] = -INFINITY;
            }
        float alpha[2];
        st.update(s, alpha);
        vp.rescale(alpha);
        vp.apply(tile0, t0, last, s, st.acc);
    }
    vp.finish(st.acc);

    /* each row's sum over its eight lanes, then the warps' states through shared memory */
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) st.l[r] += __shfl_xor_sync(0xffffffffu, st.l[r], o);
    if (g == 0) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            sm.red_m[warp][2 * j + r] = st.m[r];
            sm.red_l[warp][2 * j + r] = (qbad >> (2 * j + r)) & 1u ? NAN : st.l[r];
        }
    }
#pragma unroll
    for (int cm = 0; cm < kCM; cm++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            sm.red_acc[(warp * kRows + 2 * j + (e & 1)) * kD + VP::channel(cm, g + 8 * (e >> 1))] = st.acc[cm][e];
    __syncthreads();
    store_split_state<kRows>(c, rw, split, sm.red_m, sm.red_l, sm.red_acc, kD);
}

template <class KP, class VP>
inline int mmat_go(const vq_cu_sdpa_params &p, void *stream, int *occupancy)
{
    auto k = mmat_kernel<KP, VP>;
    if (occupancy) return occupancy_of(k, occupancy);
    k<<<decode_grid(p.c), kThreads, 0, (cudaStream_t)stream>>>(p);
    return (int)cudaGetLastError();
}

} /* namespace vqmma */

#endif
