/* case_kivi.c — KIVI group-affine caches: keys per channel over groups of
 * 32 tokens, values per token over groups of 32 channels; codes bit-packed
 * along D, scale and zero stored as f16 (as KIVI does). */
#include "cases.h"
#include "tool.h"

enum { KIVI_GROUP = 32 };

/* cache: codes [1,H,S,D*bits/8] u8, scale, zero f16 (keys [1,H,ceil(S/g),D],
 * values [1,H,S,ceil(D/g)]). */
static void kivi_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t h = case_h(in), s = case_s(in), d = case_d(in);
    const int keys = c->variant == CASE_KEYS;
    const int64_t rows = keys ? (s + KIVI_GROUP - 1) / KIVI_GROUP : s;
    const int64_t cols = keys ? d : (d + KIVI_GROUP - 1) / KIVI_GROUP;
    c->cache[0] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, d * c->bits / 8));
    c->cache[1] = tool_tensor(TOOL_F16, TOOL_DIMS(1, h, rows, cols));
    c->cache[2] = tool_tensor(TOOL_F16, TOOL_DIMS(1, h, rows, cols));
    c->x_hat = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d));
}

static vq_status kivi_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    return (c->variant == CASE_KEYS ? vq_kivi_quantize_keys : vq_kivi_quantize_values)(
        ctx, in->x, c->bits, KIVI_GROUP, c->cache[0], c->cache[1], c->cache[2]);
}

static vq_status kivi_decode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    return (c->variant == CASE_KEYS ? vq_kivi_dequantize_keys : vq_kivi_dequantize_values)(
        ctx, c->cache[0], c->cache[1], c->cache[2], c->bits, KIVI_GROUP, c->x_hat);
}

/* Keys only: per-channel groups are the layout vq_fused_sdpa reads. */
static void kivi_bind(const codec_case *c, const case_input *in, vq_encoded_keys *out)
{
    *out = (vq_encoded_keys){.format = VQ_KEYS_KIVI,
                             .kivi = {.codes = c->cache[0], .scale = c->cache[1], .zero = c->cache[2],
                                        .bits = c->bits, .group_size = KIVI_GROUP}};
}

/* Values: per-token groups of channels, the layout vq_encoded_values.kivi reads. */
static void kivi_bind_values(const codec_case *c, const case_input *in, vq_encoded_values *out)
{
    *out = (vq_encoded_values){.format = VQ_VALUES_KIVI,
                               .kivi = {.codes = c->cache[0], .scale = c->cache[1], .zero = c->cache[2],
                                          .bits = c->bits, .group_size = KIVI_GROUP}};
}

#define KIVI_CASE(bits_, role_, what_, detail_)                                                   \
    {.name = "KIVI " #bits_ "-bit " what_, .detail = detail_, .roles = role_, .bits = bits_, .variant = role_, \
     .setup = kivi_setup, .encode = kivi_encode, .decode = kivi_decode, .encode_in_library = 1, .decode_in_library = 1, \
     .bind = role_ == CASE_KEYS ? kivi_bind : NULL, .bind_values = role_ == CASE_VALUES ? kivi_bind_values : NULL}

const codec_case CASE_KIVI2_KEYS = KIVI_CASE(2, CASE_KEYS, "keys", "per-channel g=32 tokens, f16 scale+zero");
const codec_case CASE_KIVI4_KEYS = KIVI_CASE(4, CASE_KEYS, "keys", "per-channel g=32 tokens, f16 scale+zero");
const codec_case CASE_KIVI2_VALUES = KIVI_CASE(2, CASE_VALUES, "values", "per-token g=32 channels, f16 scale+zero");
const codec_case CASE_KIVI4_VALUES = KIVI_CASE(4, CASE_VALUES, "values", "per-token g=32 channels, f16 scale+zero");
