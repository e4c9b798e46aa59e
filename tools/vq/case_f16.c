/* case_f16.c — the uncompressed reference: the cache stored as f16. */
#include "cases.h"
#include "tool.h"

static void f16_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    c->cache[0] = tool_tensor(TOOL_F16, TOOL_DIMS(1, case_h(in), case_s(in), case_d(in)));
    c->x_hat = tool_tensor(TOOL_F32, TOOL_DIMS(1, case_h(in), case_s(in), case_d(in)));
}

static vq_status f16_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    uint16_t *out = c->cache[0]->data;
    const float *x = tool_f32(in->x);
    for (int64_t i = 0, n = tool_numel(in->x); i < n; i++) out[i] = vq_f32_to_f16(x[i]);
    return VQ_OK;
}

static vq_status f16_decode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const uint16_t *h = c->cache[0]->data;
    float *out = tool_f32(c->x_hat);
    for (int64_t i = 0, n = tool_numel(c->x_hat); i < n; i++) out[i] = vq_f16_to_f32(h[i]);
    return VQ_OK;
}

static void f16_bind(const codec_case *c, const case_input *in, vq_encoded_keys *out)
{
    *out = (vq_encoded_keys){.format = VQ_KEYS_F16, .f16 = {.keys = c->cache[0]}};
}

static void f16_bind_values(const codec_case *c, const case_input *in, vq_encoded_values *out)
{
    *out = vq_f16_values(c->cache[0]);
}

const codec_case CASE_F16_KEYS = {.name = "f16", .detail = "uncompressed reference", .roles = CASE_KEYS,
                                  .setup = f16_setup, .encode = f16_encode, .decode = f16_decode,
                                  .bind = f16_bind};
const codec_case CASE_F16_VALUES = {.name = "f16", .detail = "uncompressed reference", .roles = CASE_VALUES,
                                    .setup = f16_setup, .encode = f16_encode, .decode = f16_decode,
                                    .bind_values = f16_bind_values};
