/* attend_int8q.cuh — dot products of a float query with small unsigned integer
 * codes (1, 2, 4 or 8 bits) through DP4A, for the fast decode kernels.
 *
 * The query row q[0..D) is quantised once (per CTA, or per key group when a
 * scale is folded in) to 22-bit integers qi = round(q / step), step =
 * max|q| / kQMax, and each qi is split into three signed bytes
 * qi = hi * 2^14 + mid * 2^7 + lo (hi in [-127, 127], mid and lo in
 * [-64, 64]). A code row is cut into bytes with one shift and one mask per
 * four codes, and sum_c q_c code_c = step * (2^14 dot(hi) + 2^7 dot(mid) +
 * dot(lo)) with three dp4a per four codes, exact in integers. The only error is
 * the rounding of q: |err| <= step/2 * sum_c code_c, i.e. a relative 2^-21 of
 * max|q| per unit of code — far below the f32 accumulation error of the
 * float path it replaces (bench/NOTES.md, v5).
 *
 * Byte layout. A code row of BITS-bit codes is NW = D*BITS/32 little-endian
 * words; word i holds codes i*CPW .. i*CPW + CPW-1 (CPW = 32/BITS), code j at
 * bit BITS*j. Extraction m (0 <= m < NS = 8/BITS) of word i is
 * (w_i >> BITS*m) & mask, whose byte b is code i*CPW + b*NS + m. The query
 * words are stored in the same order: word index x = i*NS + m, byte b =
 * q(i*CPW + b*NS + m). */
#ifndef VQ_CUDA_ATTEND_INT8Q_CUH
#define VQ_CUDA_ATTEND_INT8Q_CUH

#include <stdint.h>

namespace vqcu {

/* Largest |qi|: hi = round(qi / 2^14) must stay within a signed byte. */
constexpr float kQMax = 2080768.0f; /* 127 * 2^14 */

template <int BITS>
struct CodeBytes {
    static constexpr int CPW = 32 / BITS;                /* codes per word */
    static constexpr int NS = 8 / BITS;                  /* extractions per word */
    static constexpr uint32_t kMask = BITS == 1 ? 0x01010101u : BITS == 2 ? 0x03030303u
                                    : BITS == 4 ? 0x0F0F0F0Fu : 0xFFFFFFFFu;
    /* the channel of byte b of query word x */
    static __device__ __forceinline__ int channel(int x, int b) { return (x / NS) * CPW + b * NS + x % NS; }
    /* extraction x of a code row held in words w[] */
    template <int NW>
    static __device__ __forceinline__ uint32_t extract(const uint32_t (&w)[NW], int x)
    {
        return (w[x / NS] >> (BITS * (x % NS))) & kMask;
    }
};

/* d + sum_i a_i * b_i over the four bytes, a signed, b unsigned. */
__device__ __forceinline__ int dp4a_su(uint32_t a, uint32_t b, int d)
{
    int r;
    asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(d));
    return r;
}

/* Splits round(v * inv) into three signed bytes (see above). */
__device__ __forceinline__ void q_split3(float v, float inv, int &hi, int &mid, int &lo)
{
    const int qi = __float2int_rn(v * inv);
    hi = (qi + 8192) >> 14;
    const int r = qi - (hi << 14);
    mid = (r + 64) >> 7;
    lo = r - (mid << 7);
}

__device__ __forceinline__ uint32_t pack_bytes(int b0, int b1, int b2, int b3)
{
    return (uint32_t)(b0 & 255) | (uint32_t)(b1 & 255) << 8 | (uint32_t)(b2 & 255) << 16 | (uint32_t)(b3 & 255) << 24;
}

/* Quantises query word x from its four channel values v[b] with 1/step `inv`
 * into the three planes at qw[0], qw[stride], qw[2*stride]. */
__device__ __forceinline__ void q_store_word(const float (&v)[4], float inv, uint32_t *qw, int stride)
{
    int h[4], m[4], l[4];
#pragma unroll
    for (int b = 0; b < 4; b++) q_split3(v[b], inv, h[b], m[b], l[b]);
    qw[0] = pack_bytes(h[0], h[1], h[2], h[3]);
    qw[stride] = pack_bytes(m[0], m[1], m[2], m[3]);
    qw[2 * stride] = pack_bytes(l[0], l[1], l[2], l[3]);
}

/* 1/step and step for a row whose largest |q| is amax (amax == 0: any step). */
__device__ __forceinline__ void q_steps(float amax, float &inv, float &step)
{
    inv = amax > 0.0f ? kQMax / amax : 0.0f;
    step = amax / kQMax;
}

/* sum_c q_c code_c / step for one code row w[] (NW words of BITS-bit codes)
 * against the three planes of a quantised query: planes[0..NX), [NX..2NX),
 * [2NX..3NX) with NX = D/4 words, read 4 words at a time (broadcast loads). */
template <int BITS, int NW>
__device__ __forceinline__ float q_dot(const uint32_t (&w)[NW], const uint32_t *planes)
{
    using CB = CodeBytes<BITS>;
    constexpr int NX = NW * CB::NS;
    int dh = 0, dm = 0, dl = 0;
#pragma unroll
    for (int x4 = 0; x4 < NX / 4; x4++) {
        const uint4 h = ((const uint4 *)planes)[x4];
        const uint4 m = ((const uint4 *)(planes + NX))[x4];
        const uint4 l = ((const uint4 *)(planes + 2 * NX))[x4];
        const uint32_t c0 = CB::extract(w, 4 * x4), c1 = CB::extract(w, 4 * x4 + 1);
        const uint32_t c2 = CB::extract(w, 4 * x4 + 2), c3 = CB::extract(w, 4 * x4 + 3);
        dh = dp4a_su(h.x, c0, dp4a_su(h.y, c1, dp4a_su(h.z, c2, dp4a_su(h.w, c3, dh))));
        dm = dp4a_su(m.x, c0, dp4a_su(m.y, c1, dp4a_su(m.z, c2, dp4a_su(m.w, c3, dm))));
        dl = dp4a_su(l.x, c0, dp4a_su(l.y, c1, dp4a_su(l.z, c2, dp4a_su(l.w, c3, dl))));
    }
    /* |dh| < 2^24 for D <= 256 and 8-bit codes (127 * 255 * 256), so each term is exact in f32 */
    return fmaf((float)dh, 16384.0f, fmaf((float)dm, 128.0f, (float)dl));
}

} /* namespace vqcu */

#endif
