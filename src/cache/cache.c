/* cache.c — vq_cache_create / vq_cache_free: the config is validated and
 * resolved into one vq_cache_layer per layer (streams, tables, the first
 * chunk of pages), and the sequence slots are allocated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"
#ifdef VQ_WITH_CUDA
#include "cache/cache_cuda.h"
#endif

static bool is_f16_layer(const vq_cache_config *cfg, int l)
{
    for (int i = 0; i < cfg->n_f16_layers; i++)
        if (cfg->f16_layers[i] == l) return true;
    return false;
}

vq_status vq_cache_check_sizes(vq_ctx *ctx, const vq_cache_config *cfg)
{
    VQ_RETURN_IF(ctx, cfg->n_layers < 1 || cfg->n_layers > 65536, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->n_layers': expected 1..65536, got %d", cfg->n_layers);
    VQ_RETURN_IF(ctx, cfg->n_kv_heads < 1 || cfg->n_kv_heads > 4096, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->n_kv_heads': expected 1..4096, got %d", cfg->n_kv_heads);
    VQ_RETURN_IF(ctx, cfg->n_q_heads < 1 || cfg->n_q_heads % cfg->n_kv_heads != 0 || cfg->n_q_heads > 65536,
                 VQ_ERR_INVALID_ARGUMENT, "argument 'cfg->n_q_heads': expected a multiple of n_kv_heads = %d, got %d",
                 cfg->n_kv_heads, cfg->n_q_heads);
    VQ_RETURN_IF(ctx, cfg->head_dim < 8 || cfg->head_dim % 8 != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->head_dim': expected a multiple of 8, got %d", cfg->head_dim);
    VQ_RETURN_IF(ctx, cfg->head_dim > 256, VQ_ERR_UNSUPPORTED,
                 "argument 'cfg->head_dim': %d > 256 is not supported by the attention kernels", cfg->head_dim);
    VQ_RETURN_IF(ctx, cfg->page_size < 0 || cfg->page_size % 32 != 0 || cfg->page_size > 65536,
                 VQ_ERR_INVALID_ARGUMENT, "argument 'cfg->page_size': expected a multiple of 32 up to 65536, got %d",
                 cfg->page_size);
    VQ_RETURN_IF(ctx, cfg->capacity_pages < 0 || cfg->capacity_pages > INT32_MAX, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->capacity_pages': expected 0..2^31-1, got %lld", (long long)cfg->capacity_pages);
    VQ_RETURN_IF(ctx, cfg->grow_pages < 0 || cfg->grow_pages > INT32_MAX, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->grow_pages': expected 0..2^31-1, got %lld", (long long)cfg->grow_pages);
    VQ_RETURN_IF(ctx, cfg->max_sequences < 0 || cfg->max_sequences > (1 << 20), VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->max_sequences': expected 0..2^20, got %d", cfg->max_sequences);
    VQ_RETURN_IF(ctx, cfg->residual_tokens < 0 || cfg->residual_tokens > 65536, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->residual_tokens': expected 0..65536, got %d", cfg->residual_tokens);
    VQ_RETURN_IF(ctx, cfg->n_f16_layers < 0 || (cfg->n_f16_layers > 0 && cfg->f16_layers == NULL),
                 VQ_ERR_INVALID_ARGUMENT, "argument 'cfg->f16_layers': NULL with n_f16_layers = %d",
                 cfg->n_f16_layers);
    VQ_RETURN_IF(ctx, cfg->window < VQ_WINDOW_F16 || cfg->window > VQ_WINDOW_TURBO, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->window': expected VQ_WINDOW_F16 (0), VQ_WINDOW_TURBO8 (1) or VQ_WINDOW_TURBO (2), "
                 "got %d",
                 (int)cfg->window);
    VQ_RETURN_IF(ctx, cfg->window != VQ_WINDOW_F16 && !vq_is_pow2(cfg->head_dim), VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->window': a TurboQuant window needs a power-of-two head_dim (Hadamard rotation), got %d",
                 cfg->head_dim);
    VQ_RETURN_IF(ctx, cfg->window == VQ_WINDOW_TURBO && (cfg->window_bits < 1 || cfg->window_bits > 8),
                 VQ_ERR_INVALID_ARGUMENT, "argument 'cfg->window_bits': VQ_WINDOW_TURBO takes 1..8, got %d",
                 cfg->window_bits);
    for (int l = 0; cfg->sliding_windows && l < cfg->n_layers; l++)
        VQ_RETURN_IF(ctx, cfg->sliding_windows[l] < 0 || cfg->sliding_windows[l] > (1 << 30), VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->sliding_windows[%d]': expected 0 (full attention) .. 2^30 tokens, got %d", l,
                     cfg->sliding_windows[l]);
    for (int i = 0; i < cfg->n_f16_layers; i++)
        VQ_RETURN_IF(ctx, cfg->f16_layers[i] < 0 || cfg->f16_layers[i] >= cfg->n_layers, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->f16_layers[%d]': layer %d outside [0, %d)", i, cfg->f16_layers[i],
                     cfg->n_layers);
    return VQ_OK;
}

static vq_status user_layer_base(vq_ctx *ctx, const vq_cache_config *cfg, int l, vq_cache_layer_config *out);

/* Tables the layer's methods need and its config leaves NULL, taken from the
 * calibration (views into it, valid while create runs). */
static vq_status from_calibration(vq_ctx *ctx, const vq_cache_config *cfg, int l, vq_cache_layer_config *lc,
                                  DLTensor *views)
{
    const vq_calibration *cal = cfg->calibration;
    if (cal == NULL) return VQ_OK;
    vq_key_config *k = &lc->keys;
    if (k->method == VQ_KEY_VECINFER && k->codebook == NULL) {
        VQ_FORWARD_IF_ERROR(
            vq_cache_forward(ctx, vq_calibration_get_table(ctx, cal, l, VQ_CAL_VECINFER_CODEBOOK, &views[0]), "vq_cache_create"));
        k->codebook = &views[0];
        if (k->smooth == NULL) {
            VQ_FORWARD_IF_ERROR(vq_cache_forward(
                ctx, vq_calibration_get_table(ctx, cal, l, VQ_CAL_VECINFER_SMOOTH, &views[1]), "vq_cache_create"));
            k->smooth = &views[1];
        }
    }
    if (k->method == VQ_KEY_COMMVQ && k->codebook == NULL) {
        VQ_FORWARD_IF_ERROR(vq_cache_forward(
            ctx, vq_calibration_get_table(ctx, cal, l, VQ_CAL_COMMVQ_CODEBOOK, &views[0]), "vq_cache_create"));
        k->codebook = &views[0];
    }
    if (lc->values.method == VQ_VALUE_CODEBOOK && lc->values.centroids == NULL) {
        VQ_FORWARD_IF_ERROR(vq_cache_forward(
            ctx, vq_calibration_get_table(ctx, cal, l, VQ_CAL_VALUE_CENTROIDS, &views[2]), "vq_cache_create"));
        lc->values.centroids = &views[2];
    }
    return VQ_OK;
}

/* The user's config of layer l (preset or layers[l]), before defaults. */
static vq_status user_layer(vq_ctx *ctx, const vq_cache_config *cfg, int l, vq_cache_layer_config *out,
                            DLTensor *views)
{
    VQ_FORWARD_IF_ERROR(user_layer_base(ctx, cfg, l, out));
    return from_calibration(ctx, cfg, l, out, views);
}

static vq_status user_layer_base(vq_ctx *ctx, const vq_cache_config *cfg, int l, vq_cache_layer_config *out)
{
    if (is_f16_layer(cfg, l)) {
        *out = (vq_cache_layer_config){{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
        return VQ_OK;
    }
    if (cfg->layers) {
        *out = cfg->layers[l];
        return VQ_OK;
    }
    const char *name = cfg->preset ? cfg->preset : "f16";
    const vq_cache_preset_info *p = vq_cache_preset_find(name, out, cfg->head_dim);
    if (p == NULL) {
        char names[256];
        vq_cache_preset_names(names, sizeof names);
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument 'cfg->preset': unknown preset '%s' (presets: %s)",
                       name, names);
    }
    VQ_RETURN_IF(ctx, p->needs_tables && cfg->calibration == NULL, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->preset': '%s' needs codebooks: pass cfg->calibration, or fill a layer with "
                 "vq_cache_preset_layer_config, set keys.codebook and pass cfg->layers",
                 name);
    return VQ_OK;
}

static vq_status build(vq_cache *c, const vq_cache_config *cfg)
{
    vq_ctx *ctx = c->ctx;
    c->layers = calloc((size_t)c->L, sizeof *c->layers);
    c->seqs = calloc((size_t)c->max_seqs, sizeof *c->seqs);
    VQ_RETURN_IF(ctx, c->layers == NULL || c->seqs == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate the cache");
    for (int i = 0; i < c->max_seqs; i++) c->seqs[i].id = -1;
    for (int l = 0; l < c->L; l++) {
        char name[48];
        snprintf(name, sizeof name, cfg->layers && !is_f16_layer(cfg, l) ? "cfg->layers[%d]" : "layer %d", l);
        vq_cache_layer_config user;
        DLTensor views[3];
        VQ_FORWARD_IF_ERROR(user_layer(ctx, cfg, l, &user, views));
        vq_cache_layer *L = &c->layers[l];
        VQ_FORWARD_IF_ERROR(vq_cache_layout_layer(c, &user, name, L));
        L->sliding = cfg->sliding_windows ? cfg->sliding_windows[l] : 0;
    }
    VQ_FORWARD_IF_ERROR(vq_cache_recipe_config(c, cfg));
    for (int l = 0; l < c->L; l++) {
        vq_cache_layer_config user;
        DLTensor views[3];
        VQ_FORWARD_IF_ERROR(user_layer(ctx, cfg, l, &user, views));
        vq_cache_layer *L = &c->layers[l];
        VQ_FORWARD_IF_ERROR(vq_cache_build_tables(c, &user, "", l, L));
        /* the tables are copied: keep no pointer to the caller's tensors */
        L->cfg.keys.codebook = L->cfg.keys.smooth = L->cfg.keys.cos_freqs = L->cfg.keys.sin_freqs = NULL;
        L->cfg.values.centroids = NULL;
        VQ_FORWARD_IF_ERROR(vq_cache_pool_reserve(c, l, 0));
    }
    return VQ_OK;
}

/* cfg with its profile's plan in the fields the profile replaces (which
 * must be left 0 / NULL beside it), for a cache of the profile's shape. */
static vq_status apply_profile(vq_ctx *ctx, const vq_cache_config *cfg, vq_cache_config *out)
{
    const vq_profile_config *p = &cfg->profile->cfg;
    const char *beside = cfg->preset ? "preset" : cfg->layers ? "layers" : cfg->f16_layers ? "f16_layers"
                         : cfg->n_f16_layers ? "n_f16_layers" : cfg->sliding_windows ? "sliding_windows"
                         : cfg->residual_tokens ? "residual_tokens" : cfg->window ? "window"
                         : cfg->window_bits ? "window_bits" : NULL;
    VQ_RETURN_IF(ctx, beside != NULL, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->%s' is set beside cfg->profile, which gives it (leave it 0 / NULL)", beside);
    const struct {
        const char *name;
        int want, got;
    } dims[3] = {{"n_layers", p->n_layers, cfg->n_layers}, {"n_kv_heads", p->n_kv_heads, cfg->n_kv_heads},
                 {"head_dim", p->head_dim, cfg->head_dim}};
    for (int i = 0; i < 3; i++)
        VQ_RETURN_IF(ctx, dims[i].want != dims[i].got, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->profile': a profile for %s %d, cfg->%s is %d", dims[i].name, dims[i].want,
                     dims[i].name, dims[i].got);
    const vq_profile *prof = cfg->profile;
    if (prof->states_recipe) {
        VQ_RETURN_IF(ctx, cfg->sink_tokens != 0 && cfg->sink_tokens != p->sink_tokens, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->sink_tokens' is %d beside cfg->profile, whose sink_tokens is %d (leave it 0)",
                     cfg->sink_tokens, p->sink_tokens);
        for (int l = 0; cfg->transforms && l < p->n_layers; l++) {
            const vq_cache_transforms *a = &cfg->transforms[l], *b = &p->transforms[l];
            const char *diff = a->key_mean || a->value_mean || a->key_scale ? "has a table"
                               : a->center_keys != b->center_keys       ? "center_keys differs"
                               : a->center_values != b->center_values   ? "center_values differs"
                               : a->smooth != b->smooth                 ? "smooth differs"
                                                                        : NULL;
            VQ_RETURN_IF(ctx, diff != NULL, VQ_ERR_INVALID_ARGUMENT,
                         "argument 'cfg->transforms[%d]' %s beside cfg->profile, which gives the transforms (center_keys "
                         "%d, center_values %d, smooth %d there; leave cfg->transforms NULL)",
                         l, diff, b->center_keys, b->center_values, b->smooth);
        }
    }
    *out = *cfg;
    out->profile = NULL;
    if (prof->states_recipe) {
        out->sink_tokens = p->sink_tokens;
        out->transforms = p->transforms;
    }
    out->layers = p->layers;
    out->sliding_windows = p->sliding_windows;
    out->residual_tokens = p->residual_tokens;
    out->window = p->window;
    out->window_bits = p->window_bits;
    return VQ_OK;
}

static vq_status create(vq_ctx *ctx, const vq_cache_config *cfg, vq_cache **out);

vq_status vq_cache_create(vq_ctx *ctx, const vq_cache_config *cfg, vq_cache **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    VQ_RETURN_IF(ctx, cfg == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'cfg' is NULL");
    vq_cache_config applied;
    if (cfg->profile) {
        VQ_FORWARD_IF_ERROR(apply_profile(ctx, cfg, &applied));
        cfg = &applied;
    }
    /* a preset named by what it buys: its sink, transforms and window where
     * cfg leaves them unset (freed below, the cache keeps copies) */
    vq_cache_config with_preset;
    vq_cache_transforms *preset_xf = NULL;
    VQ_FORWARD_IF_ERROR(vq_cache_preset_apply(ctx, cfg, &with_preset, &preset_xf));
    cfg = &with_preset;
    const vq_status made = create(ctx, cfg, out);
    free(preset_xf);
    return made;
}

static vq_status create(vq_ctx *ctx, const vq_cache_config *cfg, vq_cache **out)
{
    VQ_FORWARD_IF_ERROR(vq_cache_check_sizes(ctx, cfg));
    vq_cache *c = calloc(1, sizeof *c);
    VQ_RETURN_IF(ctx, c == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate the cache");
    *c = (vq_cache){.ctx = ctx,
                    .cuda = vq_ctx_is_cuda(ctx),
                    .L = cfg->n_layers,
                    .Hkv = cfg->n_kv_heads,
                    .Hq = cfg->n_q_heads,
                    .D = cfg->head_dim,
                    .P = cfg->page_size ? cfg->page_size : 256,
                    .capacity_pages = cfg->capacity_pages ? cfg->capacity_pages : 64,
                    .grow_pages = cfg->grow_pages,
                    .max_seqs = cfg->max_sequences ? cfg->max_sequences : 256,
                    .R = cfg->residual_tokens,
                    .window = cfg->window,
                    .window_bits = cfg->window == VQ_WINDOW_TURBO ? cfg->window_bits : 0};
#ifndef VQ_WITH_CUDA
    if (c->cuda) {
        free(c);
        return vq_fail(ctx, VQ_ERR_UNSUPPORTED, "this build has no CUDA backend");
    }
#endif
    const vq_status s = build(c, cfg);
    if (s != VQ_OK) {
        /* keep the message of the failure, not of the clean-up */
        vq_cache_free(c);
        return s;
    }
    *out = c;
    return VQ_OK;
}

void vq_cache_free(vq_cache *c)
{
    if (c == NULL) return;
    for (int i = 0; c->seqs && i < c->max_seqs; i++) {
        vq_cache_seq *q = &c->seqs[i];
        for (int l = 0; q->layers && l < c->L; l++) {
            vq_cache_mem_free(c, q->layers[l].res);
            free(q->layers[l].pages);
            vq_cache_recipe_seq_free(c, &q->layers[l]);
        }
        free(q->layers);
    }
    for (int l = 0; c->layers && l < c->L; l++) {
        vq_cache_layer *L = &c->layers[l];
        for (int k = 0; k < L->n_chunks; k++) vq_cache_mem_free(c, L->chunks[k].base);
        free(L->chunks);
        free(L->bindings);
        free(L->refcount);
        free(L->free_list);
        vq_cache_free_tables(c, L);
        free(L->xf_tables);
    }
#ifdef VQ_WITH_CUDA
    vq_cache_cuda_release(c);
#endif
    vq_cache_mem_free(c, c->stage.p);
    vq_cache_mem_free(c, c->recipe_dev.p);
    vq_cache_mem_free(c, c->wdec.p);
    vq_cache_mem_free(c, c->copies.dev.p);
    free(c->copies.jobs);
    free(c->host[0].p);
    free(c->host[1].p);
    free(c->recipe.p);
    free(c->layers);
    free(c->seqs);
    free(c);
}

vq_ctx *vq_cache_ctx(const vq_cache *c) { return c ? c->ctx : NULL; }

vq_status vq_cache_get_config(const vq_cache *c, vq_cache_config *out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    VQ_RETURN_IF(c->ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    int64_t pages = c->capacity_pages;
    for (int l = 0; l < c->L; l++)
        if (c->layers[l].n_pages > pages) pages = c->layers[l].n_pages;
    memset(out, 0, sizeof *out);
    out->n_layers = c->L;
    out->n_kv_heads = c->Hkv;
    out->n_q_heads = c->Hq;
    out->head_dim = c->D;
    out->page_size = (int)c->P;
    out->capacity_pages = pages;
    out->grow_pages = c->grow_pages;
    out->max_sequences = c->max_seqs;
    out->residual_tokens = c->R;
    out->window = c->window;
    out->window_bits = c->window_bits;
    out->sink_tokens = c->S;
    return VQ_OK;
}

/* The arguments of a per-layer getter: out not NULL, layer in range. */
static vq_status check_layer_arg(const vq_cache *c, int layer, const void *out)
{
    VQ_RETURN_IF(c->ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    VQ_RETURN_IF(c->ctx, layer < 0 || layer >= c->L, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'layer': %d outside [0, %d)", layer, c->L);
    return VQ_OK;
}

vq_status vq_cache_get_sliding_window(const vq_cache *c, int layer, int *out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    VQ_FORWARD_IF_ERROR(check_layer_arg(c, layer, out));
    *out = (int)c->layers[layer].sliding;
    return VQ_OK;
}

vq_status vq_cache_get_layer_config(const vq_cache *c, int layer, vq_cache_layer_config *out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    VQ_FORWARD_IF_ERROR(check_layer_arg(c, layer, out));
    *out = c->layers[layer].cfg;
    return VQ_OK;
}
