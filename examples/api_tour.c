/* api_tour.c — the C API tour of the README, whole: a context,
 * DLTensors over your own memory, a KIVI 4-bit cache, attention straight over
 * the compressed bytes, and error handling. It checks the fused attention
 * against attention over the dequantized cache (float64 here). Exit 0 = ok.
 * CI builds and runs it as example_api_tour, and tests/cli/test_install.sh builds
 * it against an installed copy (CMake package and pkg-config). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <veloxquant.h>

enum { B = 1, H = 2, S = 100, D = 128, G = 32, BITS = 4, GK = (S + G - 1) / G };

/* A compact CPU DLTensor over caller-owned memory (strides NULL = row-major). */
static DLTensor tensor(void *data, DLDataType dtype, int ndim, int64_t *shape)
{
    return (DLTensor){.data = data, .device = {kDLCPU, 0}, .ndim = ndim, .dtype = dtype, .shape = shape};
}

static const DLDataType F32 = {kDLFloat, 32, 1}, F16 = {kDLFloat, 16, 1}, U8 = {kDLUInt, 8, 1};

static float k[B * H * S * D], v[B * H * S * D], q[B * H * D], out[B * H * D];
static float k_hat[B * H * S * D], v_hat[B * H * S * D];
static uint8_t k_codes[B * H * S * D * BITS / 8], v_codes[B * H * S * D * BITS / 8];
static uint16_t k_scale[B * H * GK * D], k_zero[B * H * GK * D];        /* f16 */
static uint16_t v_scale[B * H * S * (D / G)], v_zero[B * H * S * (D / G)]; /* f16 */

/* |out - softmax(q.k_hat / sqrt(D)) v_hat| / |reference|, float64, per head. */
static double attention_error(void)
{
    double num = 0, den = 0;
    for (int h = 0; h < H; h++) {
        double p[S], m = -INFINITY, sum = 0;
        for (int t = 0; t < S; t++) {
            double dot = 0;
            for (int j = 0; j < D; j++) dot += (double)q[h * D + j] * k_hat[(h * S + t) * D + j];
            p[t] = dot / sqrt((double)D);
            m = fmax(m, p[t]);
        }
        for (int t = 0; t < S; t++) sum += p[t] = exp(p[t] - m);
        for (int j = 0; j < D; j++) {
            double ref = 0;
            for (int t = 0; t < S; t++) ref += p[t] / sum * v_hat[(h * S + t) * D + j];
            num += (out[h * D + j] - ref) * (out[h * D + j] - ref);
            den += ref * ref;
        }
    }
    return sqrt(num / den);
}

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        const vq_status s_ = (call);                                                                 \
        if (s_ != VQ_OK) {                                                                           \
            fprintf(stderr, "api_tour: %s: %s: %s\n", #call, vq_status_string(s_), vq_ctx_last_error(ctx)); \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

int main(void)
{
    char header_version[32];
    snprintf(header_version, sizeof header_version, "%d.%d.%d", VQ_VERSION_MAJOR, VQ_VERSION_MINOR,
             VQ_VERSION_PATCH);
    if (strcmp(header_version, vq_version_string()) != 0) {
        fprintf(stderr, "api_tour: header %s but library %s\n", header_version, vq_version_string());
        return 1;
    }

    /* 1. A context: CPU, all cores, best instruction set (VQ_ISA caps it). */
    vq_ctx *ctx = NULL;
    if (vq_ctx_create(NULL, &ctx) != VQ_OK) { /* no ctx to hold the message: vq_last_error() has it */
        fprintf(stderr, "%s\n", vq_last_error());
        return 1;
    }

    /* 2. Tensors are DLTensors over your memory. */
    vq_rng rng;
    vq_rng_seed(&rng, 7);
    for (int i = 0; i < B * H * S * D; i++) k[i] = (float)vq_rng_normal(&rng), v[i] = (float)vq_rng_normal(&rng);
    for (int i = 0; i < B * H * D; i++) q[i] = (float)vq_rng_normal(&rng);
    int64_t kv_shape[] = {B, H, S, D}, q_shape[] = {B, H, 1, D}, codes_shape[] = {B, H, S, D * BITS / 8};
    int64_t ks_shape[] = {B, H, GK, D}, vs_shape[] = {B, H, S, D / G};
    DLTensor K = tensor(k, F32, 4, kv_shape), V = tensor(v, F32, 4, kv_shape);
    DLTensor Q = tensor(q, F32, 4, q_shape), O = tensor(out, F32, 4, q_shape);
    DLTensor KC = tensor(k_codes, U8, 4, codes_shape), VC = tensor(v_codes, U8, 4, codes_shape);
    DLTensor KS = tensor(k_scale, F16, 4, ks_shape), KZ = tensor(k_zero, F16, 4, ks_shape);
    DLTensor VS = tensor(v_scale, F16, 4, vs_shape), VZ = tensor(v_zero, F16, 4, vs_shape);

    /* 3. KIVI 4-bit: keys per channel over groups of G tokens, values per
     *    token over groups of G channels; codes packed along D, f16 scales. */
    CHECK(vq_kivi_quantize_keys(ctx, &K, BITS, G, &KC, &KS, &KZ));
    CHECK(vq_kivi_quantize_values(ctx, &V, BITS, G, &VC, &VS, &VZ));

    /* 4. Attention straight over the compressed cache (decode: one query per head). */
    const vq_scalar_attend_opts opts = {.bits = BITS};
    CHECK(vq_kivi_fused_attend(ctx, &Q, &KC, &KS, &KZ, &VC, &VS, &VZ, G, 1.0f / sqrtf(D), 0, &O,
                                        &opts));

    /* The same attention over the dequantized cache must agree. */
    DLTensor KH = tensor(k_hat, F32, 4, kv_shape), VH = tensor(v_hat, F32, 4, kv_shape);
    CHECK(vq_kivi_dequantize_keys(ctx, &KC, &KS, &KZ, BITS, G, &KH));
    CHECK(vq_kivi_dequantize_values(ctx, &VC, &VS, &VZ, BITS, G, &VH));
    const double err = attention_error();

    /* 5. Errors: a status, a sentence naming the argument, nothing written. */
    const vq_status s = vq_kivi_quantize_keys(ctx, &K, 3, G, &KC, &KS, &KZ);  /* 3-bit cannot be packed */
    printf("api_tour: bad call -> %s: %s\n", vq_status_string(s), vq_ctx_last_error(ctx));

    printf("api_tour: veloxquant %s, CPU kernels %s: fused vs dequantized attention rel err %.2e\n",
           vq_version_string(), vq_ctx_isa(ctx), err);
    vq_ctx_free(ctx);
    /* the default int8 key scores (vq_key_scores) keep it within ~1%; float key scores within 1e-4 */
    const int ok = err < 5e-2 && s == VQ_ERR_INVALID_ARGUMENT;
    printf("api_tour: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
