/* test_attention_nonfinite.c — the header's rule for NaN and ±inf inputs to
 * attention, on every ISA, with and without kv splits (the merge path):
 *   - a query row with a NaN or ±inf element gives a NaN output row;
 *   - a score that is NaN or +inf (from keys, key scales, magnitudes or the
 *     mask) makes its row NaN; a -inf score (mask or data) excludes the token;
 *   - a non-finite value element reaches (as NaN or ±inf) the same column of
 *     every row that can see the token (causal), and no other column;
 *   - a row whose every score is -inf gives 0 whatever the values;
 *   - tokens past a row's causal limit are never read.
 * Paths: vq_fused_sdpa over plain f32 and f16 keys/values (dot and p.V
 * kernels), vq_kivi_fused_attend (affine direct and tile paths),
 * vq_rabitq_fused_attend (Hamming) and vq_rabitq_prefill_attend. */
#include "harness.h"

enum { HQ = 4, HKV = 2, D = 32, SKV = 70 };

/* What a row of out [1,HQ,Sq,D] must look like. */
typedef enum { FINITE, NAN_ROW, ZERO_ROW } row_kind;

static int g_splits;      /* opts num_splits of the current pass */
static const char *g_isa;

static int64_t at(int64_t h, int64_t i, int64_t sq, int64_t c) { return (h * sq + i) * D + c; }

/* Checks row (h, i): kind, and when bad_col >= 0 that column c is non-finite
 * exactly when c == bad_col (the rest finite). */
static void expect_row(const DLTensor *out, int64_t sq, int64_t h, int64_t i, row_kind kind, int bad_col,
                       const char *what)
{
    int nan = 0, nonfinite = 0, nonzero = 0, wrong_col = 0;
    for (int64_t c = 0; c < D; c++) {
        const double x = vt_get(out, at(h, i, sq, c));
        nan += isnan(x);
        nonfinite += !isfinite(x);
        nonzero += x != 0.0;
        if (bad_col >= 0) wrong_col += (c == bad_col) != !isfinite(x);
    }
    switch (kind) {
    case NAN_ROW:
        VT_CHECK(nan == D, "%s (%s, splits %d): row h %lld i %lld: %d of %d NaN", what, g_isa, g_splits,
                 (long long)h, (long long)i, nan, D);
        break;
    case ZERO_ROW:
        VT_CHECK(nonzero == 0, "%s (%s, splits %d): row h %lld i %lld: %d non-zero", what, g_isa, g_splits,
                 (long long)h, (long long)i, nonzero);
        break;
    case FINITE:
        if (bad_col >= 0)
            VT_CHECK(wrong_col == 0, "%s (%s, splits %d): row h %lld i %lld: only column %d should be non-finite "
                     "(%d columns wrong)", what, g_isa, g_splits, (long long)h, (long long)i, bad_col, wrong_col);
        else
            VT_CHECK(nonfinite == 0, "%s (%s, splits %d): row h %lld i %lld: %d non-finite", what, g_isa,
                     g_splits, (long long)h, (long long)i, nonfinite);
        break;
    }
}

/* ---- plain keys and values through vq_fused_sdpa ---- */

typedef struct plain {
    DLTensor *q, *k, *v, *mask, *out;
    int64_t sq;
    bool causal;
} plain;

static plain f16_new(DLDataType kv_dt, int64_t sq, bool causal, uint64_t seed)
{
    plain p = {.sq = sq, .causal = causal};
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    p.q = vt_new(VT_F32, VT_DIMS(1, HQ, sq, D));
    p.k = vt_new(kv_dt, VT_DIMS(1, HKV, SKV, D));
    p.v = vt_new(kv_dt, VT_DIMS(1, HKV, SKV, D));
    p.mask = vt_new(VT_F32, VT_DIMS(1, HQ, sq, SKV));
    p.out = vt_new(VT_F32, VT_DIMS(1, HQ, sq, D));
    vt_fill_normal(p.q, &rng, 0, 1);
    vt_fill_normal(p.k, &rng, 0, 1);
    vt_fill_normal(p.v, &rng, 0, 1);
    for (int64_t i = 0; i < vt_numel(p.mask); i++) vt_set(p.mask, i, 0.0);
    return p;
}

static void f16_free(plain *p)
{
    vt_free(p->q);
    vt_free(p->k);
    vt_free(p->v);
    vt_free(p->mask);
    vt_free(p->out);
}

static void f16_run(vq_ctx *ctx, plain *p)
{
    vt_poison(p->out);
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = p->k};
    const vq_attend_opts opts = {.causal = p->causal, .num_splits = g_splits};
    VT_OK(ctx, vq_fused_sdpa(ctx, p->q, &ek, VT_F16_VALUES(p->v), 0.25f, p->mask, p->out, &opts));
}

static int64_t kv_at(int64_t hk, int64_t t, int64_t c) { return (hk * SKV + t) * D + c; }
static int64_t mask_at(const plain *p, int64_t h, int64_t i, int64_t t) { return (h * p->sq + i) * SKV + t; }

static void f16_cases(vq_ctx *ctx, DLDataType dt)
{
    const double nan = NAN, inf = INFINITY;
    /* finite inputs: finite rows */
    plain p = f16_new(dt, 1, false, 11);
    f16_run(ctx, &p);
    for (int h = 0; h < HQ; h++) expect_row(p.out, 1, h, 0, FINITE, -1, "finite inputs");

    /* mask +inf and NaN poison their row only */
    vt_set(p.mask, mask_at(&p, 0, 0, 5), inf);
    vt_set(p.mask, mask_at(&p, 3, 0, 66), nan);
    f16_run(ctx, &p);
    expect_row(p.out, 1, 0, 0, NAN_ROW, -1, "mask +inf");
    expect_row(p.out, 1, 3, 0, NAN_ROW, -1, "mask NaN");
    expect_row(p.out, 1, 1, 0, FINITE, -1, "mask +inf, other head");
    expect_row(p.out, 1, 2, 0, FINITE, -1, "mask NaN, other head");
    f16_free(&p);

    /* a NaN key element poisons the rows of its kv head (both query heads) */
    p = f16_new(dt, 1, false, 12);
    vt_set(p.k, kv_at(1, 33, 3), nan);
    f16_run(ctx, &p);
    expect_row(p.out, 1, 2, 0, NAN_ROW, -1, "NaN key");
    expect_row(p.out, 1, 3, 0, NAN_ROW, -1, "NaN key");
    expect_row(p.out, 1, 0, 0, FINITE, -1, "NaN key, other kv head");
    f16_free(&p);

    /* a key element +inf meeting a positive query element: score +inf, NaN row */
    p = f16_new(dt, 1, false, 13);
    for (int h = 0; h < HQ; h++) vt_set(p.q, at(h, 0, 1, 0), 1.0);
    vt_set(p.k, kv_at(0, 10, 0), inf);
    f16_run(ctx, &p);
    expect_row(p.out, 1, 0, 0, NAN_ROW, -1, "+inf score");
    expect_row(p.out, 1, 1, 0, NAN_ROW, -1, "+inf score");
    expect_row(p.out, 1, 2, 0, FINITE, -1, "+inf score, other kv head");

    /* -inf score: the token is excluded, exactly as a -inf mask entry excludes it */
    vt_set(p.k, kv_at(0, 10, 0), -inf);
    f16_run(ctx, &p);
    DLTensor *by_data = vt_like(p.out, VT_F32);
    memcpy(by_data->data, p.out->data, vt_bytes(p.out));
    vt_set(p.k, kv_at(0, 10, 0), 0.5);
    for (int h = 0; h < 2; h++) vt_set(p.mask, mask_at(&p, h, 0, 10), -inf);
    f16_run(ctx, &p);
    double diff = 0;
    for (int64_t i = 0; i < vt_numel(p.out); i++) diff = fmax(diff, fabs(vt_get(p.out, i) - vt_get(by_data, i)));
    VT_CHECK(diff <= 1e-6, "-inf score vs -inf mask (%s, splits %d): max diff %g", g_isa, g_splits, diff);
    for (int h = 0; h < HQ; h++) expect_row(by_data, 1, h, 0, FINITE, -1, "-inf score");
    vt_free(by_data);
    f16_free(&p);

    /* non-finite query elements: NaN rows */
    p = f16_new(dt, 1, false, 14);
    vt_set(p.q, at(3, 0, 1, 5), nan);
    vt_set(p.q, at(1, 0, 1, 7), -inf);
    f16_run(ctx, &p);
    expect_row(p.out, 1, 3, 0, NAN_ROW, -1, "NaN query");
    expect_row(p.out, 1, 1, 0, NAN_ROW, -1, "-inf query");
    expect_row(p.out, 1, 0, 0, FINITE, -1, "other query");
    f16_free(&p);

    /* a NaN value element: that column of its kv head's rows, no other; a
     * fully masked row stays 0 even over it */
    p = f16_new(dt, 1, false, 15);
    vt_set(p.v, kv_at(0, 20, 7), nan);
    vt_set(p.v, kv_at(1, 50, 9), inf);
    for (int t = 0; t < SKV; t++) vt_set(p.mask, mask_at(&p, 2, 0, t), -inf);
    f16_run(ctx, &p);
    expect_row(p.out, 1, 0, 0, FINITE, 7, "NaN value");
    expect_row(p.out, 1, 1, 0, FINITE, 7, "NaN value");
    expect_row(p.out, 1, 3, 0, FINITE, 9, "inf value");
    expect_row(p.out, 1, 2, 0, ZERO_ROW, -1, "fully masked row over an inf value");
    f16_free(&p);

    /* causal prefill: the last token is seen by query 2 only; its NaN value
     * and NaN key never reach queries 0 and 1 */
    p = f16_new(dt, 3, true, 16);
    vt_set(p.v, kv_at(0, SKV - 1, 1), nan);
    vt_set(p.k, kv_at(1, SKV - 1, 4), nan);
    f16_run(ctx, &p);
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < HQ; h++) expect_row(p.out, 3, h, i, FINITE, -1, "causal: future token");
    expect_row(p.out, 3, 0, 2, FINITE, 1, "causal: visible NaN value");
    expect_row(p.out, 3, 1, 2, FINITE, 1, "causal: visible NaN value");
    expect_row(p.out, 3, 2, 2, NAN_ROW, -1, "causal: visible NaN key");
    expect_row(p.out, 3, 3, 2, NAN_ROW, -1, "causal: visible NaN key");
    f16_free(&p);
}

static void f16_all(vq_ctx *ctx, const char *isa)
{
    g_isa = isa;
    for (g_splits = 1; g_splits <= 3; g_splits += 2) {
        f16_cases(ctx, VT_F32);
        f16_cases(ctx, VT_F16);
    }
}

static void test_f16_sdpa(void) { vt_for_each_isa(2, f16_all); }

/* ---- KIVI affine: vq_kivi_fused_attend ---- */

/* A KIVI cache (group 32 both ways) of random keys and values, head dim d,
 * `bits` packed codes, Sq = sq queries; f32 scales and zeros. */
typedef struct kivi {
    DLTensor *q, *out, *k, *v, *kc, *vc, *ks, *kz, *vs, *vz;
} kivi;

enum { G = 32 };

static kivi kivi_new(vq_ctx *ctx, int64_t d, int bits, int64_t sq, uint64_t seed)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    kivi t;
    t.q = vt_new(VT_F32, VT_DIMS(1, HQ, sq, d));
    t.out = vt_new(VT_F32, VT_DIMS(1, HQ, sq, d));
    t.k = vt_new(VT_F32, VT_DIMS(1, HKV, SKV, d));
    t.v = vt_new(VT_F32, VT_DIMS(1, HKV, SKV, d));
    t.kc = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, d * bits / 8));
    t.vc = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, d * bits / 8));
    t.ks = vt_new(VT_F32, VT_DIMS(1, HKV, (SKV + G - 1) / G, d));
    t.kz = vt_like(t.ks, VT_F32);
    t.vs = vt_new(VT_F32, VT_DIMS(1, HKV, SKV, d / G));
    t.vz = vt_like(t.vs, VT_F32);
    vt_fill_normal(t.q, &rng, 0, 1);
    vt_fill_normal(t.k, &rng, 0, 1);
    vt_fill_normal(t.v, &rng, 0, 1);
    VT_OK(ctx, vq_kivi_quantize_keys(ctx, t.k, bits, G, t.kc, t.ks, t.kz));
    VT_OK(ctx, vq_kivi_quantize_values(ctx, t.v, bits, G, t.vc, t.vs, t.vz));
    return t;
}

static void kivi_free(kivi *t)
{
    DLTensor *all[] = {t->q, t->out, t->k, t->v, t->kc, t->vc, t->ks, t->kz, t->vs, t->vz};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
}

static void kivi_all(vq_ctx *ctx, const char *isa)
{
    g_isa = isa;
    for (int sq = 1; sq <= 3; sq += 2) { /* rows per kv head 2 (direct paths) and 6 (tiles) */
        kivi t = kivi_new(ctx, D, 4, sq, 21);
        DLTensor *q = t.q, *out = t.out, *kc = t.kc, *vc = t.vc, *ks = t.ks, *kz = t.kz, *vs = t.vs, *vz = t.vz;
        vt_set(ks, (1 * ((SKV + G - 1) / G) + 1) * D + 3, NAN); /* kv head 1, group 1, channel 3 */
        vt_set(q, at(0, 0, sq, 2), NAN);
        for (g_splits = 1; g_splits <= 3; g_splits += 2) {
            vt_poison(out);
            const vq_scalar_attend_opts o = {.bits = 4};
            VT_OK(ctx, vq_kivi_fused_attend(ctx, q, kc, ks, kz, vc, vs, vz, G, 0.25f, g_splits, out, &o));
            for (int64_t i = 0; i < sq; i++) {
                expect_row(out, sq, 0, i, i == 0 ? NAN_ROW : FINITE, -1, "affine: NaN query");
                expect_row(out, sq, 1, i, FINITE, -1, "affine: finite");
                expect_row(out, sq, 2, i, NAN_ROW, -1, "affine: NaN key scale");
                expect_row(out, sq, 3, i, NAN_ROW, -1, "affine: NaN key scale");
            }
        }
        kivi_free(&t);
    }
}

static void test_kivi_decode(void) { vt_for_each_isa(2, kivi_all); }

/* Integer p.V (vq_value_accum INT8: 2-bit values, g 32, D 128): a non-finite
 * value scale or zero of one token and group reaches that group's 32 columns
 * (every channel of the group has a non-finite v_hat) of every row of the kv
 * head, and no other column; rows of the other kv head stay finite. */
static void kivi_int8_values_all(vq_ctx *ctx, const char *isa)
{
    g_isa = isa;
    enum { DV = 128, SQ = 3 };
    kivi t = kivi_new(ctx, DV, 2, SQ, 23);
    DLTensor *out = t.out, *vs = t.vs, *vz = t.vz;
    vt_set(vs, (1 * SKV + 40) * (DV / G) + 1, NAN);     /* kv head 1, token 40, group 1 */
    vt_set(vz, (0 * SKV + 5) * (DV / G) + 3, INFINITY); /* kv head 0, token 5, group 3 */
    for (g_splits = 1; g_splits <= 3; g_splits += 2) {
        vt_poison(out);
        const vq_scalar_attend_opts o = {.bits = 2, .value_accum = VQ_VALUE_ACCUM_INT8};
        VT_OK(ctx, vq_kivi_fused_attend(ctx, t.q, t.kc, t.ks, t.kz, t.vc, vs, vz, G, 0.25f, g_splits, out, &o));
        for (int64_t h = 0; h < HQ; h++)
            for (int64_t i = 0; i < SQ; i++) {
                const int64_t lo = h < 2 ? 96 : 32; /* kv head 0: group 3; kv head 1: group 1 */
                int wrong = 0;
                for (int64_t c = 0; c < DV; c++)
                    wrong += (c >= lo && c < lo + 32) != !isfinite(vt_get(out, (h * SQ + i) * DV + c));
                VT_CHECK(wrong == 0, "affine int8 values (%s, splits %d): row h %lld i %lld: only columns %lld..%lld "
                         "should be non-finite (%d columns wrong)", isa, g_splits, (long long)h, (long long)i,
                         (long long)lo, (long long)lo + 31, wrong);
            }
    }
    kivi_free(&t);
}

static void test_kivi_int8_values(void) { vt_for_each_isa(2, kivi_int8_values_all); }

/* ---- RaBitQ decode (Hamming) and prefill ---- */

static void rabitq_all(vq_ctx *ctx, const char *isa)
{
    g_isa = isa;
    const int64_t sq = 3;
    vq_rng rng;
    vq_rng_seed(&rng, 31);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(1, HQ, sq, D)), *out = vt_new(VT_F32, VT_DIMS(1, HQ, sq, D));
    DLTensor *qs = vt_new(VT_F32, VT_DIMS(1, HQ, sq)), *k = vt_new(VT_F32, VT_DIMS(1, HKV, SKV, D));
    DLTensor *kb = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, D / 8)), *km = vt_new(VT_F32, VT_DIMS(1, HKV, SKV));
    DLTensor *vi = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, D / 2)), *ce = vt_new(VT_F32, VT_DIMS(16));
    DLTensor *sc = vt_new(VT_F32, VT_DIMS(1));
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(k, &rng, 0, 1);
    vt_fill_normal(ce, &rng, 0, 1);
    vt_fill_uniform_int(vi, &rng, 0, 255);
    for (int64_t i = 0; i < vt_numel(qs); i++) vt_set(qs, i, 0.2);
    vt_set(sc, 0, 0.2);
    VT_OK(ctx, vq_rabitq_encode(ctx, k, NULL, kb, km, NULL));
    vt_set(km, 1 * SKV + 44, INFINITY);     /* kv head 1: +inf magnitude */
    vt_set(q, at(0, 1, sq, 6), NAN);        /* head 0, query 1 */
    for (g_splits = 1; g_splits <= 3; g_splits += 2) {
        for (int prefill = 0; prefill < 2; prefill++) {
            vt_poison(out);
            const vq_rabitq_attend_opts o = {.num_splits = g_splits};
            if (prefill) VT_OK(ctx, vq_rabitq_prefill_attend(ctx, q, sc, kb, km, NULL, vi, ce, out, &o));
            else VT_OK(ctx, vq_rabitq_fused_attend(ctx, q, qs, kb, km, NULL, vi, ce, out, &o));
            const char *what = prefill ? "rabitq prefill" : "rabitq hamming";
            for (int64_t i = 0; i < sq; i++) {
                expect_row(out, sq, 0, i, i == 1 ? NAN_ROW : FINITE, -1, what);
                expect_row(out, sq, 1, i, FINITE, -1, what);
                /* +inf * (a sign) is +inf or -inf: the +inf-scored rows are NaN, the others exclude it */
                for (int h = 2; h < HQ; h++) {
                    int nan = 0;
                    for (int64_t c = 0; c < D; c++) nan += isnan(vt_get(out, at(h, i, sq, c)));
                    VT_CHECK(nan == 0 || nan == D, "%s (%s): row %d %lld partly NaN (%d)", what, isa, h,
                             (long long)i, nan);
                }
            }
        }
    }
    /* a NaN magnitude poisons every row of its kv head, whatever the signs */
    vt_set(km, 1 * SKV + 44, NAN);
    for (int prefill = 0; prefill < 2; prefill++) {
        g_splits = 2;
        vt_poison(out);
        const vq_rabitq_attend_opts o = {.num_splits = g_splits};
        if (prefill) VT_OK(ctx, vq_rabitq_prefill_attend(ctx, q, sc, kb, km, NULL, vi, ce, out, &o));
        else VT_OK(ctx, vq_rabitq_fused_attend(ctx, q, qs, kb, km, NULL, vi, ce, out, &o));
        for (int64_t i = 0; i < sq; i++)
            for (int h = 2; h < HQ; h++) expect_row(out, sq, h, i, NAN_ROW, -1, "rabitq: NaN magnitude");
    }
    vt_free(q); vt_free(out); vt_free(qs); vt_free(k); vt_free(kb); vt_free(km); vt_free(vi); vt_free(ce);
    vt_free(sc);
}

static void test_rabitq(void) { vt_for_each_isa(2, rabitq_all); }

int main(void)
{
    VT_RUN(test_f16_sdpa);
    VT_RUN(test_kivi_decode);
    VT_RUN(test_kivi_int8_values);
    VT_RUN(test_rabitq);
    return vt_finish();
}
