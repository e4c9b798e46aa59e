/* case_turbo.c — TurboQuant: random-sign Hadamard rotation, per-vector f32
 * scale, Lloyd-Max codes bit-packed to `bits` per element (u32 streams, the
 * form vq_fused_sdpa reads); and the two-stage residual (RVQ) variant. */
#include "cases.h"
#include "tool.h"

/* Seeded ±1 diagonal [D]: shared, regenerable from the seed. */
static DLTensor *signs(const case_input *in)
{
    DLTensor *diag = tool_tensor(TOOL_F32, TOOL_DIMS(case_d(in)));
    (void)vq_random_signs(in->seed ^ 0x7475, case_d(in), tool_f32(diag));
    return diag;
}

static int64_t packed_words(int64_t d, int bits) { return (d * bits + 31) / 32; }

/* work: idx [1,H,S,D] u8; cache: packed [1,H,S,W] u32, scale [1,H,S] f32. */
static void turbo_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t h = case_h(in), s = case_s(in), d = case_d(in);
    c->shared[0] = signs(in);
    c->work[0] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, d));
    c->cache[0] = tool_tensor(TOOL_U32, TOOL_DIMS(1, h, s, packed_words(d, c->bits)));
    c->cache[1] = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s));
    c->x_hat = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d));
}

static vq_status turbo_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const vq_turboquant_opts opts = {.norm_correct = c->variant != 0};
    const vq_status s = vq_turboquant_hadamard_quantize(ctx, in->x, c->shared[0], c->bits, c->work[0],
                                                         c->cache[1], &opts);
    return s != VQ_OK ? s : vq_bit_pack(ctx, c->work[0], c->bits, c->cache[0]);
}

static vq_status turbo_decode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const vq_status s = vq_bit_unpack(ctx, c->cache[0], c->bits, case_d(in), c->work[0]);
    return s != VQ_OK ? s
                      : vq_turboquant_hadamard_dequantize(ctx, c->work[0], c->cache[1], c->shared[0], c->bits,
                                                          c->x_hat);
}

static void turbo_bind(const codec_case *c, const case_input *in, vq_encoded_keys *out)
{
    *out = (vq_encoded_keys){.format = VQ_KEYS_TURBO,
                             .turbo = {.idx = c->cache[0], .scale = c->cache[1], .diag = c->shared[0],
                                       .bits = c->bits}};
}

static void turbo_bind_values(const codec_case *c, const case_input *in, vq_encoded_values *out)
{
    *out = (vq_encoded_values){.format = VQ_VALUES_TURBO,
                               .turbo = {.idx = c->cache[0], .scale = c->cache[1], .diag = c->shared[0],
                                         .bits = c->bits}};
}

#define TURBO_CASE(name_, bits_, nc_, detail_)                                                      \
    {.name = name_, .detail = detail_, .roles = CASE_KEYS | CASE_VALUES, .bits = bits_, .variant = nc_, \
     .setup = turbo_setup, .encode = turbo_encode, .decode = turbo_decode, .encode_in_library = 1,  \
     .decode_in_library = 1, .bind = turbo_bind, .bind_values = turbo_bind_values}

const codec_case CASE_TURBO2 = TURBO_CASE("TurboQuant 2-bit", 2, 0, "Hadamard + Lloyd-Max, f32 scale");
const codec_case CASE_TURBO3 = TURBO_CASE("TurboQuant 3-bit", 3, 0, "Hadamard + Lloyd-Max, f32 scale");
const codec_case CASE_TURBO4 = TURBO_CASE("TurboQuant 4-bit", 4, 0, "Hadamard + Lloyd-Max, f32 scale");
const codec_case CASE_TURBO2_NC =
    TURBO_CASE("TurboQuant 2-bit nc", 2, 1, "as 2-bit, norm-corrected scale");

/* RVQ, b1 = bits, b2 = variant. work: idx1, idx2 [1,H,S,D] u8; cache:
 * packed1, scale1, packed2, scale2. */
static void rvq_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t h = case_h(in), s = case_s(in), d = case_d(in);
    c->shared[0] = signs(in);
    c->work[0] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, d));
    c->work[1] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, d));
    c->cache[0] = tool_tensor(TOOL_U32, TOOL_DIMS(1, h, s, packed_words(d, c->bits)));
    c->cache[1] = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s));
    c->cache[2] = tool_tensor(TOOL_U32, TOOL_DIMS(1, h, s, packed_words(d, c->variant)));
    c->cache[3] = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s));
    c->x_hat = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d));
}

static vq_status rvq_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    vq_status s = vq_turboquant_rvq_encode(ctx, in->x, c->shared[0], c->bits, c->variant, c->work[0],
                                           c->cache[1], c->work[1], c->cache[3]);
    if (s == VQ_OK) s = vq_bit_pack(ctx, c->work[0], c->bits, c->cache[0]);
    if (s == VQ_OK) s = vq_bit_pack(ctx, c->work[1], c->variant, c->cache[2]);
    return s;
}

static vq_status rvq_decode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    vq_status s = vq_bit_unpack(ctx, c->cache[0], c->bits, case_d(in), c->work[0]);
    if (s == VQ_OK) s = vq_bit_unpack(ctx, c->cache[2], c->variant, case_d(in), c->work[1]);
    if (s == VQ_OK)
        s = vq_turboquant_rvq_decode(ctx, c->work[0], c->cache[1], c->work[1], c->cache[3], c->shared[0],
                                     c->bits, c->variant, c->x_hat);
    return s;
}

static void rvq_bind(const codec_case *c, const case_input *in, vq_encoded_keys *out)
{
    *out = (vq_encoded_keys){.format = VQ_KEYS_TURBO_RVQ,
                             .rvq = {.idx1 = c->cache[0], .scale1 = c->cache[1], .idx2 = c->cache[2],
                                     .scale2 = c->cache[3], .diag = c->shared[0], .b1 = c->bits,
                                     .b2 = c->variant}};
}

const codec_case CASE_RVQ22 = {.name = "TurboQuant RVQ 2+2", .detail = "two Hadamard stages, 2 f32 scales",
                               .roles = CASE_KEYS | CASE_VALUES, .bits = 2, .variant = 2, .setup = rvq_setup,
                               .encode = rvq_encode, .decode = rvq_decode, .encode_in_library = 1,
                               .decode_in_library = 1, .bind = rvq_bind};
