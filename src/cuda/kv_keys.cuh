/* kv_keys.cuh — what the key policies of the decode skeleton (kv_decode.cuh)
 * share; each policy, one per vq_keys_format, is in its keys_<name>.cu.
 * A lane scores one token for all R rows of its CTA straight from the
 * compressed row: it decodes 8 channels at a time into registers and
 * takes the dot with the prepared queries in shared memory (qs [R][qw], zero
 * past D). Nothing is read past D or past a row; codes outside a table are
 * clamped by the formats' decoders (src/formats/). Scores are in the log2
 * domain: the prep kernel multiplied the query by scale * log2(e) (and
 * rotated or projected it for the Hadamard and QJL formats), so only terms
 * added outside the dot (RaBitQ's constant) are multiplied by log2(e) here. */
#ifndef VQ_CUDA_KV_KEYS_CUH
#define VQ_CUDA_KV_KEYS_CUH

#include "cuda/kv_fields.cuh"
#include "cuda/kv_values.cuh"
#include "cuda/keys_registry.h"

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

/* s[r] = q[r] . k_hat over the 8-channel chunks c < D of an instance of
 * width W, decode8(c, kf) giving k_hat[c .. c+8) in order of c; two
 * accumulators per row, alternating chunks, to overlap the FMA chains. */
template <int W, int R, class F>
__device__ __forceinline__ void dot_chunks(int D, const float *qs, int qw, float (&s)[R], F &&decode8)
{
    float s0[R], s1[R];
#pragma unroll
    for (int r = 0; r < R; r++) s0[r] = s1[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < W; c += 8) {
        if (c >= D) break;
        float kf[8];
        decode8(c, kf);
        if ((c / 8) % 2) dot8(qs, qw, c, kf, s1);
        else dot8(qs, qw, c, kf, s0);
    }
#pragma unroll
    for (int r = 0; r < R; r++) s[r] = s0[r] + s1[r];
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

/* The launcher of a key policy over the value formats of one set: VSET 0 =
 * plain f16 / f32 values, 1 = the encoded ones (affine, codebook, turbo),
 * 2 = plain f16 values only (a format that exists only in the cache, whose
 * plain values are f16: no f32-value instances to compile or spill); a key
 * format's keys_<name>.cu instantiates two (kv_launch_plain or
 * kv_launch_f16, and kv_launch_enc). */
template <template <int, int> class KP, int VSET>
struct KvLaunch {
    template <int W, int R>
    struct L {
        static int go(const void *params, void *stream, int *occupancy)
        {
            const vq_cu_sdpa_params &p = *(const vq_cu_sdpa_params *)params;
            if constexpr (VSET == 0) {
                if (p.v_f16) return kv_go<KP, F16Values::Of<true>::template P, W, R>(p, stream, occupancy);
                return kv_go<KP, F16Values::Of<false>::template P, W, R>(p, stream, occupancy);
            } else if constexpr (VSET == 2) {
                if (!p.v_f16) return (int)cudaErrorInvalidValue;
                return kv_go<KP, F16Values::Of<true>::template P, W, R>(p, stream, occupancy);
            } else {
#define VQ_KV_VALUE_CASE(Policy) \
    if (p.v_fmt == Policy::format) return kv_go<KP, Policy::template P, W, R>(p, stream, occupancy);
                VQ_CU_ENCODED_VALUE_FORMATS(VQ_KV_VALUE_CASE)
#undef VQ_KV_VALUE_CASE
                return (int)cudaErrorInvalidValue;
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

/* A key format's launchers (its descriptor's launch and launch_enc): its
 * policy over the plain values (VSET 0; f16 only: VSET 2) and over the
 * encoded ones (VSET 1). */
template <template <int, int> class KP>
int kv_launch_plain(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return kv_dispatch<KP, 0>(p, stream, occupancy);
}
template <template <int, int> class KP>
int kv_launch_f16(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return kv_dispatch<KP, 2>(p, stream, occupancy);
}
template <template <int, int> class KP>
int kv_launch_enc(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return kv_dispatch<KP, 1>(p, stream, occupancy);
}
} /* namespace vqkv */

#endif
