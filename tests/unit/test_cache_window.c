/* test_cache_window.c — the TurboQuant residual windows (VQ_WINDOW_TURBO8;
 * VQ_WINDOW_TURBO at 5 bits, packed, f16 scales) on the CPU: attention
 * through the cache against the float64 reference of what it stores (every
 * token of a windowed layer through the window's round trip: the pages
 * encode f16(decode(code(x))), the window holds decode(code(x)) in f32), on
 * every ISA; accounting at the stored size, layers without a window
 * unchanged, validation and "a failing call changes nothing". Token by token
 * equal to all at once, truncate and fork, bit for bit: test_cache.c (run
 * for every window). Persistence: test_cache_persist.c. */
#include "cache_ref.h"

enum { HKV = 2, HQ = 4, DIM = 64, PAGE = 32 };

/* The window under test: VQ_WINDOW_TURBO8, or VQ_WINDOW_TURBO of t_bits. */
static vq_cache_window t_window = VQ_WINDOW_TURBO8;
static int t_bits = 8;

/* A cache of L layers of one config (8 sequences) with the given window
 * (VQ_WINDOW_TURBO: t_bits). */
static vq_cache *w8_cache(vq_ctx *ctx, const vq_cache_layer_config *lc, int L, int R, int64_t capacity, int64_t grow,
                          vq_cache_window window)
{
    ct_window = window;
    ct_window_bits = window == VQ_WINDOW_TURBO ? t_bits : 0;
    vq_cache *c = ct_cache_seqs(ctx, lc, L, HKV, HQ, DIM, PAGE, R, capacity, grow, 8);
    ct_window = VQ_WINDOW_F16;
    ct_window_bits = 0;
    return c;
}

/* Key and value methods with a window (KIVI keys always have one; the others
 * with R > 0), over TurboQuant values (the window shares their rotated
 * basis) and over the other value methods (the window's values are rotated
 * back), and VECINFER keys with a codebook. */
static int methods(const DLTensor *vecinfer_cb, method *out)
{
    int n = 0;
#define M(nm, ...) out[n++] = (method){nm, __VA_ARGS__}
    M("f16", {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}});
    M("kivi4/turbo2", {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32}, {.method = VQ_VALUE_TURBO, .bits = 2}});
    M("kivi2", {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 16}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 16}});
    M("kivi_int8/codebook", {{.method = VQ_KEY_KIVI, .bits = 8, .group_size = 8}, {.method = VQ_VALUE_CODEBOOK}});
    M("turbo3", {{.method = VQ_KEY_TURBO, .bits = 3}, {.method = VQ_VALUE_TURBO, .bits = 3}});
    M("rvq22/turbo4", {{.method = VQ_KEY_TURBO_RVQ, .bits = 2, .bits2 = 2}, {.method = VQ_VALUE_TURBO, .bits = 4}});
    M("qjl/kivi4", {{.method = VQ_KEY_QJL, .qjl_sketch = 96}, {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 16}});
    M("pq/f16", {{.method = VQ_KEY_VECINFER, .codebook = vecinfer_cb}, {.method = VQ_VALUE_F16}});
#undef M
    return n;
}

/* The tokens of a store through the window of layer L (its signs):
 * rt = f16(decode(code(x))) (what the pages encode) and dec = decode(code(x))
 * in f32 [S][Hkv][N][D] (what the window holds); code: TurboQuant at t_bits,
 * the scale rounded to f16 for VQ_WINDOW_TURBO. */
typedef struct round_trip {
    ct_store rt;
    DLTensor *kdec, *vdec;
} round_trip;

static void code8(vq_ctx *ctx, const DLTensor *x, const vq_cache_table *signs, DLTensor *rt, DLTensor *dec)
{
    DLTensor *diag = ref_table(signs);
    DLTensor *idx = vt_new(VT_U8, x->ndim, x->shape), *sc = vt_new(VT_F32, 3, x->shape);
    VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, diag, t_bits, idx, sc, NULL));
    if (t_window == VQ_WINDOW_TURBO)
        for (int64_t i = 0; i < vt_numel(sc); i++) vt_set(sc, i, vq_f16_to_f32(vq_f32_to_f16((float)vt_get(sc, i))));
    VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, sc, diag, t_bits, rt));
    VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, sc, diag, t_bits, dec));
    vt_free(diag), vt_free(idx), vt_free(sc);
}

static round_trip round_trip_of(vq_ctx *ctx, const vq_cache_layer *L, const ct_store *st)
{
    round_trip r = {{st->S, st->Hkv, st->N, st->D, vt_like(st->k, VT_F16), vt_like(st->v, VT_F16)},
                    vt_like(st->k, VT_F32), vt_like(st->v, VT_F32)};
    code8(ctx, st->k, &L->tables[VQ_CT_KDIAG], r.rt.k, r.kdec);
    code8(ctx, st->v, &L->tables[VQ_CT_VDIAG], r.rt.v, r.vdec);
    return r;
}

static void round_trip_free(round_trip *r)
{
    ct_store_free(&r->rt);
    vt_free(r->kdec), vt_free(r->vdec);
}

/* Queries, attend of sequences ids (lengths len) of layer l, and the float64
 * reference per sequence: relative L2 of out and error of lse <= tol. */
static void check_attend(vq_ctx *ctx, const char *what, vq_cache *c, int l, const ct_store *st, const int64_t *ids,
                         const int64_t *len, int S, int64_t Sq, bool causal, double tol)
{
    const vq_cache_layer *L = &c->layers[l];
    const bool windowed = L->res_cap > 0;
    round_trip rtp;
    memset(&rtp, 0, sizeof rtp);
    if (windowed) rtp = round_trip_of(ctx, L, st);
    vq_rng rng;
    vq_rng_seed(&rng, 41 + (uint64_t)S + (uint64_t)Sq);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(S, HQ, Sq, DIM)), *out = vt_new(VT_F32, VT_DIMS(S, HQ, Sq, DIM));
    DLTensor *lse = vt_new(VT_F32, VT_DIMS(S, HQ, Sq));
    vt_fill_normal(q, &rng, 0.0, 1.0);
    vt_poison(out), vt_poison(lse);
    /* KIVI pages in the exact F32 arithmetic: this checks what the cache stores */
    const vq_cache_attend_opts opts = {
        .causal = causal, .lse_out = lse, .key_scores = VQ_KEY_SCORES_F32, .value_accum = VQ_VALUE_ACCUM_F32};
    VT_OK(ctx, vq_cache_attend(c, l, S, ids, q, out, &opts));
    const double scale = (double)(1.0f / sqrtf((float)DIM));
    double *ref = malloc(sizeof(double) * (size_t)(HQ * Sq * DIM)), *rl = malloc(sizeof(double) * (size_t)(HQ * Sq));
    for (int s = 0; s < S; s++) {
        ref_layer r = ref_build(ctx, c, l, windowed ? &rtp.rt : st, s, len[s], NULL);
        for (int64_t h = 0; windowed && h < HKV; h++) /* the window: the 8-bit decode, unrounded */
            for (int64_t t = r.n_enc; t < len[s]; t++)
                for (int64_t d = 0; d < DIM; d++) {
                    const int64_t src = ((s * HKV + h) * st->N + t) * DIM + d, dst = (h * len[s] + t) * DIM + d;
                    r.khat[dst] = vt_get(rtp.kdec, src);
                    r.vhat[dst] = vt_get(rtp.vdec, src);
                }
        ref_attend(&r, HQ, Sq, (const float *)q->data + (int64_t)s * HQ * Sq * DIM, NULL, scale, causal, ref, rl);
        double err, lerr;
        ref_errors((const float *)out->data + (int64_t)s * HQ * Sq * DIM, ref, HQ * Sq * DIM,
                   (const float *)lse->data + (int64_t)s * HQ * Sq, rl, HQ * Sq, &err, &lerr);
        VT_CHECK(err <= tol && lerr <= tol, "%s seq %d (n %lld, n_enc %lld, Sq %lld%s): out rel err %.3g, lse err %.3g",
                 what, s, (long long)len[s], (long long)r.n_enc, (long long)Sq, causal ? " causal" : "", err, lerr);
        ref_free(&r);
    }
    free(ref), free(rl);
    vt_free(q), vt_free(out), vt_free(lse);
    if (windowed) round_trip_free(&rtp);
}

/* As test_cache.c's CACHE_TOL (f32 rounding of scores, rotations and P.V
 * sums); the 8-bit code error itself (~6e-3 RMS) is in the reference. A
 * window attended as f16, or pages fed the raw tokens, miss it by > 1e-3. */
#define CACHE_TOL 5e-5

/* Lengths 1, 7, 97 appended in uneven chunks (layer 0) and at once (layer 1),
 * decode of all sequences in one call and a causal prefill of Sq = 5. */
static void methods_isa(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 7);
    DLTensor *pq = vt_new(VT_F32, VT_DIMS(DIM / 4, 16, 4));
    vt_fill_normal(pq, &rng, 0.0, 1.0);
    method ms[12];
    const int nm = methods(pq, ms);
    const int64_t len[3] = {1, 7, 97};
    ct_store st = ct_store_new(3, HKV, 97, DIM, &rng);
    static int isa_round = 0; /* the SIMD ISAs run half of the pairs each, alternating (CI time) */
    const int parity = isa_round++ % 2;
    for (int R = 0; R <= 5; R += 5)
        for (int mi = 0; mi < nm; mi++) {
            if ((mi + R / 5) % 2 != parity && strcmp(isa, "scalar") != 0) continue;
            vq_cache *c = w8_cache(ctx, &ms[mi].lc, 2, R, 8, 4, t_window);
            if (c == NULL) continue;
            int64_t ids[3];
            for (int s = 0; s < 3; s++) VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
            VT_OK(ctx, ct_append(c, 0, &st, ids, 0, 3, 0, 1));
            for (int s = 0; s < 3; s++) {
                int64_t t = 1;
                for (int64_t step = 5; t < len[s]; step = step == 5 ? 1 : step * 3) {
                    const int64_t m = t + step <= len[s] ? step : len[s] - t;
                    VT_OK(ctx, ct_append(c, 0, &st, ids, s, 1, t, m));
                    t += m;
                }
                VT_OK(ctx, ct_append(c, 1, &st, ids, s, 1, 0, len[s]));
            }
            char what[96];
            snprintf(what, sizeof what, "%s %s R%d window %d/%d bits", isa, ms[mi].name, R, (int)t_window, t_bits);
            for (int l = 0; l < 2; l++) check_attend(ctx, what, c, l, &st, ids, len, 3, 1, false, CACHE_TOL);
            check_attend(ctx, what, c, 0, &st, ids, len, 3, 5, true, CACHE_TOL);
            vq_cache_free(c);
        }
    ct_store_free(&st);
    vt_free(pq);
}

static void test_methods(void)
{
    vt_for_each_isa(2, methods_isa);
    t_window = VQ_WINDOW_TURBO, t_bits = 5; /* packed codes straddling words, f16 scales */
    vt_for_each_isa(2, methods_isa);
    t_window = VQ_WINDOW_TURBO8, t_bits = 8;
}

static float *decode_out(vq_ctx *ctx, vq_cache *c, int l, const int64_t *ids, int S, uint64_t seed)
{
    return ct_decode_out(ctx, c, l, ids, S, HQ, DIM, seed);
}

/* The window counts at its stored size: D + 4 bytes per token, head and
 * half instead of 2 D (VQ_WINDOW_TURBO at 6 bits: 4 ceil(6 D / 32) + 2); the
 * pages' bytes are the f16 window's. */
static void test_memory(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_rng rng;
    vq_rng_seed(&rng, 29);
    ct_store st = ct_store_new(1, HKV, 100, DIM, &rng);
    const vq_cache_layer_config lc = {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32},
                                      {.method = VQ_VALUE_TURBO, .bits = 2}};
    t_bits = 6;
    vq_cache *a = w8_cache(ctx, &lc, 1, 8, 8, 0, VQ_WINDOW_F16), *b = w8_cache(ctx, &lc, 1, 8, 8, 0, VQ_WINDOW_TURBO8);
    vq_cache *b6 = w8_cache(ctx, &lc, 1, 8, 8, 0, VQ_WINDOW_TURBO);
    t_bits = 8;
    int64_t ia, ib, i6;
    VT_OK(ctx, vq_cache_seq_add(a, &ia));
    VT_OK(ctx, vq_cache_seq_add(b, &ib));
    VT_OK(ctx, vq_cache_seq_add(b6, &i6));
    VT_OK(ctx, ct_append(a, 0, &st, &ia, 0, 1, 0, 100));
    VT_OK(ctx, ct_append(b, 0, &st, &ib, 0, 1, 0, 100));
    VT_OK(ctx, ct_append(b6, 0, &st, &i6, 0, 1, 0, 100));
    vq_cache_memory_report ra, rb, r6;
    VT_OK(ctx, vq_cache_memory(a, &ra));
    VT_OK(ctx, vq_cache_memory(b, &rb));
    VT_OK(ctx, vq_cache_memory(b6, &r6));
    const int64_t win = 100 - 64; /* f(100) = floor((100 - 8) / 32) * 32 = 64 */
    VT_CHECK(ra.residual_bytes == win * HKV * 2 * DIM * 2 && rb.residual_bytes == win * HKV * 2 * (DIM + 4) &&
                 r6.residual_bytes == win * HKV * 2 * (4 * (6 * DIM / 32) + 2),
             "window bytes: f16 %lld, 8-bit %lld, 6-bit %lld (expected %lld, %lld, %lld)", (long long)ra.residual_bytes,
             (long long)rb.residual_bytes, (long long)r6.residual_bytes, (long long)(win * HKV * 4 * DIM),
             (long long)(win * HKV * 2 * (DIM + 4)), (long long)(win * HKV * 2 * (4 * (6 * DIM / 32) + 2)));
    VT_CHECK(ra.code_bytes == rb.code_bytes && ra.param_bytes == rb.param_bytes && ra.tokens == rb.tokens &&
                 r6.code_bytes == rb.code_bytes && r6.param_bytes == rb.param_bytes,
             "pages differ in size");
    const double elems = 100.0 * HKV * DIM;
    const double want = (double)(rb.code_bytes + rb.param_bytes + win * HKV * 2 * (DIM + 4)) * 8 / (2 * elems);
    VT_CHECK(fabs(rb.bits_per_element - want) < 1e-12 &&
                 fabs(rb.key_bits_per_element + rb.value_bits_per_element - 2 * rb.bits_per_element) < 1e-9,
             "bits per element %.6f, expected %.6f", rb.bits_per_element, want);
    VT_CHECK(rb.total_bytes == rb.code_bytes + rb.param_bytes + rb.residual_bytes + rb.table_bytes + rb.slack_bytes &&
                 rb.slack_bytes >= 0,
             "parts do not add up");
    vq_cache_config got;
    VT_OK(ctx, vq_cache_get_config(b, &got));
    VT_CHECK(got.window == VQ_WINDOW_TURBO8 && got.window_bits == 0, "get_config window %d/%d", (int)got.window,
             got.window_bits);
    VT_OK(ctx, vq_cache_get_config(b6, &got));
    VT_CHECK(got.window == VQ_WINDOW_TURBO && got.window_bits == 6, "get_config window %d/%d", (int)got.window,
             got.window_bits);
    vq_cache_free(a), vq_cache_free(b), vq_cache_free(b6);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

/* Layers with no window (RaBitQ, CommVQ; R = 0 with a key group of 1) are
 * the f16-window cache bit for bit. */
static void test_no_window_layers(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 31);
    ct_store st = ct_store_new(1, HKV, 77, DIM, &rng);
    const struct {
        vq_cache_layer_config lc;
        int R;
    } cases[] = {
        {{{.method = VQ_KEY_RABITQ}, {.method = VQ_VALUE_CODEBOOK}}, 4},
        {{{.method = VQ_KEY_TURBO, .bits = 3}, {.method = VQ_VALUE_TURBO, .bits = 3}}, 0},
        {{{.method = VQ_KEY_F16}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}}, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        vq_cache *a = ct_cache(ctx, &cases[ci].lc, 1, HKV, HQ, DIM, PAGE, cases[ci].R, 8, 0); /* default window */
        vq_cache *b = w8_cache(ctx, &cases[ci].lc, 1, cases[ci].R, 8, 0, VQ_WINDOW_TURBO8);
        int64_t ia, ib;
        VT_OK(ctx, vq_cache_seq_add(a, &ia));
        VT_OK(ctx, vq_cache_seq_add(b, &ib));
        VT_OK(ctx, ct_append(a, 0, &st, &ia, 0, 1, 0, 77));
        VT_OK(ctx, ct_append(b, 0, &st, &ib, 0, 1, 0, 77));
        float *oa = decode_out(ctx, a, 0, &ia, 1, 3), *ob = decode_out(ctx, b, 0, &ib, 1, 3);
        VT_CHECK(memcmp(oa, ob, sizeof(float) * HQ * DIM) == 0, "case %zu: a layer without a window changed", ci);
        free(oa), free(ob);
        vq_cache_free(a), vq_cache_free(b);
    }
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

/* Bad configs name cfg->window; a full fixed pool refuses an append and
 * changes nothing (window and pages, bit for bit). */
static void test_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_cache *c = NULL;
    vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM, .preset = "kivi4",
                           .window = (vq_cache_window)3};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "cfg->window", vq_cache_create(ctx, &cfg, &c));
    VT_CHECK(c == NULL, "a refused create returned a cache");
    cfg.window = VQ_WINDOW_TURBO;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cfg->window_bits': VQ_WINDOW_TURBO takes 1..8, got 0",
             vq_cache_create(ctx, &cfg, &c));
    cfg.window_bits = 9;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "cfg->window_bits", vq_cache_create(ctx, &cfg, &c));
    cfg.window_bits = 0;
    cfg.window = (vq_cache_window)-1;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "cfg->window", vq_cache_create(ctx, &cfg, &c));
    cfg = (vq_cache_config){.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = 24, .preset = "kivi4",
                            .window = VQ_WINDOW_TURBO8};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "power-of-two head_dim", vq_cache_create(ctx, &cfg, &c));
    cfg.window = VQ_WINDOW_F16;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c)); /* D = 24 is fine with an f16 window */
    vq_cache_free(c);

    vq_rng rng;
    vq_rng_seed(&rng, 37);
    ct_store st = ct_store_new(1, HKV, 200, DIM, &rng);
    const vq_cache_layer_config lc = {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32},
                                      {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}};
    c = w8_cache(ctx, &lc, 1, 5, 2, 0, VQ_WINDOW_TURBO8); /* 2 pages of 32 */
    int64_t id;
    VT_OK(ctx, vq_cache_seq_add(c, &id));
    VT_OK(ctx, ct_append(c, 0, &st, &id, 0, 1, 0, 90)); /* 64 encoded, 26 in the window */
    float *before = decode_out(ctx, c, 0, &id, 1, 9);
    VT_FAILS(ctx, VQ_ERR_OUT_OF_MEMORY, "", ct_append(c, 0, &st, &id, 0, 1, 90, 40));
    float *after = decode_out(ctx, c, 0, &id, 1, 9);
    VT_CHECK(memcmp(before, after, sizeof(float) * HQ * DIM) == 0 && vq_cache_seq_length(c, id, 0) == 90,
             "a refused append changed the cache");
    free(before), free(after);
    vq_cache_free(c);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_methods);
    VT_RUN(test_memory);
    VT_RUN(test_no_window_layers);
    VT_RUN(test_errors);
    return vt_finish();
}
