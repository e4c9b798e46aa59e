/* tuner.c — the tuner (vqtune.h): sensitivities, costs, the allocation and
 * the profile. */
#include "vqtune.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lm_eval.h"
#include "model_cli.h"

typedef struct cand {
    vq_cache_layer_config lc;
} cand;

typedef struct tuner {
    const vqm_model *model;
    vq_ctx *ctx;
    const vqt_tune_options *opt;
    const char *pre;       /* opt_prefix */
    vqm_cli_common common; /* the options of every run */
    const int32_t *toks;   /* calibration tokens */
    int32_t *win;          /* [C]: the window a run reads (its first token BOS where the model wants one) */
    int64_t n_windows, C, bits_ctx, runs, done;
    int L, V;
    float *ref;            /* [windows][C/2][V] log-probabilities of the f16 cache (f32) */
    float *logits;         /* [batch][V] */
    double *lp;            /* [V] */
    vqm_cli_method method; /* the plan under test: layers[] */
    vqt_tune_result *r;
    cand kc[VQT_TUNE_MAX_CAND], vc[VQT_TUNE_MAX_CAND];
    bool f16_cand[2];      /* f16 is a candidate of the keys (0) / values (1) */
    char *err;
} tuner;

/* The message into t->err; returns s. */
static vq_status fail(tuner *t, vq_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static vq_status fail(tuner *t, vq_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, VQT_TUNE_ERR_LEN, fmt, ap);
    va_end(ap);
    return s;
}

/* The library's message of a failed call s (VQ_OK passes). */
static vq_status lib(tuner *t, vq_status s, const char *what)
{
    return s == VQ_OK ? VQ_OK : fail(t, s, "%s: %s", what, vq_ctx_last_error(t->ctx));
}

/* The last message of model_cli without its "vq CMD: " lead. */
static const char *cli_reason(void)
{
    const char *m = vqm_cli_last_error(), *c = strstr(m, ": ");
    return strncmp(m, "vq ", 3) == 0 && c != NULL ? c + 2 : m;
}

/* The progress callback before the next run. */
static vq_status step(tuner *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static vq_status step(tuner *t, const char *fmt, ...)
{
    const int64_t done = t->done++;
    if (t->opt->progress == NULL) return VQ_OK;
    char label[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(label, sizeof label, fmt, ap);
    va_end(ap);
    if (t->opt->progress(t->opt->progress_user, done, t->runs, label) != 0)
        return fail(t, VQ_ERR_INVALID_ARGUMENT, "stopped by the progress callback before run %lld of %lld (%s)",
                    (long long)done + 1, (long long)t->runs, label);
    return VQ_OK;
}

/* A candidate from its name: a preset, or a preset with the --kv refinements
 * of one method ("kivimix-turbo2:wide20", "turbo2+vs16"; model_cli.h), whose
 * key (side 0) or value (side 1) method it takes; an error when it is none,
 * or one that needs fitted tables. */
static vq_status parse_cand(tuner *t, const char *name, int side, cand *out)
{
    vqm_cli_method *m = calloc(1, sizeof *m); /* room for every layer's config: not on the stack */
    if (m == NULL) return fail(t, VQ_ERR_OUT_OF_MEMORY, "a candidate");
    const int D = t->model->cfg.head_dim;
    if (strcmp(name, "f16") == 0 || strchr(name, '@') != NULL || strchr(name, '/') != NULL ||
        strlen(name) >= VQT_TUNE_NAME_LEN ||
        vqm_cli_method_init(m, "tune", name, NULL, 0, 1, D, false) != VQ_EXIT_OK || m->cfg.profile != NULL ||
        m->cfg.window != VQ_WINDOW_F16 || m->needs_tables) {
        free(m);
        return fail(t, VQ_ERR_INVALID_ARGUMENT, "%s%s: '%s' is not a preset without fitted tables, optionally with "
                    ":wideN / +wideN / +vs16", t->pre, side ? "values" : "keys", name);
    }
    vq_cache_layer_config lc;
    if (m->cfg.layers) lc = m->cfg.layers[0];
    else vq_cache_preset_layer_config(m->cfg.preset, D, &lc);
    free(m);
    if (side) lc.keys = (vq_key_config){.method = VQ_KEY_F16};
    else lc.values = (vq_value_config){.method = VQ_VALUE_F16};
    out->lc = lc;
    return VQ_OK;
}

/* Runs the plan in t->method over the calibration windows: the mean KL
 * against the reference in *kl (or, with fill_ref, records the reference). */
static vq_status run_plan(tuner *t, bool fill_ref, double *kl_out)
{
    char err[VQM_ERR_LEN];
    vqm_session *s = vqm_cli_session("tune", t->model, t->ctx, &t->method, (int)t->C, &t->common);
    if (s == NULL) return fail(t, VQ_ERR_INVALID_ARGUMENT, "%s", cli_reason());
    const int64_t C = t->C, half = C / 2, first = half - 1, B = t->common.batch;
    double kl = 0;
    int64_t n = 0;
    vq_status st = VQ_OK;
    for (int64_t w = 0; w < t->n_windows && st == VQ_OK; w++) {
        if ((st = vqm_session_reset(s, err)) != VQ_OK) break;
        /* a model that starts every text with BOS (Gemma) gets it as the window's first token, as `vq
         * perplexity` gives it: without it the model's attention sink is an ordinary token, and every
         * plan's KL is several times what the scored windows see */
        int32_t *win = t->win;
        memcpy(win, t->toks + w * C, (size_t)C * sizeof *win);
        vqm_tokenizer_start_window(t->model->tok, win);
        for (int64_t p0 = 0; p0 < C && st == VQ_OK; p0 += B) {
            const int64_t T = C - p0 < B ? C - p0 : B;
            const int64_t lo = first > p0 ? first : p0, n_out = lo < p0 + T ? p0 + T - lo : 0;
            if ((st = vqm_forward(s, win + p0, T, n_out, t->logits, err)) != VQ_OK) break;
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
    if (st != VQ_OK) return fail(t, st, "%s", err);
    if (kl_out) *kl_out = n ? kl / (double)n : 0;
    return VQ_OK;
}

/* Bits per element of a part at candidate lc: a one-layer cache of the
 * model's shape, with the plan's residual window and sink tokens and
 * `window` (a local layer's sliding window; 0: full attention), filled to
 * bits_ctx tokens (random data: the sizes do not depend on it), keys
 * (values) alone as vq_cache_memory counts them over the tokens the layer
 * holds after the last token's append (a local layer has evicted the pages
 * its window left); *held: those tokens (NULL: not wanted). */
static vq_status measure_bits(tuner *t, const vq_cache_layer_config *lc, bool keys, int window, double *bits,
                              int64_t *held)
{
    const vqm_config *mc = &t->model->cfg;
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = mc->n_kv_heads, .n_q_heads = mc->n_heads,
                                 .head_dim = mc->head_dim, .capacity_pages = 64, .grow_pages = 64,
                                 .max_sequences = 1, .residual_tokens = t->method.cfg.residual_tokens, .layers = lc,
                                 .window = t->method.cfg.window, .window_bits = t->method.cfg.window_bits,
                                 .sink_tokens = t->common.sink, .sliding_windows = &window};
    vq_cache *c = NULL;
    vq_status st = lib(t, vq_cache_create(t->ctx, &cfg, &c), "a trial cache");
    if (st != VQ_OK) return st;
    int64_t id;
    const int64_t n = (int64_t)mc->n_kv_heads * t->bits_ctx * mc->head_dim;
    uint16_t *kv = calloc((size_t)n, sizeof *kv);
    if (kv == NULL) st = fail(t, VQ_ERR_OUT_OF_MEMORY, "a trial cache of %lld tokens", (long long)t->bits_ctx);
    if (st == VQ_OK) st = lib(t, vq_cache_seq_add(c, &id), "a trial sequence");
    if (st == VQ_OK) {
        vq_rng rng;
        vq_rng_seed(&rng, 1);
        for (int64_t i = 0; i < n; i++) kv[i] = vq_f32_to_f16((float)vq_rng_normal(&rng));
    }
    /* all but the last token at once, then the last alone: a local layer
     * evicts on the append after a prefill */
    for (int64_t left = t->bits_ctx, T = left > 1 ? left - 1 : 1; st == VQ_OK && left > 0; left -= T, T = 1) {
        int64_t shape[4] = {1, mc->n_kv_heads, T, mc->head_dim};
        DLTensor x = {.data = kv, .device = {kDLCPU, 0}, .ndim = 4, .dtype = {kDLFloat, 16, 1}, .shape = shape};
        st = lib(t, vq_cache_append(c, 0, 1, &id, &x, &x, NULL), "a trial append");
    }
    vq_cache_memory_report r;
    if (st == VQ_OK) st = lib(t, vq_cache_memory(c, &r), "a trial's memory");
    if (st == VQ_OK) *bits = keys ? r.key_bits_per_element : r.value_bits_per_element;
    if (st == VQ_OK && held) *held = r.tokens;
    free(kv);
    vq_cache_free(c);
    return st;
}

/* The plan of picks (keys of layer l: picks[l], values: picks[L + l]) into
 * t->method. */
static void set_plan(tuner *t, const int *picks)
{
    for (int l = 0; l < t->L; l++) {
        t->method.layers[l].keys = t->kc[picks[l]].lc.keys;
        t->method.layers[l].values = t->vc[picks[t->L + l]].lc.values;
    }
}

/* A part's bits at candidate i: weighed by the elements its layer holds, so
 * that the mean over parts is the whole cache's bits. */
static double part_bits(const vqt_tune_result *r, int p, int i)
{
    const int l = p % r->n_layers;
    const vqt_tune_candidate *c = (p < r->n_layers ? r->keys : r->values) + i;
    return r->weight[l] * (r->local[l] ? c->bits_local : c->bits);
}

static const double *part_loss(const vqt_tune_result *r, int p)
{
    return r->loss + (size_t)p * VQT_TUNE_MAX_CAND;
}

static int part_cands(const vqt_tune_result *r, int p)
{
    return p < r->n_layers ? r->n_keys : r->n_values;
}

/* Part p's cheapest candidate by part_bits (the first of equals), skipping
 * those that are none (NaN loss: f16 unnamed under base cheapest). */
static int cheapest_cand(const vqt_tune_result *r, int p)
{
    int cheap = -1;
    for (int i = 0; i < part_cands(r, p); i++)
        if (!isnan(part_loss(r, p)[i]) && (cheap < 0 || part_bits(r, p, i) < part_bits(r, p, cheap))) cheap = i;
    return cheap;
}

/* The cheapest plan into picks[2L]: where the allocation starts, and the
 * base of the sensitivities under base cheapest. */
static void cheapest_plan(const vqt_tune_result *r, int *picks)
{
    for (int p = 0; p < 2 * r->n_layers; p++) picks[p] = cheapest_cand(r, p);
}

/* The sum of plan picks[2L]'s part bits (over 2L: its bits per element). */
static double plan_used(const vqt_tune_result *r, const int *picks)
{
    double used = 0;
    for (int p = 0; p < 2 * r->n_layers; p++) used += part_bits(r, p, picks[p]);
    return used;
}

/* Plan picks[2L]'s predicted KL: the base's plus each part's change from it. */
static double plan_loss(const vqt_tune_result *r, const int *picks)
{
    double loss = r->base_kl;
    for (int p = 0; p < 2 * r->n_layers; p++) loss += part_loss(r, p)[picks[p]] - r->base_kl;
    return loss;
}

/* Greedy allocation under `budget` bits per element (the mean over parts)
 * into picks[2L]; returns the predicted loss (base_kl + the parts' changes
 * from the base), and the plan's bits in *bits. */
static double allocate(const vqt_tune_result *r, int *picks, double budget, double *bits)
{
    const int P = 2 * r->n_layers;
    cheapest_plan(r, picks);
    double used = plan_used(r, picks), loss = plan_loss(r, picks);
    for (;;) {
        int bp = -1, bi = -1;
        double best = 0;
        for (int p = 0; p < P; p++) {
            const double *pl = part_loss(r, p);
            const int cur = picks[p];
            for (int i = 0; i < part_cands(r, p); i++) {
                if (isnan(pl[i])) continue; /* no candidate */
                const double db = part_bits(r, p, i) - part_bits(r, p, cur), dl = pl[cur] - pl[i];
                if (db <= 0 || dl <= 0 || (used + db) / P > budget + 1e-9) continue;
                if (dl / db > best) best = dl / db, bp = p, bi = i;
            }
        }
        if (bp < 0) break;
        const double *pl = part_loss(r, bp);
        used += part_bits(r, bp, bi) - part_bits(r, bp, picks[bp]);
        loss -= pl[picks[bp]] - pl[bi];
        picks[bp] = bi;
    }
    *bits = used / P;
    return loss;
}

double vqt_tune_predict(const vqt_tune_result *r, double budget, double *bits)
{
    int *picks = calloc(2 * (size_t)r->n_layers, sizeof *picks);
    if (picks == NULL) {
        *bits = 0;
        return -1;
    }
    const double loss = allocate(r, picks, budget, bits);
    free(picks);
    return loss;
}

/* The --kv string of the plan: the most common KEYS/VALUES pair as the base,
 * every other pair as "@LAYERS=KEYS/VALUES" (model_cli.h). */
static void kv_string(vqt_tune_result *r)
{
    const int L = r->n_layers;
    const size_t cap = sizeof r->kv;
    char *out = r->kv;
    int count[VQT_TUNE_MAX_CAND][VQT_TUNE_MAX_CAND] = {{0}}, bk = 0, bv = 0;
    for (int l = 0; l < L; l++) count[r->key_pick[l]][r->value_pick[l]]++;
    for (int i = 0; i < VQT_TUNE_MAX_CAND; i++)
        for (int j = 0; j < VQT_TUNE_MAX_CAND; j++)
            if (count[i][j] > count[bk][bv]) bk = i, bv = j;
    size_t len = (size_t)snprintf(out, cap, "%s/%s", r->keys[bk].name, r->values[bv].name);
    for (int i = 0; i < VQT_TUNE_MAX_CAND; i++)
        for (int j = 0; j < VQT_TUNE_MAX_CAND; j++) {
            if ((i == bk && j == bv) || count[i][j] == 0) continue;
            const char *sep = "@";
            for (int l = 0; l < L; l++) {
                if (r->key_pick[l] != i || r->value_pick[l] != j) continue;
                len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%d", sep, l);
                sep = ".";
            }
            len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "=%s/%s", r->keys[i].name,
                                    r->values[j].name);
        }
}

/* The measurements file: a header naming the version, the base (its KL),
 * the layers and the candidates, then one line per part, "keys L" or
 * "values L" and the loss of every candidate, f16 first ("nan": no
 * candidate, never measured). Version 1 had no base line: its losses are
 * from f16. Read back only when the layers, candidates and base are the
 * same. */
static const char MEAS_MAGIC[] = "vq-tune-measurements ";
enum { MEAS_VERSION = 2 };

static const char *base_name(bool cheapest)
{
    return cheapest ? "cheapest" : "f16";
}

/* The base in words, for a mismatch's message. */
static const char *base_words(bool cheapest)
{
    return cheapest ? "measured from the cheapest plan" : "measured from the f16 cache";
}

static bool write_measurements(const char *path, const vqt_tune_result *r)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) return false;
    fprintf(f, "%s%d\n", MEAS_MAGIC, MEAS_VERSION);
    if (r->base_cheapest) fprintf(f, "base cheapest %.9e\n", r->base_kl);
    else fprintf(f, "base f16 0\n");
    fprintf(f, "layers %d\nkeys", r->n_layers);
    for (int i = 0; i < r->n_keys; i++) fprintf(f, " %s", r->keys[i].name);
    fprintf(f, "\nvalues");
    for (int i = 0; i < r->n_values; i++) fprintf(f, " %s", r->values[i].name);
    fprintf(f, "\n");
    for (int p = 0; p < 2 * r->n_layers; p++) {
        fprintf(f, "%s %d", p < r->n_layers ? "keys" : "values", p % r->n_layers);
        for (int i = 0; i < part_cands(r, p); i++) {
            const double v = part_loss(r, p)[i];
            if (isnan(v)) fprintf(f, " nan"); /* printf may write "-nan" */
            else fprintf(f, " %.9e", v);
        }
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

/* The file's version and base (a version-1 file: f16), checked against the
 * run's; r->base_kl from the file. */
static vq_status read_meas_header(tuner *t, FILE *f, const char *path)
{
    vqt_tune_result *r = t->r;
    char line[64], w[16];
    int version = 0;
    double kl = 0;
    if (fgets(line, sizeof line, f) == NULL || strncmp(line, MEAS_MAGIC, sizeof MEAS_MAGIC - 1) != 0 ||
        sscanf(line + sizeof MEAS_MAGIC - 1, "%d", &version) != 1 || version < 1 || version > MEAS_VERSION ||
        (version >= 2 && (fscanf(f, " base %15s %lf", w, &kl) != 2 ||
                          (strcmp(w, "cheapest") != 0 && strcmp(w, "f16") != 0))))
        return fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': not a measurements file of vq tune "
                    "(version 1 or %d)", t->pre, path, MEAS_VERSION);
    const bool cheapest = version >= 2 && strcmp(w, "cheapest") == 0;
    if (cheapest != r->base_cheapest)
        return fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': %s, this run asks %sbase %s", t->pre, path,
                    base_words(cheapest), t->pre, base_name(r->base_cheapest));
    r->base_kl = cheapest ? kl : 0;
    return VQ_OK;
}

/* After reading: a loss is NaN exactly where f16 is no candidate of this
 * run (under base cheapest, f16 unnamed), so that file and run agree on
 * what may be picked. */
static vq_status check_meas_candidates(tuner *t, const char *path)
{
    const vqt_tune_result *r = t->r;
    for (int p = 0; p < 2 * r->n_layers; p++) {
        const int side = p >= r->n_layers;
        const char *name = side ? "values" : "keys";
        for (int i = 0; i < part_cands(r, p); i++) {
            const bool none = isnan(part_loss(r, p)[i]), want_none = i == 0 && !t->f16_cand[side];
            if (none == want_none) continue;
            if (i > 0)
                return fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': %s %d: no loss for '%s'", t->pre,
                            path, name, p % r->n_layers, side ? r->values[i].name : r->keys[i].name);
            return fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': f16 %s measured there for the %s, this run "
                        "%s (under %sbase cheapest f16 is a candidate only where %s%s names it)", t->pre, path,
                        none ? "was not" : "was", name, none ? "takes it" : "does not take it", t->pre, t->pre, name);
        }
    }
    return VQ_OK;
}

/* Reads the losses of the file at path into r when it exists (*have) and
 * is for these layers, candidates and base; an error naming what differs. */
static vq_status read_measurements(tuner *t, const char *path, bool *have)
{
    vqt_tune_result *r = t->r;
    *have = false;
    FILE *f = fopen(path, "r");
    if (f == NULL) return VQ_OK;
    char w[256];
    int L = -1;
    vq_status st = read_meas_header(t, f, path);
    if (st == VQ_OK && fscanf(f, " layers %d", &L) != 1)
        st = fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': truncated or malformed", t->pre, path);
    else if (st == VQ_OK && L != r->n_layers)
        st = fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': for %d layers, the model has %d", t->pre, path,
                  L, r->n_layers);
    for (int side = 0; st == VQ_OK && side < 2; side++) {
        const vqt_tune_candidate *c = side ? r->values : r->keys;
        const int n = side ? r->n_values : r->n_keys;
        if (!read_word(f, w, sizeof w) || strcmp(w, side ? "values" : "keys") != 0)
            st = fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': truncated or malformed", t->pre, path);
        for (int i = 0; st == VQ_OK && i < n; i++)
            if (!read_word(f, w, sizeof w) || strcmp(w, c[i].name) != 0)
                st = fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': its %s candidate %d is '%s', here '%s'",
                          t->pre, path, side ? "values" : "keys", i, w, c[i].name);
    }
    for (int p = 0; st == VQ_OK && p < 2 * r->n_layers; p++) {
        int l = -1;
        bool ok = read_word(f, w, sizeof w) && strcmp(w, p < r->n_layers ? "keys" : "values") == 0 &&
                  fscanf(f, "%d", &l) == 1 && l == p % r->n_layers;
        for (int i = 0; ok && i < part_cands(r, p); i++)
            ok = fscanf(f, "%lf", &r->loss[(size_t)p * VQT_TUNE_MAX_CAND + i]) == 1;
        if (!ok) st = fail(t, VQ_ERR_INVALID_ARGUMENT, "%smeasurements '%s': truncated or malformed", t->pre, path);
    }
    fclose(f);
    if (st == VQ_OK) st = check_meas_candidates(t, path);
    *have = st == VQ_OK;
    return st;
}

/* Whether f16 is a candidate of each side: always with base f16 (it is the
 * base); with base cheapest where the list names it, or where it is the
 * side's only one ("" or "f16"). Where it is none its losses are NaN, which
 * the allocation skips and no run measures. */
static void mark_f16(tuner *t, const bool named[2])
{
    vqt_tune_result *r = t->r;
    t->f16_cand[0] = !r->base_cheapest || named[0] || r->n_keys == 1;
    t->f16_cand[1] = !r->base_cheapest || named[1] || r->n_values == 1;
    for (int p = 0; p < 2 * t->L; p++)
        if (!t->f16_cand[p >= t->L]) r->loss[(size_t)p * VQT_TUNE_MAX_CAND] = NAN;
}

/* The candidates of both sides (f16 first) and their bits. */
static vq_status candidates(tuner *t)
{
    vqt_tune_result *r = t->r;
    const vq_cache_layer_config f16 = {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
    r->n_keys = r->n_values = 1;
    snprintf(r->keys[0].name, VQT_TUNE_NAME_LEN, "f16");
    snprintf(r->values[0].name, VQT_TUNE_NAME_LEN, "f16");
    t->kc[0].lc = t->vc[0].lc = f16;
    const char *lists[2] = {t->opt->keys ? t->opt->keys : VQT_TUNE_DEFAULT_KEYS,
                            t->opt->values ? t->opt->values : VQT_TUNE_DEFAULT_VALUES};
    bool named_f16[2] = {false, false};
    for (int side = 0; side < 2; side++) {
        char list[512];
        if (strlen(lists[side]) >= sizeof list)
            return fail(t, VQ_ERR_INVALID_ARGUMENT, "%s%s: longer than %zu characters", t->pre,
                        side ? "values" : "keys", sizeof list - 1);
        snprintf(list, sizeof list, "%s", lists[side]);
        vqt_tune_candidate *c = side ? r->values : r->keys;
        int *n = side ? &r->n_values : &r->n_keys;
        for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            if (strcmp(w, "f16") == 0) { /* candidate 0 already */
                named_f16[side] = true;
                continue;
            }
            if (*n == VQT_TUNE_MAX_CAND)
                return fail(t, VQ_ERR_INVALID_ARGUMENT, "%s%s: more than %d candidates", t->pre,
                            side ? "values" : "keys", VQT_TUNE_MAX_CAND - 1);
            const vq_status st = parse_cand(t, w, side, side ? &t->vc[*n] : &t->kc[*n]);
            if (st != VQ_OK) return st;
            snprintf(c[*n].name, VQT_TUNE_NAME_LEN, "%s", w);
            (*n)++;
        }
    }
    mark_f16(t, named_f16);
    /* every candidate in a full-attention layer and, where the model has
     * sliding-window layers, in a local one */
    const vqm_config *mc = &t->model->cfg;
    r->sliding_window = mc->sliding_window > 0 ? mc->sliding_window : 0;
    r->held_local = t->bits_ctx;
    int64_t held[2] = {t->bits_ctx, t->bits_ctx}; /* tokens a layer of each kind holds */
    for (int k = 0; k < 1 + (r->sliding_window > 0); k++) {
        for (int i = 0; i < r->n_keys; i++) {
            vqt_tune_candidate *c = &r->keys[i];
            const vq_status st = measure_bits(t, &t->kc[i].lc, true, k ? r->sliding_window : 0,
                                              k ? &c->bits_local : &c->bits, NULL);
            if (st != VQ_OK) return st;
        }
        /* a value candidate beside quantized keys: the layer's window holds the
         * keys' partial group too (f16 keys leave only the newest R tokens in
         * it), so values are counted beside the last key candidate */
        for (int i = 0; i < r->n_values; i++) {
            vqt_tune_candidate *c = &r->values[i];
            vq_cache_layer_config lc = t->vc[i].lc;
            if (r->n_keys > 1) lc.keys = t->kc[r->n_keys - 1].lc.keys;
            const vq_status st = measure_bits(t, &lc, false, k ? r->sliding_window : 0,
                                              k ? &c->bits_local : &c->bits, i == 0 ? &held[k] : NULL);
            if (st != VQ_OK) return st;
        }
    }
    if (r->sliding_window == 0)
        for (int i = 0; i < VQT_TUNE_MAX_CAND; i++)
            r->keys[i].bits_local = r->keys[i].bits, r->values[i].bits_local = r->values[i].bits;
    r->held_local = held[1];
    double mean_held = 0;
    for (int l = 0; l < t->L; l++) {
        r->local[l] = r->sliding_window > 0 && t->model->layers[l].local;
        mean_held += (double)held[r->local[l]] / t->L;
    }
    /* without local layers every weight is exactly 1: the plan's bits are the plain mean */
    for (int l = 0; l < t->L; l++) r->weight[l] = r->sliding_window ? (double)held[r->local[l]] / mean_held : 1.0;
    r->min_bits = 0;
    for (int p = 0; p < 2 * t->L; p++) r->min_bits += part_bits(r, p, cheapest_cand(r, p)) / (2.0 * t->L);
    return VQ_OK;
}

vq_status vqt_tune_validate(const vqt_tune_options *o, char *err)
{
    char scratch[VQT_TUNE_ERR_LEN];
    err = err ? err : scratch;
    const char *pre = o->opt_prefix ? o->opt_prefix : "";
    const int64_t tokens = o->tokens ? o->tokens : 1024, C = o->ctx ? o->ctx : 512;
    if (!(o->bits > 0 && o->bits <= 16))
        snprintf(err, VQT_TUNE_ERR_LEN, "%sbits %g: expected bits per element in (0, 16]", pre, o->bits);
    else if (tokens < 64 || tokens > (1 << 20))
        snprintf(err, VQT_TUNE_ERR_LEN, "%stokens %lld: expected 64 .. %d", pre, (long long)tokens, 1 << 20);
    else if (C < 64 || C > (1 << 16) || C % 2 != 0 || C > tokens)
        snprintf(err, VQT_TUNE_ERR_LEN, "%sctx %lld: must be even, in 64 .. %d and at most %stokens (%lld)", pre,
                 (long long)C, 1 << 16, pre, (long long)tokens);
    else if (o->bits_ctx < 0 || o->bits_ctx > (1 << 20))
        snprintf(err, VQT_TUNE_ERR_LEN, "%sbits-ctx %lld: expected 0 .. %d", pre, (long long)o->bits_ctx, 1 << 20);
    else if (o->sink < 0 || o->sink > 64 || o->residual < 0 || o->residual > (1 << 20) || o->batch < 0 ||
             o->batch > 4096 || o->kivi_arith < 0 || o->kivi_arith > 2)
        snprintf(err, VQT_TUNE_ERR_LEN, "%ssink %d / %sresidual %d / %sbatch %d / %skivi-arith %d: expected 0..64 / "
                 "0..%d / 1..4096 / 0..2", pre, o->sink, pre, o->residual, pre, o->batch, pre, o->kivi_arith, 1 << 20);
    else if (o->base != NULL && strcmp(o->base, "cheapest") != 0 && strcmp(o->base, "f16") != 0)
        snprintf(err, VQT_TUNE_ERR_LEN, "%sbase '%s': expected f16 or cheapest", pre, o->base);
    else if (o->search < 0 || o->search > VQT_TUNE_MAX_SEARCH)
        snprintf(err, VQT_TUNE_ERR_LEN, "%ssearch %d: expected 0 (no search) .. %d upgrades of each side a round", pre,
                 o->search, VQT_TUNE_MAX_SEARCH);
    else if (o->text == NULL && o->text_name == NULL)
        snprintf(err, VQT_TUNE_ERR_LEN, "%stext: no calibration text given", pre);
    else
        return VQ_OK;
    return VQ_ERR_INVALID_ARGUMENT;
}

/* The --window suffixes as the base of every plan (f16 layers). */
static vq_status window_method(tuner *t)
{
    const char *suffix = t->opt->window ? t->opt->window : "";
    char base[64];
    snprintf(base, sizeof base, "f16%s", suffix);
    if (strlen(suffix) > 48 || (*suffix && *suffix != '+') ||
        vqm_cli_method_init(&t->method, "tune", base, NULL, t->opt->residual, t->L, t->model->cfg.head_dim,
                            false) != VQ_EXIT_OK ||
        strchr(suffix, 'v') != NULL || strstr(suffix, "wide") != NULL)
        return fail(t, VQ_ERR_INVALID_ARGUMENT, "%swindow '%s': not the suffixes +w8 / +w1..+w7 / +rN", t->pre,
                    suffix);
    t->method.cfg.preset = NULL;
    t->method.cfg.layers = t->method.layers;
    return VQ_OK;
}

/* The calibration tokens: the last n_windows * C of the text (t->toks into *all). */
static vq_status calibration_tokens(tuner *t, int32_t **all)
{
    const vqt_tune_options *o = t->opt;
    const char *name = o->text_name ? o->text_name : "the text", *text = o->text;
    size_t len = o->text_len;
    char *read = NULL;
    if (text == NULL && (text = read = vqt_read_text(o->text_name, &len)) == NULL)
        return fail(t, VQ_ERR_IO, "cannot read '%s'", name);
    const int64_t nt = vqm_tokenize(t->model->tok, text, len, false, NULL, 0);
    *all = calloc((size_t)(nt < 0 ? 0 : nt) + 1, sizeof **all);
    if (*all != NULL) vqm_tokenize(t->model->tok, text, len, false, *all, nt);
    free(read);
    if (*all == NULL) return fail(t, VQ_ERR_OUT_OF_MEMORY, "the tokens of '%s'", name);
    if (nt < t->r->tokens)
        return fail(t, VQ_ERR_INVALID_ARGUMENT, "'%s' has %lld tokens, fewer than %stokens %lld", name,
                    (long long)nt, t->pre, (long long)t->r->tokens);
    t->toks = *all + nt - t->n_windows * t->C;
    return VQ_OK;
}

/* The runs that measure_losses makes around the plan base[2L]: every
 * candidate of every part but the base's own and those that are none. */
static int64_t loss_runs(const vqt_tune_result *r, const int *base)
{
    int64_t n = 0;
    for (int p = 0; p < 2 * r->n_layers; p++)
        for (int i = 0; i < part_cands(r, p); i++) n += i != base[p] && !isnan(part_loss(r, p)[i]);
    return n;
}

/* The sensitivities around the plan base[2L] (the f16 cache, or the
 * cheapest plan): each part at each of its other candidates, every other
 * part at the base; loss[p][base[p]] is base_kl. Layer by layer, keys
 * before values. */
static vq_status measure_losses(tuner *t, const int *base)
{
    vqt_tune_result *r = t->r;
    vq_status st = VQ_OK;
    for (int p = 0; p < 2 * t->L; p++) r->loss[(size_t)p * VQT_TUNE_MAX_CAND + base[p]] = r->base_kl;
    for (int l = 0; l < t->L && st == VQ_OK; l++) {
        for (int side = 0; side < 2 && st == VQ_OK; side++) {
            const int p = side ? t->L + l : l;
            for (int i = 0; i < part_cands(r, p) && st == VQ_OK; i++) {
                if (i == base[p] || isnan(part_loss(r, p)[i])) continue;
                if ((st = step(t, "layer %d %s %s", l, side ? "values" : "keys",
                               side ? r->values[i].name : r->keys[i].name)) != VQ_OK)
                    break;
                set_plan(t, base);
                if (side) t->method.layers[l].values = t->vc[i].lc.values;
                else t->method.layers[l].keys = t->kc[i].lc.keys;
                st = run_plan(t, false, &r->loss[(size_t)p * VQT_TUNE_MAX_CAND + i]);
            }
        }
    }
    return st;
}

/* The base plan of the sensitivities into base[2L]: the cheapest plan, or
 * every part f16 (candidate 0). */
static void base_plan(const tuner *t, int *base)
{
    if (t->r->base_cheapest) cheapest_plan(t->r, base);
    else memset(base, 0, 2 * (size_t)t->L * sizeof *base);
}

/* The chosen plan (into r's picks) and the plans around it, checked. */
static vq_status check_plans(tuner *t, int *picks)
{
    vqt_tune_result *r = t->r;
    const double offsets[VQT_TUNE_CHECKS] = {0, -0.5, -0.25, 0.25, 0.5};
    for (int b = 0; b < VQT_TUNE_CHECKS; b++) {
        const double B = t->opt->bits + offsets[b];
        vq_status st = step(t, "check the plan at %.2f bits", B);
        if (st != VQ_OK) return st;
        if (B < r->min_bits - 1e-9 || B > 16) continue;
        vqt_tune_check *c = &r->checks[r->n_checks];
        c->predicted_kl = allocate(r, picks, B, &c->bits);
        if (b == 0)
            for (int l = 0; l < t->L; l++) r->key_pick[l] = picks[l], r->value_pick[l] = picks[t->L + l];
        set_plan(t, picks);
        if ((st = run_plan(t, false, &c->measured_kl)) != VQ_OK) return st;
        r->n_checks++;
    }
    return VQ_OK;
}


/* The K upgrades of one side (keys: parts 0..L-1, values: L..2L-1) that the
 * losses rank highest by loss saved per bit among those of plan picks that
 * fit the budget, into up[] as part * VQT_TUNE_MAX_CAND + candidate;
 * returns how many (<= K). */
static int best_upgrades(const vqt_tune_result *r, const int *picks, int side, double budget, int K, int *up)
{
    const int L = r->n_layers, P = 2 * L;
    double score[VQT_TUNE_MAX_SEARCH];
    const double used = plan_used(r, picks);
    int n = 0;
    for (int p = side * L; p < (side + 1) * L; p++) {
        const double *pl = part_loss(r, p);
        const int cur = picks[p];
        for (int i = 0; i < part_cands(r, p); i++) {
            const double db = part_bits(r, p, i) - part_bits(r, p, cur);
            if (isnan(pl[i]) || db <= 0 || (used + db) / P > budget + 1e-9) continue;
            const double sc = (pl[cur] - pl[i]) / db;
            int j = n < K ? n++ : K; /* insertion into the K best, highest first */
            while (j > 0 && score[j - 1] < sc) {
                if (j < K) score[j] = score[j - 1], up[j] = up[j - 1];
                j--;
            }
            if (j < K) score[j] = sc, up[j] = p * VQT_TUNE_MAX_CAND + i;
        }
    }
    return n;
}

/* The scored search (opt->search = K): from the cheapest plan, each round
 * runs the round's plan with one part upgraded, for the K upgrades of the
 * keys and the K of the values that the losses rank highest and that fit
 * the budget, and keeps the one whose measured KL falls the most per bit;
 * it ends when no upgrade fits or none lowers the KL. So the losses only
 * choose what is tried; what is kept is measured on whole plans, where
 * parts that do not add up (docs/GEMMA.md) and a noisy part's change cannot
 * mislead the choice. The plan into picks[2L], its result in r->searched. */
static vq_status search_plan(tuner *t, int *picks)
{
    vqt_tune_result *r = t->r;
    const int L = t->L, K = t->opt->search;
    int up[2 * VQT_TUNE_MAX_SEARCH];
    double kl = r->base_kl;
    vq_status st = VQ_OK;
    cheapest_plan(r, picks);
    /* the cheapest plan's KL: base_kl where this run measured it; a file's
     * may be of other calibration runs (it ranks what is tried, no more) */
    if (!r->base_cheapest || !r->measured) {
        t->runs++;
        if ((st = step(t, "search: the cheapest plan")) != VQ_OK) return st;
        set_plan(t, picks);
        if ((st = run_plan(t, false, &kl)) != VQ_OK) return st;
        r->search_runs++;
    }
    for (;;) {
        const int nk = best_upgrades(r, picks, 0, t->opt->bits, K, up);
        const int n = nk + best_upgrades(r, picks, 1, t->opt->bits, K, up + nk);
        t->runs += n; /* the total grows round by round */
        int best = -1;
        double best_gain = 0, best_kl = kl;
        for (int j = 0; j < n && st == VQ_OK; j++) {
            const int p = up[j] / VQT_TUNE_MAX_CAND, i = up[j] % VQT_TUNE_MAX_CAND, side = p >= L;
            if ((st = step(t, "search round %d: layer %d %s %s", r->search_rounds + 1, p % L,
                           side ? "values" : "keys", side ? r->values[i].name : r->keys[i].name)) != VQ_OK)
                break;
            const int cur = picks[p];
            picks[p] = i;
            set_plan(t, picks);
            double trial = 0;
            st = run_plan(t, false, &trial);
            picks[p] = cur;
            r->search_runs++;
            const double gain = (kl - trial) / (part_bits(r, p, i) - part_bits(r, p, cur));
            if (st == VQ_OK && gain > best_gain) best_gain = gain, best = j, best_kl = trial;
        }
        if (st != VQ_OK || best < 0) break;
        picks[up[best] / VQT_TUNE_MAX_CAND] = up[best] % VQT_TUNE_MAX_CAND;
        kl = best_kl;
        r->search_rounds++;
    }
    if (st != VQ_OK) return st;
    r->searched = (vqt_tune_check){.bits = plan_used(r, picks) / (2 * L), .predicted_kl = plan_loss(r, picks),
                                   .measured_kl = kl};
    return VQ_OK;
}

/* The chosen plan as a profile, with the window, sink, transforms and the
 * model's sliding windows (its local layers'), which a profile carries and
 * the runtime checks. */
static vq_status make_profile(tuner *t)
{
    vqt_tune_result *r = t->r;
    for (int l = 0; l < t->L; l++) {
        t->method.layers[l].keys = t->kc[r->key_pick[l]].lc.keys;
        t->method.layers[l].values = t->vc[r->value_pick[l]].lc.values;
    }
    vq_cache_transforms *xf = calloc((size_t)t->L, sizeof *xf);
    int *wins = calloc((size_t)t->L, sizeof *wins);
    vq_status st = xf && wins ? VQ_OK : fail(t, VQ_ERR_OUT_OF_MEMORY, "the profile of %d layers", t->L);
    for (int l = 0; l < t->L && st == VQ_OK; l++) {
        xf[l] = (vq_cache_transforms){.center_keys = !t->common.no_center,
                                      .center_values = !t->common.no_center && !t->common.center_keys,
                                      .smooth = t->common.smooth};
        wins[l] = vqm_layer_window(t->model, l);
    }
    const vq_profile_config pc = {.n_layers = t->L, .n_kv_heads = t->model->cfg.n_kv_heads,
                                  .head_dim = t->model->cfg.head_dim, .layers = t->method.layers,
                                  .residual_tokens = t->method.cfg.residual_tokens, .window = t->method.cfg.window,
                                  .window_bits = t->method.cfg.window_bits, .sink_tokens = t->common.sink,
                                  .transforms = xf, .sliding_windows = wins};
    if (st == VQ_OK) st = lib(t, vq_profile_create(t->ctx, &pc, &r->profile), "the profile");
    free(xf);
    free(wins);
    return st;
}

void vqt_tune_result_free(vqt_tune_result *r)
{
    if (r == NULL) return;
    vq_profile_free(r->profile);
    free(r->key_pick);
    free(r->value_pick);
    free(r->loss);
    free(r->local);
    free(r->weight);
    free(r);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

vq_status vqt_tune(vq_ctx *ctx, const vqm_model *model, const vqt_tune_options *opt, vqt_tune_result **out,
                   char *err)
{
    char scratch[VQT_TUNE_ERR_LEN];
    err = err ? err : scratch;
    err[0] = 0;
    if (out) *out = NULL;
    if (ctx == NULL || model == NULL || opt == NULL || out == NULL) {
        snprintf(err, VQT_TUNE_ERR_LEN, "vqt_tune: ctx, model, opt and out must not be NULL");
        return VQ_ERR_INVALID_ARGUMENT;
    }
    tuner *t = calloc(1, sizeof *t);
    vqt_tune_result *r = calloc(1, sizeof *r);
    if (t == NULL || r == NULL) {
        free(t), free(r);
        snprintf(err, VQT_TUNE_ERR_LEN, "vqt_tune: out of memory");
        return VQ_ERR_OUT_OF_MEMORY;
    }
    *t = (tuner){.model = model, .ctx = ctx, .opt = opt, .pre = opt->opt_prefix ? opt->opt_prefix : "", .r = r,
                 .err = err, .L = model->cfg.n_layers, .V = model->cfg.vocab};
    t->common = (vqm_cli_common){.model = "", .residual = opt->residual, .sink = opt->sink,
                                 .batch = opt->batch ? opt->batch : 64, .no_center = opt->no_center,
                                 .center_keys = opt->center_keys, .smooth = opt->smooth,
                                 .kivi_arith = opt->kivi_arith};
    r->n_layers = t->L;
    r->base_cheapest = opt->base != NULL && strcmp(opt->base, "cheapest") == 0;
    r->tokens = opt->tokens ? opt->tokens : 1024;
    t->C = r->ctx = opt->ctx ? opt->ctx : 512;
    int32_t *all = NULL;
    int *picks = NULL, *base = NULL;
    vq_status st = vqt_tune_validate(opt, err);
    if (st == VQ_OK) {
        t->n_windows = r->n_windows = r->tokens / t->C;
        t->bits_ctx = r->bits_ctx = opt->bits_ctx ? opt->bits_ctx : t->C;
        st = window_method(t);
    }
    if (st == VQ_OK) {
        r->key_pick = calloc((size_t)t->L, sizeof *r->key_pick);
        r->value_pick = calloc((size_t)t->L, sizeof *r->value_pick);
        r->loss = calloc(2 * (size_t)t->L * VQT_TUNE_MAX_CAND, sizeof *r->loss);
        r->local = calloc((size_t)t->L, sizeof *r->local);
        r->weight = calloc((size_t)t->L, sizeof *r->weight);
        picks = calloc(2 * (size_t)t->L, sizeof *picks);
        base = calloc(2 * (size_t)t->L, sizeof *base);
        t->ref = calloc((size_t)t->n_windows * (size_t)(t->C / 2) * (size_t)t->V, sizeof *t->ref);
        t->logits = calloc((size_t)t->common.batch * (size_t)t->V, sizeof *t->logits);
        t->lp = calloc((size_t)t->V, sizeof *t->lp);
        t->win = calloc((size_t)t->C, sizeof *t->win);
        if (!r->key_pick || !r->value_pick || !r->loss || !r->local || !r->weight || !picks || !base || !t->ref ||
            !t->logits || !t->lp || !t->win)
            st = fail(t, VQ_ERR_OUT_OF_MEMORY, "the tuner's buffers for %lld tokens", (long long)r->tokens);
    }
    if (st == VQ_OK) st = candidates(t);
    if (st == VQ_OK && opt->bits < r->min_bits - 1e-9) { /* the sums of part bits round */
        char note[128] = "";
        if (r->sliding_window > 0)
            snprintf(note, sizeof note, " (local layers, sliding window %d, hold %lld of them)", r->sliding_window,
                     (long long)r->held_local);
        st = fail(t, VQ_ERR_INVALID_ARGUMENT, "%sbits %.3g: no plan of these candidates fits; the cheapest takes "
                  "%.3f bits per element at %lld tokens%s", t->pre, opt->bits, r->min_bits, (long long)t->bits_ctx,
                  note);
    }
    if (st == VQ_OK) st = calibration_tokens(t, &all);
    bool have = false;
    if (st == VQ_OK && opt->measurements != NULL) st = read_measurements(t, opt->measurements, &have);
    r->measured = !have;
    const double t0 = now();
    if (st == VQ_OK) {
        base_plan(t, base);
        t->runs = 1 + (have ? 0 : r->base_cheapest + loss_runs(r, base)) + VQT_TUNE_CHECKS;
        st = step(t, "f16 reference");
    }
    if (st == VQ_OK) {
        memset(picks, 0, 2 * (size_t)t->L * sizeof *picks); /* candidate 0 of every part: f16 */
        set_plan(t, picks);
        st = run_plan(t, true, NULL);
    }
    if (st == VQ_OK && !have && r->base_cheapest && (st = step(t, "cheapest plan")) == VQ_OK) {
        set_plan(t, base);
        st = run_plan(t, false, &r->base_kl);
    }
    if (st == VQ_OK && !have) st = measure_losses(t, base);
    if (st == VQ_OK && opt->measurements != NULL && !have && !write_measurements(opt->measurements, r))
        st = fail(t, VQ_ERR_IO, "%smeasurements: cannot write '%s'", t->pre, opt->measurements);
    if (st == VQ_OK) st = check_plans(t, picks);
    if (st == VQ_OK && opt->search > 0) st = search_plan(t, picks);
    if (st == VQ_OK && opt->search > 0 && r->searched.measured_kl < r->checks[0].measured_kl) {
        r->chose_search = true;
        for (int l = 0; l < t->L; l++) r->key_pick[l] = picks[l], r->value_pick[l] = picks[t->L + l];
    }
    r->seconds = now() - t0;
    if (st == VQ_OK) st = make_profile(t);
    if (st == VQ_OK) kv_string(r);
    free(all), free(picks), free(base), free(t->ref), free(t->logits), free(t->lp), free(t->win);
    free(t);
    if (st != VQ_OK) {
        vqt_tune_result_free(r);
        return st;
    }
    *out = r;
    return VQ_OK;
}
