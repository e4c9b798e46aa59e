/* bench_model.c — `vq bench model`: decode speed of the model runtime.
 *  1. the machine's read bandwidth (best of 5 streaming passes, all threads);
 *  2. decode at a short context (a 16-token prompt, f16 cache): tokens/s
 *     and the weight bytes read per second against that bandwidth;
 *  3. decode at --ctx tokens for each --kv method: the cache is filled with
 *     random keys and values first (vqm_session_fill_random: attention's
 *     cost depends on length and format only), then --steps decode steps
 *     are timed; the speed-up over the f16 cache of the same run, and the
 *     cache's memory (all of it, free pages included) and the fraction of
 *     the tokens it holds against every layer holding every token (a
 *     sliding-window layer holds about its window).
 * CPU time per step is given as the mean and as the fastest step (the
 * counterpart of the read test's best of 5 passes). The ctx's waiting
 * threads spin between jobs (vq_ctx_parallel_for, VQ_SPIN_US), which CPU
 * time counts too, and Linux accounts a running thread's time late, so one
 * step's CPU time is coarse: on an idle machine the wall figures are the
 * measure; the CPU ones are for a shared machine, with VQ_SPIN_US=0.
 * Ratios are taken within one run; the load average is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bench_attention.h"
#include "commands.h"
#include "model_cli.h"
#include "report.h"
#include "tool.h"

typedef struct bm_opts {
    vqm_cli_common c;
    const char *kv;
    int64_t ctx, steps;
    bool json;
} bm_opts;

/* The seconds of `steps` decode steps after one warm-up step: wall time
 * per step (mean, median, fastest: the median is what a slow step now and
 * then does not move), process CPU seconds per step (what the threads got
 * of the shared cores) and the fastest step's CPU seconds. */
typedef struct step_times {
    double mean, median, fastest, cpu, cpu_best;
} step_times;

static int cmp_seconds(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static step_times time_decode(vqm_session *s, const vqm_model *m, int64_t steps, float *logits)
{
    char err[VQM_ERR_LEN];
    int32_t tok = 198;
    double *wall = tool_calloc((size_t)steps, sizeof *wall);
    if (vqm_forward(s, &tok, 1, 1, logits, err) != VQ_OK) {
        fprintf(stderr, "vq bench model: %s\n", err);
        exit(VQ_EXIT_FAILURE);
    }
    step_times st = {.cpu_best = 1e30};
    const double t0 = tool_now(), c0 = vqb_cpu_now();
    for (int64_t i = 0; i < steps; i++) {
        tok = (int32_t)((tok * 31 + 7) % m->cfg.vocab);
        const double ti = tool_now(), ci = vqb_cpu_now();
        if (vqm_forward(s, &tok, 1, 1, logits, err) != VQ_OK) {
            fprintf(stderr, "vq bench model: %s\n", err);
            exit(VQ_EXIT_FAILURE);
        }
        const double c = vqb_cpu_now() - ci;
        wall[i] = tool_now() - ti;
        if (c < st.cpu_best) st.cpu_best = c;
    }
    st.cpu = (vqb_cpu_now() - c0) / (double)steps;
    st.mean = (tool_now() - t0) / (double)steps;
    qsort(wall, (size_t)steps, sizeof *wall, cmp_seconds);
    st.median = steps % 2 ? wall[steps / 2] : 0.5 * (wall[steps / 2 - 1] + wall[steps / 2]);
    st.fastest = wall[0];
    free(wall);
    return st;
}

int vq_cmd_bench_model(int argc, char **argv)
{
    bm_opts o = {.c = VQM_CLI_COMMON_DEFAULTS, .kv = "f16,kivi2,turbo2,turbo3", .ctx = 8192, .steps = 16};
    const vqa_opt opts[] = {
        {"kv", VQA_STRING, &o.kv, 0, 0, "LIST", "cache methods (presets, profile FILEs) timed at --ctx (f16 first as the reference)"},
        {"ctx", VQA_SIZE, &o.ctx, 1, 1 << 20, "N", "context length of the long-context decode"},
        {"steps", VQA_INT, &o.steps, 1, 1 << 20, "N", "timed decode steps per case"},
        VQM_CLI_COMMON_OPTS(o.c),
        VQA_JSON_OPT(&o.json),
    };
    const vqa_cmd cmd = {"bench model", "decode speed of the model runtime: weight bandwidth, long-context speed-up",
                         opts, VQA_COUNT(opts),
                         "The read bandwidth is the best of 5 passes of a streaming read of 4x the last-level\n"
                         "cache (at least 1 GiB), 8 streams of the widest vector loads per thread. Wall times are\n"
                         "the measure on an idle machine; CPU times also count the threads' spin between jobs\n"
                         "(VQ_SPIN_US, default 100 us; set 0 on a shared machine and read the CPU columns).\n"};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    vqm_model *model = vqm_cli_load("bench model", o.c.model);
    if (model == NULL) return VQ_EXIT_FAILURE;
    vq_ctx *ctx = tool_ctx((int)o.c.threads, NULL);
    const int threads = vq_ctx_num_threads(ctx);
    double loadavg = -1;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la != NULL) {
        if (fscanf(la, "%lf", &loadavg) != 1) loadavg = -1;
        fclose(la);
    }
    double bw_cpu = 0;
    const double bw = vqb_read_bandwidth(threads, vqb_stream_bytes(), &bw_cpu);
    float *logits = tool_calloc((size_t)model->cfg.vocab, sizeof *logits);
    vqr *r = vqr_begin("bench model", argc, argv, ctx, o.json);
    vqr_info_num(r, "read_bandwidth", bw, "GB/s");
    vqr_info_num(r, "read_bandwidth_per_cpu", bw_cpu, "GB/s");
    vqr_info_num(r, "weight_bytes", (double)model->weight_bytes, "bytes");
    vqr_info_num(r, "load_average", loadavg, NULL);
    /* short context */
    vqm_cli_method f16;
    int st = vqm_cli_method_init(&f16, "bench model", "f16", NULL, 0, model->cfg.n_layers, model->cfg.head_dim, false);
    if (st != VQ_EXIT_OK) return st;
    vqm_session *s = vqm_cli_session("bench model", model, ctx, &f16, 64 + (int)o.steps, &o.c);
    if (s == NULL) return VQ_EXIT_FAILURE;
    int32_t prompt[16];
    for (int i = 0; i < 16; i++) prompt[i] = 100 + 37 * i;
    char err[VQM_ERR_LEN];
    if (vqm_forward(s, prompt, 16, 1, logits, err) != VQ_OK) {
        fprintf(stderr, "vq bench model: %s\n", err);
        return VQ_EXIT_FAILURE;
    }
    const step_times sh = time_decode(s, model, o.steps, logits);
    const double t_short = sh.mean, c_short = sh.cpu, c_short_best = sh.cpu_best;
    vqm_session_free(s);
    const double wgbs = (double)model->weight_bytes / t_short / 1e9;
    /* per CPU-second: bytes over the CPU time each thread ran, against the read test's same measure */
    const double wgbs_cpu = (double)model->weight_bytes / (c_short / threads) / 1e9;
    const double wgbs_best = (double)model->weight_bytes / (c_short_best / threads) / 1e9;
    if (r == NULL) {
        printf("read bandwidth %.2f GB/s wall, %.2f GB/s per CPU-second (%d threads, load average %.2f); weights %.1f MB\n",
               bw, bw_cpu, threads, loadavg, model->weight_bytes / 1e6);
        printf("decode at 17 tokens: %.2f ms/token wall (%.1f tokens/s; median step %.2f ms), %.2f CPU-ms/token; "
               "weights read at %.2f GB/s "
               "wall = %.0f%% of the wall read bandwidth, %.2f GB/s per CPU-second = %.0f%% of the per-CPU read "
               "bandwidth (fastest step: %.2f CPU-ms, %.0f%%)\n", t_short * 1e3, 1 / t_short, sh.median * 1e3, c_short * 1e3, wgbs,
               100 * wgbs / bw, wgbs_cpu, 100 * wgbs_cpu / bw_cpu, c_short_best * 1e3, 100 * wgbs_best / bw_cpu);
        printf("%-16s %8s %10s %10s %10s %10s %10s %10s %10s %12s %9s %8s\n", "kv", "ctx", "ms/token", "median", "fastest",
               "CPU-ms", "bits/elt", "vs f16", "(median)", "vs f16 (CPU)", "cache MiB", "held");
    }
    vqr_row(r);
    vqr_str(r, "case", "short");
    vqr_int(r, "ctx", 17, "tokens");
    vqr_num(r, "time", t_short * 1e3, "ms");
    vqr_num(r, "weight_read", wgbs, "GB/s");
    vqr_num(r, "bandwidth_fraction", wgbs / bw, NULL);
    vqr_num(r, "cpu_time", c_short * 1e3, "ms");
    vqr_num(r, "weight_read_per_cpu", wgbs_cpu, "GB/s");
    vqr_num(r, "bandwidth_fraction_per_cpu", wgbs_cpu / bw_cpu, NULL);
    vqr_num(r, "time_median", sh.median * 1e3, "ms");
    vqr_num(r, "time_fastest", sh.fastest * 1e3, "ms");
    vqr_num(r, "cpu_time_best", c_short_best * 1e3, "ms");
    vqr_num(r, "bandwidth_fraction_per_cpu_best", wgbs_best / bw_cpu, NULL);
    /* long context */
    char list[512];
    snprintf(list, sizeof list, "f16,%s", o.kv);
    double t_f16 = 0, c_f16 = 0, b_f16 = 0, m_f16 = 0;
    int seen = 0;
    for (char *save = NULL, *w = strtok_r(list, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        if (seen++ > 0 && strcmp(w, "f16") == 0) continue;
        static vqm_cli_method m;
        st = vqm_cli_method_init(&m, "bench model", w, o.c.f16_layers, (int)o.c.residual, model->cfg.n_layers,
                                 model->cfg.head_dim, o.c.calibration != NULL);
        if (st != VQ_EXIT_OK) return st;
        s = vqm_cli_session("bench model", model, ctx, &m, (int)(o.ctx + o.steps + 1), &o.c);
        if (s == NULL) return VQ_EXIT_FAILURE;
        if (vqm_session_fill_random(s, o.ctx, 1, err) != VQ_OK) {
            fprintf(stderr, "vq bench model: %s\n", err);
            return VQ_EXIT_FAILURE;
        }
        const step_times ts = time_decode(s, model, o.steps, logits);
        const double t = ts.mean, cpu = ts.cpu, cpu_best = ts.cpu_best;
        vq_cache_memory_report mem;
        if (vqm_session_memory(s, &mem, err) != VQ_OK) {
            fprintf(stderr, "vq bench model: %s\n", err);
            return VQ_EXIT_FAILURE;
        }
        if (t_f16 == 0) {
            t_f16 = t;
            c_f16 = cpu;
            b_f16 = cpu_best;
            m_f16 = ts.median;
        }
        /* the tokens the layers hold against every layer holding every token
         * (a sliding-window layer holds its window) */
        const int64_t n_all = (int64_t)model->cfg.n_layers * vqm_session_length(s);
        const double held = n_all > 0 ? (double)mem.tokens / (double)n_all : 0;
        if (r == NULL)
            printf("%-16s %8lld %10.2f %10.2f %10.2f %10.2f %10.2f %9.2fx %9.2fx %11.2fx %9.1f %8.4f\n", w,
                   (long long)o.ctx, t * 1e3, ts.median * 1e3, ts.fastest * 1e3, cpu * 1e3, mem.bits_per_element,
                   t_f16 / t, m_f16 / ts.median, c_f16 / cpu, (double)mem.total_bytes / 1048576.0, held);
        vqr_row(r);
        vqr_str(r, "case", "long");
        vqr_str(r, "kv", w);
        vqr_int(r, "ctx", o.ctx, "tokens");
        vqr_num(r, "time", t * 1e3, "ms");
        vqr_num(r, "bits_per_element", mem.bits_per_element, "bits");
        vqr_int(r, "cache_bytes", mem.total_bytes, "bytes");
        vqr_num(r, "held_fraction", held, NULL);
        vqr_num(r, "speedup_vs_f16", t_f16 / t, NULL);
        vqr_num(r, "time_median", ts.median * 1e3, "ms");
        vqr_num(r, "time_fastest", ts.fastest * 1e3, "ms");
        vqr_num(r, "speedup_vs_f16_median", m_f16 / ts.median, NULL);
        vqr_num(r, "cpu_time", cpu * 1e3, "ms");
        vqr_num(r, "cpu_speedup_vs_f16", c_f16 / cpu, NULL);
        vqr_num(r, "cpu_time_best", cpu_best * 1e3, "ms");
        vqr_num(r, "cpu_speedup_vs_f16_best", b_f16 / cpu_best, NULL);
        vqm_session_free(s);
    }
    vqr_end(r);
    free(logits);
    vq_ctx_free(ctx);
    vqm_model_free(model);
    return VQ_EXIT_OK;
}
