/* sdpa_kernel.cu — vq_fused_sdpa on CUDA: every key format of
 * vq_encoded_keys, plain f16/f32 values, GQA, causal, additive mask, any Sq.
 *
 * Two kernels, then the split-KV merge of attend_merge.cu:
 *
 *   prep: one CTA per query row writes the prepared row to scratch qp
 *         [rows, qpf]: q * scale * log2(e), rotated first (H (diag ⊙ q)/sqrt(D),
 *         vq_cu_rotate_row, the CPU's stages) for TURBO / TURBO_RVQ / RABITQ,
 *         projected (S q, m floats) for QJL. Scores are then in the log2
 *         domain, as the merge kernel expects.
 *
 *   attend: grid (nsplit, Hkv * row_chunks, B), 128 threads. A CTA owns up to
 *         8 query rows of one kv head (GQA group x Sq, so the kv head's cache
 *         is read once for all of them) and one split of the kv axis, which it
 *         walks in tiles of 32 tokens:
 *           decode: the tile's keys -> shared f32 tile [32][D+1] (the +1 makes
 *                   the score loop's column reads conflict-free), by every
 *                   thread over (token, channel), with the format decoders
 *                   (format_pq.h / format_commvq.h clamp codes and positions);
 *                   QJL is scored straight from its sign words instead;
 *           score:  warp w scores rows w and w+4, lane j token t0+j; the
 *                   causal limit and the mask (times log2 e) are applied;
 *           softmax: online, per row in registers of its warp (m, l), the
 *                   probabilities and the rescale factor to shared memory;
 *           values: thread t owns channels t and t+128 of all 8 rows and
 *                   accumulates p * v in registers (coalesced value rows).
 *         Each CTA writes its split's (m, l, acc) to the partial-state
 *         scratch of vq_cu_attend_common; a split whose rows see no token
 *         writes m = -inf, l = 0, acc = 0, which the merge ignores. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "cuda/attend_skeleton.cuh" /* warp_max, warp_sum */
#include "cuda/codec_common.cuh"
#include "cuda/sdpa_params.h"

namespace vqsdpa {

constexpr int kRows = VQ_CU_ROWS_MAX; /* query rows per CTA */
constexpr int kTile = 32;              /* tokens per tile */
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kCh = 256 / kThreads;    /* channels per thread in the value pass (D <= 256) */
using vqcu::kLog2e;
using vqcu::warp_max;
using vqcu::warp_sum;
static_assert(kRows == 2 * kWarps, "each warp scores two rows");

__device__ __forceinline__ float load_elt(const void *p, int elt, int64_t i)
{
    if (elt == VQ_CU_F16) return __half2float(static_cast<const __half *>(p)[i]);
    if (elt == VQ_CU_BF16) return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    return static_cast<const float *>(p)[i];
}

/* ---- query preparation ---- */

__global__ void __launch_bounds__(kThreads) prep_kernel(const __grid_constant__ vq_cu_sdpa_params p)
{
    extern __shared__ float row[]; /* [D] */
    const int D = p.c.D;
    const int64_t nrows = (int64_t)p.c.B * p.c.Hq * p.c.Sq;
    const bool rotated = p.fmt == VQ_CU_SDPA_TURBO || p.fmt == VQ_CU_SDPA_TURBO_RVQ || p.fmt == VQ_CU_SDPA_RABITQ;
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        __syncthreads(); /* the previous row is consumed */
        for (int c = threadIdx.x; c < D; c += blockDim.x)
            row[c] = load_elt(p.c.q, p.c.q_f16 ? VQ_CU_F16 : VQ_CU_F32, r * D + c);
        __syncthreads();
        if (rotated) vq_cu_rotate_row(row, D, p.diag, false); /* block-wide, ends with a barrier */
        float *qp = p.qp + r * p.qpf;
        if (p.fmt == VQ_CU_SDPA_QJL) {
            for (int j = threadIdx.x; j < p.qjl_m; j += blockDim.x) {
                const float *s = p.qjl_S + (int64_t)j * D;
                float acc = 0.0f;
                for (int c = 0; c < D; c++) acc = fmaf(s[c], row[c], acc);
                qp[j] = acc * p.qmul;
            }
        } else {
            for (int c = threadIdx.x; c < D; c += blockDim.x) qp[c] = row[c] * p.qmul;
        }
    }
}

/* ---- key decoding into the tile ---- */

/* Code of channel c of a TurboQuant stage row: u8 masked to `bits`, or bits
 * [c*bits, (c+1)*bits) of the u32 stream (which may straddle two words). */
__device__ __forceinline__ uint32_t turbo_code(const vq_cu_sdpa_stage &st, int64_t tok, int c)
{
    const uint32_t mask = (1u << st.bits) - 1u;
    if (!st.packed) return static_cast<const uint8_t *>(st.idx)[tok * st.ld + c] & mask;
    const uint32_t *w = static_cast<const uint32_t *>(st.idx) + tok * st.ld;
    const int bit = c * st.bits, wi = bit >> 5, off = bit & 31;
    uint32_t v = w[wi] >> off;
    if (off + st.bits > 32) v |= w[wi + 1] << (32 - off);
    return v & mask;
}

/* Key channel c of token t (flattened index tok) of kv head (b, hkv). */
__device__ __forceinline__ float key_elem(const vq_cu_sdpa_params &p, const float (*cents)[256], int64_t bh,
                                          int64_t tok, int t, int c, int hkv)
{
    const int D = p.c.D;
    switch (p.fmt) {
    case VQ_CU_SDPA_F16: return load_elt(p.k, p.k_elt, tok * D + c);
    case VQ_CU_SDPA_TURBO:
    case VQ_CU_SDPA_TURBO_RVQ: {
        /* the CPU's order: stage products rounded, then summed */
        float y = __fmul_rn(cents[0][turbo_code(p.stage[0], tok, c)], p.stage[0].scale[tok]);
        if (p.n_stages == 2)
            y = __fadd_rn(y, __fmul_rn(cents[1][turbo_code(p.stage[1], tok, c)], p.stage[1].scale[tok]));
        return y;
    }
    case VQ_CU_SDPA_RABITQ: {
        const float m = p.mag[tok];
        return (p.sign_bits[tok * (D / 8) + c / 8] >> (c % 8)) & 1 ? m : -m;
    }
    case VQ_CU_SDPA_AFFINE: {
        const uint8_t *row = p.a_codes + tok * p.a_ldc;
        uint32_t code;
        if (p.a_bits == 8) code = row[c];
        else code = (uint32_t)(row[(c * p.a_bits) >> 3] >> ((c * p.a_bits) & 7)) & ((1u << p.a_bits) - 1u);
        const int64_t off = (bh * p.a_GK + t / p.a_g) * D + c;
        const int elt = p.a_sz_f16 ? VQ_CU_F16 : VQ_CU_F32;
        return fmaf((float)code, load_elt(p.a_scale, elt, off), load_elt(p.a_zero, elt, off));
    }
    case VQ_CU_SDPA_PQ: {
        const vq_pq_layout L = p.pq;
        const int m = c / L.dsub;
        const uint32_t code = vq_pq_code(&L, p.pq_idx + tok * L.M * L.idx_bytes, m);
        const float *cb = p.pq_cb + hkv * p.pq_cb_hs + ((int64_t)m * L.C + code) * L.dsub;
        return cb[c % L.dsub] * p.pq_smooth[hkv * p.pq_sm_hs + c];
    }
    default: return 0.0f; /* COMMVQ decodes by pairs, QJL is scored from its signs: never here */
    }
}

/* CommVQ: RoPE pairs, both channels of pair i at once (format_commvq.h's
 * order: sum the stages, scale, rotate; position clamped to [0, P)). */
__device__ __forceinline__ void commvq_pair(const vq_cu_sdpa_params &p, int64_t tok, int b, int t, int i,
                                            float *dst)
{
    const vq_commvq_layout L = p.cv;
    int32_t ia, ib;
    vq_rope_pair(L.rope, L.D, i, &ia, &ib);
    const uint8_t *codes = p.cv_idx + tok * L.R * L.idx_bytes;
    float a = 0.0f, bv = 0.0f;
    for (int r = 0; r < L.R; r++) {
        const float *cent = p.cv_cb + ((int64_t)r * L.C + vq_commvq_code(&L, codes, r)) * L.D;
        a = __fadd_rn(a, cent[ia]);
        bv = __fadd_rn(bv, cent[ib]);
    }
    const float s = p.cv_scale ? p.cv_scale[tok] : 1.0f;
    a = __fmul_rn(a, s);
    bv = __fmul_rn(bv, s);
    const int64_t pos = vq_commvq_position(p.cv_pos[b * p.cv_pos_bs + t], p.cv_P);
    const float cs = p.cv_cos[pos * (L.D / 2) + i], sn = p.cv_sin[pos * (L.D / 2) + i];
    dst[ia] = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(bv, sn));
    dst[ib] = __fadd_rn(__fmul_rn(a, sn), __fmul_rn(bv, cs));
}

/* Tokens [t0, t0 + n) of kv head (b, hkv) -> tile [n][ld]. */
__device__ void decode_tile(const vq_cu_sdpa_params &p, const float (*cents)[256], int b, int hkv, int t0, int n,
                            float *tile, int ld)
{
    const int D = p.c.D;
    const int64_t bh = (int64_t)b * p.c.Hkv + hkv, tok0 = bh * p.c.Skv + t0;
    if (p.fmt == VQ_CU_SDPA_COMMVQ) {
        const int half = D / 2;
        for (int i = threadIdx.x; i < n * half; i += kThreads)
            commvq_pair(p, tok0 + i / half, b, t0 + i / half, i % half, tile + (i / half) * ld);
        return;
    }
    for (int i = threadIdx.x; i < n * D; i += kThreads) {
        const int j = i / D, c = i % D;
        tile[j * ld + c] = key_elem(p, cents, bh, tok0 + j, t0 + j, c, hkv);
    }
}

/* ---- the attention kernel ---- */

__global__ void __launch_bounds__(kThreads) attend_kernel(const __grid_constant__ vq_cu_sdpa_params p)
{
    extern __shared__ float smem[];
    __shared__ float cents[2][256];
    __shared__ float ps[kRows][kTile];
    __shared__ float alpha[kRows];
    __shared__ int lim_s[kRows], hq_s[kRows], sq_s[kRows];
    __shared__ int64_t orow_s[kRows];

    const vq_cu_attend_common &c = p.c;
    const int D = c.D, qpf = p.qpf, ld = D + 1;
    const bool qjl = p.fmt == VQ_CU_SDPA_QJL;
    float *qs = smem, *tile = smem + kRows * qpf;
    const int split = blockIdx.x, hkv = blockIdx.y % c.Hkv, chunk = blockIdx.y / c.Hkv, b = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int G = c.Hq / c.Hkv, r0 = chunk * kRows, nr = min(kRows, c.rows - r0);

    if (threadIdx.x < kRows) {
        const int r = threadIdx.x;
        int lim = -1, hq = 0, sq = 0;
        int64_t orow = 0;
        if (r < nr) {
            hq = hkv * G + (r0 + r) / c.Sq;
            sq = (r0 + r) % c.Sq;
            orow = ((int64_t)b * c.Hq + hq) * c.Sq + sq;
            lim = c.causal ? c.Skv - c.Sq + sq : c.Skv - 1; /* last visible token (< 0: none) */
        }
        lim_s[r] = lim;
        hq_s[r] = hq;
        sq_s[r] = sq;
        orow_s[r] = orow;
    }
    if (p.fmt == VQ_CU_SDPA_TURBO || p.fmt == VQ_CU_SDPA_TURBO_RVQ)
        for (int i = threadIdx.x; i < 2 * 256; i += kThreads)
            cents[i / 256][i % 256] = i / 256 < p.n_stages ? p.stage[i / 256].cents[i % 256] : 0.0f;
    __syncthreads();
    for (int i = threadIdx.x; i < kRows * qpf; i += kThreads) {
        const int r = i / qpf;
        qs[i] = r < nr ? p.qp[orow_s[r] * qpf + i % qpf] : 0.0f;
    }
    int maxlim = -1;
    for (int r = 0; r < nr; r++) maxlim = max(maxlim, lim_s[r]);
    const int t_begin = split * c.split_len;
    const int t_end = min(min(c.Skv, t_begin + c.split_len), maxlim + 1);

    const int64_t bh = (int64_t)b * c.Hkv + hkv;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
    float acc[kRows][kCh];
#pragma unroll
    for (int r = 0; r < kRows; r++)
#pragma unroll
        for (int k = 0; k < kCh; k++) acc[r][k] = 0.0f;

    for (int t0 = t_begin; t0 < t_end; t0 += kTile) {
        const int n = min(kTile, t_end - t0);
        __syncthreads(); /* queries loaded / the previous tile's p consumed */
        if (!qjl) {
            decode_tile(p, cents, b, hkv, t0, n, tile, ld);
            __syncthreads();
        }
        /* scores of rows warp and warp + kWarps against token t0 + lane */
        const float *q0 = qs + warp * qpf, *q1 = qs + (warp + kWarps) * qpf;
        const int64_t tok = bh * c.Skv + t0 + lane;
        float s0 = 0.0f, s1 = 0.0f;
        if (lane < n) {
            if (qjl) {
                const uint32_t *w = p.qjl_bits + tok * p.qjl_W;
                for (int wi = 0; wi < p.qjl_W; wi++) {
                    const uint32_t bits = w[wi];
                    const int nb = min(32, p.qjl_m - 32 * wi);
                    for (int k = 0; k < nb; k++) {
                        const int j = 32 * wi + k;
                        const float a0 = q0[j], a1 = q1[j];
                        const bool pos = (bits >> k) & 1u;
                        s0 += pos ? a0 : -a0;
                        s1 += pos ? a1 : -a1;
                    }
                }
                const float nrm = p.qjl_norm[tok];
                s0 *= nrm;
                s1 *= nrm;
            } else {
                const float *kt = tile + lane * ld;
                for (int k = 0; k < D; k++) {
                    const float kv = kt[k];
                    s0 = fmaf(q0[k], kv, s0);
                    s1 = fmaf(q1[k], kv, s1);
                }
                if (p.fmt == VQ_CU_SDPA_RABITQ && p.cnst) {
                    const float cn = p.cnst[tok] * kLog2e;
                    s0 += cn;
                    s1 += cn;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int r = warp + i * kWarps;
            float v = -INFINITY;
            if (r < nr && lane < n && t0 + lane <= lim_s[r]) {
                v = i ? s1 : s0;
                if (p.mask) {
                    const int64_t mi = b * p.mask_sb + hq_s[r] * p.mask_sh + (int64_t)sq_s[r] * c.Skv + t0 + lane;
                    v += kLog2e * load_elt(p.mask, p.mask_f16 ? VQ_CU_F16 : VQ_CU_F32, mi);
                }
            }
            const float m_new = fmaxf(m_run[i], warp_max(v));
            float pr = 0.0f, a = 1.0f;
            if (m_new != -INFINITY) { /* a row that has seen nothing keeps the empty state */
                pr = exp2f(v - m_new);
                a = exp2f(m_run[i] - m_new);
            }
            l_run[i] = l_run[i] * a + warp_sum(pr);
            m_run[i] = m_new;
            ps[r][lane] = pr;
            if (lane == 0) alpha[r] = a;
        }
        __syncthreads();
        const int64_t vbase = (bh * c.Skv + t0) * D;
#pragma unroll
        for (int r = 0; r < kRows; r++)
#pragma unroll
            for (int k = 0; k < kCh; k++) acc[r][k] *= alpha[r];
        for (int j = 0; j < n; j++) {
#pragma unroll
            for (int k = 0; k < kCh; k++) {
                const int ch = threadIdx.x + k * kThreads;
                if (ch < D) {
                    const float vv = load_elt(p.v, p.v_f16 ? VQ_CU_F16 : VQ_CU_F32, vbase + (int64_t)j * D + ch);
#pragma unroll
                    for (int r = 0; r < kRows; r++) acc[r][k] = fmaf(ps[r][j], vv, acc[r][k]);
                }
            }
        }
    }

    /* this split's state of every row */
    const int ns = c.nsplit;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = warp + i * kWarps;
        if (r < nr && lane == 0) {
            c.part_m[orow_s[r] * ns + split] = m_run[i];
            c.part_l[orow_s[r] * ns + split] = l_run[i];
        }
    }
#pragma unroll
    for (int r = 0; r < kRows; r++) {
        if (r >= nr) break;
#pragma unroll
        for (int k = 0; k < kCh; k++) {
            const int ch = threadIdx.x + k * kThreads;
            if (ch < D) c.part_acc[(orow_s[r] * ns + split) * D + ch] = acc[r][k];
        }
    }
}

static size_t attend_smem(const vq_cu_sdpa_params *p)
{
    const int tile = p->fmt == VQ_CU_SDPA_QJL ? 0 : kTile * (p->c.D + 1);
    return sizeof(float) * (size_t)(kRows * p->qpf + tile);
}

} /* namespace vqsdpa */

extern "C" int vq_cu_launch_sdpa_prep(const vq_cu_sdpa_params *p, void *stream)
{
    const int64_t rows = (int64_t)p->c.B * p->c.Hq * p->c.Sq;
    vqsdpa::prep_kernel<<<vq_cu_row_blocks(rows), vqsdpa::kThreads, sizeof(float) * (size_t)p->c.D,
                          (cudaStream_t)stream>>>(*p);
    return (int)cudaGetLastError();
}

extern "C" int vq_cu_launch_sdpa(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    const size_t smem = vqsdpa::attend_smem(p);
    if (occupancy)
        return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(occupancy, vqsdpa::attend_kernel, vqsdpa::kThreads,
                                                                  smem);
    const dim3 grid((unsigned)p->c.nsplit, (unsigned)(p->c.Hkv * p->c.row_chunks), (unsigned)p->c.B);
    vqsdpa::attend_kernel<<<grid, vqsdpa::kThreads, smem, (cudaStream_t)stream>>>(*p);
    return (int)cudaGetLastError();
}
