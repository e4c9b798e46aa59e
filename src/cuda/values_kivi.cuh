/* values_kivi.cuh — KIVI values, quantised per token over groups of
 * channels (VQ_VALUES_KIVI), as a value policy of the decode skeleton
 * (kv_decode.cuh), with the format's fields of vq_cu_sdpa_params (p.va_*:
 * named, as the tensor-core skeleton, decode_mma_kivi.cuh, reads them too)
 * and their fill. Listed in kv_values.cuh. */
#ifndef VQ_CUDA_VALUES_KIVI_CUH
#define VQ_CUDA_VALUES_KIVI_CUH

#include "cuda/kv_fields.cuh"
#include "cuda/values_registry.h"

namespace vqkv {

/* v_hat[t,c] = code * scale[t,c/g] + zero[t,c/g], scales f16 or f32
 * (run-time, warp-uniform). A lane's 8-channel chunk lies in one group when
 * g % 8 == 0 (its scale and zero are loaded with the codes); otherwise each
 * channel's group is looked up in apply. */
struct KIVIValues {
    static constexpr int format = VQ_VALUES_KIVI;

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
                axpy8(pr, v, k, acc);
            }
        }
    };

    static const DLTensor *lead(const vq_encoded_values *v) { return v->kivi.codes; }

    static vq_status fill(vq_ctx *ctx, const vq_encoded_values *v, vq_cu_sdpa_params *p)
    {
        const DLTensor *vec[] = {v->kivi.codes, v->kivi.scale, v->kivi.zero};
        static const char *const names[] = {"values.kivi.codes", "values.kivi.scale", "values.kivi.zero"};
        VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 3));
        const DLTensor *codes = v->kivi.codes;
        const int64_t D = p->c.D;
        p->va_codes = (const uint8_t *)vq_data(codes);
        p->va_ldc = (int)vq_dim(codes, 3);
        p->va_bits = p->va_ldc != D ? v->kivi.bits : 8; /* one code per byte when the last dim is D */
        p->va_g = v->kivi.group_size;
        p->va_GV = (int)vq_ceil_div(D, p->va_g);
        p->va_scale = vq_data(v->kivi.scale);
        p->va_zero = vq_data(v->kivi.zero);
        p->va_sz_f16 = vq_dtype_of(v->kivi.scale) == VQ_DT_F16;
        return VQ_OK;
    }
};

} /* namespace vqkv */

#endif
