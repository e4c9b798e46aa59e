/* presets.c — `vq presets`: the cache presets with their bits, the ones
 * named by what they buy first (vq_cache_preset). */
#include <stdio.h>

#include "args.h"
#include "commands.h"
#include "model_cli.h"
#include "report.h"
#include "veloxquant.h"

/* The window as Python's KVCache names it: "f16", "turbo8", "turbo1".."turbo7". */
static const char *window_name(const vq_cache_preset_info *p, char *buf, size_t cap)
{
    if (p->window == VQ_WINDOW_TURBO) snprintf(buf, cap, "turbo%d", p->window_bits);
    else snprintf(buf, cap, "%s", p->window == VQ_WINDOW_TURBO8 ? "turbo8" : "f16");
    return buf;
}

int vq_cmd_presets(int argc, char **argv)
{
    bool json = false;
    const vqa_opt opts[] = {VQA_JSON_OPT(&json)};
    const vqa_cmd cmd = {"presets", "the cache presets (--kv NAME, vq_cache_config.preset) and their bits", opts,
                         VQA_COUNT(opts),
                         "bits: the whole cache (pages, window, sink tokens) as vq_cache_memory counts it, one\n"
                         "sequence of 2048 tokens at head_dim 64; keys/values: the pages alone at head_dim 128.\n"};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (!json) {
        vqm_cli_list_presets(stdout);
        return VQ_EXIT_OK;
    }
    vqr *r = vqr_begin("presets", argc, argv, NULL, true);
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        vqr_row(r);
        vqr_str(r, "name", p->name);
        vqr_str(r, "description", p->description);
        vqr_bool(r, "recipe", p->recipe);
        if (p->recipe) vqr_num(r, "bits", p->bits, "bits/element (D 64, 2048 tokens, all-in)");
        vqr_num(r, "key_bits", p->key_bits, "bits/element (pages, D 128)");
        vqr_num(r, "value_bits", p->value_bits, "bits/element (pages, D 128)");
        vqr_bool(r, "needs_tables", p->needs_tables);
        vqr_int(r, "sink_tokens", p->sink_tokens, "tokens");
        vqr_bool(r, "center_keys", p->transforms.center_keys);
        vqr_bool(r, "center_values", p->transforms.center_values);
        vqr_bool(r, "smooth", p->transforms.smooth);
        vqr_int(r, "residual_tokens", p->residual_tokens, "tokens");
        char win[16];
        vqr_str(r, "window", window_name(p, win, sizeof win));
    }
    vqr_end(r);
    return VQ_EXIT_OK;
}
