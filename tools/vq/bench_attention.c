/* bench_attention.c — `vq bench attention`: decode attention over each cache
 * format at B = 1, Hq = 32, Hkv = 32 and 8, D = 128, growing Skv; every
 * fused kernel against dequantize-then-SDPA and uncompressed f16 SDPA in the
 * same run, with bytes of cache read, GB/s and the fraction of the machine's
 * read bandwidth measured in the same run. Then prefill (Sq = Skv) RaBitQ vs
 * an f32 blocked SDPA. Public API only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bench_attention.h"
#include "bench_attention_cases.h"
#include "commands.h"
#include "progress.h"
#include "report.h"

typedef struct bench_args {
    int64_t max_skv, min_skv, prefill_s, hkv, repeats, threads, prefill_heads;
    bool json, no_prefill, no_decode, warm;
    int backend;                /* index in backends[]: 0 cpu, 1 cuda */
    const char *only;
    vqb_cuda_args cuda;
} bench_args;

/* The decode kv lengths and head counts of the CPU run. */
static const int64_t decode_sizes[] = {512, 2048, 8192, 32768, 65536};
static const int64_t decode_hkvs[] = {32, 8};

static const char *const backends[] = {"cpu", "cuda", NULL};
static const char *const cuda_formats[] = {"all", "kivi", "hamming", "exact", "cache", NULL};

/* Every option of both backends: one table, so one --help and one parser. */
static int parse(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){.max_skv = 65536, .min_skv = 1, .prefill_s = 4096, .repeats = 5, .prefill_heads = 4};
    const vqa_opt opts[] = {
        {"backend", VQA_CHOICE, &a->backend, .choices = backends, .help = "cpu: the CPU kernels; cuda: the GPU ones"},
        {"max-skv", VQA_SIZE, &a->max_skv, 1, 1 << 30, "N", "cpu: largest Skv of {512, 2K, 8K, 32K, 64K} to run"},
        {"min-skv", VQA_SIZE, &a->min_skv, 1, 1 << 30, "N", "cpu: smallest Skv to run"},
        {"hkv", VQA_INT, &a->hkv, 0, 32, "N", "only this KV head count (cpu: a divisor of 32; cuda: 8 or 32), 0 = both"},
        {"repeats", VQA_INT, &a->repeats, 1, 1000, "N", "cpu: timed calls per case, median kept (prefill: at most 3)"},
        {"threads", VQA_INT, &a->threads, 0, 1024, "N", "cpu: threads, 0 = all cores"},
        {"prefill-s", VQA_SIZE, &a->prefill_s, 1, 1 << 20, "N", "cpu: prefill Sq = Skv"},
        {"prefill-heads", VQA_INT, &a->prefill_heads, 1, 256, "N", "cpu: prefill Hq = Hkv"},
        {"no-prefill", VQA_FLAG, &a->no_prefill, .help = "cpu: skip the prefill rows"},
        {"no-decode", VQA_FLAG, &a->no_decode, .help = "cpu: skip the decode rows"},
        {"warm", VQA_FLAG, &a->warm, .help = "cpu: leave the caches warm between calls (default: a read pass evicts them)"},
        {"only", VQA_STRING, &a->only, 0, 0, "NAME", "cpu: only the formats whose name contains NAME (and f16)"},
        {"b1", VQA_FLAG, &a->cuda.b1, .help = "cuda: batch 1 only, no split sweep (a shorter run)"},
        {"format", VQA_CHOICE, &a->cuda.format, .choices = cuda_formats,
         .help = "cuda: only this format's rows (cache: mixed-width KIVI keys and controls, through the KV cache)"},
        {"skv", VQA_SIZE, &a->cuda.skv, 0, 1 << 30, "N", "cuda: only this Skv (4K, 32K or 128K), 0 = all"},
        VQA_JSON_OPT(&a->json),
    };
    const vqa_cmd cmd = {
        "bench attention",
        "decode (and prefill) attention over every cache format: fused vs dequantize-then-SDPA vs f16",
        opts, VQA_COUNT(opts),
        "cpu decode: B=1 Hq=32 D=128, Hkv in {32, 8}, Skv in {512, 2K, 8K, 32K, 64K} within\n"
        "[--min-skv, --max-skv]; median of --repeats calls after one warm-up, each call cold: a pass of\n"
        "the read loop over 4x the last-level cache (at least 1 GiB) evicts the caches before it, as a\n"
        "decode step finds a layer's cache (--warm: no pass). cpu prefill: Sq = Skv =\n"
        "--prefill-s, Hq = Hkv = --prefill-heads, median of min(--repeats, 3) calls.\n"
        "Times are wall-clock medians; cpu-ms is the process CPU time per call divided by the threads,\n"
        "which stays meaningful when other work shares the cores (with VQ_SPIN_US=0: the pool's threads\n"
        "spin between jobs by default, which CPU time counts); %bwcpu compares the kernel's bytes per\n"
        "CPU-second with the read loop's; cpu-min and %bwmin use the least CPU time of the calls. The\n"
        "read bandwidth is the best pass of the run (5 at the start, then the evicting ones): 8 streams\n"
        "of the widest vector loads per thread.\n"
        "cuda: KIVI 2-bit and RaBitQ decode at Hq=32 D=128, B in {1, 8}, Hkv in {32, 8}, Skv in {4K, 32K,\n"
        "128K}, CUDA-event medians, against the device's copy bandwidth; then a kv-split sweep.\n"};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    const bool cuda = a->backend == 1;
    if (!cuda && (a->cuda.b1 || a->cuda.format != 0 || a->cuda.skv != 0))
        return vqa_usage_error(&cmd, "--b1, --format and --skv apply to --backend cuda only");
    if (cuda && (a->max_skv != 65536 || a->min_skv != 1 || a->repeats != 5 || a->threads != 0 ||
                 a->prefill_s != 4096 || a->prefill_heads != 4 || a->no_prefill || a->no_decode || a->only))
        return vqa_usage_error(&cmd, "--backend cuda takes only --b1, --format, --skv, --hkv and --json");
    if (cuda && a->hkv != 0 && a->hkv != 8 && a->hkv != 32)
        return vqa_usage_error(&cmd, "--hkv with --backend cuda must be 8 or 32, got %lld", (long long)a->hkv);
    if (cuda && a->cuda.skv != 0 && a->cuda.skv != 4096 && a->cuda.skv != 32768 && a->cuda.skv != 131072)
        return vqa_usage_error(&cmd, "--skv must be 4K, 32K or 128K, got %lld", (long long)a->cuda.skv);
    if (!cuda && a->hkv != 0 && 32 % a->hkv != 0)
        return vqa_usage_error(&cmd, "--hkv must divide Hq = 32, got %lld", (long long)a->hkv);
    if (!cuda && !a->no_decode) {
        int n = 0;
        for (size_t s = 0; s < VQA_COUNT(decode_sizes); s++)
            n += decode_sizes[s] >= a->min_skv && decode_sizes[s] <= a->max_skv;
        if (n == 0)
            return vqa_usage_error(&cmd, "no decode Skv of {512, 2K, 8K, 32K, 64K} lies in [--min-skv %lld, --max-skv "
                                   "%lld] (use --no-decode to skip decode)", (long long)a->min_skv,
                                   (long long)a->max_skv);
    }
    if (a->no_decode && (a->no_prefill || cuda))
        return vqa_usage_error(&cmd, "--no-decode%s leaves nothing to run", cuda ? "" : " with --no-prefill");
    a->cuda.hkv = a->hkv;
    a->cuda.json = a->json;
    return VQA_RUN;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median wall seconds of `repeats` calls after one warm-up (< 0 on failure),
 * each after a pass of `evict` (NULL: warm calls); cpu[0] = median, cpu[1] =
 * least process CPU seconds per call (the least is what the read loop
 * reports too: its best pass). */
/* The clock line of the text output (vqb_clock_ghz; nothing where it does not run). */
static void print_clock(const char *when, int threads, double ghz)
{
    if (ghz > 0.0)
        printf("clock %s the rows: %.2f GHz (512-bit FMA chains on all %d threads at once, 2 per cycle, per CPU "
               "second)\n",
               when, ghz, threads);
}

static double time_case(vqb_case *c, vq_ctx *ctx, int64_t repeats, vqb_stream *evict, double *cpu)
{
    double *t = calloc((size_t)repeats * 2, sizeof *t), *u = t + repeats;
    if (t == NULL) return -1.0;
    double med = -1.0;
    if (c->run(c, ctx) != VQ_OK) goto done;
    for (int64_t r = 0; r < repeats; r++) {
        if (evict != NULL) vqb_stream_pass(evict);
        const double t0 = vqb_now(), c0 = vqb_cpu_now();
        if (c->run(c, ctx) != VQ_OK) goto done;
        t[r] = vqb_now() - t0;
        u[r] = vqb_cpu_now() - c0;
    }
    qsort(t, (size_t)repeats, sizeof t[0], cmp_double);
    qsort(u, (size_t)repeats, sizeof u[0], cmp_double);
    cpu[0] = u[repeats / 2];
    cpu[1] = u[0];
    med = t[repeats / 2];
done:
    free(t);
    return med;
}

typedef struct result {
    const char *name, *kind;  /* kind: fused, dequant+sdpa, sdpa, prefill */
    int64_t hq, hkv, sq, skv, d;
    double sec, cpu, cpu_min, bytes, gflop; /* cpu: median process CPU seconds per call / threads (cpu_min: least) */
    double vs_deq, vs_f16;    /* speed-ups (time of baseline / time), 0 = n/a */
} result;

static void print_table(const result *r, int n, double bw, double bw_cpu)
{
    printf("%-16s %-13s %4s %5s %6s %9s %9s %9s %9s %7s %6s %7s %7s %7s %7s\n", "format", "kind", "Hkv", "Sq", "Skv",
           "ms", "cpu-ms", "cpu-min", "MB read", "GB/s", "%bw", "%bwcpu", "%bwmin", "x deq", "x f16");
    for (int i = 0; i < n; i++) {
        const double gbs = r[i].bytes / r[i].sec / 1e9;
        char deq[16] = "-", f16[16] = "-";
        if (r[i].vs_deq > 0) snprintf(deq, sizeof deq, "%.2f", r[i].vs_deq);
        if (r[i].vs_f16 > 0) snprintf(f16, sizeof f16, "%.2f", r[i].vs_f16);
        printf("%-16s %-13s %4lld %5lld %6lld %9.3f %9.3f %9.3f %9.2f %7.2f %6.1f %7.1f %7.1f %7s %7s", r[i].name,
               r[i].kind, (long long)r[i].hkv, (long long)r[i].sq, (long long)r[i].skv, r[i].sec * 1e3,
               r[i].cpu * 1e3, r[i].cpu_min * 1e3, r[i].bytes / 1e6, gbs, 100.0 * gbs / bw,
               100.0 * r[i].bytes / r[i].cpu / 1e9 / bw_cpu, 100.0 * r[i].bytes / r[i].cpu_min / 1e9 / bw_cpu, deq, f16);
        if (r[i].gflop > 0) printf("  %.1f GFLOP/s", r[i].gflop / r[i].sec);
        printf("\n");
    }
}

static void report_rows(vqr *rep, const result *r, int n, double bw, double bw_cpu)
{
    vqr_info_num(rep, "read_bandwidth", bw, "GB/s");
    vqr_info_num(rep, "read_bandwidth_per_cpu", bw_cpu, "GB/s");
    for (int i = 0; i < n; i++) {
        const double gbs = r[i].bytes / r[i].sec / 1e9;
        vqr_row(rep);
        vqr_str(rep, "format", r[i].name);
        vqr_str(rep, "kind", r[i].kind);
        vqr_int(rep, "b", 1, NULL);
        vqr_int(rep, "hq", r[i].hq, NULL);
        vqr_int(rep, "hkv", r[i].hkv, NULL);
        vqr_int(rep, "sq", r[i].sq, "tokens");
        vqr_int(rep, "skv", r[i].skv, "tokens");
        vqr_int(rep, "d", r[i].d, NULL);
        vqr_num(rep, "time", r[i].sec * 1e3, "ms");
        vqr_num(rep, "cpu_time", r[i].cpu * 1e3, "ms");
        vqr_num(rep, "cpu_time_min", r[i].cpu_min * 1e3, "ms");
        vqr_num(rep, "bytes", r[i].bytes, "B");
        vqr_num(rep, "bandwidth", gbs, "GB/s");
        vqr_num(rep, "bw_fraction", gbs / bw, NULL);
        vqr_num(rep, "bw_fraction_cpu", r[i].bytes / r[i].cpu / 1e9 / bw_cpu, NULL);
        vqr_num(rep, "bw_fraction_cpu_min", r[i].bytes / r[i].cpu_min / 1e9 / bw_cpu, NULL);
        vqr_num(rep, "speedup_vs_dequant", r[i].vs_deq > 0 ? r[i].vs_deq : NAN, NULL);
        vqr_num(rep, "speedup_vs_f16", r[i].vs_f16 > 0 ? r[i].vs_f16 : NAN, NULL);
        vqr_num(rep, "compute", r[i].gflop > 0 ? r[i].gflop / r[i].sec : NAN, "GFLOP/s");
    }
}

/* Runs every decode format at one (Hkv, Skv) and appends results. */
static int bench_decode(vq_ctx *ctx, const bench_args *a, vqb_stream *evict, int64_t hkv, int64_t skv, result *out,
                        int *n)
{
    vqb_shape sh = {1, 32, hkv, 1, skv, 128};
    vqb_case cases[VQB_MAX_CASES];
    int nc = 0;
    if (!vqb_make_decode_cases(&sh, vq_ctx_num_threads(ctx), cases, &nc)) {
        fprintf(stderr, "vq bench attention: out of memory at Hkv %lld Skv %lld\n", (long long)hkv, (long long)skv);
        return VQ_EXIT_FAILURE;
    }
    double sec[VQB_MAX_CASES], cpu[VQB_MAX_CASES][2];
    int status = VQ_EXIT_OK;
    const int threads = vq_ctx_num_threads(ctx);
    for (int i = 0; i < nc; i++) {
        sec[i] = 0.0;
        if (a->only && strcmp(cases[i].name, "f16") != 0 && !strstr(cases[i].name, a->only)) continue;
        sec[i] = time_case(&cases[i], ctx, a->repeats, evict, cpu[i]);
        cpu[i][0] /= threads;
        cpu[i][1] /= threads;
        if (sec[i] < 0) {
            fprintf(stderr, "vq bench attention: %s (%s) failed: %s\n", cases[i].name, cases[i].kind,
                    vq_ctx_last_error(ctx));
            status = VQ_EXIT_FAILURE;
        }
    }
    double f16 = 0;
    for (int i = 0; i < nc; i++)
        if (strcmp(cases[i].name, "f16") == 0) f16 = sec[i];
    for (int i = 0; i < nc && status == VQ_EXIT_OK; i++) {
        if (sec[i] == 0.0) continue;
        result *r = &out[(*n)++];
        *r = (result){cases[i].name, cases[i].kind, sh.Hq, hkv, 1, skv, sh.D, sec[i], cpu[i][0], cpu[i][1],
                      (double)cases[i].bytes, 0, 0, 0};
        for (int j = 0; j < nc; j++)
            if (j != i && sec[j] > 0 && strcmp(cases[j].name, cases[i].name) == 0 &&
                strcmp(cases[j].kind, "dequant+sdpa") == 0)
                r->vs_deq = sec[j] / sec[i];
        if (strncmp(cases[i].kind, "fused", 5) == 0 && f16 > 0) r->vs_f16 = f16 / sec[i];
    }
    vqb_free_cases(cases, nc);
    return status;
}

static int bench_prefill(vq_ctx *ctx, const bench_args *a, vqb_stream *evict, result *out, int *n)
{
    vqb_shape sh = {1, a->prefill_heads, a->prefill_heads, a->prefill_s, a->prefill_s, 128};
    vqb_case cases[VQB_MAX_CASES];
    int nc = 0;
    if (!vqb_make_prefill_cases(&sh, cases, &nc)) {
        fprintf(stderr, "vq bench attention: out of memory for prefill\n");
        return VQ_EXIT_FAILURE;
    }
    const int64_t repeats = a->repeats < 3 ? a->repeats : 3;  /* documented in --help */
    double sec[VQB_MAX_CASES], cpu[VQB_MAX_CASES][2];
    for (int i = 0; i < nc; i++) {
        sec[i] = time_case(&cases[i], ctx, repeats, evict, cpu[i]);
        cpu[i][0] /= vq_ctx_num_threads(ctx);
        cpu[i][1] /= vq_ctx_num_threads(ctx);
        if (sec[i] < 0) {
            fprintf(stderr, "vq bench attention: %s failed: %s\n", cases[i].name, vq_ctx_last_error(ctx));
            vqb_free_cases(cases, nc);
            return VQ_EXIT_FAILURE;
        }
    }
    /* the two matrix products: 2 * 2 * H * Sq * Skv * D flops */
    const double gflop = 4e-9 * (double)sh.Hq * (double)sh.Sq * (double)sh.Skv * (double)sh.D;
    for (int i = 0; i < nc; i++) {
        out[(*n)++] = (result){cases[i].name, cases[i].kind, sh.Hq, sh.Hkv, sh.Sq, sh.Skv, sh.D, sec[i], cpu[i][0],
                               cpu[i][1], (double)cases[i].bytes, gflop, i > 0 ? sec[0] / sec[i] : 0, 0};
    }
    vqb_free_cases(cases, nc);
    return VQ_EXIT_OK;
}

int vq_cmd_bench_attention(int argc, char **argv)
{
    bench_args a;
    const int pr = parse(argc, argv, &a);
    if (pr != VQA_RUN) return pr;
    if (a.backend == 1) return vqb_bench_attention_cuda(&a.cuda, argc, argv);
    vq_ctx *ctx = NULL;
    const vq_ctx_config cfg = {.backend = VQ_BACKEND_CPU, .num_threads = (int)a.threads};
    if (vq_ctx_create(&cfg, &ctx) != VQ_OK) {
        fprintf(stderr, "vq bench attention: %s\n", vq_last_error());
        return VQ_EXIT_FAILURE;
    }
    const int threads = vq_ctx_num_threads(ctx);
    /* the steps: the bandwidth loop, each (Hkv, Skv) of decode, prefill */
    enum { MAX_ROWS = 512 };
    int64_t hkv_list[3];
    int n_hkv = 0;
    if (a.hkv) hkv_list[n_hkv++] = a.hkv;
    else for (int h = 0; h < VQA_COUNT(decode_hkvs); h++) hkv_list[n_hkv++] = decode_hkvs[h];
    int n_sizes = 0;
    for (int s = 0; s < VQA_COUNT(decode_sizes); s++)
        n_sizes += decode_sizes[s] <= a.max_skv && decode_sizes[s] >= a.min_skv;
    vqp p;
    vqp_begin(&p, "bench attention", 1 + (a.no_decode ? 0 : n_hkv * n_sizes) + !a.no_prefill);
    vqp_step(&p, "read bandwidth (streaming read of %.2f GiB)", (double)vqb_stream_bytes() / (1 << 30));
    vqb_stream *stream = vqb_stream_create(threads, vqb_stream_bytes(), ctx);
    result *res = calloc(MAX_ROWS, sizeof *res);
    if (res == NULL || stream == NULL) {
        fprintf(stderr, "vq bench attention: out of memory\n");
        free(res);
        vqb_stream_free(stream);
        vq_ctx_free(ctx);
        return VQ_EXIT_FAILURE;
    }
    for (int pass = 0; pass < 5; pass++) vqb_stream_pass(stream);
    vqp_clear(&p);
    const double ghz0 = vqb_clock_ghz(threads);
    if (!a.json) {
        double c = 0.0;
        const double w = vqb_stream_best(stream, &c, NULL);
        printf("read bandwidth (all %d threads, %.2f GiB, 8 streams of %d-bit loads per thread, best of 5): %.2f GB/s "
               "wall, %.2f GB/s by CPU time (bytes / (CPU seconds / threads)); kernels: %s; calls %s\n",
               threads, (double)vqb_stream_size(stream) / (1 << 30), vqb_stream_load_bits(stream), w, c,
               vq_ctx_isa(ctx), a.warm ? "warm (--warm)" : "cold (a read pass evicts the caches before each)");
        print_clock("before", threads, ghz0);
        fflush(stdout);
    }
    vqb_stream *evict = a.warm ? NULL : stream;
    int n = 0, status = VQ_EXIT_OK;
    for (int h = 0; !a.no_decode && h < n_hkv && status == VQ_EXIT_OK; h++)
        for (int s = 0; s < VQA_COUNT(decode_sizes) && status == VQ_EXIT_OK; s++) {
            if (decode_sizes[s] > a.max_skv || decode_sizes[s] < a.min_skv) continue;
            vqp_step(&p, "decode Hkv %lld Skv %lld", (long long)hkv_list[h], (long long)decode_sizes[s]);
            status = bench_decode(ctx, &a, evict, hkv_list[h], decode_sizes[s], res, &n);
        }
    if (!a.no_prefill && status == VQ_EXIT_OK) {
        vqp_step(&p, "prefill Sq = Skv = %lld", (long long)a.prefill_s);
        status = bench_prefill(ctx, &a, evict, res, &n);
    }
    vqp_end(&p);
    double bw_cpu = 0.0;
    int64_t passes = 0;
    const double bw = vqb_stream_best(stream, &bw_cpu, &passes);
    if (a.json) {
        vqr *rep = vqr_begin("bench attention", argc, argv, ctx, true);
        vqr_info_num(rep, "read_passes", (double)passes, NULL);
        vqr_info_str(rep, "calls", a.warm ? "warm" : "cold");
        report_rows(rep, res, n, bw, bw_cpu);
        vqr_end(rep);
    } else {
        printf("read bandwidth, the best of the run's %lld passes: %.2f GB/s wall, %.2f GB/s by CPU time (the "
               "%%bw columns' base)\n",
               (long long)passes, bw, bw_cpu);
        print_table(res, n, bw, bw_cpu);
        print_clock("after", threads, vqb_clock_ghz(threads));
    }
    free(res);
    vqb_stream_free(stream);
    vq_ctx_free(ctx);
    return status;
}
