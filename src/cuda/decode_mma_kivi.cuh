/* decode_mma_kivi.cuh — KIVI (group-affine) keys and values as policies of
 * the tensor-core decode skeleton (decode_mma.cuh): packed 2- or 4-bit codes,
 * D = 128, key groups of g tokens and value groups of 32 channels (g = 32).
 *
 * Codes become exact f16 operands with one shift and one LOP3 per pair:
 * code c placed in the top mantissa bits of 1.0 is 1 + c / 2^BITS. So
 *   keys:   q . k_hat = sum_c (2^BITS q_c ks_c) (1 + c_c / 2^BITS)
 *                       + sum_c q_c (kz_c - 2^BITS ks_c)
 *           the query side (2^BITS q ks, hi/lo) and the bias (f32) are
 *           rebuilt when a tile starts a new key group;
 *   values: sum_t p_t v_hat = sum_t (2^BITS p_t vs_t) (1 + c_t / 2^BITS)
 *                             + sum_t p_t (vz_t - 2^BITS vs_t)
 *           P^T is scaled per value group before its split and transpose,
 *           the second sum is kept per row and group in f32 (z) and added
 *           to the group's channels at the end.
 * The offset 1 costs a cancellation of at most 2^BITS against the f32
 * accumulation, far inside the header's bound. */
#ifndef VQ_CUDA_DECODE_MMA_KIVI_CUH
#define VQ_CUDA_DECODE_MMA_KIVI_CUH

#include "cuda/decode_mma.cuh"

namespace vqmma {

/* Element i of a f16 (f16 != 0) or f32 array. */
__device__ __forceinline__ float ld_sz(const void *p, int64_t i, int f16)
{
    return f16 ? __half2float(__ldg((const __half *)p + i)) : __ldg((const float *)p + i);
}

/* The half pair of word x's codes at bits `pos` and pos + 16 as 1 + c / 2^BITS. */
template <int BITS>
__device__ __forceinline__ uint32_t code_pair(uint32_t x, int pos)
{
    constexpr int top = 10 - BITS;
    constexpr uint32_t m = ((1u << BITS) - 1u) << top;
    const uint32_t y = pos <= top ? x << (top - pos) : x >> (pos - top);
    return (y & (m | m << 16)) | 0x3C003C00u;
}

/* Keys [B,Hkv,Skv,D*BITS/8] (or a pool chunk's pages), scale/zero per
 * channel and group of g tokens [B,Hkv,ceil(Skv/g),D] (paged: group of the
 * flattened token i is i / g). Quarter j of a code row (channels 32j ..
 * 32j + 31) is 32 * BITS / 32 words; word i holds channels 32j + CPW i + k
 * (CPW = 32 / BITS codes a word), and its A-fragment registers pair codes
 * k and k + CPW / 2 (bits BITS k and BITS k + 16). */
template <int BITS>
struct KiviKeysT {
    static constexpr int CPW = 32 / BITS;
    static constexpr int RPW = CPW / 2; /* fragment registers a word */
    static constexpr int QW = BITS;     /* words of a row quarter */
    static constexpr float kTwoB = (float)(1 << BITS);
    const uint8_t *codes;
    const void *ks, *kz;
    int64_t sz_base, cur;
    int g, f16s, paged;
    const float (*qs)[kD + 4];
    BFrag<kKS> q;
    float bias[2];

    __device__ KiviKeysT(const vq_cu_sdpa_params &p, int b, int hkv)
        : codes(p.a_codes), ks(p.a_scale), kz(p.a_zero), cur(-1), g(p.a_g), f16s(p.a_sz_f16),
          paged(p.c.pg.pages != nullptr)
    {
        sz_base = paged ? 0 : ((int64_t)b * p.c.Hkv + hkv) * p.a_GK * kD;
    }

    /* channel of element e of the query's B fragment, k-step ks, quarter j */
    static __device__ __forceinline__ int channel(int ks, int j, int e)
    {
        const int r = 2 * ks + (e >> 1);
        return 32 * j + CPW * (r / RPW) + r % RPW + (CPW / 2) * (e & 1);
    }

    __device__ void prepare(const float (*q_)[kD + 4]) { qs = q_; }

    /* The query fragments and bias of the key group at element offset off. */
    __device__ void group(int64_t off)
    {
        const int lane = threadIdx.x & 31, gr = lane >> 2, j = lane & 3;
        float sc[32], part = 0.0f;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            const int ch = 32 * j + c;
            const float s = ld_sz(ks, off + ch, f16s), z = ld_sz(kz, off + ch, f16s), qv = qs[gr][ch];
            sc[c] = qv * s * kTwoB;
            part = fmaf(qv, fmaf(-kTwoB, s, z), part);
        }
#pragma unroll
        for (int ks_ = 0; ks_ < kKS; ks_++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                split2(sc[channel(ks_, 0, 2 * h)], sc[channel(ks_, 0, 2 * h + 1)], q.hi[ks_][h], q.lo[ks_][h]);
        part += __shfl_xor_sync(0xffffffffu, part, 1);
        part += __shfl_xor_sync(0xffffffffu, part, 2);
        /* the C fragments' columns are rows 2j and 2j + 1 */
        bias[0] = __shfl_sync(0xffffffffu, part, 8 * j);
        bias[1] = __shfl_sync(0xffffffffu, part, 8 * j + 4);
    }

    __device__ __forceinline__ void load(int64_t tok, uint32_t (&w)[16]) const
    {
        const uint8_t *row = codes + tok * (kD * BITS / 8) + (threadIdx.x & 3) * (QW * 4);
        uint32_t x[QW];
        if constexpr (QW == 4) {
            const uint4 v = __ldg((const uint4 *)row);
            x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
        } else {
            const uint2 v = __ldg((const uint2 *)row);
            x[0] = v.x; x[1] = v.y;
        }
#pragma unroll
        for (int r = 0; r < 16; r++) w[r] = code_pair<BITS>(x[r / RPW], BITS * (r % RPW));
    }

    __device__ __forceinline__ void score(int64_t tile0, int t0, int last, float (&s)[2][4])
    {
        /* g % 32 == 0: a tile lies in one key group */
        const int64_t off = paged ? (tile0 + t0) / g * kD : sz_base + (int64_t)(t0 / g) * kD;
        if (off != cur) {
            cur = off;
            group(off);
        }
        key_scores(*this, tile0, t0, last, q, s);
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[mt][e] += bias[e & 1];
    }
};

/* Values [B,Hkv,Skv,D*BITS/8], scale/zero per token and group of 32
 * channels [B,Hkv,Skv,4]. Output m-tile cm lies in value group cm / 2: its
 * row r is channel 32(cm / 2) + 4(r % 8) + 2(r / 8) + cm % 2, so lane g's
 * rows g and g + 8 of the group's two m-tiles are the four codes of byte
 * 8(cm / 2) + g (2-bit) or of bytes 16(cm / 2) + 2g, + 1 (4-bit). */
template <int BITS>
struct KiviValuesT {
    static constexpr int GV = kD / 32;
    static constexpr float kTwoB = (float)(1 << BITS);
    const uint8_t *codes;
    const void *vs, *vz;
    int f16s;
    float z[2][GV]; /* sum_t p_t (vz_t - 2^BITS vs_t): rows 2j, 2j + 1, the lane's tokens */

    __device__ KiviValuesT(const vq_cu_sdpa_params &p, int, int)
        : codes(p.va_codes), vs(p.va_scale), vz(p.va_zero), f16s(p.va_sz_f16)
    {
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int v = 0; v < GV; v++) z[r][v] = 0.0f;
    }

    static __device__ __forceinline__ int channel(int cm, int r)
    {
        return 32 * (cm / 2) + 4 * (r % 8) + 2 * (r / 8) + cm % 2;
    }

    __device__ void rescale(const float (&alpha)[2])
    {
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int v = 0; v < GV; v++) z[r][v] *= alpha[r];
    }

    /* The word of token tok holding lane g's codes of value group v. */
    __device__ __forceinline__ uint32_t word(int64_t tok, int v, int gr) const
    {
        const uint32_t *row = (const uint32_t *)(codes + tok * (kD * BITS / 8));
        return __ldg(row + (BITS == 2 ? 2 * v + (gr >> 2) : 4 * v + (gr >> 1)));
    }

    __device__ __forceinline__ void apply(int64_t tile0, int t0, int last, const float (&pr)[2][4],
                                          float (&acc)[kCM][4])
    {
        const int gr = (threadIdx.x & 31) >> 2, j = threadIdx.x & 3;
        /* PRMT selector: lane g's byte (2-bit) or half word (4-bit) of two tokens, one per half */
        const uint32_t b0 = BITS == 2 ? (gr & 3) : 2 * (gr & 1), b1 = BITS == 2 ? b0 : b0 + 1;
        const uint32_t sel = b0 | b1 << 4 | (b0 + 4) << 8 | (b1 + 4) << 12;
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            /* the C-fragment tokens of this step (for P's scales) and the A-fragment tokens (codes) */
            float sv[2][GV];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int t = t0 + 16 * kk + gr + 8 * h;
                const int64_t row = (tile0 + min(t, last)) * GV;
#pragma unroll
                for (int v = 0; v < GV; v++) {
                    /* p = 0 past the end: no 0 * inf from a neighbour's scales */
                    const float s = t > last ? 0.0f : ld_sz(vs, row + v, f16s);
                    const float zz = t > last ? 0.0f : ld_sz(vz, row + v, f16s);
                    sv[h][v] = s * kTwoB;
                    z[0][v] = fmaf(pr[kk][2 * h], fmaf(-kTwoB, s, zz), z[0][v]);
                    z[1][v] = fmaf(pr[kk][2 * h + 1], fmaf(-kTwoB, s, zz), z[1][v]);
                }
            }
            int64_t tk[4];
#pragma unroll
            for (int i = 0; i < 4; i++) tk[i] = tile0 + min(t0 + 16 * kk + 2 * j + (i & 1) + 8 * (i >> 1), last);
#pragma unroll
            for (int v = 0; v < GV; v++) {
                float x[4];
#pragma unroll
                for (int e = 0; e < 4; e++) x[e] = pr[kk][e] * sv[e >> 1][v];
                uint32_t bh[2], bl[2];
                p_frags(x, bh, bl);
                /* tokens past the end read a valid neighbour's codes; their p is 0 and codes are finite */
                const uint32_t x01 = prmt(word(tk[0], v, gr), word(tk[1], v, gr), sel);
                const uint32_t x89 = prmt(word(tk[2], v, gr), word(tk[3], v, gr), sel);
#pragma unroll
                for (int u = 0; u < 2; u++) {
                    /* rows g (code u of the lane's four) and g + 8 (code 2 + u) */
                    const uint32_t a0 = code_pair<BITS>(x01, BITS * u), a1 = code_pair<BITS>(x01, BITS * (2 + u));
                    const uint32_t a2 = code_pair<BITS>(x89, BITS * u), a3 = code_pair<BITS>(x89, BITS * (2 + u));
                    mma_t(acc[2 * v + u], a0, a1, a2, a3, bh[0], bh[1]);
                    mma_t(acc[2 * v + u], a0, a1, a2, a3, bl[0], bl[1]);
                }
            }
        }
    }

    /* Adds each row's zero term to its group's channels (summed over the eight lanes of the row). */
    __device__ void finish(float (&acc)[kCM][4])
    {
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int v = 0; v < GV; v++)
#pragma unroll
                for (int o = 4; o < 32; o <<= 1) z[r][v] += __shfl_xor_sync(0xffffffffu, z[r][v], o);
#pragma unroll
        for (int cm = 0; cm < kCM; cm++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[cm][e] += z[e & 1][cm / 2];
    }
};

} /* namespace vqmma */

#endif
