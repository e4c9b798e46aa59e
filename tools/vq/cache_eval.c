/* cache_eval.c — `vq cache-eval`: grades every compression method on real
 * (or example) keys, values and queries read from .npy files.
 *
 * Per layer, each method's cache is made by the library's encoders (the
 * cases of cases.h, which `vq demo` and `vq bench codecs` also use) and
 * attended by vq_fused_sdpa on the compressed bytes; the truth is float64
 * attention over the exact keys and values (attn_ref.h). A method is a key
 * codec, a value codec, or a key+value pair; the side without a codec stays
 * exact (f32). Errors are accumulated over all layers before the ratios are
 * taken, times summed over layers. Shared tables (codebooks, sign diagonals,
 * projections) are trained per layer on the other layers' rows (held out,
 * see layer_input) and reported apart from the per-token bits. CommVQ is given the
 * keys as they are, with identity RoPE tables: captured keys already carry
 * RoPE, so this grades its additive codebooks only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "attn_ref.h"
#include "cases.h"
#include "commands.h"
#include "npy.h"
#include "plot_png.h"
#include "progress.h"
#include "report.h"
#include "tool.h"

/* The methods by name: a key codec, a value codec ("v-" names), or
 * "KEY+VALUE". */
typedef struct ce_codec {
    const char *id;
    const codec_case *tmpl;
    unsigned role;
} ce_codec;

static const ce_codec codecs[] = {
    {"f16", &CASE_F16_KEYS, CASE_KEYS},         {"kivi2", &CASE_KIVI2_KEYS, CASE_KEYS},
    {"kivi4", &CASE_KIVI4_KEYS, CASE_KEYS},     {"turbo2", &CASE_TURBO2, CASE_KEYS},
    {"turbo3", &CASE_TURBO3, CASE_KEYS},        {"turbo4", &CASE_TURBO4, CASE_KEYS},
    {"turbo2nc", &CASE_TURBO2_NC, CASE_KEYS},   {"rvq22", &CASE_RVQ22, CASE_KEYS},
    {"rabitq", &CASE_RABITQ_L1, CASE_KEYS},     {"rabitq-ub", &CASE_RABITQ_UNBIASED, CASE_KEYS},
    {"qjl", &CASE_QJL, CASE_KEYS},              {"pq", &CASE_VECINFER, CASE_KEYS},
    {"commvq", &CASE_COMMVQ, CASE_KEYS},        {"v-f16", &CASE_F16_VALUES, CASE_VALUES},
    {"v-kivi2", &CASE_KIVI2_VALUES, CASE_VALUES}, {"v-kivi4", &CASE_KIVI4_VALUES, CASE_VALUES},
    {"v-turbo2", &CASE_TURBO2, CASE_VALUES},    {"v-turbo3", &CASE_TURBO3, CASE_VALUES},
    {"v-turbo4", &CASE_TURBO4, CASE_VALUES},    {"v-codebook4", &CASE_CODEBOOK4_VALUES, CASE_VALUES},
};
enum { N_CODECS = sizeof codecs / sizeof codecs[0], CE_MAX_METHODS = 64 };

static const char default_methods[] =
    "f16,kivi2,kivi4,turbo2,turbo3,turbo4,rvq22,rabitq,rabitq-ub,qjl,pq,commvq,"
    "v-kivi2,v-kivi4,v-turbo2,v-turbo3,v-turbo4,v-codebook4,"
    "kivi2+v-kivi2,kivi4+v-kivi4,turbo3+v-turbo3,turbo4+v-turbo4,rabitq-ub+v-codebook4,pq+v-codebook4";

/* One method and what it has accumulated over the layers. */
typedef struct ce_method {
    char name[48];
    const ce_codec *key, *value;   /* NULL: that side exact */
    double key_se, key_ss, key_n;  /* sum (k_hat - k)^2, sum k^2, elements */
    double score_se, score_ss, out_se, out_ss;
    double bits, key_bits, value_bits; /* per token element, of the last layer (the same in every layer) */
    double shared_bytes, seconds;
    bool has_key_mse;
} ce_method;

typedef struct ce_opts {
    const char *keys, *values, *queries, *methods, *plot;
    int64_t repeats, threads, layers;
    bool json;
} ce_opts;

static const ce_codec *find_codec(const char *name, size_t n, unsigned role)
{
    for (size_t i = 0; i < N_CODECS; i++)
        if (strlen(codecs[i].id) == n && strncmp(codecs[i].id, name, n) == 0 && codecs[i].role == role)
            return &codecs[i];
    return NULL;
}

/* Parses "a,b+c,..." into methods; returns the count, or -1 with a message. */
static int parse_methods(const vqa_cmd *cmd, const char *list, ce_method *m)
{
    int n = 0;
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (n == CE_MAX_METHODS) return vqa_usage_error(cmd, "--methods lists more than %d methods", CE_MAX_METHODS), -1;
        ce_method *x = &m[n];
        memset(x, 0, sizeof *x);
        if (len == 0 || len >= sizeof x->name) return vqa_usage_error(cmd, "--methods has an empty or long entry"), -1;
        memcpy(x->name, p, len);
        const char *plus = memchr(p, '+', len);
        const size_t klen = plus ? (size_t)(plus - p) : len;
        if (plus) {
            x->key = find_codec(p, klen, CASE_KEYS);
            x->value = find_codec(plus + 1, len - klen - 1, CASE_VALUES);
        } else {
            x->key = find_codec(p, len, CASE_KEYS);
            x->value = x->key ? NULL : find_codec(p, len, CASE_VALUES);
        }
        if ((plus && (!x->key || !x->value)) || (!plus && !x->key && !x->value)) {
            char known[512] = "";
            for (size_t i = 0; i < N_CODECS; i++) {
                strcat(known, codecs[i].id);
                if (i + 1 < N_CODECS) strcat(known, ",");
            }
            return vqa_usage_error(cmd, "--methods: unknown method '%s' (keys, v-values, or KEY+v-VALUE of: %s)",
                                   x->name, known), -1;
        }
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

/* An .npy array as f32 host memory (the file may hold f16), shape checked. */
typedef struct ce_array {
    float *data;
    int64_t shape[4];
} ce_array;

static int load_array(const char *what, const char *path, ce_array *a)
{
    uint8_t *buf;
    vq_npy n;
    char err[512];
    if (vq_npy_load(path, (size_t)1 << 34, &buf, &n, err, sizeof err) != 0) {
        fprintf(stderr, "vq cache-eval: --%s: %s\n", what, err);
        return -1;
    }
    if (n.ndim != 4 || n.numel == 0) {
        fprintf(stderr, "vq cache-eval: --%s %s: expected a non-empty 4-D array [L, H, S, D], got %d dimensions\n",
                what, path, n.ndim);
        free(buf);
        return -1;
    }
    memcpy(a->shape, n.shape, sizeof a->shape);
    a->data = tool_calloc((size_t)n.numel, sizeof(float));
    for (int64_t i = 0; i < n.numel; i++) {
        if (n.elem_bytes == 4) {
            memcpy(&a->data[i], n.data + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, n.data + 2 * i, 2);
            a->data[i] = vq_f16_to_f32(h);
        }
        if (!isfinite(a->data[i])) {
            fprintf(stderr, "vq cache-eval: --%s %s: element %lld is not finite\n", what, path, (long long)i);
            free(buf);
            free(a->data);
            return -1;
        }
    }
    free(buf);
    return 0;
}

enum { CE_CALIB_ROWS = 4096 };

/* A case input over layer l of a [L,H,S,D] array (of n_layers graded): x
 * (and x_pre) the layer, identity RoPE tables, and calibration rows that the
 * shared tables are trained on: up to CE_CALIB_ROWS rows evenly spaced over
 * the OTHER graded layers (held out: training on the cache itself would let
 * large codebooks memorise it), or over the layer itself when it is the
 * only one (in sample; the table says so). */
static case_input *layer_input(const ce_array *a, int64_t l, int64_t n_layers, uint64_t seed)
{
    const int64_t h = a->shape[1], s = a->shape[2], d = a->shape[3], n = h * s * d;
    const float *src = a->data + l * n;
    const int64_t pool = n_layers > 1 ? (n_layers - 1) * h * s : h * s;
    const int64_t rows = pool < CE_CALIB_ROWS ? pool : CE_CALIB_ROWS;
    case_input *in = tool_calloc(1, sizeof *in);
    DLTensor *x = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d)), *x_pre = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s, d));
    DLTensor *calib = tool_tensor(TOOL_F32, TOOL_DIMS(rows, d)), *calib_pre = tool_tensor(TOOL_F32, TOOL_DIMS(rows, d));
    DLTensor *cos_t = tool_tensor(TOOL_F32, TOOL_DIMS(s, d / 2)), *sin_t = tool_tensor(TOOL_F32, TOOL_DIMS(s, d / 2));
    DLTensor *pos = tool_tensor(TOOL_I32, TOOL_DIMS(s));
    memcpy(x->data, src, (size_t)n * 4);
    memcpy(x_pre->data, src, (size_t)n * 4);
    for (int64_t j = 0; j < rows; j++) {
        int64_t row = j * pool / rows;               /* row of the pool */
        if (n_layers > 1 && row >= l * h * s) row += h * s;  /* skip layer l */
        if (n_layers == 1) row += l * h * s;
        memcpy(tool_f32(calib) + j * d, a->data + row * d, (size_t)d * 4);
    }
    memcpy(calib_pre->data, calib->data, (size_t)(rows * d) * 4);
    for (int64_t i = 0; i < s * (d / 2); i++) tool_f32(cos_t)[i] = 1.0f;  /* sin stays 0 */
    for (int64_t t = 0; t < s; t++) ((int32_t *)pos->data)[t] = (int32_t)t;
    *in = (case_input){.x = x, .x_pre = x_pre, .calib = calib, .calib_pre = calib_pre, .rope_cos = cos_t,
                        .rope_sin = sin_t, .positions = pos, .seed = seed};
    return in;
}

/* Queries of layer l regrouped per kv head: [1, Hkv, G * Sq, D] (query head
 * h * G + g, row i -> kv head h, row g * Sq + i): the rows that read one kv
 * head, which is what GQA attention computes. */
static DLTensor *layer_queries(const ce_array *q, int64_t l, int64_t hkv)
{
    const int64_t hq = q->shape[1], sq = q->shape[2], d = q->shape[3], g = hq / hkv;
    DLTensor *t = tool_tensor(TOOL_F32, TOOL_DIMS(1, hkv, g * sq, d));
    memcpy(t->data, q->data + l * hq * sq * d, (size_t)(hq * sq * d) * 4);  /* head-major: already grouped */
    return t;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            const double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The state of one layer: inputs, truth. */
typedef struct ce_layer {
    case_input *k, *v;
    DLTensor *q;
    double *logits, *out;  /* exact: [Hkv, Nq, S], [Hkv, Nq, D] */
    int64_t n_logits, n_out;
    double scale;
} ce_layer;

/* Runs one method on one layer and accumulates into m. */
static void run_method(ce_method *m, vq_ctx *ctx, const ce_layer *ly, int repeats)
{
    codec_case kc, vc;
    const int64_t h = case_h(ly->k), s = case_s(ly->k), d = case_d(ly->k), nq = ly->q->shape[2];
    vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16 = {ly->k->x}};
    vq_encoded_values ev = vq_f16_values(ly->v->x);
    double key_bytes = 4.0 * h * s * d, value_bytes = 4.0 * h * s * d;
    if (m->key) {
        kc = *m->key->tmpl;
        kc.setup(&kc, ctx, ly->k);
        tool_check(ctx, kc.encode(&kc, ctx, ly->k), kc.name);
        if (kc.decode) tool_check(ctx, kc.decode(&kc, ctx, ly->k), kc.name);
        kc.bind(&kc, ly->k, &ek);
        m->key_bits = case_bits(&kc, ly->k->x);
        key_bytes = m->key_bits * (double)(h * s * d) / 8;
        m->shared_bytes += (double)case_shared_bytes(&kc);
        /* scores as the attention estimates them */
        double *est = tool_calloc((size_t)ly->n_logits, sizeof *est);
        if (kc.scores) {
            DLTensor *st = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, nq, s));
            tool_check(ctx, kc.scores(&kc, ctx, ly->q, st), kc.name);
            for (int64_t i = 0; i < ly->n_logits; i++) est[i] = tool_f32(st)[i];
            tool_tensor_free(st);
        } else {
            ref_dots(ly->q, kc.x_hat, est);
        }
        for (int64_t i = 0; i < ly->n_logits; i++) {
            const double e = (est[i] - ly->logits[i]) * ly->scale;
            m->score_se += e * e;
            m->score_ss += ly->logits[i] * ly->logits[i] * ly->scale * ly->scale;
        }
        free(est);
        if (kc.x_hat) {
            m->has_key_mse = true;
            for (int64_t i = 0, n = h * s * d; i < n; i++) {
                const double e = (double)tool_f32(kc.x_hat)[i] - tool_f32(ly->k->x)[i];
                m->key_se += e * e;
                m->key_ss += (double)tool_f32(ly->k->x)[i] * tool_f32(ly->k->x)[i];
            }
            m->key_n += (double)(h * s * d);
        }
    }
    if (m->value) {
        vc = *m->value->tmpl;
        vc.setup(&vc, ctx, ly->v);
        tool_check(ctx, vc.encode(&vc, ctx, ly->v), vc.name);
        vc.bind_values(&vc, ly->v, &ev);
        m->value_bits = case_bits(&vc, ly->v->x);
        value_bytes = m->value_bits * (double)(h * s * d) / 8;
        m->shared_bytes += (double)case_shared_bytes(&vc);
    }
    /* bits of what is compressed: one side, or both sides together */
    m->bits = m->key && m->value ? (key_bytes + value_bytes) * 8 / (2.0 * h * s * d)
                                 : m->key ? m->key_bits : m->value_bits;
    DLTensor *o = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, nq, d));
    double times[64];
    const int reps = repeats < 64 ? repeats : 64;
    for (int r = 0; r <= reps; r++) {  /* r == 0 warms up */
        const double t0 = tool_now();
        tool_check(ctx, vq_fused_sdpa(ctx, ly->q, &ek, &ev, (float)ly->scale, NULL, o, NULL), "vq_fused_sdpa");
        if (r > 0) times[r - 1] = tool_now() - t0;
    }
    m->seconds += median(times, reps);
    for (int64_t i = 0; i < ly->n_out; i++) {
        const double e = tool_f32(o)[i] - ly->out[i];
        m->out_se += e * e;
        m->out_ss += ly->out[i] * ly->out[i];
    }
    tool_tensor_free(o);
    if (m->key) case_release(&kc);
    if (m->value) case_release(&vc);
}

static int parse(int argc, char **argv, ce_opts *o, vqa_cmd *cmd_out, const vqa_opt *opts, int n_opts)
{
    static const char details[] =
        "Inputs: keys and values [L, Hkv, S, D], queries [L, Hq, Sq, D] (f16 or f32 .npy, C order),\n"
        "Hq a multiple of Hkv, D a power of two in 32..256. Every query attends to all S tokens of its\n"
        "layer. Methods: key codecs (f16 kivi2 kivi4 turbo2 turbo3 turbo4 turbo2nc rvq22 rabitq rabitq-ub\n"
        "qjl pq commvq), value codecs (v-f16 v-kivi2 v-kivi4 v-turbo2 v-turbo3 v-turbo4 v-codebook4), or\n"
        "KEY+VALUE pairs; the other side stays exact.\n"
        "Columns: bits/elt = per-token bits per element of the compressed side(s), everything stored per\n"
        "token (codes, scales, zeros, norms); shared = per-layer tables, summed over layers, trained on\n"
        "up to 4096 rows of the other layers (held out; on the layer itself when only one is graded). key MSE = mean (k_hat - k)^2 and its ratio to mean k^2 (for\n"
        "QJL the estimator has no decoded key: '-'); score err = |s_hat - s| / |s| of the scaled scores\n"
        "q.k / sqrt(D) as the kernel estimates them; out err = |o_hat - o| / |o| of vq_fused_sdpa on the\n"
        "compressed cache against float64 exact attention; attend = median vq_fused_sdpa time, summed\n"
        "over layers. --plot writes a PNG of out err against bits/elt (a PNG writer built into vq).\n";
    *cmd_out = (vqa_cmd){"cache-eval",
                         "grade every cache method on .npy keys/values/queries: bits, key MSE, score and output "
                         "error, attend time",
                         opts, n_opts, details};
    return vqa_parse(cmd_out, argc, argv);
}

int vq_cmd_cache_eval(int argc, char **argv)
{
    ce_opts o = {.methods = default_methods, .repeats = 3, .threads = 0, .layers = 0};
    const vqa_opt opts[] = {
        {"keys", VQA_STRING, &o.keys, 0, 0, "FILE", "keys .npy [L, Hkv, S, D] (required)"},
        {"values", VQA_STRING, &o.values, 0, 0, "FILE", "values .npy [L, Hkv, S, D] (required)"},
        {"queries", VQA_STRING, &o.queries, 0, 0, "FILE", "queries .npy [L, Hq, Sq, D] (required)"},
        {"methods", VQA_STRING, &o.methods, 0, 0, "LIST", "comma-separated methods"},
        {"layers", VQA_INT, &o.layers, 0, 4096, "N", "grade the first N layers only (0 = all)"},
        {"repeats", VQA_INT, &o.repeats, 1, 64, "N", "timed attention calls per layer (median)"},
        {"threads", VQA_INT, &o.threads, 0, 1024, "T", "CPU threads, 0 = all cores"},
        {"plot", VQA_OUT_FILE, &o.plot, 0, 0, "FILE.png", "write a PNG of out err against bits/elt"},
        VQA_JSON_OPT(&o.json),
    };
    vqa_cmd cmd;
    int rc = parse(argc, argv, &o, &cmd, opts, VQA_COUNT(opts));
    if (rc != VQA_RUN) return rc;
    if (!o.keys || !o.values || !o.queries)
        return vqa_usage_error(&cmd, "--keys, --values and --queries are required");
    static ce_method methods[CE_MAX_METHODS];
    const int n_methods = parse_methods(&cmd, o.methods, methods);
    if (n_methods < 0) return VQ_EXIT_USAGE;

    ce_array K, V, Q;
    if (load_array("keys", o.keys, &K) || load_array("values", o.values, &V) || load_array("queries", o.queries, &Q))
        return VQ_EXIT_FAILURE;
    const int64_t L = K.shape[0], Hkv = K.shape[1], S = K.shape[2], D = K.shape[3];
    if (memcmp(K.shape, V.shape, sizeof K.shape) != 0 || Q.shape[0] != L || Q.shape[3] != D ||
        Q.shape[1] % Hkv != 0) {
        fprintf(stderr,
                "vq cache-eval: shapes disagree: keys [%lld, %lld, %lld, %lld], values [%lld, %lld, %lld, %lld], "
                "queries [%lld, %lld, %lld, %lld] (values must equal keys; queries [L, Hq, Sq, D], Hq %% Hkv == 0)\n",
                (long long)K.shape[0], (long long)K.shape[1], (long long)K.shape[2], (long long)K.shape[3],
                (long long)V.shape[0], (long long)V.shape[1], (long long)V.shape[2], (long long)V.shape[3],
                (long long)Q.shape[0], (long long)Q.shape[1], (long long)Q.shape[2], (long long)Q.shape[3]);
        return VQ_EXIT_FAILURE;
    }
    if (D < 32 || D > 256 || (D & (D - 1)) != 0) {
        fprintf(stderr, "vq cache-eval: head dim D = %lld must be a power of two in 32..256\n", (long long)D);
        return VQ_EXIT_FAILURE;
    }
    const int64_t n_layers = o.layers > 0 && o.layers < L ? o.layers : L;
    vq_ctx *ctx = tool_ctx((int)o.threads, NULL);
    vqr *r = vqr_begin("cache-eval", argc, argv, ctx, o.json);
    vqp p;
    vqp_begin(&p, "cache-eval", n_layers * n_methods);
    const double t_start = tool_now();
    for (int64_t l = 0; l < n_layers; l++) {
        ce_layer ly = {.k = layer_input(&K, l, n_layers, 1000 + (uint64_t)l),
                       .v = layer_input(&V, l, n_layers, 2000 + (uint64_t)l),
                       .q = layer_queries(&Q, l, Hkv), .scale = 1.0 / sqrt((double)D)};
        const int64_t nq = ly.q->shape[2];
        ly.n_logits = Hkv * nq * S;
        ly.n_out = Hkv * nq * D;
        ly.logits = tool_calloc((size_t)ly.n_logits, sizeof(double));
        ly.out = tool_calloc((size_t)ly.n_out, sizeof(double));
        ref_dots(ly.q, ly.k->x, ly.logits);
        ref_attend(ly.logits, ly.v->x, nq, ly.scale, ly.out);
        for (int i = 0; i < n_methods; i++) {
            vqp_step(&p, "layer %lld %s", (long long)l, methods[i].name);
            run_method(&methods[i], ctx, &ly, (int)o.repeats);
        }
        free(ly.logits);
        free(ly.out);
        tool_tensor_free(ly.q);
        case_input_free(ly.k);
        case_input_free(ly.v);
    }
    vqp_end(&p);
    double f16_seconds = NAN;
    for (int i = 0; i < n_methods; i++)
        if (strcmp(methods[i].name, "f16") == 0) f16_seconds = methods[i].seconds;
    vqr_info_num(r, "layers", (double)n_layers, NULL);
    vqr_info_num(r, "kv_heads", (double)Hkv, NULL);
    vqr_info_num(r, "query_heads", (double)Q.shape[1], NULL);
    vqr_info_num(r, "tokens", (double)S, "tokens");
    vqr_info_num(r, "queries_per_head", (double)Q.shape[2], NULL);
    vqr_info_num(r, "head_dim", (double)D, NULL);
    vqr_info_str(r, "keys", o.keys);
    if (!r) {
        printf("vq cache-eval: %lld layers, Hkv %lld, Hq %lld, S %lld, Sq %lld, D %lld; CPU %s, %d threads (%.1f s)\n",
               (long long)n_layers, (long long)Hkv, (long long)Q.shape[1], (long long)S, (long long)Q.shape[2],
               (long long)D, vq_ctx_isa(ctx), vq_ctx_num_threads(ctx), tool_now() - t_start);
        if (n_layers == 1) printf("tables trained on the graded layer itself (in sample): give 2+ layers to hold out\n");
        printf("%-22s %8s %10s %10s %10s %10s %10s %10s %7s\n", "method", "bits/elt", "shared KiB", "key MSE",
               "key relMSE", "score err", "out err", "attend ms", "vs f16");
    }
    vq_plot_point pts[CE_MAX_METHODS];
    int n_pts = 0;
    for (int i = 0; i < n_methods; i++) {
        const ce_method *m = &methods[i];
        const double key_mse = m->has_key_mse ? m->key_se / m->key_n : NAN;
        const double key_rel = m->has_key_mse ? m->key_se / m->key_ss : NAN;
        const double score = m->key ? sqrt(m->score_se / m->score_ss) : NAN;
        const double out = sqrt(m->out_se / m->out_ss);
        /* the f16 reference (16 bits, error ~0) would squash the compressed methods */
        if (m->bits < 16)
            pts[n_pts++] = (vq_plot_point){.x = m->bits, .y = out, .label = m->name,
                                           .series = m->key && m->value ? 2 : m->key ? 0 : 1};
        if (r) {
            vqr_row(r);
            vqr_str(r, "method", m->name);
            vqr_str(r, "key_method", m->key ? m->key->id : "exact");
            vqr_str(r, "value_method", m->value ? m->value->id : "exact");
            vqr_num(r, "bits_per_element", m->bits, "bit");
            vqr_num(r, "shared_bytes", m->shared_bytes, "B");
            vqr_num(r, "key_mse", key_mse, NULL);
            vqr_num(r, "key_rel_mse", key_rel, NULL);
            vqr_num(r, "score_rel_err", score, NULL);
            vqr_num(r, "output_rel_err", out, NULL);
            vqr_num(r, "attend_time", m->seconds * 1e3, "ms");
            continue;
        }
        char kmse[16] = "-", krel[16] = "-", sc[16] = "-", vs[16] = "-";
        if (m->has_key_mse) {
            snprintf(kmse, sizeof kmse, "%.3g", key_mse);
            snprintf(krel, sizeof krel, "%.3g", key_rel);
        }
        if (m->key) snprintf(sc, sizeof sc, "%.3g", score);
        if (isfinite(f16_seconds)) snprintf(vs, sizeof vs, "%.2fx", f16_seconds / m->seconds);
        printf("%-22s %8.3f %10.1f %10s %10s %10s %10.3g %10.3f %7s\n", m->name, m->bits, m->shared_bytes / 1024,
               kmse, krel, sc, out, m->seconds * 1e3, vs);
    }
    vqr_end(r);
    rc = VQ_EXIT_OK;
    if (o.plot) {
        const vq_plot plot = {.title = "attention output error vs bits per element",
                              .x_label = "bits per element (compressed side, per token)",
                              .y_label = "out err", .log_y = true, .points = pts, .n_points = n_pts,
                              .series_names = {"keys", "values", "keys+values"}};
        char err[256];
        if (n_pts == 0) {
            fprintf(stderr, "vq cache-eval: --plot: no compressed method to plot\n");
            rc = VQ_EXIT_FAILURE;
        } else if (vq_plot_png(o.plot, &plot, err, sizeof err) != 0) {
            fprintf(stderr, "vq cache-eval: --plot: %s\n", err);
            rc = VQ_EXIT_FAILURE;
        }
    }
    free(K.data);
    free(V.data);
    free(Q.data);
    vq_ctx_free(ctx);
    return rc;
}
