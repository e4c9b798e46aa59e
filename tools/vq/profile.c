/* profile.c — `vq profile`: the plan a --kv method string describes for a
 * model (its shape from the GGUF), written as a profile file that every
 * --kv takes back (vq_profile_save; header section 5, "Profiles"). */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "model_cli.h"
#include "report.h"

int vq_cmd_profile(int argc, char **argv)
{
    const char *kv = NULL, *out = NULL;
    bool json = false;
    vqm_cli_common c = VQM_CLI_COMMON_DEFAULTS;
    const vqa_opt opts[] = {
        {"kv", VQA_STRING, &kv, 0, 0, "METHOD", "cache method as the model commands take it (required)"},
        {"out", VQA_OUT_FILE, &out, 0, 0, "FILE", "profile file to write (required)", NULL, 'o'},
        {"model", VQA_STRING, &c.model, 0, 0, "FILE", "GGUF model whose shape the profile is for", .short_name = 'm'},
        {"f16-layers", VQA_STRING, &c.f16_layers, 0, 0, "LIST", "layers kept in f16, e.g. 0,last (default none)"},
        {"residual", VQA_INT, &c.residual, 0, 65536, "N", "newest N tokens kept in the residual window"},
        {"sink", VQA_INT, &c.sink, 0, VQ_CACHE_MAX_SINK_TOKENS, "N", "first N tokens kept in f16 (attention sink)"},
        {"no-center", VQA_FLAG, &c.no_center, .help = "store raw keys/values (default: minus their mean, exact)"},
        {"center-keys", VQA_FLAG, &c.center_keys, .help = "center keys only, store values raw"},
        {"smooth", VQA_FLAG, &c.smooth, .help = "balance key/query channels before quantizing (exact)"},
        VQA_JSON_OPT(&json),
    };
    const vqa_cmd cmd = {"profile", "write the plan of a --kv method for a model as a profile file", opts,
                         VQA_COUNT(opts),
                         "The profile holds every layer's key and value methods with their parameters, the\n"
                         "residual window (length, storage, bits), the sink tokens and the transforms (centering,\n"
                         "smoothing: fitted per sequence), for the model's layers, kv heads, head dim and\n"
                         "sliding windows (its local layers'); a preset named by what it buys (balanced-3bit,\n"
                         "...) brings its own, as in the model commands, where --sink / --smooth leave them;\n"
                         "--kv FILE of the model commands and vq_cache_config.profile take it back. Methods that\n"
                         "need fitted tables keep taking them from --calibration.\n",
                         NULL, NULL, 0, NULL};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (kv == NULL || out == NULL) return vqa_usage_error(&cmd, "--kv and --out are required");
    vqm_model *model = vqm_cli_load("profile", c.model);
    if (model == NULL) return VQ_EXIT_FAILURE;
    const int L = model->cfg.n_layers, D = model->cfg.head_dim;
    static vqm_cli_method m;
    int st = vqm_cli_method_init(&m, "profile", kv, c.f16_layers, (int)c.residual, L, D, true);
    if (st == VQ_EXIT_OK && m.cfg.profile != NULL) {
        fprintf(stderr, "vq profile: --kv %s is a profile already\n", kv);
        st = VQ_EXIT_USAGE;
    }
    static vq_cache_layer_config layers[VQM_CLI_MAX_LAYERS];
    for (int l = 0; st == VQ_EXIT_OK && l < L; l++) {
        if (m.cfg.layers) layers[l] = m.cfg.layers[l];
        else vq_cache_preset_layer_config(m.cfg.preset, D, &layers[l]);
        for (int i = 0; i < m.cfg.n_f16_layers; i++)
            if (m.cfg.f16_layers[i] == l) layers[l] = (vq_cache_layer_config){{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
    }
    vq_ctx *ctx = NULL;
    vq_profile *p = NULL;
    if (st == VQ_EXIT_OK) {
        /* the sink and transforms as a session of the model commands would
         * take them: a preset named by what it buys brings its own */
        const vqm_cli_recipe rc = vqm_cli_recipe_of(&m, &c);
        static vq_cache_transforms xf[VQM_CLI_MAX_LAYERS];
        static int wins[VQM_CLI_MAX_LAYERS]; /* the model's sliding windows, which the runtime checks */
        for (int l = 0; l < L; l++) {
            xf[l] = (vq_cache_transforms){.center_keys = rc.center, .center_values = rc.center && !rc.center_keys_only,
                                          .smooth = rc.smooth};
            wins[l] = vqm_layer_window(model, l);
        }
        const vq_profile_config pc = {.n_layers = L, .n_kv_heads = model->cfg.n_kv_heads, .head_dim = D,
                                      .layers = layers, .residual_tokens = m.cfg.residual_tokens,
                                      .window = m.cfg.window, .window_bits = m.cfg.window_bits,
                                      .sink_tokens = rc.sink, .transforms = xf, .sliding_windows = wins};
        vq_status s = vq_ctx_create(&(vq_ctx_config){.num_threads = 1}, &ctx);
        if (s == VQ_OK) s = vq_profile_create(ctx, &pc, &p);
        if (s == VQ_OK) s = vq_profile_save(ctx, p, out);
        if (s != VQ_OK) {
            fprintf(stderr, "vq profile: %s\n", ctx ? vq_ctx_last_error(ctx) : "cannot create a ctx");
            st = VQ_EXIT_FAILURE;
        } else {
            size_t bytes = 0;
            vq_profile_save_buffer(ctx, p, NULL, 0, &bytes);
            vqr *r = vqr_begin("profile", argc, argv, ctx, json);
            if (r) {
                vqr_row(r);
                vqr_str(r, "kv", kv);
                vqr_int(r, "layers", L, NULL);
                vqr_int(r, "kv_heads", model->cfg.n_kv_heads, NULL);
                vqr_int(r, "head_dim", D, NULL);
                vqr_int(r, "residual_tokens", m.cfg.residual_tokens, "tokens");
                vqr_int(r, "file_bytes", (int64_t)bytes, "B");
                vqr_str(r, "file", out);
                vqr_end(r);
            } else {
                printf("wrote %s: %d layers, %d kv heads, head dim %d, residual window %d tokens (%zu bytes)\n", out,
                       L, model->cfg.n_kv_heads, D, m.cfg.residual_tokens, bytes);
            }
        }
    }
    vq_profile_free(p);
    vq_ctx_free(ctx);
    vqm_model_free(model);
    return st;
}
