/* keys_kivi.cu — KIVI affine keys, f16 or f32 scales (VQ_KEYS_KIVI) on CUDA:
 * the decode skeleton's key policy, the format's fields of vq_cu_sdpa_params
 * and their fill from the tensors, the policy's template instances over every
 * value format, and the descriptor the registry lists (keys_registry.h). */
#include "cuda/kv_keys.cuh"

namespace vqkv {

/* ---- VQ_KEYS_KIVI: k_hat[t,c] = code * scale[t/g, c] + zero[t/g, c];
 * f16 or f32 scales (run-time, warp-uniform) ---- */
struct KIVIKeys {
    template <int W, int R>
    struct P {
        const vq_cu_sdpa_params &p;
        int D;
        int64_t sz_base; /* element offset of this kv head's group 0; -1: paged */
        __device__ P(const vq_cu_sdpa_params &pp, int b, int hkv) : p(pp), D(pp.c.D)
        {
            sz_base = pp.c.pg.pages != nullptr ? -1 : ((int64_t)b * pp.c.Hkv + hkv) * pp.a_GK * D;
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
            /* paged: pages hold whole groups, so the flattened token's group is the
             * flattened group (as the tensor-core policy, decode_mma_kivi.cuh) */
            const int64_t g0 = (sz_base < 0 ? tok / p.a_g : sz_base / D + t / p.a_g) * D;
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

} /* namespace vqkv */

/* The policy reads p.a_*, which the tensor-core skeleton
 * (decode_mma_kivi.cuh) reads too, so they are named fields of the params. */
static vq_status fill(vq_ctx *ctx, const vq_encoded_keys *keys, float, vq_cu_sdpa_params *p)
{
    const DLTensor *vec[] = {keys->kivi.codes, keys->kivi.scale, keys->kivi.zero};
    static const char *const names[] = {"keys.kivi.codes", "keys.kivi.scale", "keys.kivi.zero"};
    VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 3));
    const DLTensor *codes = keys->kivi.codes;
    /* as the CPU binder: unpacked codes (last dim D) are read as whole bytes */
    p->a_codes = (const uint8_t *)vq_data(codes);
    p->a_ldc = (int)vq_dim(codes, 3);
    p->a_bits = p->a_ldc != p->c.D ? keys->kivi.bits : 8;
    p->a_g = keys->kivi.group_size;
    p->a_GK = (int)vq_ceil_div(p->c.Skv, p->a_g);
    p->a_scale = vq_data(keys->kivi.scale);
    p->a_zero = vq_data(keys->kivi.zero);
    p->a_sz_f16 = vq_dtype_of(keys->kivi.scale) == VQ_DT_F16;
    return VQ_OK;
}

extern "C" const vq_cu_key_format vq_cu_keys_kivi = {
    VQ_KEYS_KIVI, fill, vqkv::kv_launch_plain<vqkv::KIVIKeys::P>, vqkv::kv_launch_enc<vqkv::KIVIKeys::P>, true,
    0, nullptr /* the public codecs write its bytes */};
