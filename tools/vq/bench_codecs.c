/* bench_codecs.c — `vq bench codecs`: encode and decode throughput of every
 * codec (the same calls as `vq demo`, see cases.h), the optimized kernels
 * against the scalar reference and one thread against all of them, measured
 * in one run. The scalar reference is a second context created with
 * VQ_ISA=scalar. Public API only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cases.h"
#include "commands.h"
#include "progress.h"
#include "report.h"
#include "tool.h"

enum { N_RUNS = 4 };

typedef struct bench_opts {
    vqa_sizes sizes;
    int64_t dim, min_ms, calib, max_call_s;
    bool json, quick;
    vqr *r;    /* the JSON report, NULL without --json */
    vqp *p;    /* progress */
} bench_opts;

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Parses argv into o; returns VQA_RUN to go on, else the exit status. */
static int parse(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.sizes = {2, {4096, 65536}}, .dim = 128, .min_ms = 200, .calib = 2048, .max_call_s = 3};
    const vqa_opt opts[] = {
        {"sizes", VQA_SIZES, &o->sizes, 8, 1 << 24, NULL, "vectors per run (8 heads x N/8 tokens), multiples of 8"},
        {"dim", VQA_INT, &o->dim, 32, 256, "D", "vector length, a power of two"},
        {"min-time", VQA_INT, &o->min_ms, 0, 60000, "MS", "repeat each timing for at least MS milliseconds"},
        {"max-call", VQA_INT, &o->max_call_s, 1, 86400, "S",
         "skip (shown as '-') a run whose single call is predicted to take over S seconds"},
        {"calib", VQA_SIZE, &o->calib, 256, 1 << 20, "N", "calibration rows that train the codebooks"},
        {"quick", VQA_FLAG, &o->quick, .help = "a short run: --sizes 4096 --min-time 20 (overrides both)"},
        VQA_JSON_OPT(&o->json),
    };
    const vqa_cmd cmd = {"bench codecs",
                         "encode/decode throughput of every codec: optimized kernels vs the scalar reference, "
                         "1 thread vs all",
                         opts, VQA_COUNT(opts),
                         "Each timing keeps the fastest call. Mvec/s = million vectors per second; GB/s = (f32\n"
                         "side + compressed side) bytes per second.\n"};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (o->quick) {
        o->sizes = (vqa_sizes){1, {4096}};
        o->min_ms = 20;
    }
    if ((o->dim & (o->dim - 1)) != 0)
        return vqa_usage_error(&cmd, "--dim must be a power of two in [32, 256], got %lld", (long long)o->dim);
    for (int i = 0; i < o->sizes.n; i++)
        if (o->sizes.v[i] % 8 != 0)
            return vqa_usage_error(&cmd, "--sizes: %lld is not a multiple of 8 (8 heads)", (long long)o->sizes.v[i]);
    /* Ascending, so that each size's timings predict the next one's. */
    qsort(o->sizes.v, (size_t)o->sizes.n, sizeof o->sizes.v[0], cmp_i64);
    return VQA_RUN;
}

/* The four contexts of one run: {scalar, best} x {1 thread, all threads}. */
typedef struct bench_ctxs {
    vq_ctx *ctx[N_RUNS];
} bench_ctxs;

typedef vq_status (*case_op)(codec_case *c, vq_ctx *ctx, const case_input *in);

/* Seconds of the fastest call of op, over calls repeated for at least
 * min_ms (and at least twice after a warm-up call, unless the warm-up alone
 * took min_ms): the minimum is the least disturbed by other processes. */
static double time_op(codec_case *c, case_op op, vq_ctx *ctx, const case_input *in, long min_ms)
{
    double t = tool_now();
    tool_check(ctx, op(c, ctx, in), c->name);
    double best = tool_now() - t;
    if (best * 1e3 >= (double)min_ms) return best;
    const double start = tool_now();
    for (int reps = 0; reps < 2 || (tool_now() - start) * 1e3 < (double)min_ms; reps++) {
        t = tool_now();
        tool_check(ctx, op(c, ctx, in), c->name);
        const double dt = tool_now() - t;
        if (dt < best) best = dt;
    }
    return best;
}

/* Vectors per second measured per (case, op, context) at the previous size:
 * predicts the time of one call at the next size (0 = not measured). */
enum { MAX_CASES = 64 };
typedef double bench_rates[MAX_CASES][2][N_RUNS];

/* One row: an operation (op_index 0 encode, 1 decode) of a codec at one
 * size, under all four contexts; a context predicted to need more than
 * max_call_s per call is skipped (sec < 0). JSON: one row per context. */
static void bench_row(codec_case *c, int op_index, case_op op, const case_input *in, size_t bytes_moved,
                      const bench_ctxs *bc, const bench_opts *o, double *rates)
{
    const char *op_name = op_index ? "decode" : "encode";
    const int64_t n = case_h(in) * case_s(in);
    double sec[N_RUNS];
    for (int r = 0; r < N_RUNS; r++) {
        const int skip = rates[r] > 0 && (double)n / rates[r] > (double)o->max_call_s;
        sec[r] = skip ? -1 : time_op(c, op, bc->ctx[r], in, o->min_ms);
        if (!skip) rates[r] = (double)n / sec[r];
    }
    const double bits = case_bits(c, in->x);
    if (o->r) {
        for (int r = 0; r < N_RUNS; r++) {
            vqr_row(o->r);
            vqr_str(o->r, "codec", c->name);
            vqr_str(o->r, "op", op_name);
            vqr_int(o->r, "n", n, "vectors");
            vqr_int(o->r, "dim", o->dim, NULL);
            vqr_num(o->r, "bits_per_element", bits, "bit");
            vqr_int(o->r, "shared_bytes", (int64_t)case_shared_bytes(c), "B");
            vqr_int(o->r, "bytes_moved", (int64_t)bytes_moved, "B");
            vqr_str(o->r, "run_isa", vq_ctx_isa(bc->ctx[r]));
            vqr_int(o->r, "run_threads", vq_ctx_num_threads(bc->ctx[r]), NULL);
            vqr_bool(o->r, "skipped", sec[r] < 0);
            vqr_num(o->r, "time", sec[r] < 0 ? NAN : sec[r] * 1e3, "ms");
            vqr_num(o->r, "throughput", sec[r] < 0 ? NAN : n / sec[r] / 1e6, "Mvec/s");
            vqr_num(o->r, "bandwidth", sec[r] < 0 ? NAN : bytes_moved / sec[r] / 1e9, "GB/s");
        }
        return;
    }
    vqp_clear(o->p);
    printf("%-22s %-6s %7lld %6.3f", c->name, op_name, (long long)n, bits);
    for (int r = 0; r < N_RUNS; r++) {
        if (sec[r] < 0) printf(" | %7s %6s", "-", "-");
        else printf(" | %7.3g %6.3g", n / sec[r] / 1e6, bytes_moved / sec[r] / 1e9);
    }
    if (sec[0] > 0 && sec[2] > 0) printf(" | %5.1fx", sec[0] / sec[2]);
    else printf(" | %6s", "-");
    if (sec[0] > 0 && sec[3] > 0) printf(" %5.1fx\n", sec[0] / sec[3]);
    else printf(" %6s\n", "-");
    fflush(stdout);
}

/* Both operations of one codec (table index ci) at one size. The codes
 * decode reads come from one encode call on the fastest context. */
static void bench_case(int ci, const case_input *in, const bench_ctxs *bc, const bench_opts *o, bench_rates rates)
{
    codec_case c = *case_template(ci);
    const int64_t n = case_h(in) * case_s(in);
    const double best_rate = rates[ci][0][N_RUNS - 1];
    if (best_rate > 0 && (double)n / best_rate > (double)o->max_call_s) {
        if (!o->r) {
            vqp_clear(o->p);
            printf("%-22s %-6s %7lld  skipped: one encode call would take ~%.1f s (--max-call)\n", c.name, "both",
                   (long long)n, (double)n / best_rate);
        }
        return;
    }
    c.setup(&c, bc->ctx[N_RUNS - 1], in);
    tool_check(bc->ctx[N_RUNS - 1], c.encode(&c, bc->ctx[N_RUNS - 1], in), c.name);
    size_t cache = 0;
    for (int i = 0; i < CASE_MAX_TENSORS && c.cache[i]; i++) cache += tool_bytes(c.cache[i]);
    const size_t moved = tool_bytes(in->x) + cache;
    bench_row(&c, 0, c.encode, in, moved, bc, o, rates[ci][0]);
    if (c.decode && c.decode_in_library) bench_row(&c, 1, c.decode, in, moved, bc, o, rates[ci][1]);
    case_release(&c);
}

int vq_cmd_bench_codecs(int argc, char **argv)
{
    bench_opts o;
    const int rc = parse(argc, argv, &o);
    if (rc != VQA_RUN) return rc;
    bench_ctxs bc = {{tool_ctx(1, "scalar"), tool_ctx(0, "scalar"), tool_ctx(1, NULL), tool_ctx(0, NULL)}};
    const char *isa = vq_ctx_isa(bc.ctx[3]);
    const int threads = vq_ctx_num_threads(bc.ctx[3]);
    static bench_rates rates;  /* zero: nothing measured yet */
    if (case_count() > MAX_CASES) {
        fprintf(stderr, "vq bench codecs: internal error: more than %d cases\n", MAX_CASES);
        return VQ_EXIT_FAILURE;
    }
    vqp p;
    o.p = &p;
    o.r = vqr_begin("bench codecs", argc, argv, bc.ctx[3], o.json);
    vqr_info_num(o.r, "min_time", (double)o.min_ms, "ms");
    if (!o.r) {
        printf("vq bench codecs: D=%lld, N vectors = 8 heads x N/8 tokens, f32 input; best CPU kernels %s, %d threads\n"
               "Mvec/s = million vectors per second; GB/s = (f32 side + compressed side) bytes per second;\n"
               "speedup = scalar 1-thread time over %s 1-thread and %s %d-thread time.\n\n",
               (long long)o.dim, isa, threads, isa, isa, threads);
        printf("%-22s %-6s %7s %6s | scalar x1      | scalar x%-2d     | %-6s x1      | %-6s x%-2d     | speedup\n",
               "codec", "op", "N", "bits", threads, isa, isa, threads);
        printf("%-22s %-6s %7s %6s |", "", "", "", "");
        for (int r = 0; r < N_RUNS; r++) printf(" %7s %6s |", "Mvec/s", "GB/s");
        printf(" x1    x%d\n", threads);
    }
    int n_steps = 0;
    for (int i = 0; i < case_count(); i++) n_steps += case_template(i)->encode_in_library;
    vqp_begin(&p, "bench codecs", (int64_t)n_steps * o.sizes.n);
    for (int s = 0; s < o.sizes.n; s++) {
        enum { OUTLIERS = 4 };
        const int seq = (int)(o.sizes.v[s] / 8);
        case_input *keys = case_input_new(8, seq, (int)o.dim, OUTLIERS, (int)o.calib, 1, 1);
        case_input *values = case_input_new(8, seq, (int)o.dim, 0, (int)o.calib, 0, 2);
        for (int i = 0; i < case_count(); i++) {
            const codec_case *t = case_template(i);
            if (!t->encode_in_library) continue;
            vqp_step(&p, "%s, N %lld", t->name, (long long)o.sizes.v[s]);
            /* A case meant for both keys and values is timed once, on keys. */
            bench_case(i, t->roles & CASE_KEYS ? keys : values, &bc, &o, rates);
        }
        case_input_free(keys);
        case_input_free(values);
    }
    vqp_end(&p);
    vqr_end(o.r);
    for (int r = 0; r < N_RUNS; r++) vq_ctx_free(bc.ctx[r]);
    return VQ_EXIT_OK;
}
