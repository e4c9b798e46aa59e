/* keys_rabitq.cu — RaBitQ keys with their exact score (VQ_KEYS_RABITQ) on
 * CUDA: the decode skeleton's key policy, the format's fields of
 * vq_cu_sdpa_params and their fill from the tensors, the policy's template
 * instances over every value format, and the descriptor the registry lists
 * (keys_registry.h). */
#include "cuda/kv_keys.cuh"

namespace vqkv {

/* The signs, magnitudes and constants; the rotation's diagonal is the
 * query prep's (q_diag). */
struct RabitqParams {
    const uint8_t *sign_bits; /* [B,Hkv,Skv,D/8] */
    const float *mag, *cnst;  /* [B,Hkv,Skv]; cnst may be NULL */
};

/* ---- VQ_KEYS_RABITQ: s = (rot(q) . sign) * mag + cnst. With f_j = 1 + bit_j/2
 * (code_1p: a shift and a LOP3), q . sign = 2 sum_{bit} q - sum q = 4 q.f - 5 sum q ---- */
struct RabitqKeys {
    template <int W, int R>
    struct P {
        const RabitqParams &p;
        float *qsum;
        int D;
        __device__ P(const vq_cu_sdpa_params &pp, int, int) : p(key_params<RabitqParams>(pp)), D(pp.c.D)
        {
            __shared__ float sums[R];
            qsum = sums;
        }
        __device__ void prepare(float *qs, int qw, const Rows<R> &) { row_sums<R>(qs, qw, D, qsum); }
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            const uint8_t *row = p.sign_bits + tok * (D / 8);
            float d0[R], d1[R];
            zero(d0);
            zero(d1);
#pragma unroll
            for (int c = 0; c < W; c += 8) {
                if (c >= D) break;
                const uint32_t byte = __ldg(row + c / 8);
                float kf[8];
#pragma unroll
                for (int j = 0; j < 8; j++) kf[j] = code_1p<1>(byte, j);
                if ((c / 8) % 2) dot8(qs, qw, c, kf, d1);
                else dot8(qs, qw, c, kf, d0);
            }
            const float mag = __ldg(p.mag + tok), cn = p.cnst ? __ldg(p.cnst + tok) * kLog2e : 0.0f;
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = fmaf(4.0f * (d0[r] + d1[r]) - 5.0f * qsum[r], mag, cn);
        }
    };
};

} /* namespace vqkv */

static vq_status fill(vq_ctx *, const vq_encoded_keys *keys, float, vq_cu_sdpa_params *p)
{
    vqkv::RabitqParams &k = vqkv::key_params<vqkv::RabitqParams>(*p);
    p->q_prep = VQ_CU_QPREP_ROTATE;
    p->q_diag = keys->rabitq.diag ? (const float *)vq_data(keys->rabitq.diag) : NULL;
    k.sign_bits = (const uint8_t *)vq_data(keys->rabitq.bits);
    k.mag = (const float *)vq_data(keys->rabitq.mag);
    k.cnst = keys->rabitq.cnst ? (const float *)vq_data(keys->rabitq.cnst) : NULL;
    return VQ_OK;
}

extern "C" const vq_cu_key_format vq_cu_keys_rabitq = {
    VQ_KEYS_RABITQ, fill, vqkv::kv_launch_plain<vqkv::RabitqKeys::P>, vqkv::kv_launch_enc<vqkv::RabitqKeys::P>, true,
    0, nullptr /* the public codecs write its bytes */};
