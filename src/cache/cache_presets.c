/* cache_presets.c — the named presets (vq_cache_preset*): the presets named
 * by what they buy (methods plus sink, transforms and window; applied by
 * vq_cache_create through vq_cache_preset_apply) and the key + value method
 * presets. key_bits / value_bits are what cache_layout.c stores per element
 * at D = 128: codes plus the per-token or per-group parameters of one head;
 * bits, the whole cache's at D = 64 and 2048 tokens, is checked against
 * vq_cache_memory by test_cache_presets. */
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"

typedef struct preset {
    vq_cache_preset_info info;
    vq_key_config keys;     /* D-dependent fields (QJL sketch, VECINFER M, KIVI value group) set in fill() */
    vq_value_config values;
    int wide_per_64;        /* KIVI_MIX wide channels per 64 of D (keys.wide_channels = this * D / 64), 0 = D/2 */
} preset;

/* The sink, centering and smoothing every preset named by what it buys
 * carries: on SmolLM2-135M 4 f16 sink tokens hold about 40 % of the
 * attention's squared weight, and the sink with centering cut kivi4's loss
 * from +3.3 % to +1.0 % (docs/QUALITY.md, "Which lever does what"). */
#define RECIPE_INFO(n, d, kb, vb, r, win, wbits, all_in)                                                           \
    {.name = n, .description = d, .key_bits = kb, .value_bits = vb, .recipe = true, .sink_tokens = 4,              \
     .transforms = {.center_keys = true, .center_values = true, .smooth = true}, .residual_tokens = r,            \
     .window = win, .window_bits = wbits, .bits = all_in}
/* A method preset's info: its methods' name, description and bits. */
#define METHOD_INFO(n, d, kb, vb, tables)                                                                          \
    {.name = n, .description = d, .key_bits = kb, .value_bits = vb, .needs_tables = tables}

static const preset presets[] = {
    /* Presets named by what they buy (the header lists what each sets;
     * docs/QUALITY.md, "Presets", the measurements behind them). */
    {.info = RECIPE_INFO("quality-4bit",
                         "near-lossless: KIVI 4-bit keys per channel over 128 tokens, TurboQuant 3-bit values (f16 "
                         "scales), 8-bit window, 4 sink tokens, centered and smoothed",
                         4.25, 3.125, 0, VQ_WINDOW_TURBO8, 0, 4.06),
     .keys = {.method = VQ_KEY_KIVI, .bits = 4, .group_size = 128},
     .values = {.method = VQ_VALUE_TURBO, .bits = 3, .scale_f16 = true}},
    {.info = RECIPE_INFO("balanced-3bit",
                         "about 3 bits: mixed-width KIVI keys over 128 tokens (24 of 64 channels at 4 bits, the rest "
                         "at 2), TurboQuant 2-bit values (f16 scales), 8-bit window of 64 tokens, 4 sink tokens, "
                         "centered and smoothed",
                         3.0078125, 2.125, 64, VQ_WINDOW_TURBO8, 0, 3.01),
     .keys = {.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 128},
     .values = {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true},
     .wide_per_64 = 24},
    {.info = RECIPE_INFO("compact-2.5bit",
                         "the fewest bits that hold: mixed-width KIVI keys over 128 tokens (8 of 64 channels at 4 "
                         "bits, the rest at 2), TurboQuant 2-bit values (f16 scales), 6-bit window, 4 sink tokens, "
                         "centered and smoothed",
                         2.5078125, 2.125, 0, VQ_WINDOW_TURBO, 6, 2.64),
     .keys = {.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 128},
     .values = {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true},
     .wide_per_64 = 8},
    /* Method presets: a key and a value method, nothing else. */
    {.info = METHOD_INFO("f16", "f16 keys and values (the uncompressed reference)", 16, 16, false),
     .keys = {.method = VQ_KEY_F16},
     .values = {.method = VQ_VALUE_F16}},
    {.info = METHOD_INFO("kivi2",
      "KIVI 2-bit: keys per channel over 32 tokens, values per token over 32 channels, f16 scale/zero",
      3, 3, false),
     .keys = {.method = VQ_KEY_KIVI, .bits = 2, .group_size = 32},
     .values = {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
    {.info = METHOD_INFO("kivi4",
      "KIVI 4-bit: keys per channel over 32 tokens, values per token over 32 channels, f16 scale/zero",
      5, 5, false),
     .keys = {.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32},
     .values = {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 32}},
    /* Keys per channel (KIVI) at 4 bits, values per token (TurboQuant) at
     * fewer: on SmolLM2-135M, 2-bit KIVI keys lose +81 % perplexity where
     * 4-bit KIVI keys with f16 values lose +2.3 %, and TurboQuant's rotated
     * per-token codes lose least for values (+19 % at 2 bits vs +32 % for
     * KIVI 2-bit values) but most for keys (turbo3 keys +12 % at 512 tokens).
     * 128-token key groups cut the scale/zero cost to 0.25 bits. */
    {.info = METHOD_INFO("kivi4-turbo3",
      "KIVI 4-bit keys per channel over 128 tokens (f16 scale/zero), TurboQuant 3-bit values",
      4.25, 3.25, false),
     .keys = {.method = VQ_KEY_KIVI, .bits = 4, .group_size = 128},
     .values = {.method = VQ_VALUE_TURBO, .bits = 3}},
    {.info = METHOD_INFO("kivi4-turbo2",
      "KIVI 4-bit keys per channel over 128 tokens (f16 scale/zero), TurboQuant 2-bit values",
      4.25, 2.25, false),
     .keys = {.method = VQ_KEY_KIVI, .bits = 4, .group_size = 128},
     .values = {.method = VQ_VALUE_TURBO, .bits = 2}},
    /* Keys at two widths per group (VQ_KEY_KIVI_MIX): the half of the
     * channels of the widest range at 4 bits, the other half at 2, 3.0 code
     * bits + 0.25 of f16 scale/zero + 1/128 of width mask. On SmolLM2-135M,
     * decoding with the 8-bit window, it loses about what kivi4-turbo2 loses
     * where uniform 3-bit KIVI keys lose three times more (docs/QUALITY.md).
     * CPU only. */
    {.info = METHOD_INFO("kivimix-turbo2",
      "KIVI keys per channel over 128 tokens, the widest-range half of each group's channels at 4 bits, the other "
      "half at 2 (f16 scale/zero, a width bit per channel), TurboQuant 2-bit values",
      3.2578125, 2.25, false),
     .keys = {.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 128},
     .values = {.method = VQ_VALUE_TURBO, .bits = 2}},
    /* The same split at 2-bit keys: 128-token key groups cost 0.25 bits of
     * scale/zero where kivi2's 32-token groups cost 1.0. The fewest bits of
     * the scalar codes (2.80 bits all-in at 2048 tokens on SmolLM2-135M with
     * the 8-bit window) but not the best 2-bit keys there: decoding, +27.6 %
     * perplexity against kivi2 keys' +8.5 % (with 4-bit keys in layers 1, 10,
     * 18; docs/QUALITY.md, "Where the bits go"). */
    {.info = METHOD_INFO("kivi2-turbo2",
      "KIVI 2-bit keys per channel over 128 tokens (f16 scale/zero), TurboQuant 2-bit values",
      2.25, 2.25, false),
     .keys = {.method = VQ_KEY_KIVI, .bits = 2, .group_size = 128},
     .values = {.method = VQ_VALUE_TURBO, .bits = 2}},
    {.info = METHOD_INFO("turbo2",
      "TurboQuant 2-bit keys (norm-corrected) and values, f32 scale per token", 2.25, 2.25, false),
     .keys = {.method = VQ_KEY_TURBO, .bits = 2, .norm_correct = true},
     .values = {.method = VQ_VALUE_TURBO, .bits = 2}},
    {.info = METHOD_INFO("turbo3",
      "TurboQuant 3-bit keys (norm-corrected) and values, f32 scale per token", 3.25, 3.25, false),
     .keys = {.method = VQ_KEY_TURBO, .bits = 3, .norm_correct = true},
     .values = {.method = VQ_VALUE_TURBO, .bits = 3}},
    {.info = METHOD_INFO("turbo4",
      "TurboQuant 4-bit keys (norm-corrected) and values, f32 scale per token", 4.25, 4.25, false),
     .keys = {.method = VQ_KEY_TURBO, .bits = 4, .norm_correct = true},
     .values = {.method = VQ_VALUE_TURBO, .bits = 4}},
    {.info = METHOD_INFO("rvq22", "TurboQuant residual 2+2-bit keys, TurboQuant 4-bit values", 4.5, 4.25, false),
     .keys = {.method = VQ_KEY_TURBO_RVQ, .bits = 2, .bits2 = 2},
     .values = {.method = VQ_VALUE_TURBO, .bits = 4}},
    {.info = METHOD_INFO("rabitq",
      "RaBitQ 1-bit keys (Hamming score, L1 magnitude), 4-bit Lloyd-Max codebook values", 1.25, 4.25,
      false),
     .keys = {.method = VQ_KEY_RABITQ, .rabitq_score = VQ_RABITQ_SCORE_HAMMING, .rabitq_mag = VQ_RABITQ_MAG_L1},
     .values = {.method = VQ_VALUE_CODEBOOK, .bits = 4}},
    {.info = METHOD_INFO("rabitq-exact",
      "RaBitQ 1-bit keys (exact score, unbiased magnitude), 4-bit Lloyd-Max codebook values",
      1.25, 4.25, false),
     .keys = {.method = VQ_KEY_RABITQ, .rabitq_score = VQ_RABITQ_SCORE_EXACT, .rabitq_mag = VQ_RABITQ_MAG_UNBIASED},
     .values = {.method = VQ_VALUE_CODEBOOK, .bits = 4}},
    {.info = METHOD_INFO("qjl", "QJL keys (2*D-row sign sketch + norm), KIVI 4-bit values", 2.25, 5, false),
     .keys = {.method = VQ_KEY_QJL},
     .values = {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 32}},
    {.info = METHOD_INFO("vecinfer2",
      "VecInfer product VQ keys (D/4 subspaces of 256 centroids: codebook passed in), KIVI 2-bit "
                   "values",
      2, 3, true),
     .keys = {.method = VQ_KEY_VECINFER},
     .values = {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
    {.info = METHOD_INFO("commvq",
      "CommVQ additive keys (codebook [R,256,D] passed in; 2 bits at R = D/4; plus an i32 position per "
                "token), KIVI 2-bit values",
      2, 3, true),
     .keys = {.method = VQ_KEY_COMMVQ},
     .values = {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
};

int vq_cache_preset_count(void) { return (int)(sizeof presets / sizeof presets[0]); }

const vq_cache_preset_info *vq_cache_preset(int i)
{
    return i >= 0 && i < vq_cache_preset_count() ? &presets[i].info : NULL;
}

const vq_cache_preset_info *vq_cache_preset_find(const char *name, vq_cache_layer_config *out, int head_dim)
{
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        if (strcmp(presets[i].info.name, name) != 0) continue;
        if (out) {
            *out = (vq_cache_layer_config){presets[i].keys, presets[i].values};
            if (out->keys.method == VQ_KEY_QJL) out->keys.qjl_sketch = 2 * head_dim;
            if (out->values.method == VQ_VALUE_KIVI && out->values.group_size > head_dim)
                out->values.group_size = head_dim;
            if (presets[i].wide_per_64) out->keys.wide_channels = presets[i].wide_per_64 * head_dim / 64;
        }
        return &presets[i].info;
    }
    return NULL;
}

void vq_cache_preset_names(char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < vq_cache_preset_count() && used + 1 < cap; i++) {
        const char *n = presets[i].info.name;
        const size_t len = strlen(n);
        if (used + len + 3 >= cap) break;
        if (used) {
            memcpy(buf + used, ", ", 2);
            used += 2;
        }
        memcpy(buf + used, n, len);
        used += len;
        buf[used] = '\0';
    }
}

vq_status vq_cache_preset_layer_config(const char *name, int head_dim, vq_cache_layer_config *out)
{
    if (name == NULL || out == NULL || head_dim < 8 || head_dim % 8 != 0) return VQ_ERR_INVALID_ARGUMENT;
    return vq_cache_preset_find(name, out, head_dim) ? VQ_OK : VQ_ERR_INVALID_ARGUMENT;
}

vq_status vq_cache_preset_apply(vq_ctx *ctx, const vq_cache_config *cfg, vq_cache_config *out,
                                vq_cache_transforms **xf)
{
    *out = *cfg;
    *xf = NULL;
    const vq_cache_preset_info *p = cfg->preset && !cfg->layers ? vq_cache_preset_find(cfg->preset, NULL, 0) : NULL;
    if (p == NULL || !p->recipe) return VQ_OK; /* unknown names fail later, with the list of presets */
    if (out->sink_tokens == 0) out->sink_tokens = p->sink_tokens;
    if (out->residual_tokens == 0) out->residual_tokens = p->residual_tokens;
    if (out->window == VQ_WINDOW_F16 && out->window_bits == 0) {
        out->window = p->window;
        out->window_bits = p->window_bits;
    }
    const vq_cache_transforms *t = &p->transforms;
    if (out->transforms == NULL && (t->center_keys || t->center_values || t->smooth) && cfg->n_layers > 0) {
        *xf = calloc((size_t)cfg->n_layers, sizeof **xf);
        VQ_RETURN_IF(ctx, *xf == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate the transforms of preset '%s'",
                     p->name);
        for (int l = 0; l < cfg->n_layers; l++) (*xf)[l] = *t;
        out->transforms = *xf;
    }
    return VQ_OK;
}
