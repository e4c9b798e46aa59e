/* case_rabitq.c — RaBitQ 1-bit keys (signs of the rotated key plus one f32
 * magnitude, L1 or unbiased) and the 4-bit Lloyd-Max codebook values that
 * vq_rabitq_fused_attend pairs with them (nibble-packed, 16 shared f32
 * centroids fitted on calibration values). */
#include "cases.h"
#include "tool.h"

/* cache: bits [1,H,S,D/8] u8, mag [1,H,S] f32; shared: diag [D]. */
static void rabitq_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t h = case_h(in), s = case_s(in), d = case_d(in);
    c->shared[0] = tool_tensor(TOOL_F32, TOOL_DIMS(d));
    (void)vq_random_signs(in->seed ^ 0x7262, d, tool_f32(c->shared[0]));
    c->cache[0] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, d / 8));
    c->cache[1] = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s));
    c->x_hat = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d));
}

static vq_status rabitq_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const vq_rabitq_encode_opts opts = {.mag = (vq_rabitq_mag)c->variant};
    return vq_rabitq_encode(ctx, in->x, c->shared[0], c->cache[0], c->cache[1], &opts);
}

/* x_hat = rot^-1(mag * sign): what the exact RaBitQ score dots the query with. */
static vq_status rabitq_decode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t d = case_d(in), rows = case_h(in) * case_s(in);
    const uint8_t *bits = c->cache[0]->data;
    const float *mag = tool_f32(c->cache[1]);
    float *y = tool_f32(c->x_hat);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < d; j++)
            y[r * d + j] = (bits[r * (d / 8) + j / 8] >> (j % 8) & 1) ? mag[r] : -mag[r];
    return vq_hadamard(ctx, c->x_hat, c->shared[0], true, c->x_hat);
}

static void rabitq_bind(const codec_case *c, const case_input *in, vq_encoded_keys *out)
{
    *out = (vq_encoded_keys){.format = VQ_KEYS_RABITQ,
                             .rabitq = {.bits = c->cache[0], .mag = c->cache[1], .diag = c->shared[0]}};
}

const codec_case CASE_RABITQ_L1 = {.name = "RaBitQ 1-bit L1", .detail = "signs of rot(k), f32 L1 magnitude",
                                   .roles = CASE_KEYS, .bits = 1, .variant = VQ_RABITQ_MAG_L1,
                                   .setup = rabitq_setup, .encode = rabitq_encode, .decode = rabitq_decode,
                                   .encode_in_library = 1, .decode_in_library = 0, .bind = rabitq_bind};
const codec_case CASE_RABITQ_UNBIASED = {
    .name = "RaBitQ 1-bit unbiased", .detail = "signs of rot(k), f32 |y|^2/|y|_1",
    .roles = CASE_KEYS, .bits = 1, .variant = VQ_RABITQ_MAG_UNBIASED, .setup = rabitq_setup,
    .encode = rabitq_encode, .decode = rabitq_decode, .encode_in_library = 1, .decode_in_library = 0,
    .bind = rabitq_bind};

enum { CODEBOOK_CENTS = 16, CODEBOOK_ITERS = 25 };

/* shared: cents [16] f32 fitted on every calibration element; work: idx
 * [1,H,S,D] u8; cache: nibbles [1,H,S,D/2] u8. */
static void codebook_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t h = case_h(in), s = case_s(in), d = case_d(in);
    int64_t n = tool_numel(in->calib);
    DLTensor samples = *in->calib;  /* a 1-D view of the calibration rows */
    samples.ndim = 1;
    samples.shape = &n;
    samples.strides = NULL;
    c->shared[0] = tool_tensor(TOOL_F32, TOOL_DIMS(CODEBOOK_CENTS));
    tool_check(ctx, vq_lloyd_max_fit(ctx, &samples, CODEBOOK_CENTS, CODEBOOK_ITERS, c->shared[0]),
               "vq_lloyd_max_fit");
    c->work[0] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, d));
    c->cache[0] = tool_tensor(TOOL_U8, TOOL_DIMS(1, h, s, d / 2));
    c->x_hat = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d));
}

static vq_status codebook_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const vq_status s = vq_codebook_quantize(ctx, in->x, c->shared[0], c->work[0]);
    return s != VQ_OK ? s : vq_rabitq_pack_values(ctx, c->work[0], c->cache[0]);
}

/* x_hat[j] = cents[nibble j]; low nibble = even element. */
static vq_status codebook_decode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const uint8_t *packed = c->cache[0]->data;
    const float *cents = tool_f32(c->shared[0]);
    float *out = tool_f32(c->x_hat);
    for (int64_t i = 0, n = tool_numel(c->x_hat); i < n; i++)
        out[i] = cents[(packed[i / 2] >> (4 * (i % 2))) & 15];
    return VQ_OK;
}

static void codebook_bind_values(const codec_case *c, const case_input *in, vq_encoded_values *out)
{
    *out = (vq_encoded_values){.format = VQ_VALUES_CODEBOOK,
                               .codebook = {.idx = c->cache[0], .cents = c->shared[0], .scale = NULL}};
}

const codec_case CASE_CODEBOOK4_VALUES = {
    .name = "Codebook 4-bit", .detail = "16 Lloyd-Max centroids fitted, nibbles", .roles = CASE_VALUES,
    .bits = 4, .setup = codebook_setup, .encode = codebook_encode, .decode = codebook_decode,
    .encode_in_library = 1, .decode_in_library = 0, .bind_values = codebook_bind_values};
