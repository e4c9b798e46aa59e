/* test_cache_presets.c — the presets named by what they buy (header,
 * "Presets"): each resolves to the methods, sink, transforms and window the
 * header lists (written out here, not read from the library's table); the
 * bits it lists are what vq_cache_memory counts for one 2048-token sequence
 * at head_dim 64; what the caller sets stays the caller's; method presets
 * set nothing beside their methods; a bad name is refused naming it and the
 * presets. */
#include <math.h>
#include <string.h>

#include "harness.h"

enum { L = 2, HKV = 1, HQ = 3, D = 64, N = 2048 };

/* What the header says each preset sets, at D = 64. */
typedef struct expect {
    const char *name;
    vq_key_method km;
    int kbits, kbits2, kgroup, wide;
    int vbits;
    int residual;
    vq_cache_window window;
    int window_bits;
} expect;

static const expect named[] = {
    {"quality-4bit", VQ_KEY_KIVI, 4, 0, 128, 0, 3, 0, VQ_WINDOW_TURBO8, 0},
    {"balanced-3bit", VQ_KEY_KIVI_MIX, 2, 4, 128, 24, 2, 64, VQ_WINDOW_TURBO8, 0},
    {"compact-2.5bit", VQ_KEY_KIVI_MIX, 2, 4, 128, 8, 2, 0, VQ_WINDOW_TURBO, 6},
};

static const vq_cache_preset_info *info_of(const char *name)
{
    for (int i = 0; i < vq_cache_preset_count(); i++)
        if (strcmp(vq_cache_preset(i)->name, name) == 0) return vq_cache_preset(i);
    return NULL;
}

static vq_cache *create(vq_ctx *ctx, const char *preset, int sink, int residual, const vq_cache_transforms *xf)
{
    const vq_cache_config cfg = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D,
                                 .capacity_pages = 12, .max_sequences = 2, .preset = preset, .sink_tokens = sink,
                                 .residual_tokens = residual, .transforms = xf};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    return c;
}

/* Every named preset: listed first, its config and transforms as the
 * header says, and 2048 tokens (fitted from their queries) at its bits. */
static void test_named(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 7);
    DLTensor *k = vt_new(VT_F32, VT_DIMS(1, HKV, N, D)), *v = vt_like(k, VT_F32);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(1, HQ, N, D));
    vt_fill_keys(k, &rng, 2, 3.0), vt_fill_normal(v, &rng, 0, 1), vt_fill_normal(q, &rng, 0, 1);
    for (int i = 0; i < (int)(sizeof named / sizeof named[0]); i++) {
        const expect *e = &named[i];
        const vq_cache_preset_info *p = info_of(e->name);
        VT_CHECK(p != NULL && p == vq_cache_preset(i), "%s: not listed first, in order", e->name);
        if (p == NULL) continue;
        VT_CHECK(p->recipe && p->sink_tokens == 4 && p->transforms.center_keys && p->transforms.center_values &&
                     p->transforms.smooth && !p->transforms.key_mean && !p->needs_tables,
                 "%s: sink and transforms", e->name);
        vq_cache *c = create(ctx, e->name, 0, 0, NULL);
        if (c == NULL) continue;
        vq_cache_config got;
        VT_OK(ctx, vq_cache_get_config(c, &got));
        VT_CHECK(got.sink_tokens == 4 && got.residual_tokens == e->residual && got.window == e->window &&
                     got.window_bits == e->window_bits && p->residual_tokens == e->residual &&
                     p->window == e->window && p->window_bits == e->window_bits,
                 "%s: sink %d, R %d, window %d/%d", e->name, got.sink_tokens, got.residual_tokens, (int)got.window,
                 got.window_bits);
        for (int l = 0; l < L; l++) {
            vq_cache_layer_config lc;
            vq_cache_transforms xf;
            VT_OK(ctx, vq_cache_get_layer_config(c, l, &lc));
            VT_OK(ctx, vq_cache_get_transforms(c, 0, l, &xf, NULL, NULL, NULL));
            VT_CHECK(lc.keys.method == e->km && lc.keys.bits == e->kbits &&
                         (e->km != VQ_KEY_KIVI_MIX || (lc.keys.bits2 == e->kbits2 && lc.keys.wide_channels == e->wide)) &&
                         lc.keys.group_size == e->kgroup && lc.values.method == VQ_VALUE_TURBO &&
                         lc.values.bits == e->vbits && lc.values.scale_f16,
                     "%s layer %d: keys %d/%d/%d g%d w%d, values %d/%d", e->name, l, (int)lc.keys.method, lc.keys.bits,
                     lc.keys.bits2, lc.keys.group_size, lc.keys.wide_channels, (int)lc.values.method, lc.values.bits);
            VT_CHECK(xf.center_keys && xf.center_values && xf.smooth, "%s layer %d: transforms", e->name, l);
        }
        int64_t id;
        VT_OK(ctx, vq_cache_seq_add(c, &id));
        for (int l = 0; l < L; l++) {
            VT_OK(ctx, vq_cache_fit_transforms(c, l, 1, &id, k, v, q));
            VT_OK(ctx, vq_cache_append(c, l, 1, &id, k, v, NULL));
        }
        vq_cache_memory_report r;
        VT_OK(ctx, vq_cache_memory(c, &r));
        VT_CHECK(r.tokens == (int64_t)L * N && fabs(r.bits_per_element - p->bits) < 0.005,
                 "%s: lists %.3f bits, vq_cache_memory counts %.4f", e->name, p->bits, r.bits_per_element);
        vq_cache_free(c);
    }
    vt_free(k), vt_free(v), vt_free(q);
    vq_ctx_free(ctx);
}

/* What the caller sets stays the caller's; method presets set nothing
 * beside their methods. */
static void test_caller_fields(void)
{
    vq_ctx *ctx = vt_ctx(1);
    const vq_cache_transforms off[L] = {{0}};
    vq_cache *c = create(ctx, "balanced-3bit", 2, 16, off);
    if (c != NULL) {
        vq_cache_config got;
        vq_cache_transforms xf;
        VT_OK(ctx, vq_cache_get_config(c, &got));
        VT_OK(ctx, vq_cache_get_transforms(c, 0, 1, &xf, NULL, NULL, NULL));
        VT_CHECK(got.sink_tokens == 2 && got.residual_tokens == 16 && got.window == VQ_WINDOW_TURBO8 &&
                     !xf.center_keys && !xf.center_values && !xf.smooth,
                 "caller's sink %d, R %d, transforms %d%d%d", got.sink_tokens, got.residual_tokens, xf.center_keys,
                 xf.center_values, xf.smooth);
        vq_cache_free(c);
    }
    const vq_cache_preset_info *m = info_of("kivimix-turbo2");
    VT_CHECK(m != NULL && !m->recipe && m->sink_tokens == 0 && !m->transforms.smooth && m->bits == 0,
             "method preset carries a recipe");
    c = create(ctx, "kivimix-turbo2", 0, 0, NULL);
    if (c != NULL) {
        vq_cache_config got;
        vq_cache_transforms xf;
        VT_OK(ctx, vq_cache_get_config(c, &got));
        VT_OK(ctx, vq_cache_get_transforms(c, 0, 0, &xf, NULL, NULL, NULL));
        VT_CHECK(got.sink_tokens == 0 && got.residual_tokens == 0 && got.window == VQ_WINDOW_F16 && !xf.center_keys &&
                     !xf.smooth,
                 "method preset set a sink, window or transforms");
        vq_cache_free(c);
    }
    vq_ctx_free(ctx);
}

/* A bad name: refused, naming it and the presets; per-layer configs ignore
 * the preset's extras. */
static void test_bad_names(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_cache *c = (vq_cache *)1;
    const vq_cache_config bad = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D,
                                 .preset = "balanced-3bits"};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "unknown preset 'balanced-3bits'", vq_cache_create(ctx, &bad, &c));
    VT_CHECK(c == NULL, "out not NULL after a failure");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "quality-4bit, balanced-3bit, compact-2.5bit") != NULL,
             "the message lists the named presets: %s", vq_ctx_last_error(ctx));
    vq_cache_layer_config lc;
    VT_CHECK(vq_cache_preset_layer_config("compact-2.5", D, &lc) == VQ_ERR_INVALID_ARGUMENT, "unknown name accepted");
    VT_OK(ctx, vq_cache_preset_layer_config("compact-2.5bit", 128, &lc));
    VT_CHECK(lc.keys.wide_channels == 16, "wide channels scale with D: %d at D = 128", lc.keys.wide_channels);
    /* layers given: the preset name beside them is not read, nor its extras */
    VT_OK(ctx, vq_cache_preset_layer_config("quality-4bit", D, &lc));
    const vq_cache_layer_config layers[L] = {lc, lc};
    const vq_cache_config given = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D,
                                   .preset = "quality-4bit", .layers = layers};
    c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &given, &c));
    if (c != NULL) {
        vq_cache_config got;
        VT_OK(ctx, vq_cache_get_config(c, &got));
        VT_CHECK(got.sink_tokens == 0 && got.window == VQ_WINDOW_F16, "extras applied beside layers");
        vq_cache_free(c);
    }
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_named);
    VT_RUN(test_caller_fields);
    VT_RUN(test_bad_names);
    return vt_finish();
}
