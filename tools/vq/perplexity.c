/* perplexity.c — `vq perplexity`: what each cache method costs in quality.
 *
 * Protocol (llama.cpp's llama-perplexity): the text's tokens are cut into
 * non-overlapping windows of C tokens from the start; each window runs from
 * an empty cache, and the second half of the window is scored (the logits at
 * positions C/2 - 1 .. C - 2 predict tokens C/2 .. C - 1), so every scored
 * token has at least C/2 tokens of context. Every method runs in lockstep
 * with the f16 cache on the same chunks, so the comparison is per token:
 * perplexity and its change, mean KL(f16 || method) of the next-token
 * distribution, top-1 agreement with f16; plus the cache's bits per element
 * (codes, scales, norms and the f16 residual window, at the end of a window)
 * and bytes. With --batch 1 (the quality table's protocol) each token is
 * appended and then attended alone, so every query sees the cache as a
 * decoding step does; larger chunks append a chunk before attending it, and
 * the chunk's own tokens then reach its queries through the quantized cache
 * (several times the loss of decoding with a residual window, bench/results/
 * model/protocol/README.md). --tokens writes every window position's token id and each
 * method's nll, for comparisons with other runtimes token by token
 * (bench/python_perplexity.py). --max-tokens / --windows bound the work (the
 * full novel at 8K on 2 cores takes hours). */
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

enum { PPL_MAX_METHODS = 24, PPL_CHUNK = 256 }; /* methods with f16; logits of each: --batch x vocabulary floats */

typedef struct ppl_acc {
    double nll, kl;
    double dsum, dsq, klsq; /* per-token nll - nll(f16): sum and sum of squares; kl^2 (standard errors) */
    int64_t n, agree;
    double bits;
    int64_t bytes;
} ppl_acc;

typedef struct ppl_opts {
    vqm_cli_common c;
    const char *kv, *plot, *tokens;
    vqa_sizes ctx;
    int64_t max_tokens, skip_tokens, windows;
    bool json;
} ppl_opts;

int vq_cmd_perplexity(int argc, char **argv)
{
    ppl_opts o = {.c = VQM_CLI_COMMON_DEFAULTS, .kv = "f16", .ctx = {3, {512, 2048, 8192}}};
    o.c.batch = PPL_CHUNK;
    const vqa_opt opts[] = {
        {"kv", VQA_STRING, &o.kv, 0, 0, "LIST", "comma-separated cache presets, profile FILEs (vq_profile_save) or KEYS/VALUES, each optionally with @LAYERS=METHOD overrides and last suffixes +w8 / +w1..+w7 (window at 8 or 1..7 bits), +rN (this method's --residual), +wideN (KIVI_MIX wide channels) and +vs16 (f16 TurboQuant value scales) (f16 always runs as the reference)"},
        {"ctx", VQA_SIZES, &o.ctx, 2, 1 << 20, "LIST", "window sizes in tokens (512,2048,8192)"},
        {"max-tokens", VQA_SIZE, &o.max_tokens, 0, 1ll << 40, "N", "use at most the first N tokens (0 = all; after --skip-tokens)"},
        {"skip-tokens", VQA_SIZE, &o.skip_tokens, 0, 1ll << 40, "N", "start the windows at token N of the text: score a part that a tune (its last tokens) or a search on the first windows did not read"},
        {"windows", VQA_INT, &o.windows, 0, 1 << 30, "W", "at most W windows per context (0 = all)"},
        {"plot", VQA_OUT_FILE, &o.plot, 0, 0, "FILE.png", "draw perplexity change against bits per element"},
        {"tokens", VQA_OUT_FILE, &o.tokens, 0, 0, "FILE.tsv",
         "write each window position's token id and each method's nll (nan where not scored)"},
        VQM_CLI_COMMON_OPTS(o.c),
        VQA_JSON_OPT(&o.json),
    };
    const char *pos[1];
    int n_pos = 0;
    const vqa_cmd cmd = {"perplexity", "quality of cache methods against the f16 cache on a text", opts,
                         VQA_COUNT(opts),
                         "Non-overlapping windows of each --ctx size; the second half of each window is scored\n"
                         "(llama-perplexity's protocol). Every method runs on the same tokens as the f16 cache:\n"
                         "perplexity, its change, mean KL(f16 || method), top-1 agreement, bits per element.\n"
                         "Protocol of the README's quality table: --batch 1 --sink 4 --smooth\n"
                         "(decode-faithful: each token is appended, then attended, as in generation). A --batch\n"
                         "of N > 1 appends N tokens before attending them, so a chunk's queries see the chunk's\n"
                         "own tokens through the quantized cache, not the window: faster, and a pessimistic\n"
                         "measure of the cache (bench/results/model/protocol/README.md).\n",
                         "FILE", pos, 1, &n_pos};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (n_pos != 1) return vqa_usage_error(&cmd, "one text FILE is required");
    for (int i = 0; i < o.ctx.n; i++)
        if (o.ctx.v[i] % 2 != 0) return vqa_usage_error(&cmd, "--ctx sizes must be even, got %lld", (long long)o.ctx.v[i]);
    vqm_model *model = vqm_cli_load("perplexity", o.c.model);
    if (model == NULL) return VQ_EXIT_FAILURE;
    /* methods: f16 first, then the list (f16 not repeated) */
    static vqm_cli_method methods[PPL_MAX_METHODS];
    int nm = 0;
    char list[1024];
    snprintf(list, sizeof list, "f16,%s", o.kv);
    for (char *save = NULL, *w = strtok_r(list, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        if (nm > 0 && strcmp(w, "f16") == 0) continue;
        if (nm == PPL_MAX_METHODS) {
            vqm_model_free(model);
            return vqa_usage_error(&cmd, "at most %d methods", PPL_MAX_METHODS - 1);
        }
        const int st = vqm_cli_method_init(&methods[nm], "perplexity", w, o.c.f16_layers, (int)o.c.residual,
                                           model->cfg.n_layers, model->cfg.head_dim, o.c.calibration != NULL);
        if (st != VQ_EXIT_OK) { /* a bad --kv: nothing but the model is held yet */
            vqm_model_free(model);
            return st;
        }
        nm++;
    }
    size_t len = 0;
    char *text = vqt_read_text(pos[0], &len);
    if (text == NULL) {
        fprintf(stderr, "vq perplexity: cannot read '%s'\n", pos[0]);
        vqm_model_free(model);
        return VQ_EXIT_FAILURE;
    }
    int64_t nt = vqm_tokenize(model->tok, text, len, false, NULL, 0);
    int32_t *toks = tool_calloc((size_t)nt + 1, sizeof *toks);
    vqm_tokenize(model->tok, text, len, false, toks, nt);
    free(text);
    const int64_t total_tokens = nt;
    if (o.skip_tokens >= nt) {
        fprintf(stderr, "vq perplexity: --skip-tokens %lld: the text has only %lld tokens\n", (long long)o.skip_tokens,
                (long long)nt);
        free(toks);
        vqm_model_free(model);
        return VQ_EXIT_USAGE;
    }
    const int32_t *text_toks = toks + o.skip_tokens;
    nt -= o.skip_tokens;
    if (o.max_tokens > 0 && o.max_tokens < nt) nt = o.max_tokens;
    vq_ctx *ctx = tool_ctx((int)o.c.threads, NULL);
    const int V = model->cfg.vocab;
    int64_t max_ctx = 0, steps = 0;
    for (int c = 0; c < o.ctx.n; c++) {
        int64_t w = nt / o.ctx.v[c];
        if (o.windows > 0 && w > o.windows) w = o.windows;
        steps += w;
        if (o.ctx.v[c] > max_ctx) max_ctx = o.ctx.v[c];
    }
    if (steps == 0) {
        fprintf(stderr, "vq perplexity: %lld tokens are fewer than one window of every --ctx size\n", (long long)nt);
        return VQ_EXIT_USAGE;
    }
    FILE *tsv = NULL; /* created once the arguments and the text are known good */
    if (o.tokens != NULL && (tsv = fopen(o.tokens, "w")) == NULL) {
        fprintf(stderr, "vq perplexity: --tokens: cannot write '%s'\n", o.tokens);
        free(toks);
        vq_ctx_free(ctx);
        vqm_model_free(model);
        return VQ_EXIT_FAILURE;
    }
    vqm_session *sess[PPL_MAX_METHODS];
    for (int m = 0; m < nm; m++) {
        sess[m] = vqm_cli_session("perplexity", model, ctx, &methods[m], (int)max_ctx, &o.c);
        if (sess[m] == NULL) return VQ_EXIT_FAILURE;
    }
    float *lg = tool_calloc((size_t)nm * (size_t)o.c.batch * (size_t)V, sizeof *lg);
    double *lp_ref = tool_calloc((size_t)V, sizeof *lp_ref), *lp = tool_calloc((size_t)V, sizeof *lp);
    ppl_acc *acc = tool_calloc((size_t)o.ctx.n * (size_t)nm, sizeof *acc);
    int64_t *windows_run = tool_calloc((size_t)o.ctx.n, sizeof *windows_run);
    double *win_nll = tool_calloc((size_t)max_ctx * (size_t)nm, sizeof *win_nll); /* [pos][method] of a window */
    int32_t *win = tool_calloc((size_t)max_ctx, sizeof *win);
    if (tsv != NULL) {
        fprintf(tsv, "ctx\twindow\tpos\ttoken");
        for (int m = 0; m < nm; m++) fprintf(tsv, "\tnll_%s", methods[m].name);
        fprintf(tsv, "\n");
    }
    vqp prog;
    vqp_begin(&prog, "perplexity", steps);
    char err[VQM_ERR_LEN];
    const double t_start = tool_now();
    for (int c = 0; c < o.ctx.n; c++) {
        const int64_t C = o.ctx.v[c], first = C / 2 - 1; /* logits of positions first .. C-2 are scored */
        int64_t nw = nt / C;
        if (o.windows > 0 && nw > o.windows) nw = o.windows;
        for (int64_t w = 0; w < nw; w++) {
            vqp_step(&prog, "ctx %lld window %lld/%lld", (long long)C, (long long)w + 1, (long long)nw);
            /* a model that starts every text with BOS (Gemma) gets it as each window's first
             * token, never scored (llama-perplexity does the same) */
            memcpy(win, text_toks + w * C, (size_t)C * sizeof *win);
            vqm_tokenizer_start_window(model->tok, win);
            for (int64_t i = 0; i < C * nm; i++) win_nll[i] = NAN;
            for (int m = 0; m < nm; m++) tool_check(ctx, vqm_session_reset(sess[m], err) == VQ_OK ? VQ_OK : VQ_ERR_INVALID_ARGUMENT, err);
            for (int64_t p0 = 0; p0 < C; p0 += o.c.batch) {
                const int64_t T = C - p0 < o.c.batch ? C - p0 : o.c.batch;
                /* rows of this chunk at positions >= first need logits (the last position's are unused) */
                const int64_t lo = first > p0 ? first : p0;
                const int64_t n_out = lo < p0 + T ? p0 + T - lo : 0;
                for (int m = 0; m < nm; m++)
                    if (vqm_forward(sess[m], win + p0, T, n_out, lg + (size_t)m * o.c.batch * V, err) != VQ_OK) {
                        fprintf(stderr, "vq perplexity: --kv %s: %s\n", methods[m].name, err);
                        return VQ_EXIT_FAILURE;
                    }
                for (int64_t r = 0; r < n_out; r++) {
                    const int64_t pos = lo + r;
                    if (pos >= C - 1) continue;
                    const int32_t target = win[pos + 1];
                    const int best_ref = vqt_log_softmax(lg + (size_t)r * V, V, lp_ref);
                    for (int m = 0; m < nm; m++) {
                        ppl_acc *a = &acc[c * nm + m];
                        int best = best_ref;
                        double kl = 0;
                        if (m > 0) {
                            best = vqt_log_softmax(lg + ((size_t)m * o.c.batch + (size_t)r) * V, V, lp);
                            for (int i = 0; i < V; i++) kl += exp(lp_ref[i]) * (lp_ref[i] - lp[i]);
                        }
                        const double d = m > 0 ? lp_ref[target] - lp[target] : 0;
                        a->nll -= m > 0 ? lp[target] : lp_ref[target];
                        win_nll[(pos + 1) * nm + m] = m > 0 ? -lp[target] : -lp_ref[target];
                        a->kl += kl;
                        a->klsq += kl * kl;
                        a->dsum += d;
                        a->dsq += d * d;
                        a->agree += best == best_ref;
                        a->n++;
                    }
                }
            }
            for (int m = 0; m < nm; m++) {
                vq_cache_memory_report mem;
                if (vqm_session_memory(sess[m], &mem, err) != VQ_OK) {
                    fprintf(stderr, "vq perplexity: %s\n", err);
                    return VQ_EXIT_FAILURE;
                }
                acc[c * nm + m].bits = mem.bits_per_element;
                acc[c * nm + m].bytes = mem.code_bytes + mem.param_bytes + mem.residual_bytes;
            }
            windows_run[c] = w + 1;
            for (int64_t p = 0; tsv != NULL && p < C; p++) {
                fprintf(tsv, "%lld\t%lld\t%lld\t%d", (long long)C, (long long)w, (long long)p, win[p]);
                for (int m = 0; m < nm; m++) fprintf(tsv, "\t%.9g", win_nll[p * nm + m]);
                fprintf(tsv, "\n");
            }
            if (tsv != NULL) fflush(tsv); /* a run stopped early keeps its finished windows */
        }
    }
    vqp_end(&prog);
    const double elapsed = tool_now() - t_start;
    vqr *r = vqr_begin("perplexity", argc, argv, ctx, o.json);
    vqr_info_str(r, "model", o.c.model);
    vqr_info_str(r, "text", pos[0]);
    vqr_info_num(r, "text_tokens", (double)total_tokens, "tokens");
    vqr_info_num(r, "skip_tokens", (double)o.skip_tokens, "tokens");
    vqr_info_num(r, "tokens_used", (double)nt, "tokens");
    vqr_info_num(r, "seconds", elapsed, "s");
    if (r == NULL)
        printf("%s: %lld tokens (%lld used), %s, %d threads, %.0f s\n", pos[0], (long long)total_tokens, (long long)nt,
               vq_ctx_isa(ctx), vq_ctx_num_threads(ctx), elapsed);
    if (r == NULL) printf("%-6s %-14s %7s %7s %10s %9s %7s %9s %9s %7s %11s\n", "ctx", "kv", "windows", "scored", "ppl",
                          "dppl %", "+-", "KL", "+-", "top1 %", "bits/elt");
    vq_plot_point pts[PPL_MAX_METHODS * VQA_MAX_SIZES];
    int npts = 0;
    for (int c = 0; c < o.ctx.n; c++) {
        const double ref_ppl = acc[c * nm].n ? exp(acc[c * nm].nll / acc[c * nm].n) : NAN;
        for (int m = 0; m < nm; m++) {
            const ppl_acc *a = &acc[c * nm + m];
            const double ppl = a->n ? exp(a->nll / a->n) : NAN, d = 100 * (ppl / ref_ppl - 1);
            /* paired standard errors over scored tokens (tokens treated as
             * independent, so a lower bound where errors are correlated):
             * the change is exp(mean d) - 1, d = nll - nll(f16) per token */
            const double n = (double)a->n, md = n > 0 ? a->dsum / n : NAN, mk = n > 0 ? a->kl / n : NAN;
            const double sd_d = n > 1 ? sqrt(fmax(0, (a->dsq / n - md * md) * n / (n - 1))) : NAN;
            const double sd_k = n > 1 ? sqrt(fmax(0, (a->klsq / n - mk * mk) * n / (n - 1))) : NAN;
            const double d_se = 100 * exp(md) * sd_d / sqrt(n), kl_se = sd_k / sqrt(n);
            vqr_row(r);
            vqr_int(r, "ctx", o.ctx.v[c], "tokens");
            vqr_str(r, "kv", methods[m].name);
            vqr_int(r, "windows", windows_run[c], NULL);
            vqr_int(r, "scored_tokens", a->n, "tokens");
            vqr_num(r, "ppl", ppl, NULL);
            vqr_num(r, "ppl_change", d, "%");
            vqr_num(r, "ppl_change_se", d_se, "%");
            vqr_num(r, "kl", a->n ? a->kl / a->n : NAN, "nats");
            vqr_num(r, "kl_se", kl_se, "nats");
            vqr_num(r, "top1_agreement", a->n ? 100.0 * a->agree / a->n : NAN, "%");
            vqr_num(r, "bits_per_element", a->bits, "bits");
            vqr_int(r, "cache_bytes", a->bytes, "bytes");
            if (r == NULL)
                printf("%-6lld %-14s %7lld %7lld %10.4f %+9.3f %7.3f %9.5f %9.5f %7.2f %11.3f\n", (long long)o.ctx.v[c],
                       methods[m].name, (long long)windows_run[c], (long long)a->n, ppl, d, d_se, mk, kl_se,
                       a->n ? 100.0 * a->agree / a->n : NAN, a->bits);
            if (a->n > 0) pts[npts++] = (vq_plot_point){a->bits, d, methods[m].name, c % 6};
        }
    }
    vqr_end(r);
    if (o.plot != NULL) {
        vq_plot plot = {.title = "perplexity change vs f16 cache, against bits per element",
                        .x_label = "bits per element", .y_label = "perplexity change (%)", .points = pts,
                        .n_points = npts};
        char names[VQA_MAX_SIZES][32];
        for (int c = 0; c < o.ctx.n && c < 6; c++) {
            snprintf(names[c], sizeof names[c], "ctx %lld", (long long)o.ctx.v[c]);
            plot.series_names[c] = names[c];
        }
        char perr[256];
        if (vq_plot_png(o.plot, &plot, perr, sizeof perr) != 0) {
            fprintf(stderr, "vq perplexity: --plot: %s\n", perr);
            return VQ_EXIT_FAILURE;
        }
    }
    for (int m = 0; m < nm; m++) vqm_session_free(sess[m]);
    if (tsv != NULL && fclose(tsv) != 0) {
        fprintf(stderr, "vq perplexity: --tokens: writing '%s' failed\n", o.tokens);
        return VQ_EXIT_FAILURE;
    }
    free(lg); free(lp_ref); free(lp); free(acc); free(windows_run); free(win_nll); free(win); free(toks);
    vq_ctx_free(ctx);
    vqm_model_free(model);
    return VQ_EXIT_OK;
}
