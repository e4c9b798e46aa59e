/* cache_presets.c — the named key + value methods (vq_cache_preset*). The
 * bits are what cache_layout.c stores per element at D = 128: codes plus the
 * per-token or per-group parameters of one head. */
#include <string.h>

#include "cache/cache_internal.h"

typedef struct preset {
    vq_cache_preset_info info;
    vq_key_config keys;     /* D-dependent fields (QJL sketch, VECINFER M, KIVI value group) set in fill() */
    vq_value_config values;
} preset;

static const preset presets[] = {
    {{"f16", "f16 keys and values (the uncompressed reference)", 16, 16, false},
     {.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}},
    {{"kivi2", "KIVI 2-bit: keys per channel over 32 tokens, values per token over 32 channels, f16 scale/zero",
      3, 3, false},
     {.method = VQ_KEY_KIVI, .bits = 2, .group_size = 32}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
    {{"kivi4", "KIVI 4-bit: keys per channel over 32 tokens, values per token over 32 channels, f16 scale/zero",
      5, 5, false},
     {.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32}, {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 32}},
    /* Keys per channel (KIVI) at 4 bits, values per token (TurboQuant) at
     * fewer: on SmolLM2-135M, 2-bit KIVI keys lose +81 % perplexity where
     * 4-bit KIVI keys with f16 values lose +2.3 %, and TurboQuant's rotated
     * per-token codes lose least for values (+19 % at 2 bits vs +32 % for
     * KIVI 2-bit values) but most for keys (turbo3 keys +12 % at 512 tokens).
     * 128-token key groups cut the scale/zero cost to 0.25 bits. */
    {{"kivi4-turbo3", "KIVI 4-bit keys per channel over 128 tokens (f16 scale/zero), TurboQuant 3-bit values",
      4.25, 3.25, false},
     {.method = VQ_KEY_KIVI, .bits = 4, .group_size = 128}, {.method = VQ_VALUE_TURBO, .bits = 3}},
    {{"kivi4-turbo2", "KIVI 4-bit keys per channel over 128 tokens (f16 scale/zero), TurboQuant 2-bit values",
      4.25, 2.25, false},
     {.method = VQ_KEY_KIVI, .bits = 4, .group_size = 128}, {.method = VQ_VALUE_TURBO, .bits = 2}},
    /* Keys at two widths per group (VQ_KEY_KIVI_MIX): the half of the
     * channels of the widest range at 4 bits, the other half at 2, 3.0 code
     * bits + 0.25 of f16 scale/zero + 1/128 of width mask. On SmolLM2-135M,
     * decoding with the 8-bit window, it loses about what kivi4-turbo2 loses
     * where uniform 3-bit KIVI keys lose three times more (docs/QUALITY.md).
     * CPU only. */
    {{"kivimix-turbo2",
      "KIVI keys per channel over 128 tokens, the widest-range half of each group's channels at 4 bits, the other "
      "half at 2 (f16 scale/zero, a width bit per channel), TurboQuant 2-bit values",
      3.2578125, 2.25, false},
     {.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 128}, {.method = VQ_VALUE_TURBO, .bits = 2}},
    /* The same split at 2-bit keys: 128-token key groups cost 0.25 bits of
     * scale/zero where kivi2's 32-token groups cost 1.0. The fewest bits of
     * the scalar codes (2.80 bits all-in at 2048 tokens on SmolLM2-135M with
     * the 8-bit window) but not the best 2-bit keys there: decoding, +27.6 %
     * perplexity against kivi2 keys' +8.5 % (with 4-bit keys in layers 1, 10,
     * 18; docs/QUALITY.md, "Where the bits go"). */
    {{"kivi2-turbo2", "KIVI 2-bit keys per channel over 128 tokens (f16 scale/zero), TurboQuant 2-bit values",
      2.25, 2.25, false},
     {.method = VQ_KEY_KIVI, .bits = 2, .group_size = 128}, {.method = VQ_VALUE_TURBO, .bits = 2}},
    {{"turbo2", "TurboQuant 2-bit keys (norm-corrected) and values, f32 scale per token", 2.25, 2.25, false},
     {.method = VQ_KEY_TURBO, .bits = 2, .norm_correct = true}, {.method = VQ_VALUE_TURBO, .bits = 2}},
    {{"turbo3", "TurboQuant 3-bit keys (norm-corrected) and values, f32 scale per token", 3.25, 3.25, false},
     {.method = VQ_KEY_TURBO, .bits = 3, .norm_correct = true}, {.method = VQ_VALUE_TURBO, .bits = 3}},
    {{"turbo4", "TurboQuant 4-bit keys (norm-corrected) and values, f32 scale per token", 4.25, 4.25, false},
     {.method = VQ_KEY_TURBO, .bits = 4, .norm_correct = true}, {.method = VQ_VALUE_TURBO, .bits = 4}},
    {{"rvq22", "TurboQuant residual 2+2-bit keys, TurboQuant 4-bit values", 4.5, 4.25, false},
     {.method = VQ_KEY_TURBO_RVQ, .bits = 2, .bits2 = 2}, {.method = VQ_VALUE_TURBO, .bits = 4}},
    {{"rabitq", "RaBitQ 1-bit keys (Hamming score, L1 magnitude), 4-bit Lloyd-Max codebook values", 1.25, 4.25,
      false},
     {.method = VQ_KEY_RABITQ, .rabitq_score = VQ_RABITQ_SCORE_HAMMING, .rabitq_mag = VQ_RABITQ_MAG_L1},
     {.method = VQ_VALUE_CODEBOOK, .bits = 4}},
    {{"rabitq-exact", "RaBitQ 1-bit keys (exact score, unbiased magnitude), 4-bit Lloyd-Max codebook values",
      1.25, 4.25, false},
     {.method = VQ_KEY_RABITQ, .rabitq_score = VQ_RABITQ_SCORE_EXACT, .rabitq_mag = VQ_RABITQ_MAG_UNBIASED},
     {.method = VQ_VALUE_CODEBOOK, .bits = 4}},
    {{"qjl", "QJL keys (2*D-row sign sketch + norm), KIVI 4-bit values", 2.25, 5, false},
     {.method = VQ_KEY_QJL}, {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 32}},
    {{"vecinfer2", "VecInfer product VQ keys (D/4 subspaces of 256 centroids: codebook passed in), KIVI 2-bit "
                   "values",
      2, 3, true},
     {.method = VQ_KEY_VECINFER}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
    {{"commvq", "CommVQ additive keys (codebook [R,256,D] passed in; 2 bits at R = D/4; plus an i32 position per "
                "token), KIVI 2-bit values",
      2, 3, true},
     {.method = VQ_KEY_COMMVQ}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
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
