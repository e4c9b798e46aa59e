/* keys_f16.cu — plain keys, f32, f16 or bf16 (VQ_KEYS_F16) on CUDA: the decode
 * skeleton's key policy, the format's fields of vq_cu_sdpa_params and their
 * fill from the tensors, the policy's template instances over every value
 * format, and the descriptor the registry lists (keys_registry.h). */
#include "cuda/kv_keys.cuh"

namespace vqkv {

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

} /* namespace vqkv */

/* The policy reads p.k and p.k_elt, which the tensor-core skeleton
 * (decode_mma.cuh) reads too, so they are named fields of the params. */
static vq_status fill(vq_ctx *ctx, const vq_encoded_keys *keys, float, vq_cu_sdpa_params *p)
{
    const DLTensor *vec[] = {keys->f16.keys};
    static const char *const names[] = {"keys.f16.keys"};
    VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 1));
    p->k = vq_data(keys->f16.keys);
    p->k_elt = vq_cu_elt_of(keys->f16.keys);
    return VQ_OK;
}

extern "C" const vq_cu_key_format vq_cu_keys_f16 = {
    VQ_KEYS_F16, fill, vqkv::kv_launch_plain<vqkv::F16Keys::P>, vqkv::kv_launch_enc<vqkv::F16Keys::P>, true,
    0, nullptr /* the public codecs write its bytes */};
