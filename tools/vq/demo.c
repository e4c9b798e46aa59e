/* demo.c — `vq demo`: one synthetic KV cache compressed by every codec, and
 * a table of what each costs (bits per element, all-in) and what it loses
 * (key reconstruction error, error of q.k against random queries, the slope
 * of estimated vs true logits, and the error of the attention output).
 * Public API only: every number comes from the library's own encoders and
 * decoders (cases.h), the metrics are float64 loops here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "attn_ref.h"
#include "cases.h"
#include "commands.h"
#include "progress.h"
#include "report.h"
#include "tool.h"

typedef struct demo_opts {
    int64_t heads, seq, dim, queries, calib, seed, threads;
    bool json;
} demo_opts;

/* Parses argv into o; returns VQA_RUN to go on, else the exit status. */
static int parse(int argc, char **argv, demo_opts *o)
{
    *o = (demo_opts){.heads = 8, .seq = 1024, .dim = 128, .queries = 32, .calib = 2048, .seed = 1, .threads = 0};
    const vqa_opt opts[] = {
        {"heads", VQA_INT, &o->heads, 1, 1024, "H", "KV heads"},
        {"seq", VQA_SIZE, &o->seq, 1, 1 << 20, "S", "tokens per head"},
        {"dim", VQA_INT, &o->dim, 32, 256, "D", "head dimension, a power of two"},
        {"queries", VQA_INT, &o->queries, 1, 1024, "Q", "random queries per head"},
        {"calib", VQA_SIZE, &o->calib, 256, 1 << 20, "N", "calibration rows that train the codebooks"},
        {"seed", VQA_INT, &o->seed, 0, 1 << 30, "N", "seed of the synthetic data"},
        {"threads", VQA_INT, &o->threads, 0, 1024, "T", "CPU threads, 0 = all cores"},
        VQA_JSON_OPT(&o->json),
    };
    const vqa_cmd cmd = {"demo", "compress a synthetic KV cache with every codec: bits per element and errors", opts,
                         VQA_COUNT(opts)};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if ((o->dim & (o->dim - 1)) != 0)
        return vqa_usage_error(&cmd, "--dim must be a power of two in [32, 256], got %lld", (long long)o->dim);
    return VQA_RUN;
}

/* Relative MSE of x_hat against x: sum |x_hat - x|^2 / sum |x|^2. */
static double rel_mse(const DLTensor *x_hat, const DLTensor *x)
{
    double num = 0, den = 0;
    for (int64_t i = 0, n = tool_numel(x); i < n; i++) {
        const double e = (double)tool_f32(x_hat)[i] - tool_f32(x)[i];
        num += e * e;
        den += (double)tool_f32(x)[i] * tool_f32(x)[i];
    }
    return num / den;
}

/* The reference everything is compared with: queries and exact results. */
typedef struct demo_truth {
    DLTensor *queries;     /* [1,H,Nq,D] f32 */
    double *logits;        /* [H,Nq,S] q.k with the exact keys */
    double *out;           /* [H,Nq,D] exact attention output */
    double scale;          /* 1/sqrt(D) */
    int64_t n_logits, n_out;
} demo_truth;

/* Where the results go: the table on stdout, or rows of the JSON report. */
typedef struct demo_out {
    vqr *r;   /* NULL: the table */
    vqp *p;   /* progress, erased before a table row */
} demo_out;

static void print_header(const demo_out *d, const char *what, const char *cols)
{
    vqp_clear(d->p);
    if (!d->r) printf("\n%-22s %8s %9s %9s %s\n", what, "bits/elt", "+shared", "shared", cols);
}

/* Starts a codec's row: bits per element, with the shared tables amortised
 * over this cache too, and their size. */
static void print_cost(const demo_out *d, const char *role, const codec_case *c, const DLTensor *x)
{
    const double bits = case_bits(c, x);
    const size_t shared = case_shared_bytes(c);
    const double with_shared = bits + 8.0 * (double)shared / (double)tool_numel(x);
    if (d->r) {
        vqr_row(d->r);
        vqr_str(d->r, "role", role);
        vqr_str(d->r, "codec", c->name);
        vqr_num(d->r, "bits_per_element", bits, "bit");
        vqr_num(d->r, "bits_per_element_with_shared", with_shared, "bit");
        vqr_int(d->r, "shared_bytes", (int64_t)shared, "B");
        return;
    }
    vqp_clear(d->p);
    char kib[32] = "-";
    if (shared) snprintf(kib, sizeof kib, "%.1f KiB", (double)shared / 1024);
    printf("%-22s %8.3f %9.3f %9s", c->name, bits, with_shared, kib);
}

/* A dimensionless metric of the row (undefined: '-' or null). */
static void print_num(const demo_out *d, const char *key, double v, int defined)
{
    if (d->r) vqr_num(d->r, key, defined ? v : NAN, NULL);
    else if (defined) printf(" %10.3g", v);
    else printf(" %10s", "-");
}

static void print_layout(const demo_out *d, const codec_case *c)
{
    if (d->r) vqr_str(d->r, "layout", c->detail);
    else printf("  %s\n", c->detail);
}

/* vq_fused_sdpa over the codec's compressed keys and the exact values, as
 * float64 [H, Nq, D]. */
static double *fused_attention(const codec_case *c, vq_ctx *ctx, const case_input *keys, const case_input *values,
                               const demo_truth *tr)
{
    vq_encoded_keys ek;
    c->bind(c, keys, &ek);
    DLTensor *o = tool_tensor(TOOL_F32, TOOL_DIMS(1, case_h(keys), tr->queries->shape[2], case_d(keys)));
    tool_check(ctx, vq_fused_sdpa(ctx, tr->queries, &ek, VQ_TOOL_F16(values->x), (float)tr->scale, NULL, o, NULL),
               "vq_fused_sdpa");
    double *out = tool_calloc((size_t)tr->n_out, sizeof *out);
    for (int64_t i = 0; i < tr->n_out; i++) out[i] = tool_f32(o)[i];
    tool_tensor_free(o);
    return out;
}

/* One key codec: its estimated logits vs the truth, and the attention output
 * with exact values. Returns 1 when vq_fused_sdpa disagrees with the float64
 * attention over the same estimated logits, else 0. */
static int demo_keys(const demo_out *d, codec_case *c, vq_ctx *ctx, const case_input *keys,
                     const case_input *values, const demo_truth *tr)
{
    c->setup(c, ctx, keys);
    tool_check(ctx, c->encode(c, ctx, keys), c->name);
    if (c->decode) tool_check(ctx, c->decode(c, ctx, keys), c->name);
    double *est = tool_calloc((size_t)tr->n_logits, sizeof *est);
    if (c->scores) {
        DLTensor *s = tool_tensor(TOOL_F32, TOOL_DIMS(1, case_h(keys), tr->queries->shape[2], case_s(keys)));
        tool_check(ctx, c->scores(c, ctx, tr->queries, s), c->name);
        for (int64_t i = 0; i < tr->n_logits; i++) est[i] = tool_f32(s)[i];
        tool_tensor_free(s);
    } else {
        ref_dots(tr->queries, c->x_hat, est);
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < tr->n_logits; i++) {
        num += est[i] * tr->logits[i];
        den += tr->logits[i] * tr->logits[i];
    }
    double *out = tool_calloc((size_t)tr->n_out, sizeof *out);
    ref_attend(est, values->x, tr->queries->shape[2], tr->scale, out);
    print_cost(d, "keys", c, keys->x);
    print_num(d, "key_rel_mse", c->x_hat ? rel_mse(c->x_hat, keys->x) : 0, c->x_hat != NULL);
    print_num(d, "qk_rel_rms", ref_rel_err(est, tr->logits, tr->n_logits), 1);
    if (d->r) vqr_num(d->r, "slope", num / den, NULL);
    else printf(" %6.3f", num / den);
    print_num(d, "attn_err", ref_rel_err(out, tr->out, tr->n_out), 1);
    double agree = 0;
    if (c->bind) {
        double *fused = fused_attention(c, ctx, keys, values, tr);
        print_num(d, "fused_attn_err", ref_rel_err(fused, tr->out, tr->n_out), 1);
        agree = ref_rel_err(fused, out, tr->n_out);
        free(fused);
    } else {
        print_num(d, "fused_attn_err", 0, 0);
    }
    print_layout(d, c);
    /* The fused kernel must compute what the float64 path does with the same logits. */
    if (agree > 1e-3)
        fprintf(d->r ? stderr : stdout, "  ^ ERROR: %s: vq_fused_sdpa differs from the float64 attention by %.2g\n",
                c->name, agree);
    free(est);
    free(out);
    case_release(c);
    return agree > 1e-3;
}

/* One value codec: reconstruction error and the attention output with exact keys. */
static void demo_values(const demo_out *d, codec_case *c, vq_ctx *ctx, const case_input *values,
                        const demo_truth *tr)
{
    c->setup(c, ctx, values);
    tool_check(ctx, c->encode(c, ctx, values), c->name);
    tool_check(ctx, c->decode(c, ctx, values), c->name);
    double *out = tool_calloc((size_t)tr->n_out, sizeof *out);
    ref_attend(tr->logits, c->x_hat, tr->queries->shape[2], tr->scale, out);
    print_cost(d, "values", c, values->x);
    print_num(d, "value_rel_mse", rel_mse(c->x_hat, values->x), 1);
    print_num(d, "attn_err", ref_rel_err(out, tr->out, tr->n_out), 1);
    print_layout(d, c);
    free(out);
    case_release(c);
}

int vq_cmd_demo(int argc, char **argv)
{
    demo_opts o;
    const int rc = parse(argc, argv, &o);
    if (rc != VQA_RUN) return rc;
    const double t0 = tool_now();
    vq_ctx *ctx = tool_ctx((int)o.threads, NULL);
    enum { OUTLIERS = 4 };
    case_input *keys = case_input_new((int)o.heads, (int)o.seq, (int)o.dim, OUTLIERS, (int)o.calib, 1, (uint64_t)o.seed);
    case_input *values = case_input_new((int)o.heads, (int)o.seq, (int)o.dim, 0, (int)o.calib, 0, (uint64_t)o.seed + 1);

    demo_truth tr = {.scale = 1.0 / sqrt((double)o.dim)};
    tr.queries = tool_tensor(TOOL_F32, TOOL_DIMS(1, o.heads, o.queries, o.dim));
    vq_rng rng;
    vq_rng_seed(&rng, (uint64_t)o.seed + 2);
    tool_fill_normal(tr.queries, &rng);
    tr.n_logits = o.heads * o.queries * o.seq;
    tr.n_out = o.heads * o.queries * o.dim;
    tr.logits = tool_calloc((size_t)tr.n_logits, sizeof *tr.logits);
    tr.out = tool_calloc((size_t)tr.n_out, sizeof *tr.out);
    ref_dots(tr.queries, keys->x, tr.logits);
    ref_attend(tr.logits, values->x, o.queries, tr.scale, tr.out);

    vqp p;
    const demo_out d = {vqr_begin("demo", argc, argv, ctx, o.json), &p};
    vqr_info_num(d.r, "heads", (double)o.heads, NULL);
    vqr_info_num(d.r, "seq", (double)o.seq, "tokens");
    vqr_info_num(d.r, "dim", (double)o.dim, NULL);
    vqr_info_num(d.r, "queries", (double)o.queries, NULL);
    vqr_info_num(d.r, "seed", (double)o.seed, NULL);
    if (!d.r) {
        printf("vq demo: KV cache B=1 H=%lld S=%lld D=%lld; CPU kernels %s, %d threads\n", (long long)o.heads,
               (long long)o.seq, (long long)o.dim, vq_ctx_isa(ctx), vq_ctx_num_threads(ctx));
        printf("keys: N(0,1) with %d outlier channels (mean +-10, sd 4), RoPE applied; values: N(0,1);\n"
               "%lld N(0,1) queries per head; attention scale 1/sqrt(D); codebooks trained on %d other rows.\n",
               OUTLIERS, (long long)o.queries, (int)o.calib);
        printf("bits/elt: every code, scale, zero, norm and magnitude stored per token, over H*S*D elements.\n"
               "shared: tables stored once per layer (sign diagonals, projections, codebooks); +shared\n"
               "amortises them over this one cache only.\n");
    }
    int disagreements = 0, n_steps = 0;
    for (int i = 0; i < case_count(); i++) n_steps += !!(case_template(i)->roles & CASE_KEYS) +
                                                     !!(case_template(i)->roles & CASE_VALUES);
    vqp_begin(&p, "demo", n_steps);
    print_header(&d, "Keys", "key relMSE  q.k relRMS  slope   attn err      fused  layout");
    for (int i = 0; i < case_count(); i++) {
        codec_case c = *case_template(i);
        if (!(c.roles & CASE_KEYS)) continue;
        vqp_step(&p, "keys: %s", c.name);
        disagreements += demo_keys(&d, &c, ctx, keys, values, &tr);
    }
    print_header(&d, "Values", "relMSE      attn err  layout");
    for (int i = 0; i < case_count(); i++) {
        codec_case c = *case_template(i);
        if (!(c.roles & CASE_VALUES)) continue;
        vqp_step(&p, "values: %s", c.name);
        demo_values(&d, &c, ctx, values, &tr);
    }
    vqp_end(&p);
    if (d.r) {
        vqr_info_num(d.r, "seconds", tool_now() - t0, "s");
        vqr_end(d.r);
    } else {
        printf("\nkey relMSE = sum|k_hat - k|^2 / sum|k|^2; q.k relRMS = RMS(est - true) / RMS(true);\n"
               "slope = least-squares slope of estimated vs true q.k (1 = unbiased scale); attn err =\n"
               "|out_hat - out| / |out| of softmax attention (float64 here) with the other side exact;\n"
               "fused = the same error of vq_fused_sdpa run on the compressed keys. (%.1f s)\n",
               tool_now() - t0);
    }
    free(tr.logits);
    free(tr.out);
    tool_tensor_free(tr.queries);
    case_input_free(keys);
    case_input_free(values);
    vq_ctx_free(ctx);
    if (disagreements) {
        fprintf(stderr, "vq demo: vq_fused_sdpa disagreed with the reference for %d format(s)\n", disagreements);
        return VQ_EXIT_FAILURE;
    }
    return VQ_EXIT_OK;
}
