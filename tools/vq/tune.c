/* tune.c — `vq tune`: a per-layer plan of key and value methods for a bit
 * budget, chosen from what each layer's keys and values cost the model. The
 * tuner is tools/tune (vqtune.h, where its method is described); this file
 * parses the options, shows progress, and writes the profile, the report
 * and the plots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "model_cli.h"
#include "plot_png.h"
#include "progress.h"
#include "report.h"
#include "tool.h"
#include "vqtune.h"

/* The tuner's progress on the terminal (progress.h). */
static int show_progress(void *user, int64_t done, int64_t total, const char *step)
{
    vqp *p = user;
    if (done == 0) vqp_begin(p, "tune", total);
    p->total = total; /* a search adds its runs round by round */
    vqp_step(p, "%s", step);
    return 0;
}

/* --frontier: the predicted KL of the plans for budgets from the cheapest
 * up to 3 bits above it (0.05-bit steps), and the measured KL of the
 * checked plans, against their bits. */
static int draw_frontier(const char *path, const vqt_tune_result *r)
{
    enum { MAX_PTS = 400 };
    vq_plot_point pts[MAX_PTS];
    int n = 0;
    double last = -1;
    for (double B = r->min_bits; n < MAX_PTS - VQT_TUNE_CHECKS && B <= r->min_bits + 3; B += 0.05) {
        double got;
        const double pred = vqt_tune_predict(r, B, &got);
        if (got == last) continue;
        last = got;
        pts[n++] = (vq_plot_point){got, pred, NULL, 0};
    }
    for (int b = 0; b < r->n_checks; b++) pts[n++] = (vq_plot_point){r->checks[b].bits, r->checks[b].measured_kl, NULL, 1};
    const vq_plot pl = {.title = "vq tune: loss against bits per element (all bytes counted)",
                        .x_label = "bits per element", .y_label = "KL against f16 (mean per token)", .log_y = true,
                        .points = pts, .n_points = n, .series_names = {"predicted", "measured"}};
    char err[256];
    if (vq_plot_png(path, &pl, err, sizeof err) != 0) {
        fprintf(stderr, "vq tune: --frontier: %s\n", err);
        return -1;
    }
    return 0;
}

int vq_cmd_tune(int argc, char **argv)
{
    vqm_cli_common common = VQM_CLI_COMMON_DEFAULTS;
    const char *text_path = "data/pride_and_prejudice.txt", *out = NULL, *plot = NULL, *frontier = NULL;
    const char *keys = VQT_TUNE_DEFAULT_KEYS, *values = VQT_TUNE_DEFAULT_VALUES;
    double budget = 0;
    const char *suffix = "", *measurements = NULL, *base = "f16";
    int64_t tokens = 1024, C = 512, bits_ctx = 0, search = 0;
    bool json = false;
    const vqa_opt opts[] = {
        {"bits", VQA_REAL, &budget, 1, 16, "B", "bits per element, keys and values, all bytes counted (required)"},
        {"text", VQA_STRING, &text_path, 0, 0, "FILE", "calibration text (its last --tokens tokens)"},
        {"tokens", VQA_SIZE, &tokens, 64, 1 << 20, "N", "calibration tokens"},
        {"ctx", VQA_SIZE, &C, 64, 1 << 16, "C", "window length of the calibration runs and of the bit count"},
        {"bits-ctx", VQA_SIZE, &bits_ctx, 0, 1 << 20, "N", "tokens of the cache whose bits meet --bits (0 = --ctx; "
         "the scored window length, e.g. 2048)"},
        {"window", VQA_STRING, &suffix, 0, 0, "SUFFIXES", "the residual window of every plan as --kv suffixes, e.g. "
         "+w8+r64 (default: f16, --residual tokens)"},
        {"measurements", VQA_STRING, &measurements, 0, 0, "FILE", "the sensitivities: read from FILE when it exists "
         "(same model, layers, candidates and --base), else measured and written there"},
        {"base", VQA_STRING, &base, 0, 0, "f16|cheapest", "the plan each part's candidates are measured around: "
         "cheapest, every other part at its cheapest candidate; f16, every other part f16"},
        {"search", VQA_SIZE, &search, 0, VQT_TUNE_MAX_SEARCH, "K", "also build a plan by measured upgrades from the "
         "cheapest: each round runs the plan with each of the K best-ranked upgrades of the keys and of the values, "
         "keeps the one that lowers the KL most per bit; the profile is the lower-KL plan (default 0: no search)"},
        {"out", VQA_OUT_FILE, &out, 0, 0, "FILE", "profile file to write (required)", NULL, 'o'},
        {"plot", VQA_OUT_FILE, &plot, 0, 0, "FILE.png", "draw measured against predicted KL of plans around B"},
        {"frontier", VQA_OUT_FILE, &frontier, 0, 0, "FILE.png", "draw the loss against the bits: the predicted "
         "KL of the plans for budgets from the cheapest up in 0.05-bit steps, and the measured KL of the checked "
         "plans"},
        {"keys", VQA_STRING, &keys, 0, 0, "LIST", "presets whose key methods are the candidates; f16 too where named "
         "or with --base f16"},
        {"values", VQA_STRING, &values, 0, 0, "LIST", "presets whose value methods are the candidates; f16 too where "
         "named or with --base f16"},
        VQM_CLI_COMMON_OPTS(common),
        VQA_JSON_OPT(&json),
    };
    const vqa_cmd cmd = {"tune", "choose each layer's key and value methods for a bit budget", opts, VQA_COUNT(opts),
                         "Measures, on the last --tokens tokens of the text, what each layer's keys and values\n"
                         "cost the model (mean KL of the next-token distribution against the f16 cache) at each\n"
                         "candidate method, then picks per layer the methods that meet --bits at the least\n"
                         "predicted loss, checks the plan on the same text, and writes it as a profile file\n"
                         "(--kv FILE of generate, perplexity and bench model).\n"
                         "--base cheapest measures each part (a layer's keys, or its values) at\n"
                         "each candidate with every other part at its cheapest candidate, where the plan will\n"
                         "be; f16 is a candidate only where --keys / --values name it. It runs the model 2 + L x\n"
                         "(candidates besides each part's cheapest) + 5 times over --tokens (30 layers, the\n"
                         "default candidates: 217 runs). --base f16 (the default) measures each part with every other part\n"
                         "f16 (f16 always a candidate): 1 + L x (candidates besides f16) + 5 runs (276).\n"
                         "Either predicts a plan's KL as the base plan's plus each part's change from it.\n"
                         "From --measurements FILE: 1 + 5 runs. --search K adds up to 2K runs a round,\n"
                         "a round for each upgrade it keeps (tens of runs for a budget a few tenths of a bit\n"
                         "above the cheapest plan).\n"
                         "Score other text with `vq perplexity --max-tokens` below the tuned part.\n"
                         "The sink and transform options (--sink, --smooth, ...) apply to every run, as in\n"
                         "perplexity; use the same ones when scoring the profile.\n",
                         NULL, NULL, 0, NULL};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (budget <= 0 || out == NULL) return vqa_usage_error(&cmd, "--bits and --out are required");
    if (C % 2 != 0 || tokens < C) return vqa_usage_error(&cmd, "--ctx must be even and at most --tokens");
    vqp prog = {0};
    const vqt_tune_options o = {.bits = budget, .text_name = text_path,
                                .tokens = tokens, .ctx = C, .bits_ctx = bits_ctx, .window = suffix, .keys = keys,
                                .values = values, .measurements = measurements, .base = base, .search = (int)search,
                                .residual = (int)common.residual,
                                .sink = (int)common.sink, .no_center = common.no_center,
                                .center_keys = common.center_keys, .smooth = common.smooth,
                                .batch = (int)common.batch, .kivi_arith = common.kivi_arith, .opt_prefix = "--",
                                .progress = show_progress, .progress_user = &prog};
    char err[VQT_TUNE_ERR_LEN];
    if (vqt_tune_validate(&o, err) != VQ_OK) return vqa_usage_error(&cmd, "%s", err); /* before the model loads */
    vqm_model *model = vqm_cli_load("tune", common.model);
    if (model == NULL) return VQ_EXIT_FAILURE;
    vq_ctx *ctx = tool_ctx((int)common.threads, NULL);
    vqt_tune_result *r = NULL;
    const vq_status st = vqt_tune(ctx, model, &o, &r, err);
    if (prog.command != NULL) {
        if (st == VQ_OK) vqp_end(&prog);
        else vqp_clear(&prog);
    }
    if (st != VQ_OK) {
        fprintf(stderr, "vq tune: %s\n", err);
        return st == VQ_ERR_INVALID_ARGUMENT ? VQ_EXIT_USAGE : VQ_EXIT_FAILURE;
    }
    tool_check(ctx, vq_profile_save(ctx, r->profile, out), "vq tune: writing the profile");
    const int L = r->n_layers;
    const vqt_tune_check *chk = r->checks;
    vqr *rep = vqr_begin("tune", argc, argv, ctx, json);
    if (!json) {
        printf("tuned on the last %lld tokens of %s (%lld windows of %lld), %.0f s\n",
               (long long)(r->n_windows * C), text_path, (long long)r->n_windows, (long long)C, r->seconds);
        if (r->base_cheapest)
            printf("base: the cheapest plan (%.3f bits), KL %.4e; a part's KL is the plan's with that part changed\n",
                   r->min_bits, r->base_kl);
        else printf("base: the f16 cache; a part's KL is that part's alone, every other part f16\n");
        for (int k = 0; k < 1 + (r->sliding_window > 0); k++) {
            if (k == 0)
                printf("candidate   keys bits  values bits   (bits per element at %lld tokens, all bytes counted%s)\n",
                       (long long)r->bits_ctx, r->sliding_window ? "; full-attention layers" : "");
            else
                printf("local layers (sliding window %d), over the %lld tokens they hold:\n", r->sliding_window,
                       (long long)r->held_local);
            for (int i = 0; i < (r->n_keys > r->n_values ? r->n_keys : r->n_values); i++)
                printf("%-16s %6.3f   %-12s %6.3f\n", i < r->n_keys ? r->keys[i].name : "",
                       i < r->n_keys ? (k ? r->keys[i].bits_local : r->keys[i].bits) : 0,
                       i < r->n_values ? r->values[i].name : "",
                       i < r->n_values ? (k ? r->values[i].bits_local : r->values[i].bits) : 0);
        }
        printf("layer  keys            KL        values          KL\n");
        for (int l = 0; l < L; l++) {
            const int k = r->key_pick[l], v = r->value_pick[l];
            printf("%5d  %-15s %.2e  %-15s %.2e\n", l, r->keys[k].name, r->loss[(size_t)l * VQT_TUNE_MAX_CAND + k],
                   r->values[v].name, r->loss[(size_t)(L + l) * VQT_TUNE_MAX_CAND + v]);
        }
        printf("plan        bits     predicted KL  measured KL\n");
        for (int b = 0; b < r->n_checks; b++)
            printf("%-10s %8.3f   %.4e     %.4e\n", b == 0 ? (r->chose_search ? "allocated" : "chosen") : "",
                   chk[b].bits, chk[b].predicted_kl, chk[b].measured_kl);
        if (o.search > 0)
            printf("%-10s %8.3f   %.4e     %.4e   (%d upgrades kept in %lld runs)\n",
                   r->chose_search ? "searched, chosen" : "searched", r->searched.bits, r->searched.predicted_kl,
                   r->searched.measured_kl, r->search_rounds, (long long)r->search_runs);
        printf("profile: %s\n--kv equivalent: %s\n", out, r->kv);
    }
    vqr_info_str(rep, "profile", out);
    vqr_info_str(rep, "kv", r->kv);
    vqr_info_num(rep, "budget_bits", budget, "bits/element");
    vqr_info_str(rep, "base", r->base_cheapest ? "cheapest" : "f16");
    vqr_info_num(rep, "base_kl", r->base_kl, NULL);
    vqr_info_num(rep, "min_bits", r->min_bits, "bits/element");
    const vqt_tune_check *chosen = r->chose_search ? &r->searched : &chk[0];
    vqr_info_num(rep, "bits", chosen->bits, "bits/element");
    vqr_info_num(rep, "predicted_kl", chosen->predicted_kl, NULL);
    vqr_info_num(rep, "measured_kl", chosen->measured_kl, NULL);
    vqr_info_str(rep, "plan", r->chose_search ? "searched" : "allocated");
    if (o.search > 0) {
        vqr_info_num(rep, "allocated_bits", chk[0].bits, "bits/element");
        vqr_info_num(rep, "allocated_measured_kl", chk[0].measured_kl, NULL);
        vqr_info_num(rep, "searched_bits", r->searched.bits, "bits/element");
        vqr_info_num(rep, "searched_measured_kl", r->searched.measured_kl, NULL);
        vqr_info_num(rep, "search_rounds", r->search_rounds, NULL);
        vqr_info_num(rep, "search_runs", (double)r->search_runs, NULL);
    }
    vqr_info_num(rep, "seconds", r->seconds, "s");
    for (int l = 0; l < L; l++) {
        const int k = r->key_pick[l], v = r->value_pick[l];
        vqr_row(rep);
        vqr_int(rep, "layer", l, NULL);
        vqr_str(rep, "keys", r->keys[k].name);
        vqr_num(rep, "keys_kl", r->loss[(size_t)l * VQT_TUNE_MAX_CAND + k], NULL);
        vqr_str(rep, "values", r->values[v].name);
        vqr_num(rep, "values_kl", r->loss[(size_t)(L + l) * VQT_TUNE_MAX_CAND + v], NULL);
    }
    vqr_end(rep);
    if (plot != NULL) {
        vq_plot_point pts[VQT_TUNE_CHECKS];
        char labels[VQT_TUNE_CHECKS][32];
        for (int b = 0; b < r->n_checks; b++) {
            snprintf(labels[b], sizeof labels[b], "%.2f bits", chk[b].bits);
            pts[b] = (vq_plot_point){chk[b].predicted_kl, chk[b].measured_kl, labels[b], b == 0 ? 1 : 0};
        }
        const vq_plot pl = {.title = "vq tune: measured against predicted KL of plans around the budget",
                            .x_label = "predicted KL (sum over layers)", .y_label = "measured KL", .points = pts,
                            .n_points = r->n_checks, .series_names = {"around the budget", "chosen plan"}};
        char perr[256];
        if (vq_plot_png(plot, &pl, perr, sizeof perr) != 0) {
            fprintf(stderr, "vq tune: --plot: %s\n", perr);
            return VQ_EXIT_FAILURE;
        }
    }
    if (frontier != NULL && draw_frontier(frontier, r) != 0) return VQ_EXIT_FAILURE;
    vqt_tune_result_free(r);
    vq_ctx_free(ctx);
    vqm_model_free(model);
    return VQ_EXIT_OK;
}
