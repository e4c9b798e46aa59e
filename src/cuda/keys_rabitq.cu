/* keys_rabitq.cu — RaBitQ keys on CUDA, two scores of the same tensors: the
 * exact one (VQ_KEYS_RABITQ) and the cache's Hamming estimate
 * (VQ_CUDA_KEYS_RABITQ_HAMMING, attention/attn_cuda.h). For each: the decode
 * skeleton's key policy, the format's fields of vq_cu_sdpa_params and their
 * fill from the tensors, the policy's template instances over every value
 * format, and the descriptor the registry lists (keys_registry.h). */
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

/* ---- VQ_CUDA_KEYS_RABITQ_HAMMING: s = (D - 2 popcount(sign(q') XOR bits)) *
 * (||q'||_1 / D) * mag + cnst for the prepared row q' = rot(q) * scale *
 * log2(e), as the CPU cache's Hamming keys (cache/cache_formats.c): the
 * signs of q' approximate it by its mean magnitude. prepare() packs each
 * row's signs into words (bit c % 32 of word c / 32 is q'_c >= 0, the key
 * bits' order) ---- */
struct RabitqHammingKeys {
    template <int W, int R>
    struct P {
        static constexpr int NW = W / 32; /* sign words of a row */
        const RabitqParams &p;
        uint32_t (*qb)[NW];
        float *ql1;
        int D;
        __device__ P(const vq_cu_sdpa_params &pp, int, int) : p(key_params<RabitqParams>(pp)), D(pp.c.D)
        {
            __shared__ uint32_t bits[R][NW];
            __shared__ float l1[R];
            qb = bits;
            ql1 = l1;
        }
        __device__ void prepare(float *qs, int qw, const Rows<R> &)
        {
            const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
            for (int r = warp; r < R; r += kWarps) {
                float a = 0.0f;
                for (int w = 0; w < NW; w++) {
                    const int c = 32 * w + lane;
                    const float x = c < D ? qs[r * qw + c] : 0.0f;
                    a += fabsf(x);
                    const uint32_t word = __ballot_sync(0xffffffffu, c < D && x >= 0.0f);
                    if (lane == 0) qb[r][w] = word;
                }
                a = warp_sum(a);
                if (lane == 0) ql1[r] = a / (float)D;
            }
        }
        __device__ void score(int64_t tok, int, const float *, int, float (&s)[R]) const
        {
            const uint8_t *row = p.sign_bits + tok * (D / 8);
            int ham[R];
#pragma unroll
            for (int r = 0; r < R; r++) ham[r] = 0;
            if (D % 32 == 0) { /* whole words (the rows are 4-byte aligned: fill) */
#pragma unroll
                for (int w = 0; w < NW; w++) {
                    if (32 * w >= D) break;
                    const uint32_t k = __ldg((const uint32_t *)row + w);
#pragma unroll
                    for (int r = 0; r < R; r++) ham[r] += __popc(qb[r][w] ^ k);
                }
            } else {
                for (int c8 = 0; c8 < D / 8; c8++) {
                    const uint32_t k = __ldg(row + c8);
#pragma unroll
                    for (int r = 0; r < R; r++) ham[r] += __popc(((qb[r][c8 / 4] >> (8 * (c8 % 4))) ^ k) & 0xFFu);
                }
            }
            const float mag = __ldg(p.mag + tok), cn = p.cnst ? __ldg(p.cnst + tok) * kLog2e : 0.0f;
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = fmaf((float)(D - 2 * ham[r]) * ql1[r], mag, cn);
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

/* The same tensors and query rotation as the exact score; the sign words
 * are read 4 bytes at a time. */
static vq_status fill_hamming(vq_ctx *ctx, const vq_encoded_keys *keys, float scale, vq_cu_sdpa_params *p)
{
    const DLTensor *vec[] = {keys->rabitq.bits};
    static const char *const names[] = {"keys.rabitq.bits"};
    VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 1));
    return fill(ctx, keys, scale, p);
}

extern "C" const vq_cu_key_format vq_cu_keys_rabitq = {
    VQ_KEYS_RABITQ, fill, vqkv::kv_launch_plain<vqkv::RabitqKeys::P>, vqkv::kv_launch_enc<vqkv::RabitqKeys::P>, true,
    0, nullptr /* the public codecs write its bytes */};

extern "C" const vq_cu_key_format vq_cu_keys_rabitq_hamming = {
    VQ_CU_SDPA_RABITQ_HAMMING, fill_hamming, vqkv::kv_launch_plain<vqkv::RabitqHammingKeys::P>,
    vqkv::kv_launch_enc<vqkv::RabitqHammingKeys::P>, true, 0, nullptr /* the public codecs write its bytes */};
