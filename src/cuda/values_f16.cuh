/* values_f16.cuh — plain values [B,Hkv,Skv,D], f16 or f32 (VQ_VALUES_F16),
 * as a value policy of the decode skeleton (kv_decode.cuh), with the
 * format's fields of vq_cu_sdpa_params (p.v, p.v_f16: named, as the
 * tensor-core skeleton reads them too) and their fill. Listed in
 * kv_values.cuh. */
#ifndef VQ_CUDA_VALUES_F16_CUH
#define VQ_CUDA_VALUES_F16_CUH

#include "cuda/kv_fields.cuh"
#include "cuda/values_registry.h"

namespace vqkv {

struct F16Values {
    static constexpr int format = VQ_VALUES_F16;

    /* The policy over f16 (F16) or f32 elements. */
    template <bool F16>
    struct Of {
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

    static const DLTensor *lead(const vq_encoded_values *v) { return v->f16.values; }

    static vq_status fill(vq_ctx *ctx, const vq_encoded_values *v, vq_cu_sdpa_params *p)
    {
        const DLTensor *vec[] = {v->f16.values};
        static const char *const names[] = {"values.f16.values"};
        VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 1));
        p->v = vq_data(v->f16.values);
        p->v_f16 = vq_dtype_of(v->f16.values) == VQ_DT_F16;
        return VQ_OK;
    }
};

} /* namespace vqkv */

#endif
