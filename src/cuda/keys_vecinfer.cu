/* keys_vecinfer.cu — VecInfer product-quantized keys (VQ_KEYS_VECINFER) on
 * CUDA: the decode skeleton's key policy, the format's fields of
 * vq_cu_sdpa_params and their fill from the tensors, the policy's template
 * instances over every value format, and the descriptor the registry lists
 * (keys_registry.h). */
#include "formats/format_vecinfer.h"
#include "cuda/kv_keys.cuh"

namespace vqkv {

struct PqParams {
    vq_vecinfer_layout vecinfer;
    const uint8_t *vecinfer_idx;            /* [B,Hkv,Skv,M] of vecinfer.idx_bytes */
    const float *vecinfer_cb;               /* [M,C,dsub] or [Hkv,M,C,dsub] */
    const float *vecinfer_smooth;           /* [D] or [Hkv,D] */
    int64_t vecinfer_cb_hs, vecinfer_sm_hs; /* per-head strides, 0 when shared */
};

/* ---- VQ_KEYS_VECINFER: k_hat = concat_m codebook[m, idx[m]] * smooth; the smoothing
 * is folded into the query once per CTA ---- */
struct PqKeys {
    template <int W, int R>
    struct P {
        const vq_cu_sdpa_params &pa;
        const PqParams &p;
        const float *cb;
        int hkv;
        __device__ P(const vq_cu_sdpa_params &pp, int, int h) : pa(pp), p(key_params<PqParams>(pp)), hkv(h)
        {
            cb = p.vecinfer_cb + h * p.vecinfer_cb_hs;
        }
        __device__ void prepare(float *qs, int qw, const Rows<R> &)
        {
            const float *sm = p.vecinfer_smooth + hkv * p.vecinfer_sm_hs;
            for (int i = threadIdx.x; i < R * pa.c.D; i += kThreads) qs[(i / pa.c.D) * qw + i % pa.c.D] *= __ldg(sm + i % pa.c.D);
        }
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            const vq_vecinfer_layout L = p.vecinfer;
            const uint8_t *codes = p.vecinfer_idx + tok * L.M * L.idx_bytes;
            zero(s);
            for (int m = 0; m < L.M; m++) {
                const float *cent = cb + ((int64_t)m * L.C + vq_vecinfer_code(&L, codes, m)) * L.dsub;
                const int c0 = m * L.dsub;
                for (int j = 0; j < L.dsub; j++) {
                    const float kv = __ldg(cent + j);
#pragma unroll
                    for (int r = 0; r < R; r++) s[r] = fmaf(qs[r * qw + c0 + j], kv, s[r]);
                }
            }
        }
    };
};

} /* namespace vqkv */

static vq_status fill(vq_ctx *, const vq_encoded_keys *keys, float, vq_cu_sdpa_params *p)
{
    const DLTensor *idx = keys->vecinfer.idx, *cb = keys->vecinfer.codebook, *sm = keys->vecinfer.smooth;
    const int64_t D = p->c.D, M = vq_dim(idx, 3), C = vq_dim(cb, -2);
    vqkv::PqParams &k = vqkv::key_params<vqkv::PqParams>(*p);
    k.vecinfer = vq_vecinfer_layout{(int32_t)M, (int32_t)(D / M), (int32_t)C, vq_dtype_of(idx) == VQ_DT_U8 ? 1 : 2};
    k.vecinfer_idx = (const uint8_t *)vq_data(idx);
    k.vecinfer_cb = (const float *)vq_data(cb);
    k.vecinfer_smooth = (const float *)vq_data(sm);
    k.vecinfer_cb_hs = cb->ndim == 4 ? M * C * (D / M) : 0;
    k.vecinfer_sm_hs = sm->ndim == 2 ? D : 0;
    return VQ_OK;
}

extern "C" const vq_cu_key_format vq_cu_keys_vecinfer = {
    VQ_KEYS_VECINFER, fill, vqkv::kv_launch_plain<vqkv::PqKeys::P>, vqkv::kv_launch_enc<vqkv::PqKeys::P>, true,
    0, nullptr /* the public codecs write its bytes */};
