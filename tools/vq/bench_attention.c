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

#include "bench_attention.h"
#include "bench_attention_cases.h"
#include "commands.h"

static const char usage_text[] =
    "usage: vq bench attention [--max-skv N] [--min-skv N] [--hkv N] [--repeats N] [--threads N]\n"
    "                          [--prefill-s N] [--prefill-heads N] [--no-prefill] [--no-decode] [--only NAME]\n"
    "                          [--json] [--backend cpu|cuda]\n"
    "  decode: B=1 Hq=32 D=128, Hkv in {32, 8} (--hkv picks one), Skv in {512, 2K, 8K, 32K, 64K} within\n"
    "  [--min-skv, --max-skv]; median of --repeats (default 5) calls after one warm-up.\n"
    "  prefill: Sq = Skv = --prefill-s (default 4096), Hq = Hkv = --prefill-heads (default 4).\n"
    "  --only NAME times only the cases whose format contains NAME (plus f16 for the ratio).\n"
    "  Times are wall-clock medians; cpu-ms is the process CPU time per call divided by the\n"
    "  threads, which stays meaningful when other work shares the cores; %bwcpu compares the\n"
    "  kernel's bytes per CPU-second with the read loop's.\n"
    "  --backend cuda: the GPU decode benchmark instead (its own options: --b1).\n";

typedef struct bench_args {
    int64_t max_skv, min_skv, prefill_s;
    int hkv, repeats, threads, prefill_heads;
    bool json, prefill, decode;
    const char *only;
} bench_args;

static int parse(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){.max_skv = 65536, .min_skv = 1, .prefill_s = 4096, .repeats = 5, .prefill_heads = 4,
                      .prefill = true, .decode = true};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const bool has = i + 1 < argc;
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) return -1;
        if (strcmp(o, "--json") == 0) a->json = true;
        else if (strcmp(o, "--no-prefill") == 0) a->prefill = false;
        else if (strcmp(o, "--no-decode") == 0) a->decode = false;
        else if (has && strcmp(o, "--max-skv") == 0) a->max_skv = atoll(argv[++i]);
        else if (has && strcmp(o, "--min-skv") == 0) a->min_skv = atoll(argv[++i]);
        else if (has && strcmp(o, "--hkv") == 0) a->hkv = atoi(argv[++i]);
        else if (has && strcmp(o, "--repeats") == 0) a->repeats = atoi(argv[++i]);
        else if (has && strcmp(o, "--threads") == 0) a->threads = atoi(argv[++i]);
        else if (has && strcmp(o, "--prefill-s") == 0) a->prefill_s = atoll(argv[++i]);
        else if (has && strcmp(o, "--prefill-heads") == 0) a->prefill_heads = atoi(argv[++i]);
        else if (has && strcmp(o, "--only") == 0) a->only = argv[++i];
        else if (has && strcmp(o, "--backend") == 0 && strcmp(argv[i + 1], "cpu") == 0) i++;
        else {
            fprintf(stderr, "vq bench attention: unknown or incomplete option '%s'\n", o);
            return VQ_EXIT_USAGE;
        }
    }
    if (a->repeats < 1 || a->threads < 0 || a->max_skv < 1 || a->prefill_s < 1 || a->prefill_heads < 1 ||
        (a->hkv != 0 && (a->hkv < 1 || 32 % a->hkv != 0))) {
        fprintf(stderr, "vq bench attention: bad option value\n");
        return VQ_EXIT_USAGE;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median wall seconds of `repeats` calls after one warm-up (< 0 on failure);
 * *cpu = median process CPU seconds per call. */
static double time_case(vqb_case *c, vq_ctx *ctx, int repeats, double *cpu)
{
    double t[64], u[64];
    if (repeats > 64) repeats = 64;
    if (c->run(c, ctx) != VQ_OK) return -1.0;
    for (int r = 0; r < repeats; r++) {
        const double t0 = vqb_now(), c0 = vqb_cpu_now();
        if (c->run(c, ctx) != VQ_OK) return -1.0;
        t[r] = vqb_now() - t0;
        u[r] = vqb_cpu_now() - c0;
    }
    qsort(t, (size_t)repeats, sizeof t[0], cmp_double);
    qsort(u, (size_t)repeats, sizeof u[0], cmp_double);
    *cpu = u[repeats / 2];
    return t[repeats / 2];
}

typedef struct result {
    const char *name, *kind;  /* kind: fused, dequant+sdpa, sdpa, prefill */
    int64_t hkv, sq, skv;
    double sec, cpu, bytes, gflop;  /* cpu: process CPU seconds per call / threads; gflop per call */
    double vs_deq, vs_f16;    /* speed-ups (time of baseline / time), 0 = n/a */
} result;

static void print_table(const result *r, int n, double bw, double bw_cpu)
{
    printf("%-16s %-13s %4s %5s %6s %9s %9s %9s %7s %6s %7s %7s %7s\n", "format", "kind", "Hkv", "Sq", "Skv", "ms",
           "cpu-ms", "MB read", "GB/s", "%bw", "%bwcpu", "x deq", "x f16");
    for (int i = 0; i < n; i++) {
        const double gbs = r[i].bytes / r[i].sec / 1e9;
        char deq[16] = "-", f16[16] = "-";
        if (r[i].vs_deq > 0) snprintf(deq, sizeof deq, "%.2f", r[i].vs_deq);
        if (r[i].vs_f16 > 0) snprintf(f16, sizeof f16, "%.2f", r[i].vs_f16);
        printf("%-16s %-13s %4lld %5lld %6lld %9.3f %9.3f %9.2f %7.2f %6.1f %7.1f %7s %7s", r[i].name, r[i].kind,
               (long long)r[i].hkv, (long long)r[i].sq, (long long)r[i].skv, r[i].sec * 1e3, r[i].cpu * 1e3,
               r[i].bytes / 1e6, gbs, 100.0 * gbs / bw, 100.0 * r[i].bytes / r[i].cpu / 1e9 / bw_cpu, deq, f16);
        if (r[i].gflop > 0) printf("  %.1f GFLOP/s", r[i].gflop / r[i].sec);
        printf("\n");
    }
}

static void print_json(const result *r, int n, double bw, double bw_cpu, const char *isa, int threads)
{
    printf("{\n  \"read_bandwidth_gbs\": %.3f,\n  \"read_bandwidth_per_cpu_gbs\": %.3f,\n  \"isa\": \"%s\",\n"
           "  \"threads\": %d,\n  \"results\": [\n",
           bw, bw_cpu, isa, threads);
    for (int i = 0; i < n; i++) {
        const double gbs = r[i].bytes / r[i].sec / 1e9;
        printf("    {\"format\": \"%s\", \"kind\": \"%s\", \"B\": 1, \"Hq\": %d, \"Hkv\": %lld, \"Sq\": %lld, "
               "\"Skv\": %lld, \"D\": 128, \"ms\": %.4f, \"cpu_ms\": %.4f, \"bytes\": %.0f, \"gbs\": %.3f, \"bw_fraction\": %.4f, \"bw_fraction_cpu\": %.4f, "
               "\"speedup_vs_dequant\": %.4f, \"speedup_vs_f16\": %.4f, \"gflops\": %.3f}%s\n",
               r[i].name, r[i].kind, r[i].kind[0] == 'p' ? (int)r[i].hkv : 32, (long long)r[i].hkv,
               (long long)r[i].sq, (long long)r[i].skv, r[i].sec * 1e3, r[i].cpu * 1e3, r[i].bytes, gbs, gbs / bw, r[i].bytes / r[i].cpu / 1e9 / bw_cpu, r[i].vs_deq,
               r[i].vs_f16, r[i].gflop > 0 ? r[i].gflop / r[i].sec : 0.0, i + 1 < n ? "," : "");
    }
    printf("  ]\n}\n");
}

/* Runs every decode format at one (Hkv, Skv) and appends results. */
static int bench_decode(vq_ctx *ctx, const bench_args *a, int64_t hkv, int64_t skv, result *out, int *n)
{
    vqb_shape sh = {1, 32, hkv, 1, skv, 128};
    vqb_case cases[VQB_MAX_CASES];
    int nc = 0;
    if (!vqb_make_decode_cases(&sh, vq_ctx_num_threads(ctx), cases, &nc)) {
        fprintf(stderr, "vq bench attention: out of memory at Hkv %lld Skv %lld\n", (long long)hkv, (long long)skv);
        return VQ_EXIT_FAILURE;
    }
    double sec[VQB_MAX_CASES], cpu[VQB_MAX_CASES];
    int status = VQ_EXIT_OK;
    const int threads = vq_ctx_num_threads(ctx);
    for (int i = 0; i < nc; i++) {
        sec[i] = 0.0;
        if (a->only && strcmp(cases[i].name, "f16") != 0 && !strstr(cases[i].name, a->only)) continue;
        sec[i] = time_case(&cases[i], ctx, a->repeats, &cpu[i]);
        cpu[i] /= threads;
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
        *r = (result){cases[i].name, cases[i].kind, hkv, 1, skv, sec[i], cpu[i], (double)cases[i].bytes, 0, 0, 0};
        for (int j = 0; j < nc; j++)
            if (j != i && sec[j] > 0 && strcmp(cases[j].name, cases[i].name) == 0 &&
                strcmp(cases[j].kind, "dequant+sdpa") == 0)
                r->vs_deq = sec[j] / sec[i];
        if (strncmp(cases[i].kind, "fused", 5) == 0 && f16 > 0) r->vs_f16 = f16 / sec[i];
    }
    vqb_free_cases(cases, nc);
    return status;
}

static int bench_prefill(vq_ctx *ctx, const bench_args *a, result *out, int *n)
{
    vqb_shape sh = {1, a->prefill_heads, a->prefill_heads, a->prefill_s, a->prefill_s, 128};
    vqb_case cases[VQB_MAX_CASES];
    int nc = 0;
    if (!vqb_make_prefill_cases(&sh, cases, &nc)) {
        fprintf(stderr, "vq bench attention: out of memory for prefill\n");
        return VQ_EXIT_FAILURE;
    }
    const int repeats = a->repeats < 3 ? a->repeats : 3;
    double sec[VQB_MAX_CASES], cpu[VQB_MAX_CASES];
    for (int i = 0; i < nc; i++) {
        sec[i] = time_case(&cases[i], ctx, repeats, &cpu[i]);
        cpu[i] /= vq_ctx_num_threads(ctx);
        if (sec[i] < 0) {
            fprintf(stderr, "vq bench attention: %s failed: %s\n", cases[i].name, vq_ctx_last_error(ctx));
            vqb_free_cases(cases, nc);
            return VQ_EXIT_FAILURE;
        }
    }
    /* the two matrix products: 2 * 2 * H * Sq * Skv * D flops */
    const double gflop = 4e-9 * (double)sh.Hq * (double)sh.Sq * (double)sh.Skv * (double)sh.D;
    for (int i = 0; i < nc; i++) {
        out[(*n)++] = (result){cases[i].name, cases[i].kind, sh.Hkv, sh.Sq, sh.Skv, sec[i], cpu[i],
                               (double)cases[i].bytes, gflop, i > 0 ? sec[0] / sec[i] : 0, 0};
    }
    vqb_free_cases(cases, nc);
    return VQ_EXIT_OK;
}

int vq_cmd_bench_attention(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--backend") == 0 && strcmp(argv[i + 1], "cuda") == 0)
            return vqb_bench_attention_cuda(argc, argv);
    bench_args a;
    const int pr = parse(argc, argv, &a);
    if (pr < 0) {
        fputs(usage_text, stdout);
        return VQ_EXIT_OK;
    }
    if (pr != 0) {
        fputs(usage_text, stderr);
        return pr;
    }
    vq_ctx *ctx = NULL;
    const vq_ctx_config cfg = {.backend = VQ_BACKEND_CPU, .num_threads = a.threads};
    if (vq_ctx_create(&cfg, &ctx) != VQ_OK) {
        fprintf(stderr, "vq bench attention: cannot create a CPU context\n");
        return VQ_EXIT_FAILURE;
    }
    const int threads = vq_ctx_num_threads(ctx);
    double bw_cpu = 0.0;
    const double bw = vqb_read_bandwidth(threads, (size_t)1 << 30, &bw_cpu);
    if (!a.json)
        printf("read bandwidth (all %d threads, 1 GiB streaming sum): %.2f GB/s wall, %.2f GB/s by CPU time "
               "(bytes / (CPU seconds / threads)); kernels: %s\n",
               threads, bw, bw_cpu, vq_ctx_isa(ctx));
    static const int64_t sizes[] = {512, 2048, 8192, 32768, 65536};
    static const int64_t hkvs[] = {32, 8};
    result res[256];
    int n = 0, status = VQ_EXIT_OK;
    for (size_t h = 0; a.decode && h < 2 && status == VQ_EXIT_OK; h++) {
        if (a.hkv && a.hkv != hkvs[h]) continue;
        for (size_t s = 0; s < 5 && status == VQ_EXIT_OK; s++)
            if (sizes[s] <= a.max_skv && sizes[s] >= a.min_skv)
                status = bench_decode(ctx, &a, a.hkv ? a.hkv : hkvs[h], sizes[s], res, &n);
    }
    if (a.hkv && a.hkv != 32 && a.hkv != 8 && a.decode)
        for (size_t s = 0; s < 5 && status == VQ_EXIT_OK; s++)
            if (sizes[s] <= a.max_skv && sizes[s] >= a.min_skv) status = bench_decode(ctx, &a, a.hkv, sizes[s], res, &n);
    if (a.prefill && status == VQ_EXIT_OK) status = bench_prefill(ctx, &a, res, &n);
    if (a.json) print_json(res, n, bw, bw_cpu, vq_ctx_isa(ctx), threads);
    else print_table(res, n, bw, bw_cpu);
    vq_ctx_free(ctx);
    return status;
}
