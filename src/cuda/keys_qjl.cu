/* keys_qjl.cu — QJL 1-bit sketched keys (VQ_KEYS_QJL) on CUDA: the decode
 * skeleton's key policy, the format's fields of vq_cu_sdpa_params and their
 * fill from the tensors, the policy's template instances over every value
 * format, and the descriptor the registry lists (keys_registry.h). */
#include <math.h>

#include "cuda/kv_keys.cuh"

namespace vqkv {

/* The sketch bits and norms; the projection is the query prep's (q_proj). */
struct QjlParams {
    const uint32_t *qjl_bits; /* [B,Hkv,Skv,W] */
    const float *qjl_norm;    /* [B,Hkv,Skv] */
    int qjl_m, qjl_W;
};

/* ---- VQ_KEYS_QJL: s = norm * sum_j (S q)_j sign_j over the m sketch rows (the
 * prepared query is S q times the estimator's constant); as RaBitQ with f_j ---- */
struct QjlKeys {
    template <int W, int R>
    struct P {
        const QjlParams &p;
        float *qsum;
        __device__ P(const vq_cu_sdpa_params &pp, int, int) : p(key_params<QjlParams>(pp))
        {
            __shared__ float sums[R];
            qsum = sums;
        }
        __device__ void prepare(float *qs, int qw, const Rows<R> &) { row_sums<R>(qs, qw, p.qjl_m, qsum); }
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            const uint32_t *row = p.qjl_bits + tok * p.qjl_W;
            float d0[R], d1[R];
            zero(d0);
            zero(d1);
            /* qs rows are zero past m up to a multiple of 32 (q_stride) */
            for (int wi = 0; wi < p.qjl_W; wi++) {
                const uint32_t w = __ldg(row + wi);
#pragma unroll
                for (int c = 0; c < 32; c += 8) {
                    float kf[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) kf[j] = code_1p<1>(w, c + j);
                    if ((c / 8) % 2) dot8(qs, qw, 32 * wi + c, kf, d1);
                    else dot8(qs, qw, 32 * wi + c, kf, d0);
                }
            }
            const float nrm = __ldg(p.qjl_norm + tok);
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = (4.0f * (d0[r] + d1[r]) - 5.0f * qsum[r]) * nrm;
        }
    };
};

} /* namespace vqkv */

static vq_status fill(vq_ctx *ctx, const vq_encoded_keys *keys, float scale, vq_cu_sdpa_params *p)
{
    const int64_t m = vq_dim(keys->qjl.projection, 0);
    VQ_RETURN_IF(ctx, m > VQ_CU_SDPA_MAX_QJL_M, VQ_ERR_UNSUPPORTED,
                 "argument 'keys.qjl.projection': the CUDA backend holds at most %d sketch rows, got m = %lld",
                 VQ_CU_SDPA_MAX_QJL_M, (long long)m);
    vqkv::QjlParams &k = vqkv::key_params<vqkv::QjlParams>(*p);
    k.qjl_bits = (const uint32_t *)vq_data(keys->qjl.bits);
    k.qjl_norm = (const float *)vq_data(keys->qjl.norm);
    k.qjl_m = (int)m;
    k.qjl_W = (int)vq_ceil_div(m, 32);
    p->q_prep = VQ_CU_QPREP_PROJECT;
    p->q_proj = (const float *)vq_data(keys->qjl.projection);
    p->q_proj_m = (int)m;
    p->qpf = (int)m;
    /* as the CPU binder: scale * sqrt(pi/2) / m in double, then to float */
    p->qmul = (float)((double)scale * sqrt(acos(-1.0) / 2.0) / (double)m) * 1.4426950408889634f;
    return VQ_OK;
}

extern "C" const vq_cu_key_format vq_cu_keys_qjl = {
    VQ_KEYS_QJL, fill, vqkv::kv_launch_plain<vqkv::QjlKeys::P>, vqkv::kv_launch_enc<vqkv::QjlKeys::P>, true,
    0, nullptr /* the public codecs write its bytes */};
