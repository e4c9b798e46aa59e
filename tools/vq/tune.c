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
 *    (codes, scales, the residual window, the sinks) in a cache of one layer
 *    filled to --bits-ctx tokens, once with full attention and once with the
 *    model's sliding window (its local layers hold only their window: the
 *    bytes and the elements of the tokens they evicted are not counted).
 * 5. Allocation: the losses are taken as additive over parts; a part's bits
 *    weigh by the elements its layer holds (a local layer's fewer), so the
 *    plan's bits are the whole cache's as vq_cache_memory counts them;
 *    starting from every part at its cheapest candidate, the upgrade with the
 *    largest loss saved per bit that still fits the budget is taken until
 *    none fits.
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
enum { MAX_CAND = 10, CHECK_BUDGETS = 5 };

typedef struct cand {
    const char *preset; /* whose key (value) method; "f16" */
    vq_cache_layer_config lc;
    double bits[2];     /* bits per element of this part in a full-attention [0] and a local [1] layer */
} cand;

typedef struct part {
    double loss[MAX_CAND]; /* mean KL with only this part at candidate i */
    int pick;
    int local;             /* its layer attends a sliding window: cand.bits[1] */
    double w;              /* its layer's elements held over the mean layer's (1 without local layers) */
} part;

typedef struct tuner {
    const vqm_model *model;
    vq_ctx *ctx;
    const vqm_cli_common *common;
    const int32_t *toks;   /* calibration tokens */
    int64_t n_windows, C, bits_ctx;
    int L, V;
    bool has_local;        /* the model has sliding-window layers */
    float *ref;            /* [windows][C/2][V] log-probabilities of the f16 cache (f32) */
    float *logits;         /* [batch][V] */
    double *lp;            /* [V] */
    vqm_cli_method method; /* the plan under test: layers[] */
    vqp prog;
} tuner;

/* A candidate from its name: a preset, or a preset with the --kv refinements
 * of one method ("kivimix-turbo2:wide20", "turbo2+vs16"; model_cli.h), whose
 * key (side 0) or value (side 1) method it takes; 2 when it is none, or one
 * that needs fitted tables. */
static int parse_cand(const char *name, int side, int D, cand *out)
{
    static vqm_cli_method m;
    if (strcmp(name, "f16") == 0 || strchr(name, '@') != NULL || strchr(name, '/') != NULL ||
        vqm_cli_method_init(&m, "tune", name, NULL, 0, 1, D, false) != VQ_EXIT_OK || m.cfg.profile != NULL ||
        m.cfg.window != VQ_WINDOW_F16 || m.needs_tables) {
        fprintf(stderr, "vq tune: --%s: '%s' is not a preset without fitted tables, optionally with :wideN / "
                        "+wideN / +vs16\n", side ? "values" : "keys", name);
        return VQ_EXIT_USAGE;
    }
    vq_cache_layer_config lc;
    if (m.cfg.layers) lc = m.cfg.layers[0];
    else vq_cache_preset_layer_config(m.cfg.preset, D, &lc);
    if (side) lc.keys = (vq_key_config){.method = VQ_KEY_F16};
    else lc.values = (vq_value_config){.method = VQ_VALUE_F16};
    *out = (cand){name, lc, {0, 0}};
    return VQ_EXIT_OK;
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
 * model's shape, with the plan's residual window and sink tokens and
 * `window` (the sliding window of a local layer, 0: full attention), filled
 * to --bits-ctx tokens (random data: the sizes do not depend on it), keys
 * (values) alone as vq_cache_memory counts them: over the tokens the layer
 * holds after the last token's append (decode: a local layer has evicted
 * the pages its window left). *tokens: the tokens it holds. */
static double measure_bits(const tuner *t, const vq_cache_layer_config *lc, bool keys, int window, int64_t *tokens)
{
    const vqm_config *mc = &t->model->cfg;
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = mc->n_kv_heads, .n_q_heads = mc->n_heads,
                                 .head_dim = mc->head_dim, .capacity_pages = 64, .grow_pages = 64,
                                 .max_sequences = 1, .residual_tokens = t->method.cfg.residual_tokens, .layers = lc,
                                 .window = t->method.cfg.window, .window_bits = t->method.cfg.window_bits,
                                 .sink_tokens = (int)t->common->sink, .sliding_windows = &window};
    vq_cache *c = NULL;
    tool_check(t->ctx, vq_cache_create(t->ctx, &cfg, &c), "vq tune: a trial cache");
    int64_t id;
    tool_check(t->ctx, vq_cache_seq_add(c, &id), "vq tune: a trial sequence");
    const int64_t n = (int64_t)mc->n_kv_heads * t->bits_ctx * mc->head_dim;
    uint16_t *kv = tool_calloc((size_t)n, sizeof *kv);
    vq_rng rng;
    vq_rng_seed(&rng, 1);
    for (int64_t i = 0; i < n; i++) kv[i] = vq_f32_to_f16((float)vq_rng_normal(&rng));
    /* all but the last token at once, then the last alone: a local layer
     * evicts on the append after a prefill */
    for (int64_t left = t->bits_ctx, T = left > 1 ? left - 1 : 1; left > 0; left -= T, T = 1) {
        int64_t shape[4] = {1, mc->n_kv_heads, T, mc->head_dim};
        DLTensor x = {.data = kv, .device = {kDLCPU, 0}, .ndim = 4, .dtype = {kDLFloat, 16, 1}, .shape = shape};
        tool_check(t->ctx, vq_cache_append(c, 0, 1, &id, &x, &x, NULL), "vq tune: a trial append");
    }
    vq_cache_memory_report r;
    tool_check(t->ctx, vq_cache_memory(c, &r), "vq tune: a trial's memory");
    free(kv);
    vq_cache_free(c);
    if (tokens) *tokens = r.tokens;
    return keys ? r.key_bits_per_element : r.value_bits_per_element;
}

/* The candidates' bits per element, in a full-attention layer and (models
 * with sliding windows) a local one, holding held[0] and held[1] tokens. */
static void print_cands(FILE *f, const tuner *t, const cand *kc, int nk, const cand *vc, int nv, const int64_t *held)
{
    for (int k = 0; k < 1 + t->has_local; k++) {
        if (k == 0)
            fprintf(f, "candidate   keys bits  values bits   (bits per element at %lld tokens, all bytes counted%s)\n",
                    (long long)t->bits_ctx, t->has_local ? "; full-attention layers" : "");
        else
            fprintf(f, "local layers (sliding window %d), over the %lld tokens they hold (full-attention layers: %lld):\n",
                    t->model->cfg.sliding_window, (long long)held[1], (long long)held[0]);
        for (int i = 0; i < (nk > nv ? nk : nv); i++)
            fprintf(f, "%-16s %6.3f   %-12s %6.3f\n", i < nk ? kc[i].preset : "", i < nk ? kc[i].bits[k] : 0,
                    i < nv ? vc[i].preset : "", i < nv ? vc[i].bits[k] : 0);
    }
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
    double used = 0, loss = 0; /* used: the sum over parts of weight x bits */
    for (int p = 0; p < P; p++) {
        const cand *c = p < t->L ? kc : vc;
        const int n = p < t->L ? nk : nv, k = parts[p].local;
        int cheap = 0;
        for (int i = 1; i < n; i++)
            if (c[i].bits[k] < c[cheap].bits[k]) cheap = i;
        parts[p].pick = cheap;
        used += parts[p].w * c[cheap].bits[k];
        loss += parts[p].loss[cheap];
    }
    for (;;) {
        int bp = -1, bi = -1;
        double best = 0;
        for (int p = 0; p < P; p++) {
            const cand *c = p < t->L ? kc : vc;
            const int n = p < t->L ? nk : nv, cur = parts[p].pick, k = parts[p].local;
            for (int i = 0; i < n; i++) {
                const double db = parts[p].w * (c[i].bits[k] - c[cur].bits[k]),
                             dl = parts[p].loss[cur] - parts[p].loss[i];
                if (db <= 0 || dl <= 0 || (used + db) / P > budget + 1e-9) continue;
                if (dl / db > best) best = dl / db, bp = p, bi = i;
            }
        }
        if (bp < 0) break;
        const cand *c = bp < t->L ? kc : vc;
        used += parts[bp].w * (c[bi].bits[parts[bp].local] - c[parts[bp].pick].bits[parts[bp].local]);
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

/* The measurements file (--measurements): a header naming the layers and
 * the candidates, then one line per part, "keys L" or "values L" and the
 * loss of every candidate (f16 first: 0). Read back only when the layers and
 * candidates are the same. */
static const char MEAS_MAGIC[] = "vq-tune-measurements 1";

static bool write_measurements(const char *path, const tuner *t, const part *parts, const cand *kc, int nk,
                               const cand *vc, int nv)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) return false;
    fprintf(f, "%s\nlayers %d\nkeys", MEAS_MAGIC, t->L);
    for (int i = 0; i < nk; i++) fprintf(f, " %s", kc[i].preset);
    fprintf(f, "\nvalues");
    for (int i = 0; i < nv; i++) fprintf(f, " %s", vc[i].preset);
    fprintf(f, "\n");
    for (int p = 0; p < 2 * t->L; p++) {
        fprintf(f, "%s %d", p < t->L ? "keys" : "values", p % t->L);
        for (int i = 0; i < (p < t->L ? nk : nv); i++) fprintf(f, " %.9e", parts[p].loss[i]);
        fprintf(f, "\n");
    }
    return fclose(f) == 0;
}

/* Reads one whitespace-separated word; false at the end. */
static bool read_word(FILE *f, char *w, size_t cap)
{
    char fmt[16];
    snprintf(fmt, sizeof fmt, "%%%zus", cap - 1);
    return fscanf(f, fmt, w) == 1;
}

/* Whether the file at path (if any) is for these layers and candidates:
 * false after a message naming what differs; true when it matches or does
 * not exist (then it is written). */
static bool check_measurements(const char *path, const tuner *t, const cand *kc, int nk, const cand *vc, int nv)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) return true;
    char w[256], line[64];
    int L = -1;
    bool ok = fgets(line, sizeof line, f) != NULL && strncmp(line, MEAS_MAGIC, sizeof MEAS_MAGIC - 1) == 0 &&
              fscanf(f, " layers %d", &L) == 1;
    if (!ok) fprintf(stderr, "vq tune: --measurements '%s': not a measurements file of vq tune\n", path);
    else if (L != t->L) {
        fprintf(stderr, "vq tune: --measurements '%s': for %d layers, the model has %d\n", path, L, t->L);
        ok = false;
    }
    for (int side = 0; ok && side < 2; side++) {
        const cand *c = side ? vc : kc;
        const int n = side ? nv : nk;
        ok = read_word(f, w, sizeof w) && strcmp(w, side ? "values" : "keys") == 0;
        for (int i = 0; ok && i < n; i++) {
            ok = read_word(f, w, sizeof w) && strcmp(w, c[i].preset) == 0;
            if (!ok)
                fprintf(stderr, "vq tune: --measurements '%s': its %s candidate %d is '%s', here '%s'\n", path,
                        side ? "values" : "keys", i, w, c[i].preset);
        }
    }
    fclose(f);
    return ok;
}

/* Reads the losses (check_measurements passed); false when the file does
 * not exist. */
static bool read_measurements(const char *path, const tuner *t, part *parts, const cand *kc, int nk, const cand *vc,
                              int nv)
{
    (void)kc, (void)vc;
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    char w[256];
    while (read_word(f, w, sizeof w) && strcmp(w, "values") != 0) {}
    for (int i = 0; i < nv; i++) read_word(f, w, sizeof w);
    bool ok = true;
    for (int p = 0; ok && p < 2 * t->L; p++) {
        int l = -1;
        ok = read_word(f, w, sizeof w) && strcmp(w, p < t->L ? "keys" : "values") == 0 && fscanf(f, "%d", &l) == 1 &&
             l == p % t->L;
        for (int i = 0; ok && i < (p < t->L ? nk : nv); i++) ok = fscanf(f, "%lf", &parts[p].loss[i]) == 1;
    }
    fclose(f);
    if (!ok) {
        fprintf(stderr, "vq tune: --measurements '%s': truncated or malformed\n", path);
        exit(VQ_EXIT_USAGE);
    }
    return true;
}

/* --frontier: the predicted KL of the plans for budgets from the cheapest
 * up to 3 bits above it (0.05-bit steps), and the
 * measured KL of the checked plans, against their bits. */
static int draw_frontier(const char *path, const tuner *t, part *parts, const cand *kc, int nk, const cand *vc, int nv,
                         double min_bits, const double *bits, const double *meas, int n_meas)
{
    enum { MAX_PTS = 400 };
    vq_plot_point pts[MAX_PTS];
    int n = 0;
    double last = -1;
    for (double B = min_bits; n < MAX_PTS - CHECK_BUDGETS && B <= min_bits + 3; B += 0.05) {
        double got;
        const double pred = allocate(t, parts, kc, nk, vc, nv, B, &got);
        if (got == last) continue;
        last = got;
        pts[n++] = (vq_plot_point){got, pred, NULL, 0};
    }
    for (int b = 0; b < n_meas; b++) pts[n++] = (vq_plot_point){bits[b], meas[b], NULL, 1};
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
    const char *keys = DEFAULT_KEYS, *values = DEFAULT_VALUES;
    double budget = 0;
    const char *suffix = "", *measurements = NULL;
    int64_t tokens = 1024, C = 512, bits_ctx = 0;
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
         "(same model, layers and candidates), else measured and written there"},
        {"out", VQA_OUT_FILE, &out, 0, 0, "FILE", "profile file to write (required)", NULL, 'o'},
        {"plot", VQA_OUT_FILE, &plot, 0, 0, "FILE.png", "draw measured against predicted KL of plans around B"},
        {"frontier", VQA_OUT_FILE, &frontier, 0, 0, "FILE.png", "draw the loss against the bits: the predicted "
         "KL of the plans for budgets from the cheapest up in 0.05-bit steps, and the measured KL of the checked "
         "plans"},
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
    char base[64];
    snprintf(base, sizeof base, "f16%s", suffix);
    if (strlen(suffix) > 48 || (*suffix && *suffix != '+') ||
        vqm_cli_method_init(&t.method, "tune", base, NULL, (int)common.residual, t.L, D, false) != VQ_EXIT_OK ||
        strchr(suffix, 'v') != NULL || strstr(suffix, "wide") != NULL) {
        fprintf(stderr, "vq tune: --window '%s': not the suffixes +w8 / +w1..+w7 / +rN\n", suffix);
        return VQ_EXIT_USAGE;
    }
    t.bits_ctx = bits_ctx ? bits_ctx : C;
    t.method.cfg.preset = NULL;
    t.method.cfg.layers = t.method.layers;
    t.ref = tool_calloc((size_t)t.n_windows * (size_t)(C / 2) * (size_t)t.V, sizeof *t.ref);
    t.logits = tool_calloc((size_t)common.batch * (size_t)t.V, sizeof *t.logits);
    t.lp = tool_calloc((size_t)t.V, sizeof *t.lp);
    /* candidates: f16 first */
    cand kc[MAX_CAND], vc[MAX_CAND];
    int nk = 0, nv = 0;
    kc[nk++] = (cand){"f16", {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}}, {0, 0}};
    vc[nv++] = kc[0];
    char klist[512], vlist[512];
    snprintf(klist, sizeof klist, "%s", keys);
    snprintf(vlist, sizeof vlist, "%s", values);
    for (int side = 0; side < 2; side++) {
        cand *c = side ? vc : kc;
        int *n = side ? &nv : &nk;
        for (char *save = NULL, *w = strtok_r(side ? vlist : klist, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            if (strcmp(w, "f16") == 0) continue;
            if (*n == MAX_CAND) {
                fprintf(stderr, "vq tune: --%s: more than %d candidates\n", side ? "values" : "keys", MAX_CAND - 1);
                return VQ_EXIT_USAGE;
            }
            if (parse_cand(w, side, D, &c[*n]) != VQ_EXIT_OK) return VQ_EXIT_USAGE;
            (*n)++;
        }
    }
    /* every candidate in a full-attention layer [0] and, where the model has
     * sliding-window layers, in a local one [1] */
    t.has_local = model->cfg.sliding_window > 0;
    const int n_kinds = 1 + t.has_local;
    int64_t held[2] = {t.bits_ctx, t.bits_ctx}; /* tokens a layer of each kind holds */
    for (int k = 0; k < n_kinds; k++) {
        const int W = k ? model->cfg.sliding_window : 0;
        for (int i = 0; i < nk; i++) kc[i].bits[k] = measure_bits(&t, &kc[i].lc, true, W, NULL);
        /* a value candidate beside quantized keys: the layer's window holds the
         * keys' partial group too (f16 keys leave only the newest R tokens in
         * it), so values are counted beside the last key candidate */
        for (int i = 0; i < nv; i++) {
            vq_cache_layer_config lc = vc[i].lc;
            if (nk > 1) lc.keys = kc[nk - 1].lc.keys;
            vc[i].bits[k] = measure_bits(&t, &lc, false, W, i == 0 ? &held[k] : NULL);
        }
    }
    part *parts = tool_calloc(2 * (size_t)t.L, sizeof *parts);
    double mean_held = 0, min_bits = 0;
    for (int l = 0; l < t.L; l++) mean_held += (double)held[model->layers[l].local ? 1 : 0] / t.L;
    for (int p = 0; p < 2 * t.L; p++) {
        const int k = t.has_local && model->layers[p % t.L].local ? 1 : 0;
        const cand *c = p < t.L ? kc : vc;
        double m = c[0].bits[k];
        for (int i = 1; i < (p < t.L ? nk : nv); i++) m = c[i].bits[k] < m ? c[i].bits[k] : m;
        parts[p].local = k;
        parts[p].w = (double)held[k] / mean_held;
        min_bits += parts[p].w * m / (2.0 * t.L);
    }
    if (budget < min_bits) {
        print_cands(stderr, &t, kc, nk, vc, nv, held);
        fprintf(stderr, "vq tune: --bits %.3g: no plan of these candidates fits; the cheapest takes %.3f bits per "
                        "element at %lld tokens\n", budget, min_bits, (long long)t.bits_ctx);
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
    if (measurements != NULL && !check_measurements(measurements, &t, kc, nk, vc, nv)) return VQ_EXIT_USAGE;
    const bool have = measurements != NULL && read_measurements(measurements, &t, parts, kc, nk, vc, nv);
    const int64_t runs = 1 + (have ? 0 : (int64_t)t.L * (nk - 1 + nv - 1)) + CHECK_BUDGETS;
    const double t0 = tool_now();
    vqp_begin(&t.prog, "tune", runs);
    vqp_step(&t.prog, "f16 reference");
    set_f16(&t);
    run_plan(&t, true);
    for (int l = 0; l < t.L && !have; l++) {
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
    if (measurements != NULL && !have && !write_measurements(measurements, &t, parts, kc, nk, vc, nv)) {
        fprintf(stderr, "vq tune: --measurements: cannot write '%s'\n", measurements);
        return VQ_EXIT_FAILURE;
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
    vq_cache_transforms *xf = tool_calloc((size_t)t.L, sizeof *xf);
    for (int l = 0; l < t.L; l++)
        xf[l] = (vq_cache_transforms){.center_keys = !common.no_center,
                                      .center_values = !common.no_center && !common.center_keys,
                                      .smooth = common.smooth};
    /* the model's sliding windows (its local layers'), which a profile
     * carries and the runtime checks */
    int *wins = tool_calloc((size_t)t.L, sizeof *wins);
    for (int l = 0; l < t.L; l++) wins[l] = model->layers[l].local ? model->cfg.sliding_window : 0;
    const vq_profile_config pc = {.n_layers = t.L, .n_kv_heads = model->cfg.n_kv_heads, .head_dim = D,
                                  .layers = t.method.layers, .residual_tokens = t.method.cfg.residual_tokens,
                                  .window = t.method.cfg.window, .window_bits = t.method.cfg.window_bits,
                                  .sink_tokens = (int)common.sink, .transforms = xf, .sliding_windows = wins};
    vq_profile *prof = NULL;
    tool_check(t.ctx, vq_profile_create(t.ctx, &pc, &prof), "vq tune: the profile");
    tool_check(t.ctx, vq_profile_save(t.ctx, prof, out), "vq tune: writing the profile");
    vq_profile_free(prof);
    free(xf);
    free(wins);
    char kv[4096];
    kv_string(&t, plan, kc, vc, kv, sizeof kv);
    vqr *r = vqr_begin("tune", argc, argv, t.ctx, json);
    if (!json) {
        printf("tuned on the last %lld tokens of %s (%lld windows of %lld), %.0f s\n",
               (long long)(t.n_windows * C), text_path, (long long)t.n_windows, (long long)C, tool_now() - t0);
        print_cands(stdout, &t, kc, nk, vc, nv, held);
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
    if (frontier != NULL && draw_frontier(frontier, &t, parts, kc, nk, vc, nv, min_bits, got_bits, meas, n_checked) != 0)
        return VQ_EXIT_FAILURE;
    free(parts), free(plan), free(t.ref), free(t.logits), free(t.lp), free(all);
    vq_ctx_free(t.ctx);
    vqm_model_free(model);
    return VQ_EXIT_OK;
}
