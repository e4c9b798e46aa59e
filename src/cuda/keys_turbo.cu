/* keys_turbo.cu — TurboQuant keys, one stage (VQ_KEYS_TURBO) or two
 * (VQ_KEYS_TURBO_RVQ) on CUDA: the decode skeleton's key policy, the format's
 * fields of vq_cu_sdpa_params and their fill from the tensors, the policy's
 * template instances over every value format, and the descriptor the registry
 * lists (keys_registry.h). */
#include "cuda/kv_keys.cuh"

namespace vqkv {

/* The stages (n_stages 1 or 2); the rotation's diagonal is the query
 * prep's (q_diag). */
struct TurboParams {
    int n_stages;
    vq_cu_sdpa_stage stage[2];
};

/* ---- VQ_KEYS_TURBO (1 stage) and VQ_KEYS_TURBO_RVQ (2; p.n_stages at run time): y_hat =
 * sum_st scale_st[t] * cents_st[code_st]; q . y_hat = sum_st scale_st (q . cents_st[codes]) ---- */

struct TurboKeys {
    static constexpr int NST = 2; /* at most; p.n_stages (1 or 2) at run time */
    template <int W, int R>
    struct P {
        const TurboParams &p;
        float (*cents)[256];
        int D;
        __device__ P(const vq_cu_sdpa_params &pp, int, int) : p(key_params<TurboParams>(pp)), D(pp.c.D)
        {
            __shared__ float tab[NST][256];
            cents = tab;
        }
        __device__ void prepare(float *, int, const Rows<R> &)
        {
            for (int i = threadIdx.x; i < NST * 256; i += kThreads)
                cents[i / 256][i % 256] = i / 256 < p.n_stages ? p.stage[i / 256].cents[i % 256] : 0.0f;
        }
        __device__ void score(int64_t tok, int, const float *qs, int qw, float (&s)[R]) const
        {
            zero(s);
#pragma unroll
            for (int st = 0; st < NST; st++) {
                if (st >= p.n_stages) break;
                const vq_cu_sdpa_stage &sg = p.stage[st];
                const int bits = sg.bits;
                const uint32_t mask = (1u << bits) - 1u;
                const int step = sg.packed ? bits : 8; /* bits between codes in the 64-bit window */
                float d0[R], d1[R];
                zero(d0);
                zero(d1);
#pragma unroll
                for (int c = 0; c < W; c += 8) {
                    if (c >= D) break;
                    const uint64_t v = stage_codes8(sg, tok, c);
                    float kf[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) kf[j] = cents[st][(uint32_t)(v >> (j * step)) & mask];
                    if ((c / 8) % 2) dot8(qs, qw, c, kf, d1);
                    else dot8(qs, qw, c, kf, d0);
                }
                const float sc = stage_scale(sg, tok);
#pragma unroll
                for (int r = 0; r < R; r++) s[r] = fmaf(d0[r] + d1[r], sc, s[r]);
            }
        }
    };
};

} /* namespace vqkv */

/* One stage (VQ_KEYS_TURBO) or two (VQ_KEYS_TURBO_RVQ). */
static vq_status fill(vq_ctx *ctx, const vq_encoded_keys *keys, float, vq_cu_sdpa_params *p)
{
    const bool rvq = keys->format == VQ_KEYS_TURBO_RVQ;
    const DLTensor *vec[] = {rvq ? keys->rvq.idx1 : keys->turbo.idx, rvq ? keys->rvq.idx2 : NULL};
    const char *const names[] = {rvq ? "keys.rvq.idx1" : "keys.turbo.idx", "keys.rvq.idx2"};
    VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 2));
    vqkv::TurboParams &k = vqkv::key_params<vqkv::TurboParams>(*p);
    const DLTensor *diag = rvq ? keys->rvq.diag : keys->turbo.diag;
    p->q_prep = VQ_CU_QPREP_ROTATE;
    p->q_diag = diag ? (const float *)vq_data(diag) : NULL;
    k.n_stages = rvq ? 2 : 1;
    if (rvq) {
        vq_cu_fill_stage(keys->rvq.idx1, keys->rvq.scale1, keys->rvq.b1, p->c.D, &k.stage[0]);
        vq_cu_fill_stage(keys->rvq.idx2, keys->rvq.scale2, keys->rvq.b2, p->c.D, &k.stage[1]);
    } else {
        vq_cu_fill_stage(keys->turbo.idx, keys->turbo.scale, keys->turbo.bits, p->c.D, &k.stage[0]);
    }
    return VQ_OK;
}

extern "C" const vq_cu_key_format vq_cu_keys_turbo = {
    VQ_KEYS_TURBO, fill, vqkv::kv_launch_plain<vqkv::TurboKeys::P>, vqkv::kv_launch_enc<vqkv::TurboKeys::P>,
    true, 0, nullptr /* the public codecs write its bytes */};

extern "C" const vq_cu_key_format vq_cu_keys_turbo_rvq = {
    VQ_KEYS_TURBO_RVQ, fill, vqkv::kv_launch_plain<vqkv::TurboKeys::P>, vqkv::kv_launch_enc<vqkv::TurboKeys::P>,
    true, 0, nullptr /* the public codecs write its bytes */};
