/* test_attention_sdpa.c — vq_fused_sdpa with VQ_KEYS_F16 (plain f16/f32/bf16
 * keys, f16/f32 values) against the float64 reference, on every ISA, awkward
 * shapes, GQA ratios, causal, masks, explicit splits; and every error path. */
#include "attention_ref.h"
#include "harness.h"

typedef struct sdpa_case {
    int64_t B, Hq, Hkv, Sq, Skv, D;
    DLDataType qt, kt, vt, ot;
    bool causal;
    int mask;        /* 0 none, 1 [1,1,Sq,Skv], 2 [B,Hq,Sq,Skv] f16 */
    int num_splits;
} sdpa_case;

static void run_case(vq_ctx *ctx, const char *isa, const sdpa_case *k, vq_rng *rng)
{
    const ref_dims d = {k->B, k->Hq, k->Hkv, k->Sq, k->Skv, k->D};
    DLTensor *q = vt_new(k->qt, VT_DIMS(d.B, d.Hq, d.Sq, d.D));
    DLTensor *keys = vt_new(k->kt, VT_DIMS(d.B, d.Hkv, d.Skv, d.D));
    DLTensor *v = vt_new(k->vt, VT_DIMS(d.B, d.Hkv, d.Skv, d.D));
    DLTensor *out = vt_new(k->ot, VT_DIMS(d.B, d.Hq, d.Sq, d.D));
    vt_fill_normal(q, rng, 0.0, 1.0);
    vt_fill_keys(keys, rng, 2, 4.0);
    vt_fill_normal(v, rng, 0.0, 1.0);
    DLTensor *mask = NULL;
    int64_t msb = 0, msh = 0;
    if (k->mask == 1) mask = vt_new(VT_F32, VT_DIMS(1, 1, d.Sq, d.Skv));
    if (k->mask == 2) {
        mask = vt_new(VT_F16, VT_DIMS(d.B, d.Hq, d.Sq, d.Skv));
        msh = d.Sq * d.Skv;
        msb = d.Hq * msh;
    }
    double *mref = NULL;
    if (mask) {
        vt_fill_normal(mask, rng, 0.0, 2.0);
        mref = malloc(sizeof(double) * (size_t)vt_numel(mask));
        for (int64_t x = 0; x < vt_numel(mask); x++) {
            if (x % 5 == 3) vt_set(mask, x, -INFINITY); /* fully masked tokens too */
            mref[x] = vt_get(mask, x);
        }
    }
    const int64_t nv = vt_numel(v);
    double *vh = malloc(sizeof(double) * (size_t)nv);
    for (int64_t x = 0; x < nv; x++) vh[x] = vt_get(v, x);
    double *ref = malloc(sizeof(double) * (size_t)vt_numel(out));
    const double scale = 1.0 / sqrt((double)d.D);
    const ref_f16_arg arg = {q, keys, d, (double)(float)scale};
    ref_attention(&d, ref_f16_score, &arg, vh, mref, msb, msh, k->causal, ref);

    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = keys};
    const vq_attend_opts opts = {.causal = k->causal, .num_splits = k->num_splits};
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), (float)scale, mask, out, &opts));
    const double err = vt_rel_l2(out, ref);
    VT_CHECK(err <= vt_tol(out), "%s B%lld Hq%lld Hkv%lld Sq%lld Skv%lld D%lld causal %d mask %d splits %d: rel err %.3g",
             isa, (long long)d.B, (long long)d.Hq, (long long)d.Hkv, (long long)d.Sq, (long long)d.Skv,
             (long long)d.D, k->causal, k->mask, k->num_splits, err);
    VT_CHECK(vt_count_poisoned(out) == 0, "%s: %lld output elements unwritten", isa,
             (long long)vt_count_poisoned(out));
    free(ref);
    free(vh);
    free(mref);
    vt_free(q);
    vt_free(keys);
    vt_free(v);
    vt_free(out);
    vt_free(mask);
}

static void cases_on(vq_ctx *ctx, const char *isa)
{
    static const sdpa_case cases[] = {
        /* B  Hq Hkv Sq  Skv   D    q       k        v       out     causal mask splits */
        {1, 1, 1, 1, 1, 64, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, false, 0, 0},
        {1, 3, 1, 1, 7, 96, {kDLFloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}, false, 0, 0},
        {2, 8, 2, 4, 97, 128, {kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, true, 0, 3},
        {1, 8, 1, 33, 97, 64, {kDLFloat, 32, 1}, {kDLBfloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 16, 1}, true, 1, 0},
        {1, 4, 4, 1, 4097, 128, {kDLFloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}, false, 0, 0},
        {1, 6, 2, 4, 300, 256, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, true, 2, 5},
        {2, 3, 3, 33, 40, 8, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, false, 2, 1},
        {1, 8, 8, 70, 20, 40, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, true, 0, 2},
        {1, 16, 2, 33, 500, 64, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, {kDLFloat, 32, 1}, true, 0, 0},
    };
    vq_rng rng;
    vq_rng_seed(&rng, 42);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) run_case(ctx, isa, &cases[c], &rng);
}

static void test_sdpa_f16(void) { vt_for_each_isa(2, cases_on); }

static void test_sdpa_single_thread(void)
{
    vq_ctx *ctx = vt_ctx(1);
    const sdpa_case k = {1, 4, 2, 4, 97, 64, VT_F32, VT_F16, VT_F16, VT_F32, true, 1, 3};
    vq_rng rng;
    vq_rng_seed(&rng, 7);
    run_case(ctx, "1 thread", &k, &rng);
    vq_ctx_free(ctx);
}

/* vq_fused_sdpa_supports_shape agrees with what vq_fused_sdpa accepts (plain keys). */
static void test_sdpa_supports_shape(void)
{
    VT_CHECK(vq_fused_sdpa_supports_shape(1, 32, 100, 128), "128");
    VT_CHECK(vq_fused_sdpa_supports_shape(2, 1, 1, 256), "256");
    VT_CHECK(vq_fused_sdpa_supports_shape(1, 32, 100, 104), "104 = 13 * 8");
    VT_CHECK(!vq_fused_sdpa_supports_shape(1, 32, 100, 100), "100 not a multiple of 8");
    VT_CHECK(!vq_fused_sdpa_supports_shape(1, 32, 100, 288), "288 > 256");
    VT_CHECK(!vq_fused_sdpa_supports_shape(0, 32, 100, 128) && !vq_fused_sdpa_supports_shape(1, 32, 0, 128),
             "empty");
    vq_ctx *ctx = vt_ctx(1);
    int disagree = 0;
    for (int64_t d = 1; d <= 264; d++) {
        DLTensor *q = vt_new(VT_F32, VT_DIMS(1, 2, 1, d)), *k = vt_new(VT_F32, VT_DIMS(1, 2, 3, d));
        DLTensor *v = vt_new(VT_F32, VT_DIMS(1, 2, 3, d)), *o = vt_new(VT_F32, VT_DIMS(1, 2, 1, d));
        for (int64_t i = 0; i < vt_numel(q); i++) vt_set(q, i, 0.5);
        for (int64_t i = 0; i < vt_numel(k); i++) vt_set(k, i, 0.25), vt_set(v, i, 1.0);
        const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = k};
        const bool ok = vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 0.1f, NULL, o, NULL) == VQ_OK;
        if (ok != vq_fused_sdpa_supports_shape(1, 2, 1, d)) {
            disagree++;
            fprintf(stderr, "D %lld: vq_fused_sdpa %s, supports_shape %d\n", (long long)d,
                    ok ? "ok" : vq_ctx_last_error(ctx), (int)vq_fused_sdpa_supports_shape(1, 2, 1, d));
        }
        vt_free(q); vt_free(k); vt_free(v); vt_free(o);
    }
    VT_CHECK(disagree == 0, "%d head dims where supports_shape and vq_fused_sdpa disagree", disagree);
    vq_ctx_free(ctx);
}

static void test_sdpa_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(1, 4, 2, 64));
    DLTensor *k = vt_new(VT_F16, VT_DIMS(1, 2, 10, 64));
    DLTensor *v = vt_new(VT_F32, VT_DIMS(1, 2, 10, 64));
    DLTensor *out = vt_new(VT_F32, VT_DIMS(1, 4, 2, 64));
    vq_rng rng;
    vq_rng_seed(&rng, 3);
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(k, &rng, 0, 1);
    vt_fill_normal(v, &rng, 0, 1);
    void *snap = vt_snapshot(out);
    vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = k};
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 0.125f, NULL, out, NULL));
    vt_poison(out);
    free(snap);
    snap = vt_snapshot(out);

    DLTensor *q300 = vt_new(VT_F32, VT_DIMS(1, 4, 2, 264));
    DLTensor *k300 = vt_new(VT_F32, VT_DIMS(1, 2, 10, 264));
    DLTensor *o300 = vt_new(VT_F32, VT_DIMS(1, 4, 2, 264));
    vq_encoded_keys e300 = {.format = VQ_KEYS_F16, .f16.keys = k300};
    void *snap300 = vt_snapshot(o300);
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "> 256", vq_fused_sdpa(ctx, q300, &e300, VT_F16_VALUES(k300), 1.0f, NULL, o300, NULL));
    DLTensor *q60 = vt_new(VT_F32, VT_DIMS(1, 4, 2, 60));
    DLTensor *k60 = vt_new(VT_F32, VT_DIMS(1, 2, 10, 60));
    DLTensor *o60 = vt_new(VT_F32, VT_DIMS(1, 4, 2, 60));
    vq_encoded_keys e60 = {.format = VQ_KEYS_F16, .f16.keys = k60};
    void *snap60 = vt_snapshot(o60);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "multiple of 8", vq_fused_sdpa(ctx, q60, &e60, VT_F16_VALUES(k60), 1.0f, NULL, o60, NULL));
    VT_CHECK(vt_unchanged(o300, snap300) && vt_unchanged(o60, snap60), "a failing call wrote to out");
    free(snap300);
    free(snap60);
    DLTensor *v3 = vt_new(VT_F32, VT_DIMS(1, 3, 10, 64));
    DLTensor *k3 = vt_new(VT_F32, VT_DIMS(1, 3, 10, 64));
    vq_encoded_keys e3 = {.format = VQ_KEYS_F16, .f16.keys = k3};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "mismatched heads", vq_fused_sdpa(ctx, q, &e3, VT_F16_VALUES(v3), 1.0f, NULL, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "keys.f16.keys", vq_fused_sdpa(ctx, q, &e3, VT_F16_VALUES(v), 1.0f, NULL, out, NULL));
    DLTensor *qu8 = vt_new(VT_U8, VT_DIMS(1, 4, 2, 64));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "dtype", vq_fused_sdpa(ctx, qu8, &ek, VT_F16_VALUES(v), 1.0f, NULL, out, NULL));
    DLTensor *vbf = vt_new(VT_BF16, VT_DIMS(1, 2, 10, 64));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'values.f16.values'", vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(vbf), 1.0f, NULL, out, NULL));
    DLTensor *ku8 = vt_new(VT_U8, VT_DIMS(1, 2, 10, 64));
    vq_encoded_keys eu8 = {.format = VQ_KEYS_F16, .f16.keys = ku8};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "dtype", vq_fused_sdpa(ctx, q, &eu8, VT_F16_VALUES(v), 1.0f, NULL, out, NULL));
    vq_encoded_keys enull = {.format = VQ_KEYS_F16};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "keys.f16.keys", vq_fused_sdpa(ctx, q, &enull, VT_F16_VALUES(v), 1.0f, NULL, out, NULL));
    vq_encoded_keys ebad = {.format = (vq_keys_format)99, .f16.keys = k};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "format", vq_fused_sdpa(ctx, q, &ebad, VT_F16_VALUES(v), 1.0f, NULL, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys'", vq_fused_sdpa(ctx, q, NULL, VT_F16_VALUES(v), 1.0f, NULL, out, NULL));
    DLTensor *mbad = vt_new(VT_F32, VT_DIMS(1, 2, 2, 10));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "mask", vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 1.0f, mbad, out, NULL));
    DLTensor *obad = vt_new(VT_F32, VT_DIMS(1, 4, 3, 64));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 1.0f, NULL, obad, NULL));
    DLTensor *obf = vt_new(VT_BF16, VT_DIMS(1, 4, 2, 64));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 1.0f, NULL, obf, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "scale", vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), NAN, NULL, out, NULL));
    const vq_attend_opts neg = {.num_splits = -1};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "num_splits", vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 1.0f, NULL, out, &neg));
    VT_CHECK(vq_fused_sdpa(NULL, q, &ek, VT_F16_VALUES(v), 1.0f, NULL, out, NULL) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_CHECK(vt_unchanged(out, snap), "a failing call wrote to out");
    free(snap);
    DLTensor *all[] = {q, k, v, out, q300, k300, o300, q60, k60, o60, v3, k3, qu8, vbf, ku8, mbad, obad, obf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_sdpa_f16);
    VT_RUN(test_sdpa_single_thread);
    VT_RUN(test_sdpa_supports_shape);
    VT_RUN(test_sdpa_errors);
    return vt_finish();
}
