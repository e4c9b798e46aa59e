/* keys_commvq.cu — CommVQ RoPE-commutative keys (VQ_KEYS_COMMVQ) on CUDA: the
 * decode skeleton's key policy, the format's fields of vq_cu_sdpa_params and
 * their fill from the tensors, the policy's template instances over every
 * value format, and the descriptor the registry lists (keys_registry.h). */
#include "formats/format_commvq.h"
#include "cuda/kv_keys.cuh"

namespace vqkv {

struct CommvqParams {
    vq_commvq_layout cv;
    const uint8_t *cv_idx;        /* [B,Hkv,Skv,R] of cv.idx_bytes */
    const float *cv_cb;           /* [R,C,D] */
    const float *cv_cos, *cv_sin; /* [P, D/2] */
    const int32_t *cv_pos;        /* [Skv] or [B,Skv] */
    const float *cv_scale;        /* [B,Hkv,Skv] or NULL */
    int64_t cv_pos_bs;            /* Skv when positions are [B,Skv], else 0 */
    int64_t cv_P;
};

/* ---- VQ_KEYS_COMMVQ: k_hat = RoPE_pos(scale * sum_r codebook[r, idx_r]).
 * q . RoPE(a, b) = a (q_a cos + q_b sin) + b (q_b cos - q_a sin) per pair, so
 * each stage's centroid is dotted with the query rotated back by the token's
 * position ---- */
struct CommvqKeys {
    template <int W, int R>
    struct P {
        const CommvqParams &p;
        int b;
        __device__ P(const vq_cu_sdpa_params &pp, int bb, int) : p(key_params<CommvqParams>(pp)), b(bb) {}
        __device__ void prepare(float *, int, const Rows<R> &) {}
        __device__ void score(int64_t tok, int t, const float *qs, int qw, float (&s)[R]) const
        {
            const vq_commvq_layout L = p.cv;
            const uint8_t *codes = p.cv_idx + tok * L.R * L.idx_bytes;
            const int64_t pos = vq_commvq_position(__ldg(p.cv_pos + b * p.cv_pos_bs + t), p.cv_P);
            const float *cs = p.cv_cos + pos * (L.D / 2), *sn = p.cv_sin + pos * (L.D / 2);
            zero(s);
            for (int st = 0; st < L.R; st++) {
                const float *cent = p.cv_cb + ((int64_t)st * L.C + vq_commvq_code(&L, codes, st)) * L.D;
                for (int i = 0; i < L.D / 2; i++) {
                    int32_t ia, ib;
                    vq_rope_pair(L.rope, L.D, i, &ia, &ib);
                    const float a = __ldg(cent + ia), bv = __ldg(cent + ib), c = __ldg(cs + i), n = __ldg(sn + i);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        const float qa = qs[r * qw + ia], qb = qs[r * qw + ib];
                        s[r] = fmaf(a, fmaf(qa, c, qb * n), s[r]);
                        s[r] = fmaf(bv, fmaf(qb, c, -qa * n), s[r]);
                    }
                }
            }
            const float sc = p.cv_scale ? __ldg(p.cv_scale + tok) : 1.0f;
#pragma unroll
            for (int r = 0; r < R; r++) s[r] *= sc;
        }
    };
};

} /* namespace vqkv */

static vq_status fill(vq_ctx *, const vq_encoded_keys *keys, float, vq_cu_sdpa_params *p)
{
    const DLTensor *idx = keys->commvq.idx, *cb = keys->commvq.codebook, *pos = keys->commvq.positions;
    vqkv::CommvqParams &k = vqkv::key_params<vqkv::CommvqParams>(*p);
    k.cv = vq_commvq_layout{(int32_t)vq_dim(idx, 3), (int32_t)vq_dim(cb, 1), (int32_t)p->c.D,
                            (int32_t)vq_dtype_size(vq_dtype_of(idx)),
                            keys->commvq.rope == VQ_ROPE_HALF ? VQ_FMT_ROPE_HALF : VQ_FMT_ROPE_INTERLEAVED};
    k.cv_idx = (const uint8_t *)vq_data(idx);
    k.cv_cb = (const float *)vq_data(cb);
    k.cv_cos = (const float *)vq_data(keys->commvq.cos_freqs);
    k.cv_sin = (const float *)vq_data(keys->commvq.sin_freqs);
    k.cv_pos = (const int32_t *)vq_data(pos);
    k.cv_scale = keys->commvq.scale ? (const float *)vq_data(keys->commvq.scale) : NULL;
    k.cv_pos_bs = pos->ndim == 2 ? p->c.Skv : 0;
    k.cv_P = vq_dim(keys->commvq.cos_freqs, 0);
    return VQ_OK;
}

extern "C" const vq_cu_key_format vq_cu_keys_commvq = {
    VQ_KEYS_COMMVQ, fill, vqkv::kv_launch_plain<vqkv::CommvqKeys::P>, vqkv::kv_launch_enc<vqkv::CommvqKeys::P>,
    false /* positions are indexed by sequence position */, 0, nullptr /* the public codecs write its bytes */};
