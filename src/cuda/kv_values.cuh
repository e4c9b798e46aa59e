/* kv_values.cuh — value policies of the decode skeleton (kv_decode.cuh):
 * how one lane loads its CPL channels of one token and adds p * v_hat.
 * Channels at or past D are never loaded (they read as 0 and are never
 * stored), so any D % 8 == 0 up to the instance width W works. */
#ifndef VQ_CUDA_KV_VALUES_CUH
#define VQ_CUDA_KV_VALUES_CUH

#include "cuda/kv_decode.cuh"

namespace vqkv {

/* The 8 codes of channels c .. c+8 of one TurboQuant stage row as a 64-bit
 * window: u8 codes (8 bits apart; callers mask to `bits`), or bits
 * [c*bits, (c+8)*bits) of the u32 stream (up to 3 words, never past the row). */
__device__ __forceinline__ uint64_t stage_codes8(const vq_cu_sdpa_stage &st, int64_t tok, int c)
{
    if (!st.packed) return __ldg((const unsigned long long *)((const uint8_t *)st.idx + tok * st.ld + c));
    const uint32_t *w = (const uint32_t *)st.idx + tok * st.ld;
    const int bit = c * st.bits, wi = bit >> 5, off = bit & 31;
    const uint32_t w0 = __ldg(w + wi), w1 = wi + 1 < st.ld ? __ldg(w + wi + 1) : 0u;
    uint64_t v = ((uint64_t)w1 << 32 | w0) >> off;
    if (off != 0 && off + 8 * st.bits > 64) v |= (uint64_t)__ldg(w + wi + 2) << (64 - off);
    return v;
}

/* The scale of token tok of a TurboQuant stage (f32 or f16 storage). */
__device__ __forceinline__ float stage_scale(const vq_cu_sdpa_stage &st, int64_t tok)
{
    return st.scale_f16 ? __half2float(__ldg((const __half *)st.scale + tok)) : __ldg((const float *)st.scale + tok);
}

/* Plain values [B,Hkv,Skv,D], f16 (F16) or f32. */
template <bool F16>
struct F16Values {
    template <int W, int CPL_>
    struct P {
        static constexpr int CPL = CPL_;
        static constexpr int NC = CPL / 8; /* 8-channel chunks of a lane */
        struct Pre {
            uint4 w[F16 ? NC : 2 * NC]; /* 8 halves or 4 floats per uint4 */
        };
        const uint8_t *v;
        int D, base;

        __device__ explicit P(const vq_cu_sdpa_params &p)
        {
            v = (const uint8_t *)p.v;
            D = p.c.D;
            base = ((threadIdx.x & 31) % (W / CPL)) * CPL;
        }

        __device__ void load(int64_t tok, Pre &x) const
        {
            constexpr int EB = F16 ? 2 : 4;
            const uint4 *row = (const uint4 *)(v + (tok * D + base) * EB);
#pragma unroll
            for (int k = 0; k < NC; k++) {
                const bool on = base + 8 * k < D;
                if constexpr (F16) {
                    x.w[k] = on ? __ldg(row + k) : make_uint4(0, 0, 0, 0);
                } else {
                    x.w[2 * k] = on ? __ldg(row + 2 * k) : make_uint4(0, 0, 0, 0);
                    x.w[2 * k + 1] = on ? __ldg(row + 2 * k + 1) : make_uint4(0, 0, 0, 0);
                }
            }
        }

        template <int R>
        __device__ void apply(const Pre &x, const float (&pr)[R], float (&acc)[R][CPL], float (&)[R]) const
        {
            float f[CPL];
#pragma unroll
            for (int k = 0; k < (F16 ? NC : 2 * NC); k++) {
                const uint32_t u[4] = {x.w[k].x, x.w[k].y, x.w[k].z, x.w[k].w};
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    if constexpr (F16) {
                        const float2 h = __half22float2(*(const __half2 *)&u[i]);
                        f[8 * k + 2 * i] = h.x;
                        f[8 * k + 2 * i + 1] = h.y;
                    } else {
                        f[4 * k + i] = __uint_as_float(u[i]);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int j = 0; j < CPL; j++) acc[r][j] = fmaf(pr[r], f[j], acc[r][j]);
        }
    };
};


/* Codes of 8 channels c .. c+8 of a row of `bits`-wide codes packed along D
 * (bits 2, 4; 8 = one code per byte) as a 64-bit window, code j at bit j*bits. */
__device__ __forceinline__ uint64_t codes8(const uint8_t *row, int c, int bits)
{
    if (bits == 2) return __ldg((const uint16_t *)(row + c / 4));
    if (bits == 4) return __ldg((const uint32_t *)(row + c / 2));
    return __ldg((const unsigned long long *)(row + c));
}

/* KIVI values (KIVI per token): v_hat[t,c] = code * scale[t,c/g] + zero[t,c/g],
 * scales f16 or f32 (run-time, warp-uniform). A lane's 8-channel chunk lies
 * in one group when g % 8 == 0 (its scale and zero are loaded with the
 * codes); otherwise each channel's group is looked up in apply. */
struct KIVIValues {
    template <int W, int CPL_>
    struct P {
        static constexpr int CPL = CPL_;
        static constexpr int NC = CPL / 8;
        struct Pre {
            uint64_t w[NC];
            float s[NC], z[NC];
            int64_t srow; /* element offset of the token's scale row */
        };
        const vq_cu_sdpa_params &p;
        int D, base, grp[NC];
        bool g8;

        __device__ explicit P(const vq_cu_sdpa_params &pp) : p(pp)
        {
            D = p.c.D;
            base = ((threadIdx.x & 31) % (W / CPL)) * CPL;
            g8 = p.va_g % 8 == 0;
#pragma unroll
            for (int k = 0; k < NC; k++) grp[k] = min(base + 8 * k, D - 1) / p.va_g;
        }

        __device__ float sz(const void *t, int64_t i) const
        {
            return p.va_sz_f16 ? __half2float(__ldg((const __half *)t + i)) : __ldg((const float *)t + i);
        }

        __device__ void load(int64_t tok, Pre &x) const
        {
            const uint8_t *row = p.va_codes + tok * p.va_ldc;
            x.srow = tok * p.va_GV;
#pragma unroll
            for (int k = 0; k < NC; k++) {
                const bool on = base + 8 * k < D;
                x.w[k] = on ? codes8(row, base + 8 * k, p.va_bits) : 0;
                x.s[k] = on && g8 ? sz(p.va_scale, x.srow + grp[k]) : 0.0f;
                x.z[k] = on && g8 ? sz(p.va_zero, x.srow + grp[k]) : 0.0f;
            }
        }

        template <int R>
        __device__ void apply(const Pre &x, const float (&pr)[R], float (&acc)[R][CPL], float (&)[R]) const
        {
            const int bits = p.va_bits;
            const uint32_t mask = (1u << bits) - 1u;
#pragma unroll
            for (int k = 0; k < NC; k++) {
                float v[8];
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const float code = code_f((uint32_t)(x.w[k] >> (j * bits)) & mask);
                    float s = x.s[k], z = x.z[k];
                    if (!g8) {
                        const int c = min(base + 8 * k + j, D - 1);
                        s = sz(p.va_scale, x.srow + c / p.va_g);
                        z = sz(p.va_zero, x.srow + c / p.va_g);
                    }
                    v[j] = fmaf(code, s, z);
                }
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[r][8 * k + j] = fmaf(pr[r], v[j], acc[r][8 * k + j]);
            }
        }
    };
};

/* CODEBOOK values: v_hat = cents[min(idx, n - 1)] * scale[t]; idx one per byte
 * or nibble-packed (run-time, warp-uniform); the table sits in shared memory
 * with the clamp built in (entries past n repeat the last centroid). */
struct CodebookValues {
    template <int W, int CPL_>
    struct P {
        static constexpr int CPL = CPL_;
        static constexpr int NC = CPL / 8;
        struct Pre {
            uint2 w[NC]; /* 8 indices: nibbles in .x, or bytes in .x/.y */
            float vs;
        };
        const vq_cu_sdpa_params &p;
        float *cents;
        int D, base;

        __device__ explicit P(const vq_cu_sdpa_params &pp) : p(pp)
        {
            __shared__ float tab[256];
            cents = tab;
            D = p.c.D;
            base = ((threadIdx.x & 31) % (W / CPL)) * CPL;
            /* the skeleton's barriers after prepare() order these writes before any read */
            for (int i = threadIdx.x; i < 256; i += kThreads) tab[i] = __ldg(p.vc_cents + min(i, p.vc_n - 1));
        }

        __device__ void load(int64_t tok, Pre &x) const
        {
#pragma unroll
            for (int k = 0; k < NC; k++) {
                const int c = base + 8 * k;
                x.w[k] = make_uint2(0, 0);
                if (c < D) {
                    if (p.vc_packed) x.w[k].x = __ldg((const uint32_t *)(p.vc_idx + tok * (D / 2) + c / 2));
                    else x.w[k] = __ldg((const uint2 *)(p.vc_idx + tok * D + c));
                }
            }
            x.vs = p.vc_scale ? __ldg(p.vc_scale + tok) : 1.0f;
        }

        template <int R>
        __device__ void apply(const Pre &x, const float (&pr)[R], float (&acc)[R][CPL], float (&)[R]) const
        {
            float a[R];
#pragma unroll
            for (int r = 0; r < R; r++) a[r] = pr[r] * x.vs;
#pragma unroll
            for (int k = 0; k < NC; k++) {
                float v[8];
                if (p.vc_packed) {
#pragma unroll
                    for (int j = 0; j < 8; j++) v[j] = cents[(x.w[k].x >> (4 * j)) & 15u];
                } else {
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        v[j] = cents[(x.w[k].x >> (8 * j)) & 255u];
                        v[4 + j] = cents[(x.w[k].y >> (8 * j)) & 255u];
                    }
                }
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[r][8 * k + j] = fmaf(a[r], v[j], acc[r][8 * k + j]);
            }
        }
    };
};

/* TURBO values: y_hat = scale[t] * cents[code] in the rotated basis (the
 * merge kernel rotates each output row back); codes and scales (f32 or f16)
 * as the keys' stages. */
struct TurboValues {
    template <int W, int CPL_>
    struct P {
        static constexpr int CPL = CPL_;
        static constexpr int NC = CPL / 8;
        struct Pre {
            uint64_t w[NC];
            float vs;
        };
        const vq_cu_sdpa_params &p;
        float *cents;
        int D, base;

        __device__ explicit P(const vq_cu_sdpa_params &pp) : p(pp)
        {
            __shared__ float tab[256];
            cents = tab;
            D = p.c.D;
            base = ((threadIdx.x & 31) % (W / CPL)) * CPL;
            for (int i = threadIdx.x; i < 256; i += kThreads) tab[i] = p.v_stage.cents[i];
        }

        __device__ void load(int64_t tok, Pre &x) const
        {
#pragma unroll
            for (int k = 0; k < NC; k++) x.w[k] = base + 8 * k < D ? stage_codes8(p.v_stage, tok, base + 8 * k) : 0;
            x.vs = stage_scale(p.v_stage, tok);
        }

        template <int R>
        __device__ void apply(const Pre &x, const float (&pr)[R], float (&acc)[R][CPL], float (&)[R]) const
        {
            const int bits = p.v_stage.bits, step = p.v_stage.packed ? bits : 8;
            const uint32_t mask = (1u << bits) - 1u;
            float a[R];
#pragma unroll
            for (int r = 0; r < R; r++) a[r] = pr[r] * x.vs;
#pragma unroll
            for (int k = 0; k < NC; k++) {
                float v[8];
#pragma unroll
                for (int j = 0; j < 8; j++) v[j] = cents[(uint32_t)(x.w[k] >> (j * step)) & mask];
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[r][8 * k + j] = fmaf(a[r], v[j], acc[r][8 * k + j]);
            }
        }
    };
};

} /* namespace vqkv */

#endif
