/* attend_skeleton.cuh — the one split-KV decode skeleton of the CUDA backend,
 * specialised by a key/value format policy (affine, RaBitQ).
 *
 * Grid (nsplit, Hkv * row_chunks, B), 128 threads = 4 warps. A CTA owns up to
 * R query rows of one kv head (the GQA group times Sq), so the kv head's cache
 * is read once for all of them, and one split of the kv axis. Each warp walks
 * tiles of 32 tokens:
 *   loads:  every load of the tile is issued first (the key row of lane i's
 *           token, the value chunks and scales the lane will need), so a tile
 *           costs one memory latency, not one per phase;
 *   keys:   lane i scores token t0 + i for all R rows (one token per thread,
 *           the whole compressed key row in registers, queries broadcast from
 *           shared memory);
 *   softmax: warp max per row, p = exp2(s - m) into shared memory;
 *   values: lanes own 8 channels each (DMAX/8 lanes per token, 32/(DMAX/8)
 *           tokens per step) and accumulate p * v_hat in registers.
 * The split's state (m, l, acc) goes to global scratch; a merge kernel
 * (attend_merge.cu) combines the splits. Scores are in the log2 domain. */
#ifndef VQ_CUDA_ATTEND_SKELETON_CUH
#define VQ_CUDA_ATTEND_SKELETON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "cuda/attend_params.h"

namespace vqcu {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float warp_max(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ __forceinline__ float warp_sum(float x)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* An integer code < 2^23 as a float without the slow I2F: the bits of 2^23 + c
 * minus 2^23 (exact). */
__device__ __forceinline__ float code_f(uint32_t c) { return __uint_as_float(0x4B000000u | c) - 8388608.0f; }

/* Code c (BITS wide) at bit `pos` of w placed in the top mantissa bits of 1.0f:
 * the float 1 + c * 2^-BITS, exact, in a shift and one LOP3 (no I2F). Callers
 * fold the 2^BITS scale and the constant 1 into their coefficients. */
template <int BITS>
__device__ __forceinline__ float code_1p(uint32_t w, int pos)
{
    constexpr int top = 23 - BITS;
    const uint32_t x = pos <= top ? w << (top - pos) : w >> (pos - top);
    return __uint_as_float(0x3F800000u | (x & (((1u << BITS) - 1u) << top)));
}

__device__ __forceinline__ float load_f(const void *p, int64_t i, int is_f16)
{
    return is_f16 ? __half2float(__ldg((const __half *)p + i)) : __ldg((const float *)p + i);
}

/* Loads `nbytes` (a multiple of 4, at most 4*NW) of a row into w[]; words past
 * nbytes are 0. Uses 16-byte loads when the row start is 16-byte aligned and
 * nbytes is a multiple of 16, else 4-byte loads (rows of D % 8 == 0 with >= 2
 * bits per code are 4-byte aligned when nbytes % 4 == 0; smaller rows use u8). */
template <int NW>
__device__ __forceinline__ void load_row(const uint8_t *row, int nbytes, uint32_t (&w)[NW])
{
#pragma unroll
    for (int i = 0; i < NW; i++) w[i] = 0;
    if constexpr (NW % 4 == 0) {
        if ((((uintptr_t)row | (uintptr_t)nbytes) & 15) == 0) {
#pragma unroll
            for (int i = 0; i < NW / 4; i++) {
                if (16 * i < nbytes) {
                    const uint4 v = __ldg((const uint4 *)row + i);
                    w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
                }
            }
            return;
        }
    }
    if ((((uintptr_t)row | (uintptr_t)nbytes) & 3) == 0) {
#pragma unroll
        for (int i = 0; i < NW; i++)
            if (4 * i < nbytes) w[i] = __ldg((const uint32_t *)row + i);
        return;
    }
#pragma unroll
    for (int i = 0; i < 4 * NW; i++)
        if (i < nbytes) w[i / 4] |= (uint32_t)__ldg(row + i) << (8 * (i % 4));
}

/* Bits [bit, bit + n) of a little-endian word array (n <= 8, never straddling a
 * word because code widths divide 32). */
template <int NW>
__device__ __forceinline__ uint32_t bits_at(const uint32_t (&w)[NW], int bit, int n)
{
    return (w[bit >> 5] >> (bit & 31)) & ((1u << n) - 1u);
}

/* The rows a CTA serves and where they live. */
template <int R>
struct Rows {
    int n;              /* valid rows (<= R) */
    int64_t out[R];     /* global row index (b*Hq + hq)*Sq + sq */
    int lim[R];         /* last kv position the row sees */
    int hq[R], sq[R];
    /* first kv position row r sees: lo0 + sq[r] * lo_step (c.bound; INT_MIN
     * and 0 without one). Two scalars, not an array per row: registers */
    int lo0, lo_step;
};

template <int R>
__device__ __forceinline__ Rows<R> cta_rows(const vq_cu_attend_common &c, int b, int hkv, int chunk)
{
    Rows<R> rw;
    const int G = c.Hq / c.Hkv;
    const int r0 = chunk * VQ_CU_ROWS_MAX;
    rw.n = min(R, c.rows - r0);
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int rr = min(r0 + r, c.rows - 1);
        rw.sq[r] = rr % c.Sq;
        rw.hq[r] = hkv * G + rr / c.Sq;
        rw.out[r] = ((int64_t)b * c.Hq + rw.hq[r]) * c.Sq + rw.sq[r];
        rw.lim[r] = c.causal ? c.Skv - c.Sq + rw.sq[r] : c.Skv - 1;
        if (r >= rw.n) rw.lim[r] = -1; /* padding rows see nothing */
    }
    rw.lo0 = c.bound.on ? c.bound.lo[min(b, VQ_CU_PAGED_MAX_B - 1)] : INT_MIN;
    rw.lo_step = c.bound.on ? c.bound.step : 0;
    return rw;
}

/* The first kv position row r sees (the sliding window; INT_MIN: no bound). */
template <int R>
__device__ __forceinline__ int row_low(const Rows<R> &rw, int r)
{
    return rw.lo0 + rw.sq[r] * rw.lo_step;
}

/* Token t is outside row r's [low, lim] (the causal limit, the sliding window). */
template <int R>
__device__ __forceinline__ bool row_hides(const Rows<R> &rw, int r, int t)
{
    return t > rw.lim[r] || t < row_low(rw, r);
}

/* Flattened token index of token t of (b, hkv): contiguous or paged
 * (vq_cu_paging in attend_params.h). */
__device__ __forceinline__ int64_t kv_token(const vq_cu_attend_common &c, int b, int hkv, int t)
{
    if (c.pg.pages == nullptr) return ((int64_t)b * c.Hkv + hkv) * c.Skv + t;
    const int page = __ldg(c.pg.pages + (int64_t)c.pg.slot[b] * c.pg.ld + t / c.pg.P);
    return ((int64_t)page * c.Hkv + hkv) * c.pg.P + t % c.pg.P;
}

/* Where a format's per-(b, hkv) stream pointers start (the fast kernels add
 * kv_offset(t0) per tile): token 0 of (b, hkv) when contiguous, the pool's
 * flattened token 0 when paged. */
__device__ __forceinline__ int64_t kv_base(const vq_cu_attend_common &c, int b, int hkv)
{
    return c.pg.pages == nullptr ? ((int64_t)b * c.Hkv + hkv) * c.Skv : 0;
}
__device__ __forceinline__ int64_t kv_offset(const vq_cu_attend_common &c, int b, int hkv, int t)
{
    return c.pg.pages == nullptr ? t : kv_token(c, b, hkv, t);
}

/* Tokens of batch row b: Skv, or its own count when paged. */
__device__ __forceinline__ int kv_len(const vq_cu_attend_common &c, int b)
{
    return c.pg.pages == nullptr ? c.Skv : c.pg.n_tok[b];
}

/* Shared memory of the skeleton; the format policy gets `fmt_smem` floats. */
template <int DMAX, int R>
struct SkelSmem {
    float q[R][DMAX];           /* raw queries (f32), 0 past D and in padding rows */
    float p[kWarps][R][32];     /* probabilities of the current tile */
    float red_m[kWarps][R], red_l[kWarps][R];
};

/* Bit r set: query row r of the CTA holds a NaN or +-inf element somewhere
 * (the header's rule makes such a row NaN). `mine` has bit r set where the
 * calling thread's own share of row r does. Block-wide (one __syncthreads_or
 * per row), so it is also the barrier that publishes the queries the CTA
 * just wrote to shared memory. */
template <int R>
__device__ __forceinline__ unsigned cta_rows_nonfinite(unsigned mine)
{
    unsigned bad = 0;
#pragma unroll
    for (int r = 0; r < R; r++) bad |= (__syncthreads_or((int)((mine >> r) & 1u)) ? 1u : 0u) << r;
    return bad;
}

/* After a split's last tile, behind a barrier: combines the kWarps warps'
 * online-softmax states of each row (red_m, red_l [kWarps][R] and red_acc
 * [kWarps][R][stride] in shared memory) and writes the split's partial state
 * (m, l, acc[D]) to global scratch for the merge kernel. Shared by both decode
 * skeletons. */
template <int R>
__device__ __forceinline__ void store_split_state(const vq_cu_attend_common &c, const Rows<R> &rw, int split,
                                                  const float (*red_m)[R], const float (*red_l)[R],
                                                  const float *red_acc, int stride)
{
    for (int i = threadIdx.x; i < R * c.D; i += kThreads) {
        const int r = i / c.D, d = i % c.D;
        if (r >= rw.n) continue;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; w++) M = fmaxf(M, red_m[w][r]);
        float a = 0.0f, l = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; w++) {
            const float f = M == -INFINITY ? 0.0f : exp2f(red_m[w][r] - M);
            a += f * red_acc[(w * R + r) * stride + d];
            l += f * red_l[w][r];
        }
        const int64_t slot_i = rw.out[r] * c.nsplit + split;
        c.part_acc[slot_i * c.D + d] = a;
        if (d == 0) {
            c.part_m[slot_i] = M;
            c.part_l[slot_i] = l;
        }
    }
}

/* The decode body. Fmt provides the types KRow (a key row) and VPre (one
 * token's value chunk and scales) and:
 *   prepare(q_smem, rows)              once per CTA, after q is in shared memory
 *   tile_begin(warp, t0, q_smem)       per warp tile (warp-uniform; group folds)
 *   key_load(t, KRow&)                 issues the loads of token t's key row
 *   score(warp, t, KRow, q_smem, s[R]) log2-domain scores of token t (one lane)
 *   value_load(t, cidx, VPre&)         issues the loads of a value chunk
 *   value_apply(VPre, p[R], acc, accz) acc[r][j] += p[r] * v_hat(t, 8*cidx + j);
 *                                      a per-chunk constant term may go to accz[r]
 * red_acc: kWarps * R * DMAX floats of shared memory, which the policy may use
 * for its own tables until the final reduction. */
template <class Fmt, int DMAX, int R>
__device__ __forceinline__ void decode_split(const vq_cu_attend_common &c, Fmt &fmt, float *red_acc)
{
    constexpr int LPT = DMAX / 8;   /* value lanes per token */
    constexpr int TPS = 32 / LPT;   /* tokens per value step */
    __shared__ SkelSmem<DMAX, R> sm;

    const int split = blockIdx.x, b = blockIdx.z;
    const int hkv = blockIdx.y / c.row_chunks, chunk = blockIdx.y % c.row_chunks;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const Rows<R> rw = cta_rows<R>(c, b, hkv, chunk);

    unsigned qbad = 0;
    for (int i = threadIdx.x; i < R * DMAX; i += kThreads) {
        const int r = i / DMAX, d = i % DMAX;
        float v = 0.0f;
        if (r < rw.n && d < c.D) v = load_f(c.q, rw.out[r] * c.D + d, c.q_f16);
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
    const int t_end = min(min(c.Skv, t_begin + c.split_len), lim_max + 1);

    float m_run[R], l_lane[R], acc[R][8], accz[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        m_run[r] = -INFINITY;
        l_lane[r] = 0.0f;
        accz[r] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) acc[r][j] = 0.0f;
    }
    const int slot = lane / LPT, cidx = lane % LPT;
    const bool chunk_ok = 8 * cidx < c.D;

    /* value chunks a lane prefetches per batch: the whole tile up to D = 128,
     * two batches at D = 256 (registers) */
    constexpr int NV = 32 / TPS, VB = NV < 16 ? NV : 16;
    /* Branch-free tiles: tokens past t_end and chunks past D load a valid
     * neighbour (clamped) and contribute p = 0 or land in channels that are
     * never written out, so the loop has no divergent guards. */
    const int cidx_c = min(cidx, c.D / 8 - 1);
    for (int t0 = t_begin + 32 * warp; t0 < t_end; t0 += 32 * kWarps) {
        const int t = t0 + lane, tl = min(t, t_end - 1);
        typename Fmt::KRow kr;
        fmt.key_load(tl, kr);
        typename Fmt::VPre vp[VB];
#pragma unroll
        for (int k = 0; k < VB; k++) fmt.value_load(min(t0 + slot + k * TPS, t_end - 1), cidx_c, vp[k]);
        fmt.tile_begin(warp, t0, &sm.q[0][0]); /* after the loads: its own loads overlap theirs */
        float s[R];
        fmt.score(warp, tl, kr, &sm.q[0][0], s);
#pragma unroll
        for (int r = 0; r < R; r++)
            if (t >= t_end || row_hides(rw, r, t)) s[r] = -INFINITY;
        float alpha[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float m_new = fmaxf(m_run[r], warp_max(s[r]));
            /* m_new == -inf: nothing seen yet in this row; keep the zero state */
            alpha[r] = m_new == -INFINITY ? 1.0f : exp2f(m_run[r] - m_new);
            const float pr = s[r] == -INFINITY ? 0.0f : exp2f(s[r] - m_new);
            l_lane[r] = l_lane[r] * alpha[r] + pr;
            sm.p[warp][r][lane] = pr;
            m_run[r] = m_new;
        }
        __syncwarp();
#pragma unroll
        for (int r = 0; r < R; r++) {
            accz[r] *= alpha[r];
#pragma unroll
            for (int j = 0; j < 8; j++) acc[r][j] *= alpha[r];
        }
#pragma unroll
        for (int b0 = 0; b0 < NV; b0 += VB) {
            if (b0 > 0) {
#pragma unroll
                for (int k = 0; k < VB; k++)
                    fmt.value_load(min(t0 + slot + (b0 + k) * TPS, t_end - 1), cidx_c, vp[k]);
            }
#pragma unroll
            for (int k = 0; k < VB; k++) {
                /* lanes past the tile's end wrote p = 0 */
                float p[R];
#pragma unroll
                for (int r = 0; r < R; r++) p[r] = sm.p[warp][r][slot + (b0 + k) * TPS];
                fmt.value_apply(vp[k], p, acc, accz);
            }
        }
        __syncwarp();
    }

    /* lanes of different value slots hold partial sums of the same channels */
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float v = acc[r][j] + accz[r];
#pragma unroll
            for (int o = LPT; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            acc[r][j] = v;
        }
        l_lane[r] = warp_sum(l_lane[r]);
        if ((qbad >> r) & 1u) l_lane[r] = NAN; /* the merge makes a row with a NaN l all NaN */
    }
    __syncthreads(); /* the policy's shared memory is free from here: red_acc may alias it */
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            sm.red_m[warp][r] = m_run[r];
            sm.red_l[warp][r] = l_lane[r];
        }
    }
    if (slot == 0 && chunk_ok) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int j = 0; j < 8; j++) red_acc[(warp * R + r) * DMAX + 8 * cidx + j] = acc[r][j];
    }
    __syncthreads();

    store_split_state<R>(c, rw, split, sm.red_m, sm.red_l, red_acc, DMAX);
}

/* The instance width for head dim D in the general kernels. */
inline int decode_dmax(int D) { return D <= 64 ? 64 : D <= 128 ? 128 : 256; }

/* Picks the kernel instance for (width, R) at run time and launches it, or,
 * with occupancy != NULL, stores how many of its CTAs fit on one SM instead
 * (cudaOccupancyMaxActiveBlocksPerMultiprocessor; the split plan uses it).
 * width is 64, 128 or 256: decode_dmax(D) for the general kernels, D itself
 * for the fast ones. */
template <template <int, int> class Launch>
inline int dispatch_instance(int width, int rows, const void *params, void *stream, int *occupancy)
{
    const int n = rows < VQ_CU_ROWS_MAX ? rows : VQ_CU_ROWS_MAX;
    /* R = 2 and 3 rows run in the R = 4 instance: fewer instances to compile,
     * and the padding rows cost arithmetic only, no extra bytes */
    const int R = n <= 1 ? 1 : n <= 4 ? 4 : 8;
#define VQ_CU_CASE(DM, RR)                                                                                  \
    if (width == DM && R == RR)                                                                             \
        return occupancy ? Launch<DM, RR>::occupancy(params, occupancy) : Launch<DM, RR>::run(params, stream);
    VQ_CU_CASE(64, 1) VQ_CU_CASE(64, 4) VQ_CU_CASE(64, 8)
    VQ_CU_CASE(128, 1) VQ_CU_CASE(128, 4) VQ_CU_CASE(128, 8)
    VQ_CU_CASE(256, 1) VQ_CU_CASE(256, 4) VQ_CU_CASE(256, 8)
#undef VQ_CU_CASE
    return (int)cudaErrorInvalidValue;
}

/* CTAs of `kernel` resident per SM at kThreads threads and `dyn` bytes of
 * dynamic shared memory. */
template <class K>
inline int occupancy_of(K kernel, int *out, int dyn = 0)
{
    return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, kernel, kThreads, (size_t)dyn);
}

inline dim3 decode_grid(const vq_cu_attend_common &c)
{
    return dim3((unsigned)c.nsplit, (unsigned)(c.Hkv * c.row_chunks), (unsigned)c.B);
}

} /* namespace vqcu */

#endif
