/* cache_profile.c — vq_profile: a per-layer plan of a cache (header section
 * 5, "Profiles"), validated as vq_cache_create would validate it, without a
 * cache: every layer is laid out (streams and window, no memory) on a dry
 * cache of the profile's shape. Files: src/persist/persist_profile.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        const int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

/* Layer l of the plan (named cfg->layers[l]) laid out on a dry cache whose
 * page size is the smallest a cache could take with its key group. */
static vq_status check_layer(vq_ctx *ctx, const vq_profile_config *cfg, int l)
{
    const vq_cache_layer_config *lc = &cfg->layers[l];
    const vq_key_config *k = &lc->keys;
    char name[48];
    snprintf(name, sizeof name, "cfg->layers[%d]", l);
    const char *table = k->codebook ? "keys.codebook" : k->smooth ? "keys.smooth" : k->cos_freqs ? "keys.cos_freqs"
                        : k->sin_freqs ? "keys.sin_freqs" : lc->values.centroids ? "values.centroids" : NULL;
    VQ_RETURN_IF(ctx, table != NULL, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.%s' is set: a profile holds no fitted tables (a cache takes them from its "
                 "calibration)", name, table);
    VQ_RETURN_IF(ctx, k->method < VQ_KEY_F16 || k->method > VQ_KEY_KIVI_MIX, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.method': unknown key method %d", name, (int)k->method);
    const bool grouped = k->method == VQ_KEY_KIVI || k->method == VQ_KEY_KIVI_MIX;
    const int64_t g = grouped && k->group_size ? k->group_size : 32;
    VQ_RETURN_IF(ctx, g < 1 || 32 / gcd64(32, g) * g > 65536, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.group_size': %d divides no page size (a multiple of 32 up to 65536)", name,
                 k->group_size);
    vq_cache dry = {.ctx = ctx, .L = cfg->n_layers, .Hkv = cfg->n_kv_heads, .Hq = cfg->n_kv_heads,
                    .D = cfg->head_dim, .P = 32 / gcd64(32, g) * g, .capacity_pages = 1, .max_seqs = 1,
                    .R = cfg->residual_tokens, .window = cfg->window, .window_bits = cfg->window_bits};
    vq_cache_layer_config laid = *lc;
    /* keys whose layout needs their fitted tables: only their values are laid out here (their scalar
     * fields are checked when a cache gets the tables) */
    if (k->method == VQ_KEY_VECINFER || k->method == VQ_KEY_COMMVQ) laid.keys = (vq_key_config){.method = VQ_KEY_F16};
    vq_cache_layer L;
    memset(&L, 0, sizeof L);
    return vq_cache_layout_layer(&dry, &laid, name, &L);
}

vq_status vq_profile_check(vq_ctx *ctx, const vq_profile_config *cfg)
{
    VQ_RETURN_IF(ctx, cfg->layers == NULL, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->layers' is NULL (a profile gives every layer's methods)");
    const vq_cache_config sizes = {.n_layers = cfg->n_layers, .n_kv_heads = cfg->n_kv_heads,
                                   .n_q_heads = cfg->n_kv_heads, .head_dim = cfg->head_dim,
                                   .residual_tokens = cfg->residual_tokens, .window = cfg->window,
                                   .window_bits = cfg->window_bits, .sliding_windows = cfg->sliding_windows,
                                   .sink_tokens = cfg->sink_tokens};
    VQ_FORWARD_IF_ERROR(vq_cache_check_sizes(ctx, &sizes));
    VQ_RETURN_IF(ctx, cfg->window != VQ_WINDOW_TURBO && cfg->window_bits != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->window_bits': %d without VQ_WINDOW_TURBO (0 then)", cfg->window_bits);
    for (int l = 0; l < cfg->n_layers; l++) VQ_FORWARD_IF_ERROR(check_layer(ctx, cfg, l));
    VQ_FORWARD_IF_ERROR(vq_cache_recipe_check(ctx, cfg->sink_tokens, cfg->transforms, cfg->n_layers,
                                              cfg->n_kv_heads, cfg->head_dim));
    /* what a cache would refuse of the recipe on CommVQ keys (appended before RoPE) */
    for (int l = 0; l < cfg->n_layers; l++) {
        if (cfg->layers[l].keys.method != VQ_KEY_COMMVQ) continue;
        const vq_cache_transforms *t = cfg->transforms ? &cfg->transforms[l] : NULL;
        VQ_RETURN_IF(ctx, t && (t->center_keys || t->center_values || t->smooth), VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->transforms[%d]': layer %d has CommVQ keys, which take no transforms", l, l);
        VQ_RETURN_IF(ctx, cfg->sink_tokens > 0, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->sink_tokens': layer %d has CommVQ keys, which take no sink tokens", l);
    }
    return VQ_OK;
}

vq_status vq_profile_create(vq_ctx *ctx, const vq_profile_config *cfg, vq_profile **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    VQ_RETURN_IF(ctx, cfg == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'cfg' is NULL");
    VQ_FORWARD_IF_ERROR(vq_profile_check(ctx, cfg));
    const size_t L = (size_t)cfg->n_layers, n = (size_t)cfg->n_kv_heads * (size_t)cfg->head_dim;
    size_t given = 0; /* tables */
    for (size_t l = 0; cfg->transforms && l < L; l++)
        given += (cfg->transforms[l].key_mean != NULL) + (cfg->transforms[l].value_mean != NULL) +
                 (cfg->transforms[l].key_scale != NULL);
    vq_profile *p = calloc(1, sizeof *p);
    if (p) p->layers = malloc(sizeof *p->layers * L);
    if (p) p->sliding = calloc(L, sizeof *p->sliding);
    if (p) p->xf = calloc(L, sizeof *p->xf);
    if (p) p->xf_tensors = calloc(3 * L, sizeof *p->xf_tensors);
    if (p && given) p->xf_data = malloc(sizeof *p->xf_data * n * given);
    if (p == NULL || p->layers == NULL || p->sliding == NULL || p->xf == NULL || p->xf_tensors == NULL ||
        (given && p->xf_data == NULL)) {
        vq_profile_free(p);
        return vq_fail(ctx, VQ_ERR_OUT_OF_MEMORY, "cannot allocate a profile of %d layers", cfg->n_layers);
    }
    memcpy(p->layers, cfg->layers, sizeof *p->layers * L);
    if (cfg->sliding_windows) memcpy(p->sliding, cfg->sliding_windows, sizeof *p->sliding * L);
    p->xf_shape[0] = cfg->n_kv_heads, p->xf_shape[1] = cfg->head_dim;
    float *next = p->xf_data;
    for (size_t l = 0; cfg->transforms && l < L; l++) {
        const vq_cache_transforms *t = &cfg->transforms[l];
        vq_cache_transforms *x = &p->xf[l];
        *x = (vq_cache_transforms){t->center_keys, t->center_values, t->smooth, NULL, NULL, NULL};
        const DLTensor *src[3] = {t->key_mean, t->value_mean, t->key_scale};
        const DLTensor **dst[3] = {&x->key_mean, &x->value_mean, &x->key_scale};
        for (int i = 0; i < 3; i++) {
            if (src[i] == NULL) continue;
            memcpy(next, vq_data(src[i]), sizeof *next * n);
            DLTensor *d = &p->xf_tensors[3 * l + (size_t)i];
            *d = (DLTensor){.data = next, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                            .shape = p->xf_shape};
            *dst[i] = d;
            next += n;
        }
    }
    p->cfg = *cfg;
    p->cfg.layers = p->layers;
    p->cfg.sliding_windows = p->sliding;
    p->cfg.transforms = p->xf;
    p->states_recipe = true;
    *out = p;
    return VQ_OK;
}

vq_status vq_profile_get(const vq_profile *p, vq_profile_config *out)
{
    if (p == NULL || out == NULL) return VQ_ERR_INVALID_ARGUMENT;
    *out = p->cfg;
    out->no_recipe = !p->states_recipe;
    return VQ_OK;
}

void vq_profile_free(vq_profile *p)
{
    if (p == NULL) return;
    free(p->layers);
    free(p->sliding);
    free(p->xf);
    free(p->xf_tensors);
    free(p->xf_data);
    free(p);
}
