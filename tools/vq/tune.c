/* tune.c — `vq tune`: a per-layer plan of key and value methods for a bit
 * budget, chosen from what each layer's keys and values cost the model.
 *
 * Method (docs/QUALITY.md, "Tuning"):
 * 1. Calibration text: the last --tokens tokens of the text, cut into windows
 *    of --ctx tokens; `vq perplexity` scores windows from the start, so with
 *    --max-tokens <= (text tokens - --tokens) the two never share a token.
 * 2. Reference: the f16 cache's next-token distribution at every scored
 *    position (the second half of each window, as `vq perplexity`).
 * 3. Sensitivity, keys and values apart: for each layer and each candidate
 *    method of its keys (then of its values), every other part f16, the mean
 *    KL(f16 || trial) over the scored positions.
 * 4. Cost: each candidate's bits per element as vq_cache_memory counts them
 *    (codes, scales, the residual window) in a cache of one layer filled to
 *    --ctx tokens.
 * 5. Allocation: the losses are taken as additive over parts; starting from
 *    every part at its cheapest candidate, the upgrade with the largest loss
 *    saved per bit that still fits the budget is taken until none fits.
 * 6. Check: the chosen plan (and plans for budgets around it) run on the
 *    calibration windows; predicted and measured KL are printed and plotted.
 * The plan is written as a profile file (--kv FILE of every model command,
 * vq_profile_load), and as the equivalent --kv string. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "lm_eval.h"
#include "model_cli.h"
#include "plot_png.h"
#include "progress.h"
#include "report.h"
#include "tool.h"

/* Candidates: the key (value) method of a preset; f16 is always one. */
#define DEFAULT_KEYS "kivi2-turbo2,kivi2,kivimix-turbo2,kivi4-turbo2,kivi4"
#define DEFAULT_VALUES "turbo2,turbo3,turbo4,kivi4"
enum { MAX_CAND = 8, CHECK_BUDGETS = 5 };

typedef struct cand {
    const char *preset; /* whose key (value) method; "f16" */
    vq_cache_layer_config lc;
    double bits;        /* bits per element of this part */
} cand;

typedef struct part {
    double loss[MAX_CAND]; /* mean KL with only this part at candidate i */
    int pick;
} part;

typedef struct tuner {
    const vqm_model *model;
    vq_ctx *ctx;
    const vqm_cli_common *common;
    const int32_t *toks;   /* calibration tokens */
    int64_t n_windows, C;
    int L, V;
    float *ref;            /* [windows][C/2][V] log-probabilities of the f16 cache (f32) */
    float *logits;         /* [batch][V] */
    double *lp;            /* [V] */
    vqm_cli_method method; /* the plan under test: layers[] */
    vqp prog;
} tuner;

/* A preset that needs fitted tables (VecInfer, CommVQ keys) is no candidate. */
static bool needs_tables(const char *name)
{
    for (int i = 0; i < vq_cache_preset_count(); i++)
        if (strcmp(vq_cache_preset(i)->name, name) == 0) return vq_cache_preset(i)->needs_tables;
    return false;
}

/* Runs the plan in t->method over the calibration windows: mean KL against
 * the reference (or, with fill_ref, records the reference and returns 0). */
static double run_plan(tuner *t, bool fill_ref)
{
    char err[VQM_ERR_LEN];
    vqm_session *s = vqm_cli_session("tune", t->model, t->ctx, &t->method, (int)t->C, t->common);
    if (s == NULL) exit(VQ_EXIT_FAILURE);
    const int64_t C = t->C, half = C / 2, first = half - 1, B = t->common->batch;
    double kl = 0;
    int64_t n = 0;
    for (int64_t w = 0; w < t->n_windows; w++) {
        tool_check(t->ctx, vqm_session_reset(s, err) == VQ_OK ? VQ_OK : VQ_ERR_INVALID_ARGUMENT, err);
        const int32_t *win = t->toks + w * C;
        for (int64_t p0 = 0; p0 < C; p0 += B) {
            const int64_t T = C - p0 < B ? C - p0 : B;
            const int64_t lo = first > p0 ? first : p0, n_out = lo < p0 + T ? p0 + T - lo : 0;
            if (vqm_forward(s, win + p0, T, n_out, t->logits, err) != VQ_OK) {
                fprintf(stderr, "vq tune: %s\n", err);
                exit(VQ_EXIT_FAILURE);
            }
            for (int64_t r = 0; r < n_out; r++) {
                const int64_t pos = lo + r;
                if (pos >= C - 1) continue;
                float *ref = t->ref + ((size_t)w * (size_t)half + (size_t)(pos - first)) * (size_t)t->V;
                vqt_log_softmax(t->logits + (size_t)r * t->V, t->V, t->lp);
                if (fill_ref) {
                    for (int i = 0; i < t->V; i++) ref[i] = (float)t->lp[i];
                    continue;
                }
                kl += vqt_kl(ref, t->lp, t->V);
                n++;
            }
        }
    }
    vqm_session_free(s);
    return n ? kl / (double)n : 0;
}

/* Bits per element of a part at candidate c: a one-layer cache of the
 * model's shape filled to C tokens (random data: the sizes do not depend on
 * it), keys (values) alone as vq_cache_memory counts them. */
static double measure_bits(const tuner *t, const vq_cache_layer_config *lc, bool keys)
{
    const vqm_config *mc = &t->model->cfg;
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = mc->n_kv_heads, .n_q_heads = mc->n_heads,
                                 .head_dim = mc->head_dim, .capacity_pages = 64, .grow_pages = 64,
                                 .max_sequences = 1, .residual_tokens = (int)t->common->residual, .layers = lc};
    vq_cache *c = NULL;
    tool_check(t->ctx, vq_cache_create(t->ctx, &cfg, &c), "vq tune: a trial cache");
    int64_t id;
    tool_check(t->ctx, vq_cache_seq_add(c, &id), "vq tune: a trial sequence");
    const int64_t n = (int64_t)mc->n_kv_heads * t->C * mc->head_dim;
    uint16_t *kv = tool_calloc((size_t)n, sizeof *kv);
    vq_rng rng;
    vq_rng_seed(&rng, 1);
    for (int64_t i = 0; i < n; i++) kv[i] = vq_f32_to_f16((float)vq_rng_normal(&rng));
    int64_t shape[4] = {1, mc->n_kv_heads, t->C, mc->head_dim};
    DLTensor x = {.data = kv, .device = {kDLCPU, 0}, .ndim = 4, .dtype = {kDLFloat, 16, 1}, .shape = shape};
    tool_check(t->ctx, vq_cache_append(c, 0, 1, &id, &x, &x, NULL), "vq tune: a trial append");
    vq_cache_memory_report r;
    tool_check(t->ctx, vq_cache_memory(c, &r), "vq tune: a trial's memory");
    free(kv);
    vq_cache_free(c);
    return keys ? r.key_bits_per_element : r.value_bits_per_element;
}

static void set_f16(tuner *t)
{
    for (int l = 0; l < t->L; l++)
        t->method.layers[l] = (vq_cache_layer_config){{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
}

/* The plan of the parts' picks into t->method (keys of layer l: part l,
 * values: part L + l). */
static void set_plan(tuner *t, const part *parts, const cand *kc, const cand *vc)
{
    for (int l = 0; l < t->L; l++) {
        t->method.layers[l].keys = kc[parts[l].pick].lc.keys;
        t->method.layers[l].values = vc[parts[t->L + l].pick].lc.values;
    }
}

/* Greedy allocation under `budget` bits per element (the mean over parts);
 * returns the predicted loss, and the plan's bits in *bits. */
static double allocate(const tuner *t, part *parts, const cand *kc, int nk, const cand *vc, int nv, double budget,
                       double *bits)
{
    const int P = 2 * t->L;
    double used = 0, loss = 0;
    for (int p = 0; p < P; p++) {
        const cand *c = p < t->L ? kc : vc;
        const int n = p < t->L ? nk : nv;
        int cheap = 0;
        for (int i = 1; i < n; i++)
            if (c[i].bits < c[cheap].bits) cheap = i;
        parts[p].pick = cheap;
        used += c[cheap].bits;
        loss += parts[p].loss[cheap];
    }
    for (;;) {
        int bp = -1, bi = -1;
        double best = 0;
        for (int p = 0; p < P; p++) {
            const cand *c = p < t->L ? kc : vc;
            const int n = p < t->L ? nk : nv, cur = parts[p].pick;
            for (int i = 0; i < n; i++) {
                const double db = c[i].bits - c[cur].bits, dl = parts[p].loss[cur] - parts[p].loss[i];
                if (db <= 0 || dl <= 0 || (used + db) / P > budget + 1e-9) continue;
                if (dl / db > best) best = dl / db, bp = p, bi = i;
            }
        }
        if (bp < 0) break;
        const cand *c = bp < t->L ? kc : vc;
        used += c[bi].bits - c[parts[bp].pick].bits;
        loss -= parts[bp].loss[parts[bp].pick] - parts[bp].loss[bi];
        parts[bp].pick = bi;
    }
    *bits = used / P;
    return loss;
}

/* The --kv string of the plan: the most common KEYS/VALUES pair as the base,
 * every other pair as "@LAYERS=KEYS/VALUES" (model_cli.h). */
static void kv_string(const tuner *t, const part *parts, const cand *kc, const cand *vc, char *out, size_t cap)
{
    int count[MAX_CAND][MAX_CAND] = {{0}}, bk = 0, bv = 0;
    for (int l = 0; l < t->L; l++) count[parts[l].pick][parts[t->L + l].pick]++;
    for (int i = 0; i < MAX_CAND; i++)
        for (int j = 0; j < MAX_CAND; j++)
            if (count[i][j] > count[bk][bv]) bk = i, bv = j;
    size_t len = (size_t)snprintf(out, cap, "%s/%s", kc[bk].preset, vc[bv].preset);
    for (int i = 0; i < MAX_CAND; i++)
        for (int j = 0; j < MAX_CAND; j++) {
            if ((i == bk && j == bv) || count[i][j] == 0) continue;
            const char *sep = "@";
            for (int l = 0; l < t->L; l++) {
                if (parts[l].pick != i || parts[t->L + l].pick != j) continue;
                len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%d", sep, l);
                sep = ".";
            }
            len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "=%s/%s", kc[i].preset, vc[j].preset);
        }
}

int vq_cmd_tune(int argc, char **argv)
{
    vqm_cli_common common = VQM_CLI_COMMON_DEFAULTS;
    const char *text_path = "data/pride_and_prejudice.txt", *out = NULL, *plot = NULL;
    const char *keys = DEFAULT_KEYS, *values = DEFAULT_VALUES;
    double budget = 0;
    int64_t tokens = 1024, C = 512;
    bool json = false;
    const vqa_opt opts[] = {
        {"bits", VQA_REAL, &budget, 1, 16, "B", "bits per element, keys and values, all bytes counted (required)"},
        {"text", VQA_STRING, &text_path, 0, 0, "FILE", "calibration text (its last --tokens tokens)"},
        {"tokens", VQA_SIZE, &tokens, 64, 1 << 20, "N", "calibration tokens"},
        {"ctx", VQA_SIZE, &C, 64, 1 << 16, "C", "window length of the calibration runs and of the bit count"},
        {"out", VQA_OUT_FILE, &out, 0, 0, "FILE", "profile file to write (required)", NULL, 'o'},
        {"plot", VQA_OUT_FILE, &plot, 0, 0, "FILE.png", "draw measured against predicted KL of plans around B"},
        {"keys", VQA_STRING, &keys, 0, 0, "LIST", "presets whose key methods are the candidates (besides f16) (default "
         DEFAULT_KEYS ")"},
        {"values", VQA_STRING, &values, 0, 0, "LIST", "presets whose value methods are the candidates (besides f16) "
         "(default " DEFAULT_VALUES ")"},
        VQM_CLI_COMMON_OPTS(common),
        VQA_JSON_OPT(&json),
    };
    const vqa_cmd cmd = {"tune", "choose each layer's key and value methods for a bit budget", opts, VQA_COUNT(opts),
                         "Measures, on the last --tokens tokens of the text, what each layer's keys and values\n"
                         "cost the model (mean KL of the next-token distribution against the f16 cache) at each\n"
                         "candidate method, then picks per layer the methods that meet --bits at the least\n"
                         "predicted loss, checks the plan on the same text, and writes it as a profile file\n"
                         "(--kv FILE of generate, perplexity and bench model). It runs the model 1 + L x\n"
                         "(candidates) + 5 times over --tokens (30 layers, the default candidates: 276 runs).\n"
                         "Score other text with `vq perplexity --max-tokens` below the tuned part.\n"
                         "The sink and transform options (--sink, --smooth, ...) apply to every run, as in\n"
                         "perplexity; use the same ones when scoring the profile.\n",
                         NULL, NULL, 0, NULL};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (budget <= 0 || out == NULL) return vqa_usage_error(&cmd, "--bits and --out are required");
    if (C % 2 != 0 || tokens < C) return vqa_usage_error(&cmd, "--ctx must be even and at most --tokens");
    vqm_model *model = vqm_cli_load("tune", common.model);
    if (model == NULL) return VQ_EXIT_FAILURE;
    tuner t = {.model = model, .common = &common, .C = C, .n_windows = tokens / C, .L = model->cfg.n_layers,
               .V = model->cfg.vocab};
    t.ctx = tool_ctx((int)common.threads, NULL);
    const int D = model->cfg.head_dim;
    if (vqm_cli_method_init(&t.method, "tune", "f16", NULL, (int)common.residual, t.L, D, false) != VQ_EXIT_OK)
        return VQ_EXIT_FAILURE;
    t.method.cfg.preset = NULL;
    t.method.cfg.layers = t.method.layers;
    t.ref = tool_calloc((size_t)t.n_windows * (size_t)(C / 2) * (size_t)t.V, sizeof *t.ref);
    t.logits = tool_calloc((size_t)common.batch * (size_t)t.V, sizeof *t.logits);
    t.lp = tool_calloc((size_t)t.V, sizeof *t.lp);
    /* candidates: f16 first */
    cand kc[MAX_CAND], vc[MAX_CAND];
    int nk = 0, nv = 0;
    kc[nk++] = (cand){"f16", {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}}, 0};
    vc[nv++] = kc[0];
    char klist[512], vlist[512];
    snprintf(klist, sizeof klist, "%s", keys);
    snprintf(vlist, sizeof vlist, "%s", values);
    for (int side = 0; side < 2; side++) {
        cand *c = side ? vc : kc;
        int *n = side ? &nv : &nk;
        for (char *save = NULL, *w = strtok_r(side ? vlist : klist, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            vq_cache_layer_config lc;
            if (strcmp(w, "f16") == 0) continue;
            if (*n == MAX_CAND || vq_cache_preset_layer_config(w, D, &lc) != VQ_OK ||
                needs_tables(w)) {
                fprintf(stderr, "vq tune: --%s: '%s' is not a preset without fitted tables (or more than %d)\n",
                        side ? "values" : "keys", w, MAX_CAND - 1);
                return VQ_EXIT_USAGE;
            }
            if (side) lc.keys = (vq_key_config){.method = VQ_KEY_F16};
            else lc.values = (vq_value_config){.method = VQ_VALUE_F16};
            c[(*n)++] = (cand){w, lc, 0};
        }
    }
    for (int i = 0; i < nk; i++) kc[i].bits = measure_bits(&t, &kc[i].lc, true);
    for (int i = 0; i < nv; i++) vc[i].bits = measure_bits(&t, &vc[i].lc, false);
    double min_bits = 0;
    {
        double mk = kc[0].bits, mv = vc[0].bits;
        for (int i = 1; i < nk; i++) mk = kc[i].bits < mk ? kc[i].bits : mk;
        for (int i = 1; i < nv; i++) mv = vc[i].bits < mv ? vc[i].bits : mv;
        min_bits = (mk + mv) / 2;
    }
    if (budget < min_bits) {
        fprintf(stderr, "vq tune: --bits %.3g: no plan of these candidates fits; the cheapest takes %.3f bits per "
                        "element at --ctx %lld\n", budget, min_bits, (long long)C);
        return VQ_EXIT_USAGE;
    }
    size_t len = 0;
    char *text = vqt_read_text(text_path, &len);
    if (text == NULL) {
        fprintf(stderr, "vq tune: cannot read '%s'\n", text_path);
        return VQ_EXIT_FAILURE;
    }
    const int64_t nt = vqm_tokenize(model->tok, text, len, false, NULL, 0);
    int32_t *all = tool_calloc((size_t)nt + 1, sizeof *all);
    vqm_tokenize(model->tok, text, len, false, all, nt);
    free(text);
    if (nt < tokens) {
        fprintf(stderr, "vq tune: '%s' has %lld tokens, fewer than --tokens %lld\n", text_path, (long long)nt,
                (long long)tokens);
        return VQ_EXIT_USAGE;
    }
    t.toks = all + nt - t.n_windows * C;
    part *parts = tool_calloc(2 * (size_t)t.L, sizeof *parts);
    const int64_t runs = 1 + (int64_t)t.L * (nk - 1 + nv - 1) + CHECK_BUDGETS;
    const double t0 = tool_now();
    vqp_begin(&t.prog, "tune", runs);
    vqp_step(&t.prog, "f16 reference");
    set_f16(&t);
    run_plan(&t, true);
    for (int l = 0; l < t.L; l++) {
        for (int i = 1; i < nk; i++) {
            vqp_step(&t.prog, "layer %d keys %s", l, kc[i].preset);
            set_f16(&t);
            t.method.layers[l].keys = kc[i].lc.keys;
            parts[l].loss[i] = run_plan(&t, false);
        }
        for (int i = 1; i < nv; i++) {
            vqp_step(&t.prog, "layer %d values %s", l, vc[i].preset);
            set_f16(&t);
            t.method.layers[l].values = vc[i].lc.values;
            parts[t.L + l].loss[i] = run_plan(&t, false);
        }
    }
    /* the plan, and plans around it for the check */
    const double offsets[CHECK_BUDGETS] = {0, -0.5, -0.25, 0.25, 0.5};
    double pred[CHECK_BUDGETS], meas[CHECK_BUDGETS], got_bits[CHECK_BUDGETS];
    part *plan = tool_calloc(2 * (size_t)t.L, sizeof *plan);
    int n_checked = 0;
    for (int b = 0; b < CHECK_BUDGETS; b++) {
        const double B = budget + offsets[b];
        vqp_step(&t.prog, "check the plan at %.2f bits", B);
        if (B < min_bits || B > 16) continue;
        pred[n_checked] = allocate(&t, parts, kc, nk, vc, nv, B, &got_bits[n_checked]);
        if (b == 0) memcpy(plan, parts, 2 * (size_t)t.L * sizeof *plan);
        set_plan(&t, parts, kc, vc);
        meas[n_checked] = run_plan(&t, false);
        n_checked++;
    }
    vqp_end(&t.prog);
    /* write the profile */
    set_plan(&t, plan, kc, vc);
    /* the model's sliding windows (its local layers'), which a profile
     * carries and the runtime checks */
    int *wins = tool_calloc((size_t)t.L, sizeof *wins);
    for (int l = 0; l < t.L; l++) wins[l] = model->layers[l].local ? model->cfg.sliding_window : 0;
    const vq_profile_config pc = {.n_layers = t.L, .n_kv_heads = model->cfg.n_kv_heads, .head_dim = D,
                                  .layers = t.method.layers, .residual_tokens = (int)common.residual,
                                  .sliding_windows = wins};
    vq_profile *prof = NULL;
    tool_check(t.ctx, vq_profile_create(t.ctx, &pc, &prof), "vq tune: the profile");
    tool_check(t.ctx, vq_profile_save(t.ctx, prof, out), "vq tune: writing the profile");
    vq_profile_free(prof);
    free(wins);
    char kv[4096];
    kv_string(&t, plan, kc, vc, kv, sizeof kv);
    vqr *r = vqr_begin("tune", argc, argv, t.ctx, json);
    if (!json) {
        printf("tuned on the last %lld tokens of %s (%lld windows of %lld), %.0f s\n",
               (long long)(t.n_windows * C), text_path, (long long)t.n_windows, (long long)C, tool_now() - t0);
        printf("candidate   keys bits  values bits   (bits per element at ctx %lld, all bytes counted)\n",
               (long long)C);
        for (int i = 0; i < (nk > nv ? nk : nv); i++)
            printf("%-16s %6.3f   %-12s %6.3f\n", i < nk ? kc[i].preset : "", i < nk ? kc[i].bits : 0,
                   i < nv ? vc[i].preset : "", i < nv ? vc[i].bits : 0);
        printf("layer  keys            KL        values          KL\n");
        for (int l = 0; l < t.L; l++)
            printf("%5d  %-15s %.2e  %-15s %.2e\n", l, kc[plan[l].pick].preset, plan[l].loss[plan[l].pick],
                   vc[plan[t.L + l].pick].preset, plan[t.L + l].loss[plan[t.L + l].pick]);
        printf("budget      bits     predicted KL  measured KL\n");
        for (int b = 0; b < n_checked; b++) printf("%6s  %8.3f   %.4e     %.4e\n", b == 0 ? "chosen" : "",
                                                   got_bits[b], pred[b], meas[b]);
        printf("profile: %s\n--kv equivalent: %s\n", out, kv);
    }
    vqr_info_str(r, "profile", out);
    vqr_info_str(r, "kv", kv);
    vqr_info_num(r, "budget_bits", budget, "bits/element");
    vqr_info_num(r, "bits", got_bits[0], "bits/element");
    vqr_info_num(r, "predicted_kl", pred[0], NULL);
    vqr_info_num(r, "measured_kl", meas[0], NULL);
    vqr_info_num(r, "seconds", tool_now() - t0, "s");
    for (int l = 0; l < t.L; l++) {
        vqr_row(r);
        vqr_int(r, "layer", l, NULL);
        vqr_str(r, "keys", kc[plan[l].pick].preset);
        vqr_num(r, "keys_kl", plan[l].loss[plan[l].pick], NULL);
        vqr_str(r, "values", vc[plan[t.L + l].pick].preset);
        vqr_num(r, "values_kl", plan[t.L + l].loss[plan[t.L + l].pick], NULL);
    }
    vqr_end(r);
    if (plot != NULL) {
        vq_plot_point pts[CHECK_BUDGETS];
        char labels[CHECK_BUDGETS][32];
        for (int b = 0; b < n_checked; b++) {
            snprintf(labels[b], sizeof labels[b], "%.2f bits", got_bits[b]);
            pts[b] = (vq_plot_point){pred[b], meas[b], labels[b], b == 0 ? 1 : 0};
        }
        const vq_plot pl = {.title = "vq tune: measured against predicted KL of plans around the budget",
                            .x_label = "predicted KL (sum over layers)", .y_label = "measured KL", .points = pts,
                            .n_points = n_checked, .series_names = {"around the budget", "chosen plan"}};
        char perr[256];
        if (vq_plot_png(plot, &pl, perr, sizeof perr) != 0) {
            fprintf(stderr, "vq tune: --plot: %s\n", perr);
            return VQ_EXIT_FAILURE;
        }
    }
    free(parts), free(plan), free(t.ref), free(t.logits), free(t.lp), free(all);
    vq_ctx_free(t.ctx);
    vqm_model_free(model);
    return VQ_EXIT_OK;
}
