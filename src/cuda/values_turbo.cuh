/* values_turbo.cuh — TurboQuant values (VQ_VALUES_TURBO), y_hat = scale[t] *
 * cents[code] in the rotated basis, as a value policy of the decode skeleton
 * (kv_decode.cuh), with the format's fields of vq_cu_sdpa_params (in p.vp)
 * and their fill. The merge kernel rotates each output row back (the fill
 * sets c.rot_back and c.rot_diag). Listed in kv_values.cuh. */
#ifndef VQ_CUDA_VALUES_TURBO_CUH
#define VQ_CUDA_VALUES_TURBO_CUH

#include "cuda/kv_fields.cuh"
#include "cuda/keys_registry.h" /* vq_cu_fill_stage, shared with the TurboQuant keys */
#include "cuda/values_registry.h"

namespace vqkv {

/* The format's fields of p.vp: one stage, codes and scales (f32 or f16) as
 * the TurboQuant keys' stages. */
struct TurboValueFields {
    vq_cu_sdpa_stage st;
};

struct TurboValues {
    static constexpr int format = VQ_VALUES_TURBO;

    template <int W, int CPL_>
    struct P {
        static constexpr int CPL = CPL_;
        static constexpr int NC = CPL / 8;
        struct Pre {
            uint64_t w[NC];
            float vs;
        };
        const vq_cu_sdpa_stage &st;
        float *cents;
        int D, base;

        __device__ explicit P(const vq_cu_sdpa_params &p) : st(value_params<TurboValueFields>(p).st)
        {
            __shared__ float tab[256];
            cents = tab;
            D = p.c.D;
            base = ((threadIdx.x & 31) % (W / CPL)) * CPL;
            for (int i = threadIdx.x; i < 256; i += kThreads) tab[i] = st.cents[i];
        }

        __device__ void load(int64_t tok, Pre &x) const
        {
#pragma unroll
            for (int k = 0; k < NC; k++) x.w[k] = base + 8 * k < D ? stage_codes8(st, tok, base + 8 * k) : 0;
            x.vs = stage_scale(st, tok);
        }

        template <int R>
        __device__ void apply(const Pre &x, const float (&pr)[R], float (&acc)[R][CPL], float (&)[R]) const
        {
            const int bits = st.bits, step = st.packed ? bits : 8;
            const uint32_t mask = (1u << bits) - 1u;
            float a[R];
#pragma unroll
            for (int r = 0; r < R; r++) a[r] = pr[r] * x.vs;
#pragma unroll
            for (int k = 0; k < NC; k++) {
                float v[8];
#pragma unroll
                for (int j = 0; j < 8; j++) v[j] = cents[(uint32_t)(x.w[k] >> (j * step)) & mask];
                axpy8(a, v, k, acc);
            }
        }
    };

    static const DLTensor *lead(const vq_encoded_values *v) { return v->turbo.idx; }

    static vq_status fill(vq_ctx *ctx, const vq_encoded_values *v, vq_cu_sdpa_params *p)
    {
        const DLTensor *vec[] = {v->turbo.idx};
        static const char *const names[] = {"values.turbo.idx"};
        VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 1));
        vq_cu_fill_stage(v->turbo.idx, v->turbo.scale, v->turbo.bits, p->c.D, &value_params<TurboValueFields>(*p).st);
        p->c.rot_back = 1;
        p->c.rot_diag = v->turbo.diag ? (const float *)vq_data(v->turbo.diag) : NULL;
        return VQ_OK;
    }
};

} /* namespace vqkv */

#endif
