/* case_vecinfer.c — VecInfer product VQ: keys smoothed channel-wise, 4-dim
 * subvectors, 256 centroids each (8 bits per 4 elements). The codebook is
 * trained on calibration keys, not on the cache itself. */
#include "cases.h"
#include "tool.h"

enum { VECINFER_SUB_DIM = 4, VECINFER_CENTS = 256, VECINFER_ITERS = 10 };

/* shared: smooth [D], codebook [M, C, 4] (k-means per subspace on smoothed
 * calibration keys); cache: idx [1,H,S,M] u8. */
static void vecinfer_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t h = case_h(in), s = case_s(in), d = case_d(in), m_count = d / VECINFER_SUB_DIM;
    const int64_t n = in->calib->shape[0];
    c->shared[0] = tool_tensor(TOOL_F32, TOOL_DIMS(d));
    tool_check(ctx, vq_vecinfer_smooth_factors(ctx, in->calib, c->shared[0]), "vq_vecinfer_smooth_factors");
    c->shared[1] = tool_tensor(TOOL_F32, TOOL_DIMS(m_count, VECINFER_CENTS, VECINFER_SUB_DIM));
    DLTensor *samples = tool_tensor(TOOL_F32, TOOL_DIMS(n, VECINFER_SUB_DIM));
    DLTensor *cents = tool_tensor(TOOL_F32, TOOL_DIMS(VECINFER_CENTS, VECINFER_SUB_DIM));
    const float *smooth = tool_f32(c->shared[0]), *calib = tool_f32(in->calib);
    for (int64_t m = 0; m < m_count; m++) {
        for (int64_t r = 0; r < n; r++)
            for (int j = 0; j < VECINFER_SUB_DIM; j++) {
                const int64_t ch = m * VECINFER_SUB_DIM + j;
                tool_f32(samples)[r * VECINFER_SUB_DIM + j] = calib[r * d + ch] / smooth[ch];
            }
        tool_check(ctx, vq_kmeans(ctx, samples, VECINFER_CENTS, VECINFER_ITERS, in->seed + (uint64_t)m, cents), "vq_kmeans");
        for (int64_t i = 0; i < VECINFER_CENTS * VECINFER_SUB_DIM; i++)
            tool_f32(c->shared[1])[m * VECINFER_CENTS * VECINFER_SUB_DIM + i] = tool_f32(cents)[i];
    }
    tool_tensor_free(samples);
    tool_tensor_free(cents);
    c->cache[0] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, m_count));
    c->x_hat = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d));
}

static vq_status vecinfer_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    return vq_vecinfer_quantize(ctx, in->x, c->shared[1], c->shared[0], (int)c->cache[0]->shape[3], c->cache[0]);
}

static vq_status vecinfer_decode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    return vq_vecinfer_dequant(ctx, c->cache[0], c->shared[1], c->shared[0], c->x_hat);
}

static void vecinfer_bind(const codec_case *c, const case_input *in, vq_encoded_keys *out)
{
    *out = (vq_encoded_keys){.format = VQ_KEYS_VECINFER,
                             .vecinfer = {.idx = c->cache[0], .codebook = c->shared[1], .smooth = c->shared[0]}};
}

const codec_case CASE_VECINFER = {.name = "VecInfer VECINFER", .detail = "smoothed, 4-dim subvectors x 256 centroids",
                            .roles = CASE_KEYS, .setup = vecinfer_setup, .encode = vecinfer_encode, .decode = vecinfer_decode,
                            .encode_in_library = 1, .decode_in_library = 1, .bind = vecinfer_bind};
