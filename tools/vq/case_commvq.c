/* case_commvq.c — CommVQ: R additive full-width codebooks trained (residual
 * k-means) on pre-RoPE calibration keys; the cache stores R u8 indices per
 * token and RoPE is applied at decode. */
#include "cases.h"
#include "tool.h"

enum { COMMVQ_STAGES = 16, COMMVQ_CENTS = 256, COMMVQ_ITERS = 8 };

/* shared: codebook [R, C, D] (residual k-means on pre-RoPE calibration
 * keys); cache: idx [1,H,S,R] u8. */
static void commvq_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t h = case_h(in), s = case_s(in), d = case_d(in);
    c->shared[0] = tool_tensor(TOOL_F32, TOOL_DIMS(COMMVQ_STAGES, COMMVQ_CENTS, d));
    tool_check(ctx, vq_commvq_train(ctx, in->calib_pre, COMMVQ_STAGES, COMMVQ_CENTS, COMMVQ_ITERS, in->seed,
                                     c->shared[0]), "vq_commvq_train");
    c->cache[0] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, COMMVQ_STAGES));
    c->x_hat = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d));
}

static vq_status commvq_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    return vq_commvq_encode(ctx, in->x_pre, c->shared[0], c->cache[0]);
}

static vq_status commvq_decode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const vq_commvq_opts opts = {.rope = VQ_ROPE_HALF};
    return vq_commvq_decode(ctx, c->cache[0], c->shared[0], in->rope_cos, in->rope_sin, in->positions, c->x_hat,
                             &opts);
}

static void commvq_bind(const codec_case *c, const case_input *in, vq_encoded_keys *out)
{
    *out = (vq_encoded_keys){.format = VQ_KEYS_COMMVQ,
                             .commvq = {.idx = c->cache[0], .codebook = c->shared[0], .cos_freqs = in->rope_cos,
                                        .sin_freqs = in->rope_sin, .positions = in->positions,
                                        .rope = VQ_ROPE_HALF}};
}

const codec_case CASE_COMMVQ = {.name = "CommVQ R=16", .detail = "16 additive 256-codebooks, RoPE at decode",
                                .roles = CASE_KEYS, .setup = commvq_setup, .encode = commvq_encode,
                                .decode = commvq_decode, .encode_in_library = 1, .decode_in_library = 1,
                                .bind = commvq_bind};
