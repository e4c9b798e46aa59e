/* test_cache_recipe.c — sink tokens and the exact transforms of vq_cache
 * (header section 5, "Sinks and transforms"): attention over an f16 cache
 * with sinks, centering and smoothing against float64 attention over the
 * untransformed tokens; sinks alone exact (every token a sink of a 2-bit
 * cache); token by token equal to all at once, bit for bit, across the sink
 * boundary and page boundaries; fitted tables read back and given to a new
 * cache give the same bits; fork, truncate, save/load keep the state;
 * accounting; every bad argument refused with the cache unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { L = 2, HKV = 2, HQ = 4, D = 32, PAGE = 32, N = 80 };

/* Tokens of one sequence, [1, HKV, N, D] f32: channels with offsets (what
 * centering removes), a few large channels, token 0 far from the rest. */
static DLTensor *tokens(uint64_t seed, double offset)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    DLTensor *x = vt_new(VT_F32, VT_DIMS(1, HKV, N, D));
    vt_fill_normal(x, &rng, 0.0, 1.0);
    float *p = x->data;
    for (int h = 0; h < HKV; h++)
        for (int t = 0; t < N; t++)
            for (int e = 0; e < D; e++) {
                float *y = &p[((int64_t)h * N + t) * D + e];
                *y = *y * (e % 7 == 0 ? 4.0f : 1.0f) + (float)(offset * ((e % 5) - 2));
                if (t == 0) *y += 6.0f;
            }
    return x;
}

/* Tokens [t0, t0 + n) of x as a [1, HKV, n, D] view (strides of x). */
typedef struct chunk {
    DLTensor t;
    int64_t shape[4], strides[4];
} chunk;

static void chunk_of(chunk *c, const DLTensor *x, int64_t t0, int64_t n)
{
    const int64_t H = x->shape[1], T = x->shape[2];
    c->t = *x;
    c->t.data = (float *)x->data + t0 * D;
    c->shape[0] = 1, c->shape[1] = H, c->shape[2] = n, c->shape[3] = D;
    c->strides[0] = H * T * D, c->strides[1] = T * D, c->strides[2] = D, c->strides[3] = 1;
    c->t.shape = c->shape;
    c->t.strides = c->strides;
}

static vq_cache *make(vq_ctx *ctx, const vq_cache_layer_config *lc, int R, int S, const vq_cache_transforms *xf)
{
    vq_cache_layer_config layers[L] = {*lc, *lc};
    const vq_cache_config cfg = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D,
                                 .page_size = PAGE, .capacity_pages = 16, .max_sequences = 8,
                                 .residual_tokens = R, .layers = layers, .sink_tokens = S, .transforms = xf};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    return c;
}

/* Appends tokens [0, n) of k, v (and queries q for fitting: [1, HQ, N, D],
 * or NULL) to every layer of sequence id in chunks of `step`. */
static void feed(vq_ctx *ctx, vq_cache *c, int64_t id, const DLTensor *k, const DLTensor *v, const DLTensor *q,
                 int64_t t0, int64_t n, int64_t step)
{
    for (int64_t t = t0; t < t0 + n; t += step) {
        const int64_t m = t + step < t0 + n ? step : t0 + n - t;
        chunk ck, cv, cq;
        chunk_of(&ck, k, t, m), chunk_of(&cv, v, t, m);
        if (q) chunk_of(&cq, q, t, m);
        for (int l = 0; l < L; l++) {
            if (q) VT_OK(ctx, vq_cache_fit_transforms(c, l, 1, &id, &ck.t, &cv.t, &cq.t));
            VT_OK(ctx, vq_cache_append(c, l, 1, &id, &ck.t, &cv.t, NULL));
        }
    }
}

/* Attention of queries rows [n - Sq, n) of q (the sequence's last Sq
 * tokens) over layer l: out [1, HQ, Sq, D] and lse, owned by the caller. */
static void attend(vq_ctx *ctx, vq_cache *c, int l, int64_t id, const DLTensor *q, int64_t n, int64_t Sq,
                   bool causal, float *out, float *lse)
{
    DLTensor *qq = vt_new(VT_F32, VT_DIMS(1, HQ, Sq, D));
    for (int h = 0; h < HQ; h++)
        memcpy((float *)qq->data + (int64_t)h * Sq * D, (const float *)q->data + ((int64_t)h * N + n - Sq) * D,
               sizeof(float) * (size_t)(Sq * D));
    DLTensor *o = vt_new(VT_F32, VT_DIMS(1, HQ, Sq, D)), *ls = vt_new(VT_F32, VT_DIMS(1, HQ, Sq));
    const vq_cache_attend_opts opts = {.causal = causal, .lse_out = ls};
    VT_OK(ctx, vq_cache_attend(c, l, 1, &id, qq, o, &opts));
    memcpy(out, o->data, sizeof(float) * (size_t)(HQ * Sq * D));
    memcpy(lse, ls->data, sizeof(float) * (size_t)(HQ * Sq));
    vt_free(qq), vt_free(o), vt_free(ls);
}

/* float64 attention over the f16-rounded untransformed tokens [0, n) for
 * query rows [n - Sq, n): relative L2 error of out and max |lse error|. */
static void reference_errors(const DLTensor *k, const DLTensor *v, const DLTensor *q, int64_t n, int64_t Sq,
                             bool causal, const float *out, const float *lse, double *err, double *lerr)
{
    const double scale = 1.0 / sqrt((double)D);
    double num = 0, den = 0, le = 0;
    const float *K = k->data, *V = v->data, *Q = q->data;
    double *s = malloc(sizeof(double) * (size_t)n);
    for (int h = 0; h < HQ; h++)
        for (int64_t i = 0; i < Sq; i++) {
            const int64_t pos = n - Sq + i, lim = causal ? pos + 1 : n, g = h / (HQ / HKV);
            double mx = -INFINITY, sum = 0;
            for (int64_t t = 0; t < lim; t++) {
                double d = 0;
                for (int e = 0; e < D; e++)
                    d += (double)Q[((int64_t)h * N + pos) * D + e] *
                         vq_f16_to_f32(vq_f32_to_f16(K[(g * N + t) * D + e]));
                s[t] = d * scale;
                if (s[t] > mx) mx = s[t];
            }
            for (int64_t t = 0; t < lim; t++) sum += exp(s[t] - mx);
            for (int e = 0; e < D; e++) {
                double o = 0;
                for (int64_t t = 0; t < lim; t++)
                    o += exp(s[t] - mx) / sum * vq_f16_to_f32(vq_f32_to_f16(V[(g * N + t) * D + e]));
                const double got = out[((int64_t)h * Sq + i) * D + e];
                num += (got - o) * (got - o);
                den += o * o;
            }
            const double dl = fabs(lse[(int64_t)h * Sq + i] - (mx + log(sum)));
            if (dl > le || isnan(dl)) le = dl;
        }
    free(s);
    *err = sqrt(num / den);
    *lerr = le;
}

static const vq_cache_layer_config F16 = {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
static const vq_cache_layer_config LOSSY = {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 16},
                                            {.method = VQ_VALUE_TURBO, .bits = 2}};

/* Every transform and sinks over an f16 cache: the attention of the
 * untransformed tokens, within the f16 rounding of the transformed ones. */
static void test_exact_against_reference(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *k = tokens(1, 3.0), *v = tokens(2, 2.0), *q = tokens(3, 0.0);
    DLTensor *qh = vt_new(VT_F32, VT_DIMS(1, HQ, N, D));
    for (int i = 0; i < HQ * N * D; i++) ((float *)qh->data)[i] = ((float *)q->data)[i % (HKV * N * D)] * 0.7f;
    const vq_cache_transforms all = {.center_keys = true, .center_values = true, .smooth = true};
    const vq_cache_transforms xf[L] = {all, all};
    const int sinks[3] = {0, 3, 5};
    const int64_t lens[4] = {2, 4, 37, N}; /* inside the sinks, just past them, across a page, two pages */
    for (int si = 0; si < 3; si++)
        for (int li = 0; li < 4; li++)
            for (int causal = 0; causal < 2; causal++) {
                vq_cache *c = make(ctx, &F16, 0, sinks[si], xf);
                int64_t id;
                VT_OK(ctx, vq_cache_seq_add(c, &id));
                feed(ctx, c, id, k, v, qh, 0, lens[li], 7);
                const int64_t Sq = lens[li] < 6 ? lens[li] : 6;
                float out[HQ * 6 * D], lse[HQ * 6];
                double err, lerr;
                for (int l = 0; l < L; l++) {
                    attend(ctx, c, l, id, qh, lens[li], Sq, causal, out, lse);
                    reference_errors(k, v, qh, lens[li], Sq, causal, out, lse, &err, &lerr);
                    /* f16 rounding of (k - mk) s and v - mv: relative ~2^-11 per element; the
                     * sink token's keys reach ~30 against queries of norm ~6, so its scores
                     * move by ~1e-2 (the lse with them) */
                    VT_CHECK(err < 2e-3 && lerr < 5e-2, "S %d n %lld causal %d layer %d: error %g, lse error %g",
                             sinks[si], (long long)lens[li], causal, l, err, lerr);
                }
                VT_CHECK(vq_cache_seq_length(c, id, 1) == lens[li], "length %lld, expected %lld",
                         (long long)vq_cache_seq_length(c, id, 1), (long long)lens[li]);
                vq_cache_free(c);
            }
    vt_free(k), vt_free(v), vt_free(q), vt_free(qh);
    vq_ctx_free(ctx);
}

/* The sink tokens are kept exactly: a 2-bit cache whose tokens are all
 * sinks attends as the f16 reference. */
static void test_sinks_exact(void)
{
    vq_ctx *ctx = vt_ctx(1);
    DLTensor *k = tokens(4, 1.0), *v = tokens(5, 1.0), *q = tokens(6, 0.0);
    DLTensor *qh = vt_new(VT_F32, VT_DIMS(1, HQ, N, D));
    for (int i = 0; i < HQ * N * D; i++) ((float *)qh->data)[i] = ((float *)q->data)[i % (HKV * N * D)];
    const vq_cache_layer_config kivi2 = {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 32},
                                         {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}};
    vq_cache *c = make(ctx, &kivi2, 0, 40, NULL);
    int64_t id;
    VT_OK(ctx, vq_cache_seq_add(c, &id));
    feed(ctx, c, id, k, v, NULL, 0, 40, 40);
    float out[HQ * 4 * D], lse[HQ * 4];
    attend(ctx, c, 0, id, qh, 40, 4, true, out, lse);
    double err, lerr;
    reference_errors(k, v, qh, 40, 4, true, out, lse, &err, &lerr);
    VT_CHECK(err < 1e-6 && lerr < 1e-5, "40 sink tokens: error %g, lse error %g", err, lerr);
    vq_cache_memory_report r;
    VT_OK(ctx, vq_cache_memory(c, &r));
    VT_CHECK(r.tokens == 2 * 40 && r.residual_bytes == 2 * 40 * HKV * D * 2 * 2 && r.code_bytes == 0 &&
                 fabs(r.bits_per_element - 16) < 1e-9,
             "sinks accounted as %lld tokens, %lld residual bytes, %g bits", (long long)r.tokens,
             (long long)r.residual_bytes, r.bits_per_element);
    vq_cache_free(c);
    vt_free(k), vt_free(v), vt_free(q), vt_free(qh);
    vq_ctx_free(ctx);
}

/* Outputs of the last 3 rows (causal) of both layers of a sequence. */
static float *outputs(vq_ctx *ctx, vq_cache *c, int64_t id, const DLTensor *qh, int64_t n)
{
    float *o = malloc(sizeof(float) * (size_t)(L * HQ * 3 * (D + 1)));
    for (int l = 0; l < L; l++)
        attend(ctx, c, l, id, qh, n, 3, true, o + l * HQ * 3 * D, o + L * HQ * 3 * D + l * HQ * 3);
    return o;
}

static bool same_outputs(const float *a, const float *b) { return memcmp(a, b, sizeof(float) * L * HQ * 3 * (D + 1)) == 0; }

/* Given tables: chunking does not matter (bit for bit), the state survives
 * fork, truncate and save/load; fitted tables read back and given to a
 * new cache reproduce the fitted cache. */
static void test_bit_for_bit(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *k = tokens(7, 2.0), *v = tokens(8, 1.0), *q = tokens(9, 0.0);
    DLTensor *qh = vt_new(VT_F32, VT_DIMS(1, HQ, N, D));
    for (int i = 0; i < HQ * N * D; i++) ((float *)qh->data)[i] = ((float *)q->data)[i % (HKV * N * D)];
    const vq_cache_transforms fit = {.center_keys = true, .center_values = true, .smooth = true};
    const vq_cache_transforms fits[L] = {fit, fit};
    /* fitted on a first chunk of 20 tokens */
    vq_cache *a = make(ctx, &LOSSY, 8, 4, fits);
    int64_t ia;
    VT_OK(ctx, vq_cache_seq_add(a, &ia));
    feed(ctx, a, ia, k, v, qh, 0, 20, 20);
    DLTensor *tabs[L][3];
    vq_cache_transforms xf[L];
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < 3; i++) tabs[l][i] = vt_new(VT_F32, VT_DIMS(HKV, D));
        VT_OK(ctx, vq_cache_get_transforms(a, ia, l, &xf[l], tabs[l][0], tabs[l][1], tabs[l][2]));
        VT_CHECK(xf[l].center_keys && xf[l].center_values && xf[l].smooth && xf[l].key_mean == NULL,
                 "layer %d: switches read back wrong", l);
        /* the means leave out token 0 of a first chunk of more than one */
        double m = 0;
        for (int t = 1; t < 20; t++) m += ((float *)k->data)[t * D + 3];
        VT_CHECK(fabs(((float *)tabs[l][0]->data)[3] - m / 19) < 1e-5, "key mean %g, expected %g",
                 (double)((float *)tabs[l][0]->data)[3], m / 19);
        double lg = 0;
        for (int e = 0; e < D; e++) lg += log(((float *)tabs[l][2]->data)[e]);
        VT_CHECK(fabs(lg / D) < 0.05, "key scales of head 0: geometric mean %g, expected ~1", exp(lg / D));
        xf[l].key_mean = tabs[l][0], xf[l].value_mean = tabs[l][1], xf[l].key_scale = tabs[l][2];
    }
    feed(ctx, a, ia, k, v, NULL, 20, N - 20, 13);
    float *ref = outputs(ctx, a, ia, qh, N);
    /* given tables: token by token, odd chunks, all at once: the same bits */
    const int64_t steps[3] = {1, 3, N};
    for (int s = 0; s < 3; s++) {
        vq_cache *b = make(ctx, &LOSSY, 8, 4, xf);
        int64_t ib;
        VT_OK(ctx, vq_cache_seq_add(b, &ib));
        feed(ctx, b, ib, k, v, NULL, 0, N, steps[s]);
        float *got = outputs(ctx, b, ib, qh, N);
        VT_CHECK(same_outputs(got, ref), "given tables, chunks of %lld: not the fitted cache's bits",
                 (long long)steps[s]);
        free(got);
        vq_cache_free(b);
    }
    /* fork at 30 tokens, both grow alike */
    vq_cache *b = make(ctx, &LOSSY, 8, 4, xf);
    int64_t ib, ic;
    VT_OK(ctx, vq_cache_seq_add(b, &ib));
    feed(ctx, b, ib, k, v, NULL, 0, 30, 30);
    VT_OK(ctx, vq_cache_seq_fork(b, ib, &ic));
    feed(ctx, b, ic, k, v, NULL, 30, N - 30, 50);
    float *got = outputs(ctx, b, ic, qh, N);
    VT_CHECK(same_outputs(got, ref), "a fork differs");
    free(got);
    /* truncate into the sinks (R = 8 keeps rollbacks exact here) and re-append */
    VT_OK(ctx, vq_cache_seq_truncate(b, ib, 2));
    VT_CHECK(vq_cache_seq_length(b, ib, 0) == 2, "truncated to %lld", (long long)vq_cache_seq_length(b, ib, 0));
    feed(ctx, b, ib, k, v, NULL, 2, N - 2, 9);
    got = outputs(ctx, b, ib, qh, N);
    VT_CHECK(same_outputs(got, ref), "truncate into the sinks and re-append differs");
    free(got);
    vq_cache_free(b);
    /* save and load the fitted cache: same bits, same tables */
    size_t size;
    VT_OK(ctx, vq_cache_save_buffer(a, -1, NULL, 0, &size));
    void *buf = malloc(size);
    VT_OK(ctx, vq_cache_save_buffer(a, -1, buf, size, &size));
    vq_cache *d = NULL;
    VT_OK(ctx, vq_cache_load_buffer(ctx, buf, size, &d));
    if (d) {
        vq_cache_config cfg;
        VT_OK(ctx, vq_cache_get_config(d, &cfg));
        VT_CHECK(cfg.sink_tokens == 4, "loaded sink_tokens %d", cfg.sink_tokens);
        got = outputs(ctx, d, ia, qh, N);
        VT_CHECK(same_outputs(got, ref), "a loaded cache differs");
        free(got);
        DLTensor *t = vt_new(VT_F32, VT_DIMS(HKV, D));
        VT_OK(ctx, vq_cache_get_transforms(d, ia, 1, NULL, NULL, NULL, t));
        VT_CHECK(memcmp(t->data, tabs[1][2]->data, sizeof(float) * HKV * D) == 0, "loaded key scales differ");
        vt_free(t);
        /* a sequence file into the loaded cache */
        size_t ss;
        VT_OK(ctx, vq_cache_save_buffer(a, ia, NULL, 0, &ss));
        void *sb = malloc(ss);
        VT_OK(ctx, vq_cache_save_buffer(a, ia, sb, ss, &ss));
        int64_t ie;
        VT_OK(ctx, vq_cache_seq_load_buffer(d, sb, ss, &ie));
        got = outputs(ctx, d, ie, qh, N);
        VT_CHECK(same_outputs(got, ref), "a loaded sequence differs");
        free(got);
        /* every truncation of the file is refused */
        for (size_t cut = 0; cut < size; cut += size / 61 + 1) {
            vq_cache *e = NULL;
            VT_CHECK(vq_cache_load_buffer(ctx, buf, cut, &e) != VQ_OK && e == NULL, "a file cut at %zu loads", cut);
        }
        free(sb);
        vq_cache_free(d);
    }
    free(buf);
    free(ref);
    vq_cache_free(a);
    for (int l = 0; l < L; l++)
        for (int i = 0; i < 3; i++) vt_free(tabs[l][i]);
    vt_free(k), vt_free(v), vt_free(q), vt_free(qh);
    vq_ctx_free(ctx);
}

/* Bad arguments: named in the message, nothing changed. */
static void test_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_cache *c = NULL;
    vq_cache_layer_config layers[L] = {F16, F16};
    vq_cache_config cfg = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D, .page_size = PAGE,
                           .layers = layers};
    cfg.sink_tokens = -1;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cfg->sink_tokens': expected 0..1024, got -1", vq_cache_create(ctx, &cfg, &c));
    cfg.sink_tokens = VQ_CACHE_MAX_SINK_TOKENS + 1;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "got 1025", vq_cache_create(ctx, &cfg, &c));
    cfg.sink_tokens = 2;
    DLTensor *wrong = vt_new(VT_F32, VT_DIMS(HKV, D + 8)), *good = vt_new(VT_F32, VT_DIMS(HKV, D));
    for (int i = 0; i < HKV * D; i++) ((float *)good->data)[i] = 1.0f;
    vq_cache_transforms xf[L] = {{.center_keys = true}, {.center_keys = true, .key_mean = wrong}};
    cfg.transforms = xf;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "cfg->transforms[1].key_mean", vq_cache_create(ctx, &cfg, &c));
    xf[1] = (vq_cache_transforms){.center_keys = true, .key_scale = good};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cfg->transforms[1].key_scale' is given but smooth is false",
             vq_cache_create(ctx, &cfg, &c));
    ((float *)good->data)[5] = 0.0f;
    xf[1] = (vq_cache_transforms){.smooth = true, .key_scale = good};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "element [0, 5] is 0", vq_cache_create(ctx, &cfg, &c));
    VT_CHECK(c == NULL, "a failed create gave a cache");
    /* a smooth layer without queries: the append refuses, nothing changes */
    xf[1] = (vq_cache_transforms){.smooth = true};
    c = make(ctx, &F16, 0, 2, xf);
    int64_t id, id2;
    VT_OK(ctx, vq_cache_seq_add(c, &id));
    VT_OK(ctx, vq_cache_seq_add(c, &id2));
    DLTensor *k = tokens(10, 1.0), *v = tokens(11, 1.0);
    chunk ck, cv;
    chunk_of(&ck, k, 0, 5), chunk_of(&cv, v, 0, 5);
    VT_OK(ctx, vq_cache_append(c, 0, 1, &id, &ck.t, &cv.t, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "no key scales for layer 1 yet", vq_cache_append(c, 1, 1, &id, &ck.t, &cv.t, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "argument 'q' is NULL", vq_cache_fit_transforms(c, 1, 1, &id, &ck.t, &cv.t, NULL));
    VT_CHECK(vq_cache_seq_length(c, id, 1) == 0, "a refused append changed layer 1");
    DLTensor *t = vt_new(VT_F32, VT_DIMS(HKV, D));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "no tables for layer 1 yet", vq_cache_get_transforms(c, id, 1, NULL, NULL, NULL, t));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "key_mean", vq_cache_get_transforms(c, id, 0, NULL, wrong, NULL, NULL));
    /* two sequences that would put 3 and 5 of 5 tokens in the pages */
    chunk_of(&ck, k, 0, 5), chunk_of(&cv, v, 0, 5);
    DLTensor *k2 = vt_new(VT_F32, VT_DIMS(2, HKV, 5, D)), *v2 = vt_new(VT_F32, VT_DIMS(2, HKV, 5, D));
    vq_rng rng;
    vq_rng_seed(&rng, 12);
    vt_fill_normal(k2, &rng, 0, 1), vt_fill_normal(v2, &rng, 0, 1);
    const int64_t both[2] = {id, id2};
    const int64_t len0 = vq_cache_seq_length(c, id, 0);
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "append them in separate calls", vq_cache_append(c, 0, 2, both, k2, v2, NULL));
    VT_CHECK(vq_cache_seq_length(c, id, 0) == len0 && vq_cache_seq_length(c, id2, 0) == 0,
             "a refused append changed a sequence");
    /* a decode step of a fresh sequence (a sink) beside a longer one: fine */
    DLTensor *k1 = vt_new(VT_F32, VT_DIMS(2, HKV, 1, D)), *v1 = vt_new(VT_F32, VT_DIMS(2, HKV, 1, D));
    vt_fill_normal(k1, &rng, 0, 1), vt_fill_normal(v1, &rng, 0, 1);
    VT_OK(ctx, vq_cache_append(c, 0, 2, both, k1, v1, NULL));
    VT_CHECK(vq_cache_seq_length(c, id, 0) == len0 + 1 && vq_cache_seq_length(c, id2, 0) == 1, "batched decode lengths");
    vq_cache_free(c);
    vt_free(k), vt_free(v), vt_free(k2), vt_free(v2), vt_free(k1), vt_free(v1), vt_free(t), vt_free(wrong), vt_free(good);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_exact_against_reference);
    VT_RUN(test_sinks_exact);
    VT_RUN(test_bit_for_bit);
    VT_RUN(test_errors);
    return vt_finish();
}
