/* test_cache.c — the KV cache on the CPU: every key and value method through
 * the cache against the float64 reference of its decoded keys and values
 * (cache_ref.h), the f16 method against exact attention, token-by-token
 * appends equal to one append bit for bit, a batch of sequences of awkward
 * lengths equal to each alone, truncate, fork, presets and accounting.
 * Bad input and "a failing call changes nothing": test_cache_errors.c.
 * Token by token, truncate and fork run for both window storages; the 8-bit
 * window's own reference and checks: test_cache_window.c. */
#include "attention/attn_kernels.h"
#include "cache_ref.h"

enum { HKV = 2, HQ = 4, DIM = 64, PAGE = 32 };

/* Tables of the methods that take them: a VECINFER codebook [M = D/4, 16, 4]
 * with smooth factors, a CommVQ codebook [4, 16, D] and RoPE tables. */
typedef struct tables {
    DLTensor *vecinfer_cb, *vecinfer_sm, *cv_cb, *cos, *sin;
} tables;

static tables make_tables(vq_rng *rng, int64_t Pmax)
{
    tables t = {vt_new(VT_F32, VT_DIMS(DIM / 4, 16, 4)), vt_new(VT_F32, VT_DIMS(DIM)),
                vt_new(VT_F32, VT_DIMS(4, 16, DIM)), vt_new(VT_F32, VT_DIMS(Pmax, DIM / 2)),
                vt_new(VT_F32, VT_DIMS(Pmax, DIM / 2))};
    vt_fill_normal(t.vecinfer_cb, rng, 0.0, 1.0);
    for (int64_t i = 0; i < DIM; i++) vt_set(t.vecinfer_sm, i, 0.5 + (double)(i % 7) / 4.0);
    vt_fill_normal(t.cv_cb, rng, 0.0, 0.7);
    for (int64_t p = 0; p < Pmax; p++)
        for (int64_t i = 0; i < DIM / 2; i++) {
            const double th = (double)p * pow(10000.0, -2.0 * (double)i / DIM);
            vt_set(t.cos, p * (DIM / 2) + i, cos(th));
            vt_set(t.sin, p * (DIM / 2) + i, sin(th));
        }
    return t;
}

static void free_tables(tables *t)
{
    vt_free(t->vecinfer_cb), vt_free(t->vecinfer_sm), vt_free(t->cv_cb), vt_free(t->cos), vt_free(t->sin);
}

/* Every key method (with a value method each), and every value method. */
static int methods(const tables *t, method *out)
{
    int n = 0;
#define M(nm, ...) out[n++] = (method){nm, __VA_ARGS__}
    M("f16", {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}});
    M("kivi2", {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 16}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 16}});
    M("kivi4", {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32}, {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 32}});
    M("kivi_int8/codebook", {{.method = VQ_KEY_KIVI, .bits = 8, .group_size = 8}, {.method = VQ_VALUE_CODEBOOK}});
    M("kivi4/turbo2", {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32}, {.method = VQ_VALUE_TURBO, .bits = 2}});
    M("kivimix42/turbo2", {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 16}, {.method = VQ_VALUE_TURBO, .bits = 2}});
    M("kivimix37/f16", {{.method = VQ_KEY_KIVI_MIX, .bits = 3, .bits2 = 7, .group_size = 32}, {.method = VQ_VALUE_F16}});
    /* W wide channels other than D/2: byte-aligned parts (whole-row unpacks) and not (W = 3, 63) */
    M("kivimix42w20/turbo2h", {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 16, .wide_channels = 20},
                               {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true}});
    M("kivimix24w3/turbo3h", {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 32, .wide_channels = 3},
                              {.method = VQ_VALUE_TURBO, .bits = 3, .scale_f16 = true}});
    M("kivimix13w63/turbo8h", {{.method = VQ_KEY_KIVI_MIX, .bits = 1, .bits2 = 3, .group_size = 16, .wide_channels = 63},
                               {.method = VQ_VALUE_TURBO, .bits = 8, .scale_f16 = true}});
    M("turbo1", {{.method = VQ_KEY_TURBO, .bits = 1}, {.method = VQ_VALUE_TURBO, .bits = 1}});
    M("turbo3nc", {{.method = VQ_KEY_TURBO, .bits = 3, .norm_correct = true}, {.method = VQ_VALUE_TURBO, .bits = 3}});
    M("turbo8/kivi2", {{.method = VQ_KEY_TURBO, .bits = 8}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}});
    M("rvq22/turbo4", {{.method = VQ_KEY_TURBO_RVQ, .bits = 2, .bits2 = 2}, {.method = VQ_VALUE_TURBO, .bits = 4}});
    M("rabitq-ham", {{.method = VQ_KEY_RABITQ}, {.method = VQ_VALUE_CODEBOOK}});
    M("rabitq-exact", {{.method = VQ_KEY_RABITQ, .rabitq_score = VQ_RABITQ_SCORE_EXACT, .rabitq_mag = VQ_RABITQ_MAG_UNBIASED},
                       {.method = VQ_VALUE_F16}});
    M("qjl", {{.method = VQ_KEY_QJL, .qjl_sketch = 96}, {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 16}});
    M("pq", {{.method = VQ_KEY_VECINFER, .codebook = t->vecinfer_cb, .smooth = t->vecinfer_sm}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}});
    M("commvq", {{.method = VQ_KEY_COMMVQ, .codebook = t->cv_cb, .cos_freqs = t->cos, .sin_freqs = t->sin},
                 {.method = VQ_VALUE_F16}});
#undef M
    return n;
}

/* The queries of one attend: [S, Hq, Sq, D] f32, and their rotation by the
 * key signs [S][Hq][Sq][D] (for the Hamming reference). */
static float *rotated_queries(vq_ctx *ctx, const vq_cache *c, int l, const DLTensor *q)
{
    const vq_cache_layer *L = &c->layers[l];
    if (L->cfg.keys.method != VQ_KEY_RABITQ) return NULL;
    DLTensor *y = vt_like(q, VT_F32);
    DLTensor *diag = ref_table(&L->tables[VQ_CT_KDIAG]);
    VT_OK(ctx, vq_hadamard(ctx, q, diag, false, y));
    float *out = malloc(vt_bytes(y));
    memcpy(out, y->data, vt_bytes(y));
    vt_free(y), vt_free(diag);
    return out;
}

/* Attends layer l of sequences ids[0..S) (lengths len[]) with queries q and
 * checks out and lse against the reference. tol: relative L2 per sequence.
 * KIVI pages in the exact F32 arithmetic (this checks what the cache
 * stores); check_attend_arith takes another (test_kivi_arith). */
static void check_attend_arith(vq_ctx *ctx, const char *what, vq_cache *c, int l, const ct_store *st,
                               const int64_t *ids, const int64_t *len, int S, int64_t Sq, bool causal,
                               DLTensor *pos_all, double tol, vq_key_scores ks, vq_value_accum va, DLTensor *out_copy)
{
    vq_rng rng;
    vq_rng_seed(&rng, 99 + (uint64_t)S);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(S, HQ, Sq, DIM)), *out = vt_new(VT_F32, VT_DIMS(S, HQ, Sq, DIM));
    DLTensor *lse = vt_new(VT_F32, VT_DIMS(S, HQ, Sq));
    vt_fill_normal(q, &rng, 0.0, 1.0);
    const vq_cache_attend_opts opts = {.causal = causal, .lse_out = lse, .key_scores = ks, .value_accum = va};
    VT_OK(ctx, vq_cache_attend(c, l, S, ids, q, out, &opts));
    if (out_copy) memcpy(out_copy->data, out->data, vt_bytes(out));
    float *qrot = rotated_queries(ctx, c, l, q);
    const double scale = (double)(1.0f / sqrtf((float)DIM));
    double *ref = malloc(sizeof(double) * (size_t)(HQ * Sq * DIM)), *rl = malloc(sizeof(double) * (size_t)(HQ * Sq));
    for (int s = 0; s < S; s++) {
        DLTensor *pos = NULL;
        if (pos_all) {
            pos = vt_new(VT_I32, VT_DIMS(len[s] ? len[s] : 1));
            for (int64_t t = 0; t < len[s]; t++) vt_set(pos, t, (double)t);
        }
        ref_layer r = ref_build(ctx, c, l, st, s, len[s], pos);
        const float *qs = (const float *)q->data + (int64_t)s * HQ * Sq * DIM;
        ref_attend(&r, HQ, Sq, qs, qrot ? qrot + (int64_t)s * HQ * Sq * DIM : NULL, scale, causal, ref, rl);
        double err, lerr;
        ref_errors((const float *)out->data + (int64_t)s * HQ * Sq * DIM, ref, HQ * Sq * DIM,
                   (const float *)lse->data + (int64_t)s * HQ * Sq, rl, HQ * Sq, &err, &lerr);
        VT_CHECK(err <= tol && lerr <= tol, "%s seq %d (n %lld, Sq %lld%s): out rel err %.3g, lse err %.3g (tol %.1g)",
                 what, s, (long long)len[s], (long long)Sq, causal ? " causal" : "", err, lerr, tol);
        ref_free(&r);
        vt_free(pos);
    }
    free(ref), free(rl), free(qrot);
    vt_free(q), vt_free(out), vt_free(lse);
}

static void check_attend(vq_ctx *ctx, const char *what, vq_cache *c, int l, const ct_store *st, const int64_t *ids,
                         const int64_t *len, int S, int64_t Sq, bool causal, DLTensor *pos_all, double tol)
{
    check_attend_arith(ctx, what, c, l, st, ids, len, S, Sq, causal, pos_all, tol, VQ_KEY_SCORES_F32,
                       VQ_VALUE_ACCUM_F32, NULL);
}

/* Tolerance of cache vs reference. The reference decodes with the same
 * codes; the kernels add only f32 rounding: scores s = scale q.k_hat with
 * |q| ~ 8, |k_hat| ~ 12 (outliers) at D = 64 carry ~ D 2^-24 |q||k| scale
 * ~ 1e-5 absolute (rotations: log2 D more steps), and softmax maps an
 * absolute score error e to a relative output error <= 2e; the f32 P.V sums
 * add ~ sqrt(n) 2^-24. 5e-5 covers that with margin and is far below any
 * codec error (>= 1e-3), which a wrong code or token would produce. */
#define CACHE_TOL 5e-5

/* Sequences of lengths 1, 7, 97 (across pages and KIVI groups), appended
 * as one batch call (1 token each), then per sequence in chunks; layer 1
 * gets the same tokens all at once. Decode attends of all sequences in one
 * call; a causal prefill attend of Sq = 5. */
static void methods_isa(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 7);
    tables tb = make_tables(&rng, 128);
    method ms[24];
    const int nm = methods(&tb, ms);
    const int64_t len[3] = {1, 7, 97};
    ct_store st = ct_store_new(3, HKV, 97, DIM, &rng);
    /* every method with and without a window on the scalar ISA; each SIMD
     * ISA runs half of those pairs, alternating (sanitizer time in CI) */
    static int isa_round = 0;
    const int parity = isa_round++ % 2;
    for (int R = 0; R <= 5; R += 5)
        for (int mi = 0; mi < nm; mi++) {
            if ((mi + R / 5) % 2 != parity && strcmp(isa, "scalar") != 0) continue;
            vq_cache *c = ct_cache(ctx, &ms[mi].lc, 2, HKV, HQ, DIM, PAGE, R, 8, 4);
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
                VT_CHECK(vq_cache_seq_length(c, ids[s], 0) == len[s], "length %lld", (long long)len[s]);
            }
            char what[96];
            snprintf(what, sizeof what, "%s %s R%d", isa, ms[mi].name, R);
            const bool commvq = ms[mi].lc.keys.method == VQ_KEY_COMMVQ;
            for (int l = 0; l < 2; l++) check_attend(ctx, what, c, l, &st, ids, len, 3, 1, false, commvq ? st.k : NULL, CACHE_TOL);
            check_attend(ctx, what, c, 0, &st, ids, len, 3, 5, true, commvq ? st.k : NULL, CACHE_TOL);
            vq_cache_free(c);
        }
    ct_store_free(&st);
    free_tables(&tb);
}

static void test_methods(void) { vt_for_each_isa(2, methods_isa); }

/* The arithmetic of KIVI pages (vq_cache_attend_opts key_scores and
 * value_accum): AUTO gives INT8's output bit for bit where the integer
 * scores apply (2-bit keys at D = 64: half chunks; mixed 2/4-bit keys with
 * a multiple of 4 wide channels), which differs from F32's;
 * each is within its tolerance of the exact reference: F32 to f32
 * rounding, INT8 to KIVI_INT8_TOL (the query's int8 rounding, at most
 * max|x| / 254 per unit of code in each score: 0.006-0.020 relative L2 on
 * these unit-normal queries, measured). A bad enum value is refused. */
enum { KIVI_SEQS = 2 };
#define KIVI_INT8_TOL 0.06

static void kivi_arith_isa(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 11);
    const int64_t len[KIVI_SEQS] = {45, 97};
    ct_store st = ct_store_new(KIVI_SEQS, HKV, 97, DIM, &rng);
    static const vq_cache_layer_config lcs[] = {
        {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 32}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
        {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 16}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
        /* mixed widths on the 4-bit integer path: half the channels wide, and 20 of 64 */
        {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 16}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
        {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 32, .wide_channels = 20},
         {.method = VQ_VALUE_TURBO, .bits = 2}},
    };
    for (size_t li = 0; li < sizeof lcs / sizeof lcs[0]; li++) {
        vq_cache *c = ct_cache(ctx, &lcs[li], 1, HKV, HQ, DIM, PAGE, 0, 8, 4);
        int64_t ids[KIVI_SEQS];
        for (int s = 0; s < KIVI_SEQS; s++) {
            VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
            VT_OK(ctx, ct_append(c, 0, &st, ids, s, 1, 0, len[s]));
        }
        DLTensor *o[3];
        static const vq_key_scores kss[3] = {VQ_KEY_SCORES_F32, VQ_KEY_SCORES_AUTO, VQ_KEY_SCORES_INT8};
        static const double tols[3] = {CACHE_TOL, KIVI_INT8_TOL, KIVI_INT8_TOL};
        for (int a = 0; a < 3; a++) {
            char what[64];
            snprintf(what, sizeof what, "%s kivi arith %zu scores %d", isa, li, (int)kss[a]);
            o[a] = vt_new(VT_F32, VT_DIMS(KIVI_SEQS, HQ, 1, DIM));
            check_attend_arith(ctx, what, c, 0, &st, ids, len, KIVI_SEQS, 1, false, NULL, tols[a], kss[a],
                               kss[a] == VQ_KEY_SCORES_F32 ? VQ_VALUE_ACCUM_F32 : VQ_VALUE_ACCUM_AUTO, o[a]);
        }
        VT_CHECK(memcmp(o[1]->data, o[2]->data, vt_bytes(o[1])) == 0, "%s kivi arith %zu: AUTO differs from INT8", isa,
                 li);
        VT_CHECK(memcmp(o[0]->data, o[1]->data, vt_bytes(o[0])) != 0, "%s kivi arith %zu: AUTO equals F32", isa, li);
        DLTensor *q = vt_new(VT_F32, VT_DIMS(1, HQ, 1, DIM)), *o1 = vt_new(VT_F32, VT_DIMS(1, HQ, 1, DIM));
        vt_fill_normal(q, &rng, 0.0, 1.0);
        const vq_cache_attend_opts bad_ks = {.key_scores = (vq_key_scores)7}, bad_va = {.value_accum = (vq_value_accum)-1};
        VT_CHECK(vq_cache_attend(c, 0, 1, ids, q, o1, &bad_ks) == VQ_ERR_INVALID_ARGUMENT &&
                     strstr(vq_ctx_last_error(ctx), "opts->key_scores") != NULL,
                 "%s bad key_scores: %s", isa, vq_ctx_last_error(ctx));
        VT_CHECK(vq_cache_attend(c, 0, 1, ids, q, o1, &bad_va) == VQ_ERR_INVALID_ARGUMENT &&
                     strstr(vq_ctx_last_error(ctx), "opts->value_accum") != NULL,
                 "%s bad value_accum: %s", isa, vq_ctx_last_error(ctx));
        for (int a = 0; a < 3; a++) vt_free(o[a]);
        vt_free(q), vt_free(o1);
        vq_cache_free(c);
    }
    ct_store_free(&st);
}

static void test_kivi_arith(void) { vt_for_each_isa(2, kivi_arith_isa); }

/* The arithmetic of TurboQuant pages at D = 128 (veloxquant.h: vq_value_accum
 * "TurboQuant values", vq_key_scores "TurboQuant keys"): AUTO is INT8 bit
 * for bit for 2- and 4-bit codes where the ISA has the SIMD kernel
 * (cb8_fast for the values, cbqk8_fast for the keys), and for 3-bit codes
 * where the nibble conversion is SIMD too (nibbles3_fast), else F32; INT8
 * differs from F32 by about the header's typical error (values: under 1 %
 * relative here; keys: the query's int8 rounding, as KIVI's integer
 * scores), for 2-, 3- and 4-bit codes. (Their bounds against the
 * exact attention: tests/test_attention_turbo_{pv8,qk8}.c.) */
static void turbo_arith_isa(vq_ctx *ctx, const char *isa)
{
    enum { D128 = 128, SEQS = 2 };
    vq_rng rng;
    vq_rng_seed(&rng, 13);
    const int64_t len[SEQS] = {70, 200};
    ct_store st = ct_store_new(SEQS, HKV, 200, D128, &rng);
    const vq_attn_kernels *kern = vq_attn_kernels_for(ctx->isa);
    for (int keys = 0; keys < 2; keys++)
        for (int bits = 2; bits <= 4; bits++) {
            const vq_cache_layer_config lc =
                keys ? (vq_cache_layer_config){{.method = VQ_KEY_TURBO, .bits = bits, .norm_correct = true},
                                               {.method = VQ_VALUE_F16}}
                     : (vq_cache_layer_config){{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32},
                                               {.method = VQ_VALUE_TURBO, .bits = bits}};
            vq_cache *c = ct_cache(ctx, &lc, 1, HKV, HQ, D128, PAGE, 0, 8, 4);
            int64_t ids[SEQS];
            for (int s = 0; s < SEQS; s++) {
                VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
                VT_OK(ctx, ct_append(c, 0, &st, ids, s, 1, 0, len[s]));
            }
            DLTensor *q = vt_new(VT_F32, VT_DIMS(SEQS, HQ, 1, D128)), *o[3];
            vt_fill_normal(q, &rng, 0.0, 1.0);
            static const vq_key_scores kss[3] = {VQ_KEY_SCORES_F32, VQ_KEY_SCORES_AUTO, VQ_KEY_SCORES_INT8};
            static const vq_value_accum vas[3] = {VQ_VALUE_ACCUM_F32, VQ_VALUE_ACCUM_AUTO, VQ_VALUE_ACCUM_INT8};
            for (int a = 0; a < 3; a++) { /* F32, AUTO, INT8 of the varied part; the other F32 */
                o[a] = vt_new(VT_F32, VT_DIMS(SEQS, HQ, 1, D128));
                const vq_cache_attend_opts opts = {.key_scores = keys ? kss[a] : VQ_KEY_SCORES_F32,
                                                   .value_accum = keys ? VQ_VALUE_ACCUM_F32 : vas[a]};
                VT_OK(ctx, vq_cache_attend(c, 0, SEQS, ids, q, o[a], &opts));
            }
            /* 3-bit words: only where they turn into nibbles in SIMD code */
            const bool auto_int8 = (keys ? kern->cbqk8_fast : kern->cb8_fast) && (bits != 3 || kern->nibbles3_fast);
            VT_CHECK(memcmp(o[1]->data, o[auto_int8 ? 2 : 0]->data, vt_bytes(o[1])) == 0,
                     "%s turbo%d %s: AUTO is not %s", isa, bits, keys ? "keys" : "values", auto_int8 ? "INT8" : "F32");
            VT_CHECK(memcmp(o[0]->data, o[2]->data, vt_bytes(o[0])) != 0, "%s turbo%d %s: INT8 equals F32", isa, bits,
                     keys ? "keys" : "values");
            double num = 0.0, den = 0.0;
            for (int64_t e = 0; e < vt_numel(o[0]); e++) {
                const double x = vt_get(o[0], e), y = vt_get(o[2], e);
                num += (x - y) * (x - y);
                den += x * x;
            }
            /* keys: the query's int8 rounding, as KIVI's (KIVI_INT8_TOL); values: ~1e-3 C S per channel */
            VT_CHECK(sqrt(num / den) <= (keys ? KIVI_INT8_TOL : 1e-2), "%s turbo%d %s: INT8 against F32, rel err %.3g",
                     isa, bits, keys ? "keys" : "values", sqrt(num / den));
            for (int a = 0; a < 3; a++) vt_free(o[a]);
            vt_free(q);
            vq_cache_free(c);
        }
    ct_store_free(&st);
}

static void test_turbo_arith(void) { vt_for_each_isa(2, turbo_arith_isa); }

/* The f16 method equals exact attention over the f16-rounded tokens, and
 * f32 inputs are rounded to f16 (same cache as f16 inputs, bit for bit). */
static void test_f16_exact(void)
{
    vq_ctx *ctx = vt_ctx(3);
    vq_rng rng;
    vq_rng_seed(&rng, 11);
    ct_store st = ct_store_new(2, HKV, 300, DIM, &rng);
    const vq_cache_layer_config lc = {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
    vq_cache *a = ct_cache(ctx, &lc, 1, HKV, HQ, DIM, 64, 0, 16, 0), *b = ct_cache(ctx, &lc, 1, HKV, HQ, DIM, 64, 0, 16, 0);
    int64_t ids[2], idb[2];
    for (int s = 0; s < 2; s++) {
        VT_OK(ctx, vq_cache_seq_add(a, &ids[s]));
        VT_OK(ctx, vq_cache_seq_add(b, &idb[s]));
    }
    VT_OK(ctx, ct_append(a, 0, &st, ids, 0, 2, 0, 300));
    /* b: the same tokens as f32 */
    DLTensor *k32 = vt_like(st.k, VT_F32), *v32 = vt_like(st.v, VT_F32);
    for (int64_t i = 0; i < vt_numel(k32); i++) vt_set(k32, i, vt_get(st.k, i)), vt_set(v32, i, vt_get(st.v, i));
    VT_OK(ctx, vq_cache_append(b, 0, 2, idb, k32, v32, NULL));
    const int64_t len[2] = {300, 300};
    check_attend(ctx, "f16 exact", a, 0, &st, ids, len, 2, 1, false, NULL, 2e-6);
    DLTensor *q = vt_new(VT_F16, VT_DIMS(2, HQ, 3, DIM)), *oa = vt_new(VT_F32, VT_DIMS(2, HQ, 3, DIM));
    DLTensor *ob = vt_like(oa, VT_F32);
    vt_fill_normal(q, &rng, 0, 1);
    VT_OK(ctx, vq_cache_attend(a, 0, 2, ids, q, oa, NULL));
    VT_OK(ctx, vq_cache_attend(b, 0, 2, idb, q, ob, NULL));
    VT_CHECK(memcmp(oa->data, ob->data, vt_bytes(oa)) == 0, "f32 input differs from f16 input");
    vt_free(q), vt_free(oa), vt_free(ob), vt_free(k32), vt_free(v32);
    vq_cache_free(a), vq_cache_free(b);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

/* out of a decode attend of all sequences (fixed queries) -> malloc'd copy */
static float *decode_out(vq_ctx *ctx, vq_cache *c, int l, const int64_t *ids, int S, uint64_t seed)
{
    return ct_decode_out(ctx, c, l, ids, S, HQ, DIM, seed);
}

/* Token by token, in uneven chunks, and all at once: bit-identical caches
 * (attention outputs) for every method, with and without a window; run for
 * the f16 window and the 8-bit one (test_cache_window.c: its reference). */
static void token_by_token(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 13);
    tables tb = make_tables(&rng, 128);
    method ms[24];
    const int nm = methods(&tb, ms);
    ct_store st = ct_store_new(1, HKV, 70, DIM, &rng);
    for (int R = 0; R <= 3; R += 3)
        for (int mi = 0; mi < nm; mi++) {
            vq_cache *a = ct_cache(ctx, &ms[mi].lc, 1, HKV, HQ, DIM, PAGE, R, 8, 0);
            vq_cache *b = ct_cache(ctx, &ms[mi].lc, 1, HKV, HQ, DIM, PAGE, R, 8, 0);
            vq_cache *d = ct_cache(ctx, &ms[mi].lc, 1, HKV, HQ, DIM, PAGE, R, 8, 0);
            int64_t ia, ib, id;
            VT_OK(ctx, vq_cache_seq_add(a, &ia));
            VT_OK(ctx, vq_cache_seq_add(b, &ib));
            VT_OK(ctx, vq_cache_seq_add(d, &id));
            VT_OK(ctx, ct_append(a, 0, &st, &ia, 0, 1, 0, 70));
            for (int64_t t = 0; t < 70; t++) VT_OK(ctx, ct_append(b, 0, &st, &ib, 0, 1, t, 1));
            for (int64_t t = 0, m = 3; t < 70; t += m, m = m * 2 + 1)
                VT_OK(ctx, ct_append(d, 0, &st, &id, 0, 1, t, t + m <= 70 ? m : 70 - t));
            float *oa = decode_out(ctx, a, 0, &ia, 1, 5), *ob = decode_out(ctx, b, 0, &ib, 1, 5);
            float *od = decode_out(ctx, d, 0, &id, 1, 5);
            const size_t bytes = sizeof(float) * HQ * DIM;
            VT_CHECK(memcmp(oa, ob, bytes) == 0 && memcmp(oa, od, bytes) == 0, "%s R%d window %d: token by token "
                     "differs", ms[mi].name, R, (int)ct_window);
            free(oa), free(ob), free(od);
            vq_cache_free(a), vq_cache_free(b), vq_cache_free(d);
        }
    ct_store_free(&st);
    free_tables(&tb);
    vq_ctx_free(ctx);
}

/* Where a sequence's pages lie changes nothing, bit for bit: one sequence
 * whose pages are consecutive in one chunk (attended as one run of pages)
 * against the same tokens appended page by page in turn with a second
 * sequence into a pool of 2-page chunks (every page its own run, runs across
 * chunks), for every method, decode and causal prefill, then again after a
 * fork's copy-on-write page. */
static void pages_isa(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 23);
    tables tb = make_tables(&rng, 256);
    method ms[24];
    const int nm = methods(&tb, ms);
    enum { N = 5 * PAGE + 9 };
    ct_store st = ct_store_new(2, HKV, N, DIM, &rng);
    for (int mi = 0; mi < nm; mi++) {
        vq_cache *a = ct_cache(ctx, &ms[mi].lc, 1, HKV, HQ, DIM, PAGE, 3, 16, 0);
        vq_cache *b = ct_cache(ctx, &ms[mi].lc, 1, HKV, HQ, DIM, PAGE, 3, 2, 2);
        int64_t ia, ib[2];
        VT_OK(ctx, vq_cache_seq_add(a, &ia));
        VT_OK(ctx, ct_append(a, 0, &st, &ia, 0, 1, 0, N));
        for (int s = 0; s < 2; s++) VT_OK(ctx, vq_cache_seq_add(b, &ib[s]));
        for (int64_t t = 0; t < N; t += PAGE)
            for (int s = 0; s < 2; s++) VT_OK(ctx, ct_append(b, 0, &st, ib, s, 1, t, t + PAGE <= N ? PAGE : N - t));
        for (int round = 0; round < 2; round++) {
            for (int Sq = 1; Sq <= 5; Sq += 4) {
                DLTensor *q = vt_new(VT_F32, VT_DIMS(1, HQ, Sq, DIM)), *oa = vt_new(VT_F32, VT_DIMS(1, HQ, Sq, DIM));
                DLTensor *ob = vt_new(VT_F32, VT_DIMS(1, HQ, Sq, DIM));
                vt_fill_normal(q, &rng, 0, 1);
                vt_poison(oa), vt_poison(ob);
                const vq_cache_attend_opts o = {.causal = Sq > 1};
                VT_OK(ctx, vq_cache_attend(a, 0, 1, &ia, q, oa, &o));
                VT_OK(ctx, vq_cache_attend(b, 0, 1, &ib[0], q, ob, &o));
                VT_CHECK(memcmp(oa->data, ob->data, vt_bytes(oa)) == 0, "%s %s round %d Sq %d: pages in runs differ "
                         "from scattered pages", isa, ms[mi].name, round, Sq);
                vt_free(q), vt_free(oa), vt_free(ob);
            }
            /* fork both, append to the forks (a copy-on-write of the last page), attend the forks */
            int64_t fa[2], fb[2]; /* [1]: the fork (ct_append takes store sequence 1 at ids[1]) */
            VT_OK(ctx, vq_cache_seq_fork(a, ia, &fa[1]));
            VT_OK(ctx, vq_cache_seq_fork(b, ib[0], &fb[1]));
            VT_OK(ctx, ct_append(a, 0, &st, fa, 1, 1, 0, 7));
            VT_OK(ctx, ct_append(b, 0, &st, fb, 1, 1, 0, 7));
            ia = fa[1], ib[0] = fb[1];
        }
        vq_cache_free(a), vq_cache_free(b);
    }
    ct_store_free(&st);
    free_tables(&tb);
}

static void test_page_runs(void) { vt_for_each_isa(2, pages_isa); }

/* Sequences of lengths 1, 7, 97, 4097 in one batch equal each attended alone
 * (up to the split-merge order: f32 rounding), and the batch also matches
 * the reference. */
static void test_batch_vs_alone(void)
{
    vq_ctx *ctx = vt_ctx(4);
    vq_rng rng;
    vq_rng_seed(&rng, 17);
    const int64_t len[4] = {1, 7, 97, 4097};
    ct_store st = ct_store_new(4, HKV, 4097, DIM, &rng);
    const vq_cache_layer_config cfgs[2] = {
        {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 32}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}},
        {{.method = VQ_KEY_TURBO, .bits = 3}, {.method = VQ_VALUE_TURBO, .bits = 3}}};
    for (int ci = 0; ci < 2; ci++) {
        vq_cache *c = ct_cache(ctx, &cfgs[ci], 1, HKV, HQ, DIM, 256, 4, 4, 4);
        int64_t ids[4];
        for (int s = 0; s < 4; s++) {
            VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
            VT_OK(ctx, ct_append(c, 0, &st, ids, s, 1, 0, len[s]));
        }
        float *all = decode_out(ctx, c, 0, ids, 4, 3);
        vq_rng qr;
        vq_rng_seed(&qr, 3);
        DLTensor *q = vt_new(VT_F32, VT_DIMS(4, HQ, 1, DIM)), *o1 = vt_new(VT_F32, VT_DIMS(1, HQ, 1, DIM));
        vt_fill_normal(q, &qr, 0, 1);
        for (int s = 0; s < 4; s++) {
            DLTensor *q1 = vt_view(q, VT_DIMS(1, HQ, 1, DIM));
            q1->byte_offset = (uint64_t)s * HQ * DIM * 4;
            VT_OK(ctx, vq_cache_attend(c, 0, 1, &ids[s], q1, o1, NULL));
            double num = 0, den = 0;
            for (int64_t i = 0; i < HQ * DIM; i++) {
                const double a = all[s * HQ * DIM + i], b = ((float *)o1->data)[i];
                num += (a - b) * (a - b), den += b * b;
            }
            /* only the split-merge order differs: f32 rounding of ~n/32 block merges */
            VT_CHECK(sqrt(num / den) <= 1e-5, "cfg %d seq %d (n %lld): batch vs alone %.3g", ci, s, (long long)len[s],
                     sqrt(num / den));
            vt_free_view(q1);
        }
        check_attend(ctx, ci ? "batch turbo3" : "batch kivi2", c, 0, &st, ids, len, 4, 1, false, NULL, CACHE_TOL);
        free(all);
        vt_free(q), vt_free(o1);
        vq_cache_free(c);
    }
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

/* Append A + B, truncate to |A|, append C == append A + C, bit for bit,
 * where the header promises it; a KIVI cut inside an encoded group is
 * refused and changes nothing. */
static void truncate_cases(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 19);
    ct_store st = ct_store_new(2, HKV, 120, DIM, &rng); /* seq 0: A + B, seq 1: A + C (A shared) */
    for (int64_t h = 0; h < HKV; h++) /* seq 1's first 50 tokens = seq 0's */
        for (int64_t i = 0; i < 50 * DIM; i++) {
            vt_set(st.k, (HKV + h) * 120 * DIM + i, vt_get(st.k, h * 120 * DIM + i));
            vt_set(st.v, (HKV + h) * 120 * DIM + i, vt_get(st.v, h * 120 * DIM + i));
        }
    const struct {
        vq_cache_layer_config lc;
        int R;
        int64_t cut_from, cut_to;
    } cases[] = {
        {{{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}}, 0, 90, 50},
        {{{.method = VQ_KEY_TURBO, .bits = 2}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 16}}, 0, 90, 50},
        {{{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 16}, {.method = VQ_VALUE_F16}}, 0, 60, 50}, /* inside the window */
        {{{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 16}, {.method = VQ_VALUE_F16}}, 0, 90, 48}, /* a group boundary */
        {{{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 16}, {.method = VQ_VALUE_F16}}, 8, 56, 50}, /* rollback in R */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        vq_cache *a = ct_cache(ctx, &cases[ci].lc, 1, HKV, HQ, DIM, PAGE, cases[ci].R, 8, 0);
        vq_cache *b = ct_cache(ctx, &cases[ci].lc, 1, HKV, HQ, DIM, PAGE, cases[ci].R, 8, 0);
        int64_t ia, ib;
        VT_OK(ctx, vq_cache_seq_add(a, &ia));
        VT_OK(ctx, vq_cache_seq_add(b, &ib));
        const int64_t cut = cases[ci].cut_to;
        VT_OK(ctx, ct_append(a, 0, &st, &ia, 0, 1, 0, cases[ci].cut_from));
        VT_OK(ctx, vq_cache_seq_truncate(a, ia, cut));
        VT_CHECK(vq_cache_seq_length(a, ia, 0) == cut, "length after truncate");
        /* re-append seq 1's tokens [cut, 120) (A's tokens are equal below 50) */
        int64_t one = ia;
        ct_view hk, hv;
        VT_OK(ctx, vq_cache_append(a, 0, 1, &one, ct_slice(&hk, &st, st.k, 1, 1, cut, 120 - cut),
                                   ct_slice(&hv, &st, st.v, 1, 1, cut, 120 - cut), NULL));
        const int64_t s1 = 1, ids1[2] = {0, ib};
        (void)s1;
        VT_OK(ctx, ct_append(b, 0, &st, ids1, 1, 1, 0, 120));
        float *oa = decode_out(ctx, a, 0, &ia, 1, 8), *ob = decode_out(ctx, b, 0, &ib, 1, 8);
        VT_CHECK(memcmp(oa, ob, sizeof(float) * HQ * DIM) == 0, "truncate case %zu window %d differs", ci,
                 (int)ct_window);
        free(oa), free(ob);
        vq_cache_free(a), vq_cache_free(b);
    }
    /* a KIVI cut inside an encoded group: refused, nothing changes */
    const vq_cache_layer_config kv = {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 16}, {.method = VQ_VALUE_F16}};
    vq_cache *c = ct_cache(ctx, &kv, 1, HKV, HQ, DIM, PAGE, 0, 8, 0);
    int64_t id;
    VT_OK(ctx, vq_cache_seq_add(c, &id));
    VT_OK(ctx, ct_append(c, 0, &st, &id, 0, 1, 0, 70));
    float *before = decode_out(ctx, c, 0, &id, 1, 9);
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "cuts an encoded KIVI key group", vq_cache_seq_truncate(c, id, 40));
    float *after = decode_out(ctx, c, 0, &id, 1, 9);
    VT_CHECK(memcmp(before, after, sizeof(float) * HQ * DIM) == 0 && vq_cache_seq_length(c, id, 0) == 70,
             "a refused truncate changed the cache");
    free(before), free(after);
    vq_cache_free(c);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

/* Fork after a prefill of 45 tokens (the last page partly filled and
 * shared): both then grow differently and each equals a fresh cache of its
 * tokens; removing the source keeps the fork; shared pages count once. */
static void fork_cases(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 23);
    ct_store st = ct_store_new(2, HKV, 80, DIM, &rng);
    for (int64_t h = 0; h < HKV; h++) /* seq 1 shares seq 0's first 45 tokens */
        for (int64_t i = 0; i < 45 * DIM; i++) {
            vt_set(st.k, (HKV + h) * 80 * DIM + i, vt_get(st.k, h * 80 * DIM + i));
            vt_set(st.v, (HKV + h) * 80 * DIM + i, vt_get(st.v, h * 80 * DIM + i));
        }
    const vq_cache_layer_config lc = {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 16},
                                      {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 16}};
    vq_cache *c = ct_cache(ctx, &lc, 2, HKV, HQ, DIM, PAGE, 4, 8, 0);
    vq_cache *fresh = ct_cache(ctx, &lc, 2, HKV, HQ, DIM, PAGE, 4, 8, 0);
    int64_t src, dst, f[2];
    VT_OK(ctx, vq_cache_seq_add(c, &src));
    for (int l = 0; l < 2; l++) VT_OK(ctx, ct_append(c, l, &st, &src, 0, 1, 0, 45));
    vq_cache_memory_report m1, m2;
    VT_OK(ctx, vq_cache_memory(c, &m1));
    VT_OK(ctx, vq_cache_seq_fork(c, src, &dst));
    VT_OK(ctx, vq_cache_memory(c, &m2));
    VT_CHECK(m2.code_bytes == m1.code_bytes && m2.tokens == 2 * m1.tokens && m2.sequences == 2,
             "fork: shared pages must count once (code %lld -> %lld, tokens %lld -> %lld)", (long long)m1.code_bytes,
             (long long)m2.code_bytes, (long long)m1.tokens, (long long)m2.tokens);
    for (int l = 0; l < 2; l++) {
        VT_OK(ctx, ct_append(c, l, &st, &src, 0, 1, 45, 35));
        const int64_t two[2] = {-1, dst};
        VT_OK(ctx, ct_append(c, l, &st, two, 1, 1, 45, 20));
    }
    for (int s = 0; s < 2; s++) {
        VT_OK(ctx, vq_cache_seq_add(fresh, &f[s]));
        for (int l = 0; l < 2; l++) VT_OK(ctx, ct_append(fresh, l, &st, f, s, 1, 0, s ? 65 : 80));
    }
    for (int l = 0; l < 2; l++) {
        const int64_t mine[2] = {src, dst};
        float *a = decode_out(ctx, c, l, mine, 2, 4), *b = decode_out(ctx, fresh, l, f, 2, 4);
        VT_CHECK(memcmp(a, b, sizeof(float) * 2 * HQ * DIM) == 0, "layer %d: forked sequences differ from fresh ones",
                 l);
        free(a), free(b);
    }
    VT_OK(ctx, vq_cache_seq_remove(c, src));
    VT_CHECK(vq_cache_seq_length(c, src, 0) == -1, "removed sequence still known");
    float *a = decode_out(ctx, c, 1, &dst, 1, 6), *b = decode_out(ctx, fresh, 1, &f[1], 1, 6);
    VT_CHECK(memcmp(a, b, sizeof(float) * HQ * DIM) == 0, "the fork changed when its source was removed");
    free(a), free(b);
    vq_cache_free(c), vq_cache_free(fresh);
    ct_store_free(&st);
    vq_ctx_free(ctx);
}

/* The bit-exactness tests for every window storage (VQ_WINDOW_TURBO at 5
 * bits: codes that straddle words). */
static void both_windows(void (*fn)(void))
{
    for (int w = VQ_WINDOW_F16; w <= VQ_WINDOW_TURBO; w++) {
        ct_window = (vq_cache_window)w;
        ct_window_bits = w == VQ_WINDOW_TURBO ? 5 : 0;
        fn();
    }
    ct_window = VQ_WINDOW_F16;
    ct_window_bits = 0;
}
static void test_token_by_token(void) { both_windows(token_by_token); }
static void test_truncate(void) { both_windows(truncate_cases); }
static void test_fork(void) { both_windows(fork_cases); }

/* Every preset creates (with tables where it needs them), its listed bits
 * per element match the memory report of full pages at D = 128. */
static void test_presets(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 29);
    VT_CHECK(vq_cache_preset_count() >= 11 && vq_cache_preset(vq_cache_preset_count()) == NULL &&
                 vq_cache_preset(-1) == NULL,
             "preset list");
    DLTensor *pq = vt_new(VT_F32, VT_DIMS(32, 256, 4)), *cv = vt_new(VT_F32, VT_DIMS(32, 256, 128));
    DLTensor *cs = vt_new(VT_F32, VT_DIMS(512, 64)), *sn = vt_new(VT_F32, VT_DIMS(512, 64));
    vt_fill_normal(pq, &rng, 0, 1), vt_fill_normal(cv, &rng, 0, 0.2);
    for (int64_t i = 0; i < vt_numel(cs); i++) vt_set(cs, i, 1.0), vt_set(sn, i, 0.0);
    DLTensor *k = vt_new(VT_F16, VT_DIMS(1, 2, 256, 128)), *v = vt_like(k, VT_F16);
    vt_fill_keys(k, &rng, 2, 3.0), vt_fill_normal(v, &rng, 0, 1);
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        vq_cache_layer_config lc;
        VT_CHECK(vq_cache_preset_layer_config(p->name, 128, &lc) == VQ_OK, "%s: layer config", p->name);
        if (p->needs_tables) {
            VT_CHECK(lc.keys.method == VQ_KEY_VECINFER || lc.keys.method == VQ_KEY_COMMVQ, "%s needs tables", p->name);
            lc.keys.codebook = lc.keys.method == VQ_KEY_VECINFER ? pq : cv;
            lc.keys.cos_freqs = cs, lc.keys.sin_freqs = sn;
        }
        const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 128, .page_size = 256,
                                     .capacity_pages = 4, .layers = &lc};
        vq_cache *c = NULL;
        VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
        if (c == NULL) continue;
        int64_t id;
        VT_OK(ctx, vq_cache_seq_add(c, &id));
        VT_OK(ctx, vq_cache_append(c, 0, 1, &id, k, v, NULL));
        vq_cache_memory_report r;
        VT_OK(ctx, vq_cache_memory(c, &r));
        const double pos_bits = lc.keys.method == VQ_KEY_COMMVQ ? 32.0 / (2 * 128) : 0.0; /* one i32 per token */
        VT_CHECK(fabs(r.key_bits_per_element - p->key_bits - pos_bits) < 1e-9 &&
                     fabs(r.value_bits_per_element - p->value_bits) < 1e-9 && r.tokens == 256 && r.residual_bytes == 0,
                 "%s: listed %.3f/%.3f bits, stored %.3f/%.3f", p->name, p->key_bits, p->value_bits,
                 r.key_bits_per_element, r.value_bits_per_element);
        VT_CHECK(r.total_bytes == r.code_bytes + r.param_bytes + r.residual_bytes + r.table_bytes + r.slack_bytes &&
                     r.slack_bytes >= 0,
                 "%s: parts do not add up", p->name);
        vq_cache_free(c);
        if (!p->needs_tables) { /* by name too */
            const vq_cache_config byname = {.n_layers = 2, .n_kv_heads = 2, .n_q_heads = 2, .head_dim = 128,
                                            .preset = p->name};
            VT_OK(ctx, vq_cache_create(ctx, &byname, &c));
            vq_cache_free(c);
        }
    }
    VT_CHECK(vq_cache_preset_layer_config("nope", 128, &(vq_cache_layer_config){0}) == VQ_ERR_INVALID_ARGUMENT,
             "unknown preset accepted");
    vt_free(pq), vt_free(cv), vt_free(cs), vt_free(sn), vt_free(k), vt_free(v);
    vq_ctx_free(ctx);
}

/* f16_layers keeps the chosen layers in f16 whatever the preset. */
static void test_f16_layers(void)
{
    vq_ctx *ctx = vt_ctx(1);
    const int keep[2] = {0, 3};
    const vq_cache_config cfg = {.n_layers = 4, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .preset = "kivi2",
                                 .f16_layers = keep, .n_f16_layers = 2};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    for (int l = 0; c && l < 4; l++) {
        vq_cache_layer_config lc;
        VT_OK(ctx, vq_cache_get_layer_config(c, l, &lc));
        const bool f16 = l == 0 || l == 3;
        VT_CHECK((lc.keys.method == VQ_KEY_F16) == f16 && (lc.values.method == VQ_VALUE_F16) == f16 &&
                     (f16 || (lc.keys.bits == 2 && lc.keys.group_size == 32)),
                 "layer %d", l);
    }
    vq_cache_free(c);
    vq_ctx_free(ctx);
}

/* Tables from a calibration: VECINFER keys (vecinfer2) and codebook values take
 * the fitted tables when their configs leave them NULL; the cache copies
 * them (the calibration is freed before the cache is used). */
static void test_calibration(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 37);
    DLTensor *ks = vt_new(VT_F32, VT_DIMS(2, HKV, 64, DIM)), *vs = vt_like(ks, VT_F32);
    vt_fill_keys(ks, &rng, 2, 3.0), vt_fill_normal(vs, &rng, 0, 1);
    const vq_calibration_config cc = {.vecinfer_subspaces = DIM / 4, .vecinfer_centroids = 16, .value_centroids = 16, .iters = 4};
    vq_calibration *cal = NULL;
    VT_OK(ctx, vq_calibration_fit(ctx, &cc, ks, vs, &cal));
    vq_cache_layer_config layers[2];
    VT_OK(ctx, vq_cache_preset_layer_config("vecinfer2", DIM, &layers[0]));
    layers[1] = (vq_cache_layer_config){{.method = VQ_KEY_F16}, {.method = VQ_VALUE_CODEBOOK}};
    const vq_cache_config cfg = {.n_layers = 2, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM, .page_size = PAGE,
                                 .capacity_pages = 8, .layers = layers, .calibration = cal};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    const vq_cache_config by_name = {.n_layers = 2, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                     .preset = "vecinfer2", .calibration = cal};
    vq_cache *c2 = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &by_name, &c2));
    vq_cache_free(c2);
    vq_calibration_free(cal);
    if (c != NULL) {
        VT_CHECK(c->layers[0].tables[VQ_CT_CODEBOOK].shape[0] == HKV && c->layers[1].tables[VQ_CT_VCENTS].shape[0] == 16,
                 "calibration tables not taken");
        ct_store st = ct_store_new(2, HKV, 50, DIM, &rng);
        int64_t ids[2];
        for (int s = 0; s < 2; s++) VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
        const int64_t len[2] = {50, 50};
        for (int l = 0; l < 2; l++) {
            VT_OK(ctx, ct_append(c, l, &st, ids, 0, 2, 0, 50));
            check_attend(ctx, l ? "calibration codebook values" : "calibration pq", c, l, &st, ids, len, 2, 1, false,
                         NULL, CACHE_TOL);
        }
        ct_store_free(&st);
    }
    vq_cache_free(c);
    vt_free(ks), vt_free(vs);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_methods);
    VT_RUN(test_kivi_arith);
    VT_RUN(test_turbo_arith);
    VT_RUN(test_f16_exact);
    VT_RUN(test_token_by_token);
    VT_RUN(test_page_runs);
    VT_RUN(test_batch_vs_alone);
    VT_RUN(test_truncate);
    VT_RUN(test_fork);
    VT_RUN(test_presets);
    VT_RUN(test_f16_layers);
    VT_RUN(test_calibration);
    return vt_finish();
}
