/* kv_keys.cuh — key policies of the decode skeleton (kv_decode.cuh): one per
 * vq_keys_format. A lane scores one token for all R rows of its CTA straight
 * from the compressed row: it decodes 8 channels at a time into registers and
 * takes the dot with the prepared queries in shared memory (qs [R][qw], zero
 * past D). Nothing is read past D or past a row; codes outside a table are
 * clamped by the formats' decoders (src/formats/). Scores are in the log2
 * domain: the prep kernel multiplied the query by scale * log2(e) (and
 * rotated or projected it for the Hadamard and QJL formats), so only terms
 * added outside the dot (RaBitQ's constant) are multiplied by log2(e) here. */
#ifndef VQ_CUDA_KV_KEYS_CUH
#define VQ_CUDA_KV_KEYS_CUH

#include "cuda/kv_decode.cuh"
#include "cuda/kv_values.cuh"

namespace vqkv {

/* s[r] += q[r][c .. c+8) . k[0 .. 8) */
template <int R>
__device__ __forceinline__ void dot8(const float *qs, int qw, int c, const float (&k)[8], float (&s)[R])
{
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float4 a = *(const float4 *)(qs + r * qw + c), b = *(const float4 *)(qs + r * qw + c + 4);
        float x = s[r];
        x = fmaf(a.x, k[0], x); x = fmaf(a.y, k[1], x); x = fmaf(a.z, k[2], x); x = fmaf(a.w, k[3], x);
        x = fmaf(b.x, k[4], x); x = fmaf(b.y, k[5], x); x = fmaf(b.z, k[6], x); x = fmaf(b.w, k[7], x);
        s[r] = x;
    }
}

template <int R>
__device__ __forceinline__ void zero(float (&s)[R])
{
#pragma unroll
    for (int r = 0; r < R; r++) s[r] = 0.0f;
}

/* The 8 floats of a uint4 of halves (H) or bf16s. */
template <bool H>
__device__ __forceinline__ void unpack8(const uint4 v, float (&k)[8])
{
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (H) {
            const float2 f = __half22float2(*(const __half2 *)&u[i]);
            k[2 * i] = f.x;
            k[2 * i + 1] = f.y;
        } else {
            k[2 * i] = __uint_as_float(u[i] << 16);
            k[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
        }
    }
}

/* Sum of the first n floats of each row of qs (per-row constants). */
template <int R>
__device__ __forceinline__ void row_sums(const float *qs, int qw, int n, float *out)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int r = warp; r < R; r += kWarps) {
        float a = 0.0f;
        for (int d = lane; d < n; d += 32) a += qs[r * qw + d];
        a = warp_sum(a);
        if (lane == 0) out[r] = a;
    }
}

/* ---- VQ_KEYS_F16: plain keys, f32, f16 or bf16 (run-time, warp-uniform:
 * one instance instead of three) ---- */
struct F16Keys {
    template <int W, int R>
    struct P {
        const uint8_t *k;
        int D, elt;
        __device__ P(const vq_cu_sdpa_params &p, int, int) : k((const uint8_t *)p.k), D(p.c.D), elt(p.k_elt) {}
        __device__ void prepare(float *, int, const Rows<R> &) {}
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            float s0[R], s1[R];
            zero(s0);
            zero(s1);
#pragma unroll
            for (int c = 0; c < W; c += 8) {
                if (c >= D) break;
                float kf[8];
                if (elt == VQ_CU_F32) {
                    const float4 *row = (const float4 *)(k + (tok * D + c) * 4);
                    const float4 a = __ldg(row), b = __ldg(row + 1);
                    kf[0] = a.x; kf[1] = a.y; kf[2] = a.z; kf[3] = a.w;
                    kf[4] = b.x; kf[5] = b.y; kf[6] = b.z; kf[7] = b.w;
                } else {
                    const uint4 v = __ldg((const uint4 *)(k + (tok * D + c) * 2));
                    if (elt == VQ_CU_F16) unpack8<true>(v, kf);
                    else unpack8<false>(v, kf);
                }
                if ((c / 8) % 2) dot8(qs, qw, c, kf, s1);
                else dot8(qs, qw, c, kf, s0);
            }
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = s0[r] + s1[r];
        }
    };
};

/* ---- VQ_KEYS_TURBO (1 stage) and VQ_KEYS_TURBO_RVQ (2; p.n_stages at run time): y_hat =
 * sum_st scale_st[t] * cents_st[code_st]; q . y_hat = sum_st scale_st (q . cents_st[codes]) ---- */

struct TurboKeys {
    static constexpr int NST = 2; /* at most; p.n_stages (1 or 2) at run time */
    template <int W, int R>
    struct P {
        const vq_cu_sdpa_params &p;
        float (*cents)[256];
        int D;
        __device__ P(const vq_cu_sdpa_params &pp, int, int) : p(pp), D(pp.c.D)
        {
            __shared__ float tab[NST][256];
            cents = tab;
        }
        __device__ void prepare(float *, int, const Rows<R> &)
        {
            for (int i = threadIdx.x; i < NST * 256; i += kThreads)
                cents[i / 256][i % 256] = i / 256 < p.n_stages ? p.stage[i / 256].cents[i % 256] : 0.0f;
        }
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            zero(s);
#pragma unroll
            for (int st = 0; st < NST; st++) {
                if (st >= p.n_stages) break;
                const vq_cu_sdpa_stage &sg = p.stage[st];
                const int bits = sg.bits;
                const uint32_t mask = (1u << bits) - 1u;
                const int step = sg.packed ? bits : 8; /* bits between codes in the 64-bit window */
                float d0[R], d1[R];
                zero(d0);
                zero(d1);
#pragma unroll
                for (int c = 0; c < W; c += 8) {
                    if (c >= D) break;
                    const uint64_t v = stage_codes8(sg, tok, c);
                    float kf[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) kf[j] = cents[st][(uint32_t)(v >> (j * step)) & mask];
                    if ((c / 8) % 2) dot8(qs, qw, c, kf, d1);
                    else dot8(qs, qw, c, kf, d0);
                }
                const float sc = __ldg(sg.scale + tok);
#pragma unroll
                for (int r = 0; r < R; r++) s[r] = fmaf(d0[r] + d1[r], sc, s[r]);
            }
        }
    };
};

/* ---- VQ_KEYS_KIVI: k_hat[t,c] = code * scale[t/g, c] + zero[t/g, c];
 * f16 or f32 scales (run-time, warp-uniform) ---- */
struct KIVIKeys {
    template <int W, int R>
    struct P {
        const vq_cu_sdpa_params &p;
        int D;
        int64_t sz_base; /* element offset of this kv head's group 0 */
        __device__ P(const vq_cu_sdpa_params &pp, int b, int hkv) : p(pp), D(pp.c.D)
        {
            sz_base = ((int64_t)b * pp.c.Hkv + hkv) * pp.a_GK * D;
        }
        __device__ void prepare(float *, int, const Rows<R> &) {}
        __device__ void load8(const void *base, int64_t i, float (&f)[8]) const
        {
            if (p.a_sz_f16) {
                unpack8<true>(__ldg((const uint4 *)((const __half *)base + i)), f);
            } else {
                const float4 a = __ldg((const float4 *)((const float *)base + i)), b = __ldg((const float4 *)((const float *)base + i) + 1);
                f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
                f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
            }
        }
        __device__ void score(int64_t tok, int t, const float *qs, int qw, float (&s)[R]) const
        {
            const int bits = p.a_bits;
            const uint32_t mask = (1u << bits) - 1u;
            const uint8_t *row = p.a_codes + tok * p.a_ldc;
            const int64_t g0 = sz_base + (int64_t)(t / p.a_g) * D;
            float s0[R], s1[R];
            zero(s0);
            zero(s1);
#pragma unroll
            for (int c = 0; c < W; c += 8) {
                if (c >= D) break;
                const uint64_t v = codes8(row, c, bits); /* bits 8: the one-code-per-byte layout */
                float sc[8], zr[8], kf[8];
                load8(p.a_scale, g0 + c, sc);
                load8(p.a_zero, g0 + c, zr);
#pragma unroll
                for (int j = 0; j < 8; j++) kf[j] = fmaf((float)((uint32_t)(v >> (j * bits)) & mask), sc[j], zr[j]);
                if ((c / 8) % 2) dot8(qs, qw, c, kf, s1);
                else dot8(qs, qw, c, kf, s0);
            }
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = s0[r] + s1[r];
        }
    };
};

/* ---- VQ_KEYS_RABITQ: s = (rot(q) . sign) * mag + cnst. With f_j = 1 + bit_j/2
 * (code_1p: a shift and a LOP3), q . sign = 2 sum_{bit} q - sum q = 4 q.f - 5 sum q ---- */
struct RabitqKeys {
    template <int W, int R>
    struct P {
        const vq_cu_sdpa_params &p;
        float *qsum;
        int D;
        __device__ P(const vq_cu_sdpa_params &pp, int, int) : p(pp), D(pp.c.D)
        {
            __shared__ float sums[R];
            qsum = sums;
        }
        __device__ void prepare(float *qs, int qw, const Rows<R> &) { row_sums<R>(qs, qw, D, qsum); }
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            const uint8_t *row = p.sign_bits + tok * (D / 8);
            float d0[R], d1[R];
            zero(d0);
            zero(d1);
#pragma unroll
            for (int c = 0; c < W; c += 8) {
                if (c >= D) break;
                const uint32_t byte = __ldg(row + c / 8);
                float kf[8];
#pragma unroll
                for (int j = 0; j < 8; j++) kf[j] = code_1p<1>(byte, j);
                if ((c / 8) % 2) dot8(qs, qw, c, kf, d1);
                else dot8(qs, qw, c, kf, d0);
            }
            const float mag = __ldg(p.mag + tok), cn = p.cnst ? __ldg(p.cnst + tok) * kLog2e : 0.0f;
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = fmaf(4.0f * (d0[r] + d1[r]) - 5.0f * qsum[r], mag, cn);
        }
    };
};

/* ---- VQ_KEYS_QJL: s = norm * sum_j (S q)_j sign_j over the m sketch rows (the
 * prepared query is S q times the estimator's constant); as RaBitQ with f_j ---- */
struct QjlKeys {
    template <int W, int R>
    struct P {
        const vq_cu_sdpa_params &p;
        float *qsum;
        __device__ P(const vq_cu_sdpa_params &pp, int, int) : p(pp)
        {
            __shared__ float sums[R];
            qsum = sums;
        }
        __device__ void prepare(float *qs, int qw, const Rows<R> &) { row_sums<R>(qs, qw, p.qjl_m, qsum); }
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            const uint32_t *row = p.qjl_bits + tok * p.qjl_W;
            float d0[R], d1[R];
            zero(d0);
            zero(d1);
            /* qs rows are zero past m up to a multiple of 32 (q_stride) */
            for (int wi = 0; wi < p.qjl_W; wi++) {
                const uint32_t w = __ldg(row + wi);
#pragma unroll
                for (int c = 0; c < 32; c += 8) {
                    float kf[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) kf[j] = code_1p<1>(w, c + j);
                    if ((c / 8) % 2) dot8(qs, qw, 32 * wi + c, kf, d1);
                    else dot8(qs, qw, 32 * wi + c, kf, d0);
                }
            }
            const float nrm = __ldg(p.qjl_norm + tok);
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = (4.0f * (d0[r] + d1[r]) - 5.0f * qsum[r]) * nrm;
        }
    };
};

/* ---- VQ_KEYS_VECINFER: k_hat = concat_m codebook[m, idx[m]] * smooth; the smoothing
 * is folded into the query once per CTA ---- */
struct PqKeys {
    template <int W, int R>
    struct P {
        const vq_cu_sdpa_params &p;
        const float *cb;
        int hkv;
        __device__ P(const vq_cu_sdpa_params &pp, int, int h) : p(pp), hkv(h) { cb = pp.vecinfer_cb + h * pp.vecinfer_cb_hs; }
        __device__ void prepare(float *qs, int qw, const Rows<R> &)
        {
            const float *sm = p.vecinfer_smooth + hkv * p.vecinfer_sm_hs;
            for (int i = threadIdx.x; i < R * p.c.D; i += kThreads) qs[(i / p.c.D) * qw + i % p.c.D] *= __ldg(sm + i % p.c.D);
        }
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            const vq_vecinfer_layout L = p.vecinfer;
            const uint8_t *codes = p.vecinfer_idx + tok * L.M * L.idx_bytes;
            zero(s);
            for (int m = 0; m < L.M; m++) {
                const float *cent = cb + ((int64_t)m * L.C + vq_vecinfer_code(&L, codes, m)) * L.dsub;
                const int c0 = m * L.dsub;
                for (int j = 0; j < L.dsub; j++) {
                    const float kv = __ldg(cent + j);
#pragma unroll
                    for (int r = 0; r < R; r++) s[r] = fmaf(qs[r * qw + c0 + j], kv, s[r]);
                }
            }
        }
    };
};

/* ---- VQ_KEYS_COMMVQ: k_hat = RoPE_pos(scale * sum_r codebook[r, idx_r]).
 * q . RoPE(a, b) = a (q_a cos + q_b sin) + b (q_b cos - q_a sin) per pair, so
 * each stage's centroid is dotted with the query rotated back by the token's
 * position ---- */
struct CommvqKeys {
    template <int W, int R>
    struct P {
        const vq_cu_sdpa_params &p;
        int b;
        __device__ P(const vq_cu_sdpa_params &pp, int bb, int) : p(pp), b(bb) {}
        __device__ void prepare(float *, int, const Rows<R> &) {}
        __device__ void score(int64_t tok, int t, const float *qs, int qw, float (&s)[R]) const
        {
            const vq_commvq_layout L = p.cv;
            const uint8_t *codes = p.cv_idx + tok * L.R * L.idx_bytes;
            const int64_t pos = vq_commvq_position(__ldg(p.cv_pos + b * p.cv_pos_bs + t), p.cv_P);
            const float *cs = p.cv_cos + pos * (L.D / 2), *sn = p.cv_sin + pos * (L.D / 2);
            zero(s);
            for (int st = 0; st < L.R; st++) {
                const float *cent = p.cv_cb + ((int64_t)st * L.C + vq_commvq_code(&L, codes, st)) * L.D;
                for (int i = 0; i < L.D / 2; i++) {
                    int32_t ia, ib;
                    vq_rope_pair(L.rope, L.D, i, &ia, &ib);
                    const float a = __ldg(cent + ia), bv = __ldg(cent + ib), c = __ldg(cs + i), n = __ldg(sn + i);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        const float qa = qs[r * qw + ia], qb = qs[r * qw + ib];
                        s[r] = fmaf(a, fmaf(qa, c, qb * n), s[r]);
                        s[r] = fmaf(bv, fmaf(qb, c, -qa * n), s[r]);
                    }
                }
            }
            const float sc = p.cv_scale ? __ldg(p.cv_scale + tok) : 1.0f;
#pragma unroll
            for (int r = 0; r < R; r++) s[r] *= sc;
        }
    };
};

/* The launcher of a key policy over the value formats of one set: VSET 0 =
 * plain f16 / f32 values, 1 = the encoded ones (affine, codebook, turbo), so
 * that each set of instances is its own translation unit (kv_sdpa_*.cu). */
template <template <int, int> class KP, int VSET>
struct KvLaunch {
    template <int W, int R>
    struct L {
        static int go(const void *params, void *stream, int *occupancy)
        {
            const vq_cu_sdpa_params &p = *(const vq_cu_sdpa_params *)params;
            if constexpr (VSET == 0) {
                if (p.v_f16) return kv_go<KP, F16Values<true>::template P, W, R>(p, stream, occupancy);
                return kv_go<KP, F16Values<false>::template P, W, R>(p, stream, occupancy);
            } else {
                if (p.v_fmt == VQ_CU_V_KIVI) return kv_go<KP, KIVIValues::template P, W, R>(p, stream, occupancy);
                if (p.v_fmt == VQ_CU_V_CODEBOOK)
                    return kv_go<KP, CodebookValues::template P, W, R>(p, stream, occupancy);
                return kv_go<KP, TurboValues::template P, W, R>(p, stream, occupancy);
            }
        }
        static int run(const void *params, void *stream) { return go(params, stream, nullptr); }
        static int occupancy(const void *params, int *out) { return go(params, nullptr, out); }
    };
};

/* Picks the instance for (D, rows): widths 128 and 256 only (D <= 64 runs in
 * the 128 instance: half its value lanes idle, but a third fewer kernels to
 * compile), rows 1, 4 (2..4) or 8 (5..8). With occupancy != NULL stores how
 * many CTAs fit on one SM instead of launching. */
template <template <int, int> class KP, int VSET>
inline int kv_dispatch(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    const int n = p->c.rows < VQ_CU_ROWS_MAX ? p->c.rows : VQ_CU_ROWS_MAX;
    const int R = n <= 1 ? 1 : n <= 4 ? 4 : 8;
    const bool wide = p->c.D > 128;
#define VQ_KV_CASE(WW, RR)                                                                  \
    if ((WW == 256) == wide && R == RR)                                                     \
        return occupancy ? KvLaunch<KP, VSET>::template L<WW, RR>::occupancy(p, occupancy) \
                         : KvLaunch<KP, VSET>::template L<WW, RR>::run(p, stream);
    VQ_KV_CASE(128, 1) VQ_KV_CASE(128, 4) VQ_KV_CASE(128, 8)
    VQ_KV_CASE(256, 1) VQ_KV_CASE(256, 4) VQ_KV_CASE(256, 8)
#undef VQ_KV_CASE
    return (int)cudaErrorInvalidValue;
}

/* The instance files: kv_sdpa_<keys>.cu holds a key format's launcher
 * over plain values (VQ_KV_VSET 0); kv_sdpa_<keys>_enc.cu defines
 * VQ_KV_VSET 1 and VQ_KV_NAME (the _enc suffix) and includes it. */
#ifndef VQ_KV_VSET
#define VQ_KV_VSET 0
#define VQ_KV_NAME(n) n
#endif
} /* namespace vqkv */

#endif
