/* test_cache_sliding.c — sliding-window layers (vq_cache_config.
 * sliding_windows) on the CPU: attention against the float64 reference that
 * masks every token older than each query's window (windows below the
 * residual window and not multiples of the page size, prefills longer than
 * the window, causal prefills, awkward lengths), with and without sink
 * tokens (which the window masks as any token: windows shorter and longer
 * than the sinks, sequences inside and past their sinks in one call),
 * token by token equal to chunked appends bit for bit, the pages older than
 * the window back in the pool (a local layer's memory bounded; a
 * Gemma-3-like cache at 32K tokens), fork, truncate, save/load, and "a
 * failing call changes nothing". */
#include "cache_ref.h"

enum { HKV = 2, HQ = 4, DIM = 64, PAGE = 32 };

#define TOL 5e-5 /* as test_cache.c's CACHE_TOL: f32 rounding of scores and P.V sums */

/* A cache of L layers of one method, layer l with window wins[l], S sink
 * tokens. */
static vq_cache *sw_cache_sinks(vq_ctx *ctx, const vq_cache_layer_config *lc, int L, const int *wins, int R,
                                int64_t capacity, int64_t grow, int S)
{
    vq_cache_layer_config layers[8];
    for (int l = 0; l < L; l++) { /* layer l draws its signs from seed + l: the same in every layer */
        layers[l] = *lc;
        layers[l].keys.seed = layers[l].values.seed = 1000 - (uint64_t)l;
    }
    const vq_cache_config cfg = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                 .page_size = PAGE, .capacity_pages = capacity, .grow_pages = grow,
                                 .max_sequences = 8, .residual_tokens = R, .layers = layers,
                                 .sliding_windows = wins, .sink_tokens = S};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    return c;
}

static vq_cache *sw_cache(vq_ctx *ctx, const vq_cache_layer_config *lc, int L, const int *wins, int R, int64_t capacity,
                          int64_t grow)
{
    return sw_cache_sinks(ctx, lc, L, wins, R, capacity, grow, 0);
}

/* The reference of layer l for the first n tokens of store sequence s in a
 * cache of S sink tokens: tokens [0, min(S, n)) in f16 (the sinks), tokens
 * [S, n) as the pages and the residual window hold them (the reference of
 * a layer given those tokens alone); every token masked by the window. */
static ref_layer ref_build_sinks(vq_ctx *ctx, const vq_cache *c, int l, const ct_store *st, int64_t s, int64_t n)
{
    const int64_t S = n < c->S ? n : c->S, m = n - S, Hkv = st->Hkv, D = st->D;
    if (S == 0) return ref_build(ctx, c, l, st, s, n, NULL);
    ref_layer r = {.Hkv = Hkv, .n = n, .D = D, .n_enc = 0, .sliding = c->layers[l].sliding};
    r.khat = calloc((size_t)(Hkv * n * D), sizeof(double));
    r.vhat = calloc((size_t)(Hkv * n * D), sizeof(double));
    for (int64_t h = 0; h < Hkv; h++)
        for (int64_t t = 0; t < S; t++)
            for (int64_t e = 0; e < D; e++) {
                r.khat[(h * n + t) * D + e] = vt_get(st->k, ((s * Hkv + h) * st->N + t) * D + e);
                r.vhat[(h * n + t) * D + e] = vt_get(st->v, ((s * Hkv + h) * st->N + t) * D + e);
            }
    if (m == 0) return r;
    ct_store after = {1, Hkv, m, D, vt_new(VT_F16, VT_DIMS(1, Hkv, m, D)), vt_new(VT_F16, VT_DIMS(1, Hkv, m, D))};
    for (int64_t h = 0; h < Hkv; h++) {
        const size_t from = (size_t)(((s * Hkv + h) * st->N + S) * D) * 2, bytes = (size_t)(m * D) * 2;
        memcpy((char *)after.k->data + (size_t)(h * m * D) * 2, (const char *)st->k->data + from, bytes);
        memcpy((char *)after.v->data + (size_t)(h * m * D) * 2, (const char *)st->v->data + from, bytes);
    }
    ref_layer a = ref_build(ctx, c, l, &after, 0, m, NULL);
    VT_CHECK(a.kind == REF_DOT, "ref_build_sinks: the layer's method has no dot-product reference");
    for (int64_t h = 0; h < Hkv; h++) {
        memcpy(r.khat + (h * n + S) * D, a.khat + h * m * D, sizeof(double) * (size_t)(m * D));
        memcpy(r.vhat + (h * n + S) * D, a.vhat + h * m * D, sizeof(double) * (size_t)(m * D));
    }
    ref_free(&a);
    ct_store_free(&after);
    return r;
}

/* Attend of sequences ids (lengths len: tokens [0, len) of store sequences
 * s0, s0 + 1, ...) of layer l with Sq query rows against the float64
 * reference. */
static void check_attend(vq_ctx *ctx, const char *what, vq_cache *c, int l, const ct_store *st, int s0,
                         const int64_t *ids, const int64_t *len, int S, int64_t Sq, bool causal)
{
    DLTensor *q, *out, *lse;
    ref_cache_attend(ctx, c, l, ids, S, Sq, causal, 17 + (uint64_t)Sq, &q, &out, &lse);
    const double scale = (double)(1.0f / sqrtf((float)DIM));
    double *ref = malloc(sizeof(double) * (size_t)(HQ * Sq * DIM)), *rl = malloc(sizeof(double) * (size_t)(HQ * Sq));
    for (int s = 0; s < S; s++) {
        ref_layer r = ref_build_sinks(ctx, c, l, st, s0 + s, len[s]);
        ref_attend(&r, HQ, Sq, (const float *)q->data + (int64_t)s * HQ * Sq * DIM, NULL, scale, causal, ref, rl);
        double err, lerr;
        ref_errors((const float *)out->data + (int64_t)s * HQ * Sq * DIM, ref, HQ * Sq * DIM,
                   (const float *)lse->data + (int64_t)s * HQ * Sq, rl, HQ * Sq, &err, &lerr);
        VT_CHECK(err <= TOL && lerr <= TOL,
                 "%s layer %d seq %d (n %lld, W %lld, S %d, Sq %lld%s): out rel err %.3g, lse %.3g", what, l, s,
                 (long long)len[s], (long long)r.sliding, c->S, (long long)Sq, causal ? " causal" : "", err, lerr);
        ref_free(&r);
    }
    free(ref), free(rl);
    vt_free(q), vt_free(out), vt_free(lse);
}

/* The tokens a layer holds of a sequence (p0 * P on are not evicted). */
static int64_t held(const vq_cache *c, int64_t id, int l)
{
    const vq_cache_seq *q = vq_cache_find_seq(c, id);
    return q->layers[l].n - q->layers[l].p0 * c->P;
}

/* Method pairs: f16; KIVI keys (groups, page-aligned eviction) over
 * TurboQuant values; TurboQuant keys over KIVI values; mixed-width keys. */
static const method METHODS[] = {
    {"f16", {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}}},
    {"kivi4/turbo2", {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 16}, {.method = VQ_VALUE_TURBO, .bits = 2}}},
    {"turbo3/kivi2", {{.method = VQ_KEY_TURBO, .bits = 3}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 16}}},
    {"kivimix/turbo3",
     {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 32}, {.method = VQ_VALUE_TURBO, .bits = 3}}},
};

/* Layer 0 token by token, layer 1 a prefill longer than the window and then
 * chunks, layer 2 full attention; four sequences of awkward lengths (with
 * sinks: one inside them, or just past); decode of all of them in one call,
 * and the causal rows of each chunk (with sinks: chunks across the sink
 * boundary). The last append of layers 0 and 1 is one token: both then
 * evicted the same pages, and their outputs agree bit for bit. */
static void windows_isa(vq_ctx *ctx, const char *isa)
{
    /* {W, R, S}: windows shorter than the sinks, as long, longer */
    static const int Ws[][3] = {{5, 8, 0}, {40, 0, 0}, {40, 8, 0}, {64, 3, 0}, {100, 0, 0},
                                {5, 8, 4}, {40, 0, 4}, {7, 3, 40}, {64, 0, 1}, {30, 5, 30}};
    enum { NS = 4 };
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    const int64_t len[NS] = {1, 30, 77, 203};
    ct_store st = ct_store_new(NS, HKV, 203, DIM, &rng);
    for (size_t mi = 0; mi < sizeof METHODS / sizeof *METHODS; mi++)
        for (size_t wi = 0; wi < sizeof Ws / sizeof *Ws; wi++) {
            if (strcmp(isa, "scalar") != 0 && (mi + wi) % 2) continue; /* the SIMD ISAs take half (CI time) */
            const int W = Ws[wi][0], R = Ws[wi][1], wins[3] = {W, W, 0};
            vq_cache *c = sw_cache_sinks(ctx, &METHODS[mi].lc, 3, wins, R, 4, 2, Ws[wi][2]);
            int64_t ids[NS];
            for (int s = 0; s < NS; s++) VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
            char what[96];
            snprintf(what, sizeof what, "%s %s W%d R%d S%d", isa, METHODS[mi].name, W, R, Ws[wi][2]);
            for (int s = 0; s < NS; s++) {
                for (int64_t t = 0; t < len[s]; t++) VT_OK(ctx, ct_append(c, 0, &st, ids, s, 1, t, 1));
                int64_t t = len[s] > 1 ? (len[s] - 1) * 2 / 3 : 0; /* a prefill of 50 and 134 tokens */
                if (t > 0) VT_OK(ctx, ct_append(c, 1, &st, ids, s, 1, 0, t));
                for (int64_t m = 9; t < len[s] - 1; t += m) {
                    m = t + m <= len[s] - 1 ? m : len[s] - 1 - t;
                    VT_OK(ctx, ct_append(c, 1, &st, ids, s, 1, t, m));
                    if (t + m < len[s] - 1) { /* the chunk's causal rows: the attend that follows its append */
                        const int64_t n1 = t + m;
                        check_attend(ctx, what, c, 1, &st, s, &ids[s], &n1, 1, m, true);
                    }
                }
                VT_OK(ctx, ct_append(c, 1, &st, ids, s, 1, len[s] - 1, 1));
                VT_OK(ctx, ct_append(c, 2, &st, ids, s, 1, 0, len[s]));
                /* bounded: a local layer holds the window (or the residual window, if longer) and the rest of
                 * the page it starts in, beside its sinks */
                const int64_t cap = c->layers[0].res_cap, bound = (W > cap ? W : cap) + PAGE - 1;
                for (int l = 0; l < 2; l++)
                    VT_CHECK(held(c, ids[s], l) <= bound,
                             "%s layer %d seq %d holds %lld of %lld tokens", what, l, s, (long long)held(c, ids[s], l),
                             (long long)len[s]);
            }
            for (int l = 0; l < 3; l++) check_attend(ctx, what, c, l, &st, 0, ids, len, NS, 1, false);
            /* token by token == chunks, bit for bit */
            float *a = ct_decode_out(ctx, c, 0, ids, NS, HQ, DIM, 3), *b = ct_decode_out(ctx, c, 1, ids, NS, HQ, DIM, 3);
            VT_CHECK(memcmp(a, b, sizeof(float) * NS * HQ * DIM) == 0, "%s: token by token differs from chunks", what);
            free(a), free(b);
            vq_cache_free(c);
        }
    ct_store_free(&st);
}

static void test_reference(void) { vt_for_each_isa(2, windows_isa); }

/* Pages older than the window go back to the pool: a decode of 1000 tokens
 * never grows a local layer's pool past the pages of W + P + R tokens, and
 * vq_cache_memory counts what is held. */
static void test_pool_bounded(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_rng rng;
    vq_rng_seed(&rng, 9);
    const int W = 45, R = 6, wins[2] = {W, 0};
    ct_store st = ct_store_new(2, HKV, 1000, DIM, &rng);
    const method *m = &METHODS[1];
    vq_cache *c = sw_cache(ctx, &m->lc, 2, wins, R, 2, 2);
    int64_t ids[2];
    for (int s = 0; s < 2; s++) VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
    for (int64_t t = 0; t < 1000; t++)
        for (int l = 0; l < 2; l++) VT_OK(ctx, ct_append(c, l, &st, ids, 0, 2, t, 1));
    /* per sequence: the window, the page it starts in, the residual window and an open KIVI group */
    const int64_t bound_pages = 2 * ((W + 2 * PAGE - 2 + R + 15) / PAGE);
    VT_CHECK(c->layers[0].n_pages <= bound_pages, "local pool grew to %lld pages (bound %lld)",
             (long long)c->layers[0].n_pages, (long long)bound_pages);
    VT_CHECK(c->layers[1].n_pages >= 2 * 1000 / PAGE - 2, "the full layer holds %lld pages",
             (long long)c->layers[1].n_pages);
    vq_cache_memory_report r;
    VT_OK(ctx, vq_cache_memory(c, &r));
    int64_t tokens = 0;
    for (int s = 0; s < 2; s++) tokens += held(c, ids[s], 0) + 1000;
    VT_CHECK(r.tokens == tokens, "memory report counts %lld tokens, the layers hold %lld", (long long)r.tokens,
             (long long)tokens);
    const int64_t pages = c->layers[0].n_pages;
    for (int64_t p = 0; p < pages; p++) /* every page is free or held once */
        VT_CHECK(c->layers[0].refcount[p] == 0 || c->layers[0].refcount[p] == 1, "page %lld refcount %d",
                 (long long)p, c->layers[0].refcount[p]);
    check_attend(ctx, "pool", c, 0, &st, 0, ids, (const int64_t[]){1000, 1000}, 2, 1, false);
    /* removing the sequences returns every page */
    for (int s = 0; s < 2; s++) VT_OK(ctx, vq_cache_seq_remove(c, ids[s]));
    VT_CHECK(c->layers[0].n_free == c->layers[0].n_pages, "pages leaked: %lld free of %lld",
             (long long)c->layers[0].n_free, (long long)c->layers[0].n_pages);
    vq_cache_free(c);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

/* Gemma 3's layout: five local layers (W = 512) of every six, head dim 256,
 * one kv head, 256-token pages, the kivi4-turbo2 preset; 32768 tokens in
 * chunks of 512. The local layers stay at their bound, so the whole cache
 * takes what the one full layer in six takes plus five windows: measured
 * against a cache of that one full layer alone, and against six full
 * layers. */
static void test_gemma_shape(void)
{
    vq_ctx *ctx = vt_ctx(2);
    enum { N = 32768, CH = 512, D = 256, L = 6, P = 256 };
    const int wins[L] = {512, 512, 512, 512, 512, 0};
    vq_rng rng;
    vq_rng_seed(&rng, 13);
    DLTensor *k = vt_new(VT_F16, VT_DIMS(1, 1, CH, D)), *v = vt_new(VT_F16, VT_DIMS(1, 1, CH, D));
    vt_fill_keys(k, &rng, 2, 4.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);
    vq_cache_config cfg = {.n_layers = L, .n_kv_heads = 1, .n_q_heads = 4, .head_dim = D, .page_size = P,
                           .capacity_pages = 4, .grow_pages = 4, .max_sequences = 1, .preset = "kivi4-turbo2",
                           .sliding_windows = wins};
    vq_cache *c = NULL, *one = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    cfg.n_layers = 1, cfg.sliding_windows = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &one));
    int64_t id, id1;
    VT_OK(ctx, vq_cache_seq_add(c, &id));
    VT_OK(ctx, vq_cache_seq_add(one, &id1));
    for (int64_t t = 0; t < N; t += CH) {
        for (int l = 0; l < L; l++) VT_OK(ctx, vq_cache_append(c, l, 1, &id, k, v, NULL));
        VT_OK(ctx, vq_cache_append(one, 0, 1, &id1, k, v, NULL));
    }
    vq_cache_memory_report r, r1;
    VT_OK(ctx, vq_cache_memory(c, &r));
    VT_OK(ctx, vq_cache_memory(one, &r1));
    /* a local layer holds the last chunk and its window, within a page */
    for (int l = 0; l < L - 1; l++)
        VT_CHECK(held(c, id, l) <= CH + 512 + P - 1, "layer %d holds %lld tokens", l, (long long)held(c, id, l));
    const int64_t local_bound = (L - 1) * (CH + 512 + P) * 1 * D * 4; /* f16 bytes of their tokens, above any method */
    VT_CHECK(r.total_bytes <= r1.total_bytes + local_bound,
             "sliding-window cache %lld bytes > one full layer %lld + five windows %lld", (long long)r.total_bytes,
             (long long)r1.total_bytes, (long long)local_bound);
    printf("    32K tokens, 6 layers (5 local W=512): %.2f MiB; one full layer alone %.2f MiB; six full layers %.2f MiB "
           "(ratio to six full %.4f, one in six %.4f)\n",
           r.total_bytes / 1048576.0, r1.total_bytes / 1048576.0, 6 * r1.total_bytes / 1048576.0,
           (double)r.total_bytes / (6.0 * (double)r1.total_bytes), 1.0 / 6.0);
    vq_cache_free(c);
    vq_cache_free(one);
    vt_free(k), vt_free(v);
    vq_ctx_free(ctx);
}

/* Fork shares the pages (refcounted, evicted in each sequence apart) and
 * copies the sinks; truncate back to the last append's first token keeps
 * the reference; further back (or into the sinks) is refused, changing
 * nothing; an attend that needs evicted tokens is refused, writing
 * nothing. With S sink tokens. */
static void fork_truncate(int S)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_rng rng;
    vq_rng_seed(&rng, 21);
    const int W = 40, R = 4, wins[1] = {W};
    ct_store st = ct_store_new(2, HKV, 300, DIM, &rng);
    vq_cache *c = sw_cache_sinks(ctx, &METHODS[0].lc, 1, wins, R, 4, 4, S); /* f16: a truncate anywhere is exact */
    int64_t ids[2];
    VT_OK(ctx, vq_cache_seq_add(c, &ids[0]));
    for (int64_t t = 0; t < 150; t += 10) VT_OK(ctx, ct_append(c, 0, &st, ids, 0, 1, t, 10));
    VT_OK(ctx, vq_cache_seq_fork(c, ids[0], &ids[1]));
    const vq_cache_seq *a = vq_cache_find_seq(c, ids[0]);
    VT_CHECK(a->layers[0].p0 > 0, "nothing evicted before the fork");
    VT_CHECK(c->layers[0].refcount[a->layers[0].pages[0]] == 2, "the fork does not share the pages");
    /* the fork goes on with sequence 1's tokens: both against their references */
    ct_store mix = {2, HKV, 300, DIM, vt_like(st.k, VT_F16), vt_like(st.v, VT_F16)};
    memcpy(mix.k->data, st.k->data, vt_bytes(st.k));
    memcpy(mix.v->data, st.v->data, vt_bytes(st.v));
    const int64_t row = 300 * DIM * 2;
    for (int h = 0; h < HKV; h++) { /* tokens [0, 150) of the fork are sequence 0's */
        memcpy((char *)mix.k->data + (HKV + h) * row, (char *)st.k->data + h * row, 150 * DIM * 2);
        memcpy((char *)mix.v->data + (HKV + h) * row, (char *)st.v->data + h * row, 150 * DIM * 2);
    }
    for (int64_t t = 150; t < 290; t += 7) {
        VT_OK(ctx, ct_append(c, 0, &mix, ids, 0, 1, t, 7));
        VT_OK(ctx, ct_append(c, 0, &mix, ids, 1, 1, t, 7));
    }
    check_attend(ctx, "fork", c, 0, &mix, 0, ids, (const int64_t[]){290, 290}, 2, 1, false);
    check_attend(ctx, "fork prefill", c, 0, &mix, 0, ids, (const int64_t[]){290, 290}, 2, 7, true);
    /* truncate to the last append's first token (283): the reference of 283 tokens */
    VT_OK(ctx, vq_cache_seq_truncate(c, ids[1], 283));
    VT_OK(ctx, ct_append(c, 0, &mix, ids, 1, 1, 283, 1));
    check_attend(ctx, "truncate", c, 0, &mix, 1, &ids[1], (const int64_t[]){284}, 1, 1, false);
    /* back past the evicted tokens: refused, nothing changed */
    float *before = ct_decode_out(ctx, c, 0, ids, 2, HQ, DIM, 8);
    const vq_cache_seq *b = vq_cache_find_seq(c, ids[1]);
    const int64_t n_b = b->layers[0].n, p0_b = b->layers[0].p0;
    const int64_t sink_b = b->layers[0].n_sink;
    VT_CHECK(vq_cache_seq_truncate(c, ids[1], 200) == VQ_ERR_UNSUPPORTED, "truncate past the evicted tokens passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "sliding window") != NULL, "message: %s", vq_ctx_last_error(ctx));
    if (S > 0) /* into the sinks: below the window as well */
        VT_CHECK(vq_cache_seq_truncate(c, ids[1], S - 1) == VQ_ERR_UNSUPPORTED, "truncate into the sinks passed");
    VT_CHECK(b->layers[0].n == n_b && b->layers[0].p0 == p0_b && b->layers[0].n_sink == sink_b,
             "a refused truncate changed the sequence");
    /* causal rows older than the last append: refused, out untouched */
    DLTensor *q = vt_new(VT_F32, VT_DIMS(1, HQ, 60, DIM)), *out = vt_new(VT_F32, VT_DIMS(1, HQ, 60, DIM));
    vt_fill_normal(q, &rng, 0, 1);
    memset(out->data, 0x5a, vt_bytes(out));
    const vq_cache_attend_opts causal = {.causal = true};
    VT_CHECK(vq_cache_attend(c, 0, 1, &ids[0], q, out, &causal) == VQ_ERR_INVALID_ARGUMENT,
             "an attend over evicted tokens passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "evicted") != NULL, "message: %s", vq_ctx_last_error(ctx));
    for (size_t i = 0; i < vt_bytes(out); i++)
        if (((unsigned char *)out->data)[i] != 0x5a) {
            VT_CHECK(false, "a refused attend wrote out");
            break;
        }
    float *after = ct_decode_out(ctx, c, 0, ids, 2, HQ, DIM, 8);
    VT_CHECK(memcmp(before, after, sizeof(float) * 2 * HQ * DIM) == 0, "refused calls changed the outputs");
    free(before), free(after);
    /* the source removed: the fork keeps the shared pages */
    VT_OK(ctx, vq_cache_seq_remove(c, ids[0]));
    check_attend(ctx, "fork alone", c, 0, &mix, 1, &ids[1], (const int64_t[]){284}, 1, 1, false);
    vt_free(q), vt_free(out);
    ct_store_free(&mix);
    vq_cache_free(c);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

static void test_fork_truncate(void)
{
    fork_truncate(0);
    fork_truncate(5);
}

/* Save/load: version 5 with the windows, the evicted pages and the S sink
 * tokens, outputs bit for bit; a cache without windows still writes
 * version 1 (4 with sinks); a sequence file loads into a cache of the same
 * windows only. */
static void persist(int S)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_rng rng;
    vq_rng_seed(&rng, 33);
    const int wins[2] = {37, 0};
    ct_store st = ct_store_new(2, HKV, 200, DIM, &rng);
    vq_cache *c = sw_cache_sinks(ctx, &METHODS[1].lc, 2, wins, 5, 4, 4, S);
    int64_t ids[2];
    for (int s = 0; s < 2; s++) VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
    for (int64_t t = 0; t < 190; t++)
        for (int l = 0; l < 2; l++) VT_OK(ctx, ct_append(c, l, &st, ids, 0, t < 120 ? 2 : 1, t, 1));
    size_t size;
    VT_OK(ctx, vq_cache_save_buffer(c, -1, NULL, 0, &size));
    unsigned char *buf = malloc(size);
    VT_OK(ctx, vq_cache_save_buffer(c, -1, buf, size, &size));
    uint32_t version;
    memcpy(&version, buf + 8, 4);
    VT_CHECK(version == 5, "a sliding-window cache saved as version %u", (unsigned)version);
    vq_cache *d = NULL;
    VT_OK(ctx, vq_cache_load_buffer(ctx, buf, size, &d));
    int w = -1;
    VT_OK(ctx, vq_cache_get_sliding_window(d, 0, &w));
    VT_CHECK(w == 37, "loaded window %d", w);
    for (int l = 0; l < 2; l++) {
        float *a = ct_decode_out(ctx, c, l, ids, 2, HQ, DIM, 4), *b = ct_decode_out(ctx, d, l, ids, 2, HQ, DIM, 4);
        VT_CHECK(memcmp(a, b, sizeof(float) * 2 * HQ * DIM) == 0, "layer %d: the loaded cache differs", l);
        free(a), free(b);
    }
    VT_CHECK(vq_cache_find_seq(d, ids[0])->layers[0].p0 == vq_cache_find_seq(c, ids[0])->layers[0].p0,
             "the evicted pages did not load as evicted");
    /* both go on alike */
    for (int64_t t = 190; t < 200; t++)
        for (int l = 0; l < 2; l++) {
            VT_OK(ctx, ct_append(c, l, &st, ids, 0, 1, t, 1));
            VT_OK(ctx, ct_append(d, l, &st, ids, 0, 1, t, 1));
        }
    float *a = ct_decode_out(ctx, c, 0, ids, 1, HQ, DIM, 5), *b = ct_decode_out(ctx, d, 0, ids, 1, HQ, DIM, 5);
    VT_CHECK(memcmp(a, b, sizeof(float) * HQ * DIM) == 0, "the loaded cache went on differently");
    free(a), free(b);
    check_attend(ctx, "loaded", d, 0, &st, 0, ids, (const int64_t[]){200}, 1, 1, false);
    /* a sequence file: into a cache with the same windows, not into one without */
    size_t ss;
    VT_OK(ctx, vq_cache_save_buffer(c, ids[0], NULL, 0, &ss));
    unsigned char *sb = malloc(ss);
    VT_OK(ctx, vq_cache_save_buffer(c, ids[0], sb, ss, &ss));
    int64_t nid;
    VT_OK(ctx, vq_cache_seq_load_buffer(d, sb, ss, &nid));
    float *x = ct_decode_out(ctx, d, 0, &nid, 1, HQ, DIM, 6), *y = ct_decode_out(ctx, c, 0, ids, 1, HQ, DIM, 6);
    VT_CHECK(memcmp(x, y, sizeof(float) * HQ * DIM) == 0, "the loaded sequence differs");
    free(x), free(y);
    vq_cache *full = sw_cache_sinks(ctx, &METHODS[1].lc, 2, NULL, 5, 4, 4, S);
    VT_CHECK(vq_cache_seq_load_buffer(full, sb, ss, &nid) == VQ_ERR_CORRUPT_DATA,
             "a windowed sequence loaded into a cache without windows");
    VT_CHECK(full->n_live == 0, "a refused load left a sequence");
    /* without windows: version 1 as before */
    size_t fs;
    VT_OK(ctx, vq_cache_save_buffer(full, -1, NULL, 0, &fs));
    unsigned char *fb = malloc(fs);
    VT_OK(ctx, vq_cache_save_buffer(full, -1, fb, fs, &fs));
    memcpy(&version, fb + 8, 4);
    VT_CHECK(version == (S > 0 ? 4u : 1u), "a cache without windows saved as version %u", (unsigned)version);
    free(fb), free(sb), free(buf);
    vq_cache_free(full);
    vq_cache_free(d);
    vq_cache_free(c);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

static void test_persist(void)
{
    persist(0);
    persist(3);
}

/* An append the fixed pool cannot take (a prefill is held whole until the
 * next append) fails and changes nothing, sinks, pages, evicted pages and
 * outputs alike; the sequence then goes on as if it had not been tried. */
static void test_failed_append(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_rng rng;
    vq_rng_seed(&rng, 41);
    const int wins[1] = {8};
    ct_store st = ct_store_new(1, HKV, 200, DIM, &rng);
    vq_cache *c = sw_cache_sinks(ctx, &METHODS[0].lc, 1, wins, 0, 3, 0, 4);
    int64_t id;
    VT_OK(ctx, vq_cache_seq_add(c, &id));
    for (int64_t t = 0; t < 60; t++) VT_OK(ctx, ct_append(c, 0, &st, &id, 0, 1, t, 1));
    const vq_cache_seq_layer *sl = &vq_cache_find_seq(c, id)->layers[0];
    const vq_cache_seq_layer was = *sl;
    VT_CHECK(was.p0 > 0 && was.n_sink == 4, "setup: p0 %lld, %lld sinks", (long long)was.p0, (long long)was.n_sink);
    float *before = ct_decode_out(ctx, c, 0, &id, 1, HQ, DIM, 7);
    VT_FAILS(ctx, VQ_ERR_OUT_OF_MEMORY, "", ct_append(c, 0, &st, &id, 0, 1, 60, 130));
    VT_CHECK(sl->n == was.n && sl->n_enc == was.n_enc && sl->p0 == was.p0 && sl->n_pages == was.n_pages &&
                 sl->n_sink == was.n_sink && memcmp(sl->pages, was.pages, sizeof *sl->pages * (size_t)was.n_pages) == 0,
             "a failed append changed the sequence");
    float *after = ct_decode_out(ctx, c, 0, &id, 1, HQ, DIM, 7);
    VT_CHECK(memcmp(before, after, sizeof(float) * HQ * DIM) == 0, "a failed append changed the outputs");
    free(before), free(after);
    VT_OK(ctx, ct_append(c, 0, &st, &id, 0, 1, 60, 1));
    check_attend(ctx, "after a failed append", c, 0, &st, 0, &id, (const int64_t[]){61}, 1, 1, false);
    vq_cache_free(c);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

static void test_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    const int bad[2] = {0, -3};
    const vq_cache_config cfg = {.n_layers = 2, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                 .sliding_windows = bad};
    vq_cache *c = (vq_cache *)1;
    VT_CHECK(vq_cache_create(ctx, &cfg, &c) == VQ_ERR_INVALID_ARGUMENT && c == NULL, "a negative window passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "cfg->sliding_windows[1]") != NULL, "message: %s", vq_ctx_last_error(ctx));
    const int ok[2] = {0, 7};
    vq_cache_config good = cfg;
    good.sliding_windows = ok;
    VT_OK(ctx, vq_cache_create(ctx, &good, &c));
    int w = -1;
    VT_OK(ctx, vq_cache_get_sliding_window(c, 1, &w));
    VT_CHECK(w == 7, "window %d", w);
    VT_CHECK(vq_cache_get_sliding_window(c, 2, &w) == VQ_ERR_INVALID_ARGUMENT && w == 7, "layer 2 passed");
    vq_cache_config back;
    VT_OK(ctx, vq_cache_get_config(c, &back));
    VT_CHECK(back.sliding_windows == NULL, "get_config returned a window pointer");
    vq_cache_free(c);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_reference);
    VT_RUN(test_pool_bounded);
    VT_RUN(test_gemma_shape);
    VT_RUN(test_fork_truncate);
    VT_RUN(test_persist);
    VT_RUN(test_failed_append);
    VT_RUN(test_errors);
    return vt_finish();
}
