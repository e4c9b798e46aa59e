/* bench_codecs.c — `vq bench codecs`: encode and decode throughput of every
 * codec (the same calls as `vq demo`, see cases.h), the optimized kernels
 * against the scalar reference and one thread against all of them, measured
 * in one run. The scalar reference is a second context created with
 * VQ_ISA=scalar. Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "commands.h"
#include "tool.h"

static const char bench_usage[] =
    "usage: vq bench codecs [--sizes N[,N...]] [--dim D] [--min-time MS] [--max-call S] [--calib N]\n"
    "                       [--json] [--quick]\n"
    "  N vectors of D elements per size (default 4096,65536 of D=128); each timing repeats the\n"
    "  call for at least MS milliseconds (default 200) and keeps the fastest call. Codebooks train on N\n"
    "  calibration rows (default 2048, >= 256). --quick: N=4096, 20 ms. --json: JSON on stdout.\n"
    "  A run whose single call is predicted (from the smaller size) to take over S seconds (default 3)\n"
    "  is skipped and shown as '-'.\n";

enum { MAX_SIZES = 8, N_RUNS = 4 };

typedef struct bench_opts {
    long sizes[MAX_SIZES];
    int n_sizes;
    long dim, min_ms, calib, max_call_s;
    int json;
} bench_opts;

/* "4096,65536" -> sizes, sorted; 0 on a malformed list. */
static int parse_sizes(const char *s, bench_opts *o)
{
    o->n_sizes = 0;
    while (*s && o->n_sizes < MAX_SIZES) {
        char *end = NULL;
        const long v = strtol(s, &end, 10);
        if (end == s || v < 8 || v > (1L << 24) || (*end != ',' && *end != '\0')) return 0;
        o->sizes[o->n_sizes++] = v;
        s = *end ? end + 1 : end;
    }
    /* Ascending, so that each size's timings predict the next one's. */
    for (int i = 1; i < o->n_sizes; i++)
        for (int j = i; j > 0 && o->sizes[j - 1] > o->sizes[j]; j--) {
            const long t = o->sizes[j];
            o->sizes[j] = o->sizes[j - 1];
            o->sizes[j - 1] = t;
        }
    return *s == '\0' && o->n_sizes > 0;
}

/* Parses argv into o; returns -1 to go on, else the exit status. */
static int parse(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.sizes = {4096, 65536}, .n_sizes = 2, .dim = 128, .min_ms = 200, .calib = 2048,
                      .max_call_s = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(bench_usage, stdout);
            return VQ_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--quick")) {
            *o = (bench_opts){.sizes = {4096}, .n_sizes = 1, .dim = o->dim, .min_ms = 20, .calib = o->calib,
                              .max_call_s = o->max_call_s, .json = o->json};
        } else if (!strcmp(a, "--dim")) {
            if (!tool_int_arg("bench codecs", argc, argv, &i, 32, 256, &o->dim)) return VQ_EXIT_USAGE;
        } else if (!strcmp(a, "--calib")) {
            if (!tool_int_arg("bench codecs", argc, argv, &i, 256, 1 << 20, &o->calib)) return VQ_EXIT_USAGE;
        } else if (!strcmp(a, "--max-call")) {
            if (!tool_int_arg("bench codecs", argc, argv, &i, 1, 86400, &o->max_call_s)) return VQ_EXIT_USAGE;
        } else if (!strcmp(a, "--min-time")) {
            if (!tool_int_arg("bench codecs", argc, argv, &i, 0, 60000, &o->min_ms)) return VQ_EXIT_USAGE;
        } else if (!strcmp(a, "--sizes")) {
            if (i + 1 >= argc || !parse_sizes(argv[++i], o)) {
                fprintf(stderr, "vq bench codecs: --sizes expects N[,N...] with 8 <= N <= 16777216\n");
                return VQ_EXIT_USAGE;
            }
        } else {
            return tool_bad_option("bench codecs", a, bench_usage);
        }
    }
    if ((o->dim & (o->dim - 1)) != 0) {
        fprintf(stderr, "vq bench codecs: --dim must be a power of two in 32..256, got %ld\n", o->dim);
        return VQ_EXIT_USAGE;
    }
    for (int i = 0; i < o->n_sizes; i++)
        if (o->sizes[i] % 8 != 0) {
            fprintf(stderr, "vq bench codecs: sizes must be multiples of 8 (8 heads), got %ld\n", o->sizes[i]);
            return VQ_EXIT_USAGE;
        }
    return -1;
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
 * max_call_s per call is skipped (sec < 0). */
static void bench_row(codec_case *c, int op_index, case_op op, const case_input *in, size_t bytes_moved,
                      const bench_ctxs *bc, const bench_opts *o, double *rates, int *first_json)
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
    if (o->json) {
        printf("%s\n    {\"codec\": \"%s\", \"op\": \"%s\", \"n\": %lld, \"dim\": %ld, \"bits_per_element\": %.4f, "
               "\"shared_bytes\": %zu, \"bytes_moved\": %zu, \"runs\": [",
               *first_json ? "" : ",", c->name, op_name, (long long)n, o->dim, bits, case_shared_bytes(c),
               bytes_moved);
        for (int r = 0; r < N_RUNS; r++) {
            printf("%s{\"isa\": \"%s\", \"threads\": %d, ", r ? ", " : "", vq_ctx_isa(bc->ctx[r]),
                   vq_ctx_num_threads(bc->ctx[r]));
            if (sec[r] < 0) printf("\"skipped\": true}");
            else printf("\"seconds\": %.6g, \"vectors_per_s\": %.6g, \"gb_per_s\": %.6g}", sec[r], n / sec[r],
                        bytes_moved / sec[r] / 1e9);
        }
        printf("]}");
        *first_json = 0;
        return;
    }
    printf("%-22s %-6s %7lld %6.3f", c->name, op_name, (long long)n, bits);
    for (int r = 0; r < N_RUNS; r++) {
        if (sec[r] < 0) printf(" | %7s %6s", "-", "-");
        else printf(" | %7.3g %6.3g", n / sec[r] / 1e6, bytes_moved / sec[r] / 1e9);
    }
    if (sec[0] > 0 && sec[2] > 0) printf(" | %5.1fx", sec[0] / sec[2]);
    else printf(" | %6s", "-");
    if (sec[0] > 0 && sec[3] > 0) printf(" %5.1fx\n", sec[0] / sec[3]);
    else printf(" %6s\n", "-");
}

/* Both operations of one codec (table index ci) at one size. The codes
 * decode reads come from one encode call on the fastest context. */
static void bench_case(int ci, const case_input *in, const bench_ctxs *bc, const bench_opts *o, bench_rates rates,
                       int *first_json)
{
    codec_case c = *case_template(ci);
    const int64_t n = case_h(in) * case_s(in);
    const double best_rate = rates[ci][0][N_RUNS - 1];
    if (best_rate > 0 && (double)n / best_rate > (double)o->max_call_s) {
        if (!o->json)
            printf("%-22s %-6s %7lld  skipped: one encode call would take ~%.1f s (--max-call)\n", c.name, "both",
                   (long long)n, (double)n / best_rate);
        return;
    }
    c.setup(&c, bc->ctx[N_RUNS - 1], in);
    tool_check(bc->ctx[N_RUNS - 1], c.encode(&c, bc->ctx[N_RUNS - 1], in), c.name);
    size_t cache = 0;
    for (int i = 0; i < CASE_MAX_TENSORS && c.cache[i]; i++) cache += tool_bytes(c.cache[i]);
    const size_t moved = tool_bytes(in->x) + cache;
    bench_row(&c, 0, c.encode, in, moved, bc, o, rates[ci][0], first_json);
    if (c.decode && c.decode_in_library) bench_row(&c, 1, c.decode, in, moved, bc, o, rates[ci][1], first_json);
    case_release(&c);
}

int vq_cmd_bench_codecs(int argc, char **argv)
{
    bench_opts o;
    const int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    bench_ctxs bc = {{tool_ctx(1, "scalar"), tool_ctx(0, "scalar"), tool_ctx(1, NULL), tool_ctx(0, NULL)}};
    const char *isa = vq_ctx_isa(bc.ctx[3]);
    const int threads = vq_ctx_num_threads(bc.ctx[3]);
    int first_json = 1;
    static bench_rates rates;  /* zero: nothing measured yet */
    if (case_count() > MAX_CASES) {
        fprintf(stderr, "vq bench codecs: internal error: more than %d cases\n", MAX_CASES);
        return VQ_EXIT_FAILURE;
    }
    if (o.json) {
        printf("{\"benchmark\": \"codecs\", \"version\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"results\": [",
               vq_version_string(), isa, threads);
    } else {
        printf("vq bench codecs: D=%ld, N vectors = 8 heads x N/8 tokens, f32 input; best CPU kernels %s, %d threads\n"
               "Mvec/s = million vectors per second; GB/s = (f32 side + compressed side) bytes per second;\n"
               "speedup = scalar 1-thread time over %s 1-thread and %s %d-thread time.\n\n",
               o.dim, isa, threads, isa, isa, threads);
        printf("%-22s %-6s %7s %6s | scalar x1      | scalar x%-2d     | %-6s x1      | %-6s x%-2d     | speedup\n",
               "codec", "op", "N", "bits", threads, isa, isa, threads);
        printf("%-22s %-6s %7s %6s |", "", "", "", "");
        for (int r = 0; r < N_RUNS; r++) printf(" %7s %6s |", "Mvec/s", "GB/s");
        printf(" x1    x%d\n", threads);
    }
    for (int s = 0; s < o.n_sizes; s++) {
        enum { OUTLIERS = 4 };
        const int seq = (int)(o.sizes[s] / 8);
        case_input *keys = case_input_new(8, seq, (int)o.dim, OUTLIERS, (int)o.calib, 1, 1);
        case_input *values = case_input_new(8, seq, (int)o.dim, 0, (int)o.calib, 0, 2);
        for (int i = 0; i < case_count(); i++) {
            const codec_case *t = case_template(i);
            /* A case meant for both keys and values is timed once, on keys. */
            if (t->encode_in_library) bench_case(i, t->roles & CASE_KEYS ? keys : values, &bc, &o, rates, &first_json);
        }
        case_input_free(keys);
        case_input_free(values);
    }
    if (o.json) printf("\n]}\n");
    for (int r = 0; r < N_RUNS; r++) vq_ctx_free(bc.ctx[r]);
    return VQ_EXIT_OK;
}
