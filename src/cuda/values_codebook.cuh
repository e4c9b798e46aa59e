/* values_codebook.cuh — codebook values, v_hat = cents[min(idx, n - 1)] *
 * scale[t] (VQ_VALUES_CODEBOOK), as a value policy of the decode skeleton
 * (kv_decode.cuh), with the format's fields of vq_cu_sdpa_params (in p.vp)
 * and their fill. Listed in kv_values.cuh. */
#ifndef VQ_CUDA_VALUES_CODEBOOK_CUH
#define VQ_CUDA_VALUES_CODEBOOK_CUH

#include "cuda/kv_fields.cuh"
#include "cuda/values_registry.h"

namespace vqkv {

/* The format's fields of p.vp. */
struct CodebookFields {
    const uint8_t *idx; /* [B,Hkv,Skv,D] or nibble-packed [B,Hkv,Skv,D/2] */
    const float *cents; /* [n] */
    const float *scale; /* [B,Hkv,Skv] or NULL */
    int packed, n;
};

/* idx one per byte or nibble-packed (run-time, warp-uniform); the table sits
 * in shared memory with the clamp built in (entries past n repeat the last
 * centroid). */
struct CodebookValues {
    static constexpr int format = VQ_VALUES_CODEBOOK;

    template <int W, int CPL_>
    struct P {
        static constexpr int CPL = CPL_;
        static constexpr int NC = CPL / 8;
        struct Pre {
            uint2 w[NC]; /* 8 indices: nibbles in .x, or bytes in .x/.y */
            float vs;
        };
        const CodebookFields &f;
        float *cents;
        int D, base;

        __device__ explicit P(const vq_cu_sdpa_params &p) : f(value_params<CodebookFields>(p))
        {
            __shared__ float tab[256];
            cents = tab;
            D = p.c.D;
            base = ((threadIdx.x & 31) % (W / CPL)) * CPL;
            /* the skeleton's barriers after prepare() order these writes before any read */
            for (int i = threadIdx.x; i < 256; i += kThreads) tab[i] = __ldg(f.cents + min(i, f.n - 1));
        }

        __device__ void load(int64_t tok, Pre &x) const
        {
#pragma unroll
            for (int k = 0; k < NC; k++) {
                const int c = base + 8 * k;
                x.w[k] = make_uint2(0, 0);
                if (c < D) {
                    if (f.packed) x.w[k].x = __ldg((const uint32_t *)(f.idx + tok * (D / 2) + c / 2));
                    else x.w[k] = __ldg((const uint2 *)(f.idx + tok * D + c));
                }
            }
            x.vs = f.scale ? __ldg(f.scale + tok) : 1.0f;
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
                if (f.packed) {
#pragma unroll
                    for (int j = 0; j < 8; j++) v[j] = cents[(x.w[k].x >> (4 * j)) & 15u];
                } else {
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        v[j] = cents[(x.w[k].x >> (8 * j)) & 255u];
                        v[4 + j] = cents[(x.w[k].y >> (8 * j)) & 255u];
                    }
                }
                axpy8(a, v, k, acc);
            }
        }
    };

    static const DLTensor *lead(const vq_encoded_values *v) { return v->codebook.idx; }

    static vq_status fill(vq_ctx *ctx, const vq_encoded_values *v, vq_cu_sdpa_params *p)
    {
        const DLTensor *vec[] = {v->codebook.idx};
        static const char *const names[] = {"values.codebook.idx"};
        VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 1));
        CodebookFields &f = value_params<CodebookFields>(*p);
        f.idx = (const uint8_t *)vq_data(v->codebook.idx);
        f.packed = vq_dim(v->codebook.idx, 3) != p->c.D;
        f.cents = (const float *)vq_data(v->codebook.cents);
        f.n = (int)vq_numel(v->codebook.cents);
        f.scale = v->codebook.scale ? (const float *)vq_data(v->codebook.scale) : NULL;
        return VQ_OK;
    }
};

} /* namespace vqkv */

#endif
