/* decode_loop.c — a decode loop over the KV cache: two sequences of
 * different lengths, every layer appends its token's keys and values and
 * attends over everything cached, then the next step. The "model" is a
 * stand-in that makes deterministic K, V, Q; a real one computes them from
 * the hidden state. Public API only; built and run by CI (ctest
 * example_decode_loop). The loop itself is the README's example. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "veloxquant.h"

enum { LAYERS = 4, HKV = 2, HQ = 8, D = 64, BATCH = 2, STEPS = 300 };

/* A host f32 tensor [a, b, c, d] over data (the caller owns both). */
static DLTensor tensor4(float *data, int64_t *shape)
{
    return (DLTensor){.data = data, .device = {kDLCPU, 0}, .ndim = 4, .dtype = {kDLFloat, 32, 1}, .shape = shape};
}

/* Stand-in for a transformer layer's projections: x[i] = sin(seed * i + t). */
static void fake_projection(float *x, int64_t n, int layer, int step, float seed)
{
    for (int64_t i = 0; i < n; i++) x[i] = sinf(seed * (float)(i + 1) + 0.1f * (float)(step + layer));
}

static int check(vq_ctx *ctx, vq_status s, const char *what)
{
    if (s == VQ_OK) return 0;
    fprintf(stderr, "%s: %s: %s\n", what, vq_status_string(s), vq_ctx_last_error(ctx));
    exit(1);
}

int main(void)
{
    static float k[BATCH * HKV * D], v[BATCH * HKV * D], q[BATCH * HQ * D], o[BATCH * HQ * D];
    int64_t kv_shape[4] = {BATCH, HKV, 1, D}, q_shape[4] = {BATCH, HQ, 1, D};
    DLTensor K = tensor4(k, kv_shape), V = tensor4(v, kv_shape), Q = tensor4(q, q_shape), O = tensor4(o, q_shape);
    vq_ctx *ctx = NULL;
    check(NULL, vq_ctx_create(NULL, &ctx), "vq_ctx_create");

    /* ---- the loop (README) ---- */
    const int keep_f16[2] = {0, LAYERS - 1};                /* first and last layer stay f16 */
    vq_cache_config cfg = {.n_layers = LAYERS, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D,
                           .preset = "kivi2", .residual_tokens = 32, .capacity_pages = 8, .grow_pages = 8,
                           .f16_layers = keep_f16, .n_f16_layers = 2};
    vq_cache *cache;
    check(ctx, vq_cache_create(ctx, &cfg, &cache), "vq_cache_create");
    int64_t seq[BATCH];
    for (int b = 0; b < BATCH; b++) check(ctx, vq_cache_seq_add(cache, &seq[b]), "vq_cache_seq_add");
    for (int step = 0; step < STEPS; step++) {
        for (int l = 0; l < LAYERS; l++) {
            fake_projection(k, BATCH * HKV * D, l, step, 0.37f); /* model: k, v, q of this token */
            fake_projection(v, BATCH * HKV * D, l, step, 0.71f);
            fake_projection(q, BATCH * HQ * D, l, step, 0.53f);
            const int n = step < 100 ? 1 : BATCH; /* sequence 1 joins at step 100 */
            kv_shape[0] = q_shape[0] = n;
            check(ctx, vq_cache_append(cache, l, n, seq, &K, &V, NULL), "vq_cache_append");
            check(ctx, vq_cache_attend(cache, l, n, seq, &Q, &O, NULL), "vq_cache_attend");
            /* model: o feeds the layer's output projection */
        }
    }
    /* ---- end of the loop ---- */

    vq_cache_memory_report mem;
    check(ctx, vq_cache_memory(cache, &mem), "vq_cache_memory");
    printf("%lld tokens cached (sequence lengths %lld and %lld), %.2f bits per element, %lld bytes in all\n",
           (long long)mem.tokens, (long long)vq_cache_seq_length(cache, seq[0], 0),
           (long long)vq_cache_seq_length(cache, seq[1], 0), mem.bits_per_element, (long long)mem.total_bytes);
    printf("o[0..3] = %.4f %.4f %.4f %.4f\n", o[0], o[1], o[2], o[3]);
    vq_cache_free(cache);
    vq_ctx_free(ctx);
    return 0;
}
