/* test_attention_turbo_pv8.c — integer p.V of TurboQuant values
 * (vq_attend_opts.value_accum = VQ_VALUE_ACCUM_INT8; veloxquant.h,
 * vq_value_accum, "TurboQuant values") on every ISA: against a float64
 * attention over the decoded values, within the header's bound and with its
 * typical error; the same on every layout of the codes (u8, packed words);
 * at D = 128 and 64 (the two kernels) and 256 (the D = 128 kernel per half),
 * packed rows compact and in a wider buffer;
 * AUTO and F32 the float path; layouts the kernels do not take (D other than
 * 64, 128 and 256, bits > 4) exactly the float path; bad enum values refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "harness.h"
#include "veloxquant.h"

enum { HQ = 8, HKV = 2, D = 128 };

typedef struct tcase {
    int bits, Sq, Skv;
    bool packed, f16_scale, causal;
} tcase;

typedef struct built {
    DLTensor *q, *k, *idx, *scale, *vhat, *diag;
    vq_encoded_values ev;
    int64_t d;  /* head dim */
} built;

static void build(vq_ctx *ctx, const tcase *c, int64_t d, vq_rng *rng, built *b)
{
    b->d = d;
    b->q = vt_new(VT_F32, VT_DIMS(1, HQ, c->Sq, d));
    b->k = vt_new(VT_F32, VT_DIMS(1, HKV, c->Skv, d));
    DLTensor *x = vt_new(VT_F32, VT_DIMS(1, HKV, c->Skv, d));
    b->diag = vt_new(VT_F32, VT_DIMS(d));
    vt_fill_normal(b->q, rng, 0.0, 1.0);
    vt_fill_normal(b->k, rng, 0.0, 1.0);
    vt_fill_normal(x, rng, 0.3, 1.0);
    vt_fill_signs(b->diag, rng);
    for (int64_t t = 0; t < c->Skv; t += 5) /* tokens of larger norm: scales that differ */
        for (int64_t e = 0; e < d; e++) vt_set(x, t * d + e, 3.0 * vt_get(x, t * d + e));
    DLTensor *idx = vt_new(VT_U8, VT_DIMS(1, HKV, c->Skv, d)), *sc = vt_new(VT_F32, VT_DIMS(1, HKV, c->Skv));
    VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, b->diag, c->bits, idx, sc, NULL));
    b->scale = sc;
    if (c->f16_scale) { /* the f16-rounded scales in both, so that the reference decodes what is stored */
        b->scale = vt_like(sc, VT_F16);
        for (int64_t e = 0; e < vt_numel(sc); e++) {
            vt_set(b->scale, e, vt_get(sc, e));
            vt_set(sc, e, vt_get(b->scale, e));
        }
    }
    b->vhat = vt_new(VT_F32, VT_DIMS(1, HKV, c->Skv, d));
    VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, sc, b->diag, c->bits, b->vhat));
    b->idx = idx;
    if (c->packed) {
        b->idx = vt_new(VT_U32, VT_DIMS(1, HKV, c->Skv, (d * c->bits + 31) / 32));
        VT_OK(ctx, vq_bit_pack(ctx, idx, c->bits, b->idx));
        vt_free(idx);
    }
    if (b->scale != sc) vt_free(sc);
    b->ev = (vq_encoded_values){.format = VQ_VALUES_TURBO, .turbo = {b->idx, b->scale, b->diag, c->bits}};
    vt_free(x);
}

static void built_free(built *b)
{
    DLTensor *all[] = {b->q, b->k, b->idx, b->scale, b->vhat, b->diag};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
}

static vq_status attend(vq_ctx *ctx, const tcase *c, const built *b, vq_value_accum va, DLTensor *out)
{
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = b->k};
    const vq_attend_opts o = {.causal = c->causal, .value_accum = va};
    return vq_fused_sdpa(ctx, b->q, &ek, &b->ev, 1.0f / sqrtf((float)b->d), NULL, out, &o);
}

/* The exact attention over the decoded values, float64: ref [HQ][Sq][d]. */
static void reference(const tcase *c, const built *b, double *ref)
{
    const ref_dims d = {1, HQ, HKV, c->Sq, c->Skv, b->d};
    const ref_f16_arg arg = {b->q, b->k, d, 1.0 / sqrt((double)b->d)};
    double *vh = ref_doubles(b->vhat);
    ref_attention(&d, ref_f16_score, &arg, vh, NULL, 0, 0, c->causal, ref, NULL);
    free(vh);
}

/* max_i |centroid_i| and max_t |scale_t|: the header's C and S. */
static void bound_terms(const tcase *c, const built *b, double *C, double *S)
{
    static const double cmax[5] = {0.0, 0.798, 1.510, 2.152, 2.733}; /* Lloyd-Max N(0,1), largest centroid */
    *C = cmax[c->bits];
    *S = 0.0;
    for (int64_t e = 0; e < vt_numel(b->scale); e++) *S = fmax(*S, fabs(vt_get(b->scale, e)));
}

static const tcase cases[] = {
    {2, 1, 1000, true, false, false}, {2, 1, 77, false, false, false}, {2, 3, 1000, true, true, true},
    {3, 1, 1000, true, false, false}, {3, 1, 33, false, true, false},  {4, 1, 1000, true, false, false},
    {4, 1, 1, false, false, false},   {4, 3, 513, true, true, true},   {2, 1, 4097, true, true, false},
};

static void cases_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 17);
    static const int64_t dims[3] = {128, 64, 256}; /* the two kernels; the first one per half */
    const size_t nc = sizeof cases / sizeof cases[0];
    for (size_t ci = 0; ci < 3 * nc; ci++) {
        const tcase *c = &cases[ci % nc];
        const int64_t D = dims[ci / nc];
        built b;
        build(ctx, c, D, &rng, &b);
        DLTensor *o8 = vt_new(VT_F32, VT_DIMS(1, HQ, c->Sq, D)), *of = vt_like(o8, VT_F32), *oa = vt_like(o8, VT_F32);
        VT_OK(ctx, attend(ctx, c, &b, VQ_VALUE_ACCUM_INT8, o8));
        VT_OK(ctx, attend(ctx, c, &b, VQ_VALUE_ACCUM_F32, of));
        VT_OK(ctx, attend(ctx, c, &b, VQ_VALUE_ACCUM_AUTO, oa));
        const int64_t n = vt_numel(o8);
        double *ref = malloc(sizeof(double) * (size_t)n);
        reference(c, &b, ref);
        double C, S;
        bound_terms(c, &b, &C, &S);
        /* the header's bound: 0.131 C S per rotated channel, sqrt(D) times that per output channel */
        const double bound = sqrt((double)D) * 0.131 * C * S;
        double worst = 0.0, se = 0.0;
        for (int64_t e = 0; e < n; e++) {
            const double err = fabs(vt_get(o8, e) - ref[e]);
            worst = fmax(worst, err);
            se += err * err;
        }
        const double rms = sqrt(se / (double)n);
        VT_CHECK(worst <= bound, "%s D %lld bits %d Sq %d Skv %d: max error %.3g above the bound %.3g", isa, (long long)D, c->bits,
                 c->Sq, c->Skv, worst, bound);
        /* typical error ~1e-3 C S (random signs); a wrong code, centroid or weight is ~C S */
        VT_CHECK(rms <= 5e-3 * C * S, "%s bits %d Sq %d Skv %d: rms error %.3g C S", isa, c->bits, c->Sq, c->Skv,
                 rms / (C * S));
        VT_CHECK(vt_rel_l2(of, ref) <= 1e-5, "%s bits %d: the f32 path, rel err %.3g", isa, c->bits,
                 vt_rel_l2(of, ref));
        VT_CHECK(memcmp(oa->data, of->data, vt_bytes(of)) == 0, "%s bits %d: AUTO is not F32 in vq_fused_sdpa", isa,
                 c->bits);
        VT_CHECK(c->Skv == 1 || memcmp(o8->data, of->data, vt_bytes(of)) != 0,
                 "%s bits %d Skv %d: INT8 gave the f32 path's bytes (not taken?)", isa, c->bits, c->Skv);
        VT_CHECK(vt_count_poisoned(o8) == 0, "%s: unwritten output", isa);
        /* the other layout of the same codes: the same nibble rows, the same bytes */
        DLTensor *other = c->packed ? vt_new(VT_U8, VT_DIMS(1, HKV, c->Skv, D))
                                    : vt_new(VT_U32, VT_DIMS(1, HKV, c->Skv, (D * c->bits + 31) / 32));
        if (c->packed) VT_OK(ctx, vq_bit_unpack(ctx, b.idx, c->bits, D, other));
        else VT_OK(ctx, vq_bit_pack(ctx, b.idx, c->bits, other));
        DLTensor *keep = b.idx, *o2 = vt_like(o8, VT_F32);
        b.ev.turbo.idx = other;
        VT_OK(ctx, attend(ctx, c, &b, VQ_VALUE_ACCUM_INT8, o2));
        VT_CHECK(memcmp(o2->data, o8->data, vt_bytes(o8)) == 0, "%s bits %d: u8 and packed codes differ", isa, c->bits);
        b.ev.turbo.idx = keep;
        if (c->packed) { /* packed rows in a buffer one word wider (a capacity layout): the same bytes */
            const int64_t W = vq_dim(keep, 3), rows = vt_numel(keep) / W;
            DLTensor *big = vt_new(VT_U32, VT_DIMS(1, HKV, c->Skv, W + 1));
            for (int64_t r = 0; r < rows; r++)
                for (int64_t w = 0; w <= W; w++)
                    vt_set(big, r * (W + 1) + w, w < W ? vt_get(keep, r * W + w) : 0xA5A5A5A5u);
            int64_t shape[4] = {1, HKV, c->Skv, W}, strides[4] = {HKV * c->Skv * (W + 1), c->Skv * (W + 1), W + 1, 1};
            DLTensor view = *big;
            view.shape = shape;
            view.strides = strides;
            b.ev.turbo.idx = &view;
            VT_OK(ctx, attend(ctx, c, &b, VQ_VALUE_ACCUM_INT8, o2));
            VT_CHECK(memcmp(o2->data, o8->data, vt_bytes(o8)) == 0, "%s D %lld bits %d: strided rows differ", isa,
                     (long long)D, c->bits);
            b.ev.turbo.idx = keep;
            vt_free(big);
        }
        vt_free(other);
        vt_free(o2);
        free(ref);
        vt_free(o8);
        vt_free(of);
        vt_free(oa);
        built_free(&b);
    }
}

static void test_turbo_pv8(void) { vt_for_each_isa(2, cases_on); }

/* Where the kernel does not apply, INT8 is the f32 path, bit for bit. */
static void fallback_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    const struct {
        int bits;
        int64_t d;
    } f[] = {{4, 32}, {3, 32}, {5, 128}, {8, 128}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const tcase c = {f[i].bits, 1, 100, true, false, false};
        built b;
        build(ctx, &c, f[i].d, &rng, &b);
        DLTensor *o8 = vt_new(VT_F32, VT_DIMS(1, HQ, 1, f[i].d)), *of = vt_like(o8, VT_F32);
        VT_OK(ctx, attend(ctx, &c, &b, VQ_VALUE_ACCUM_INT8, o8));
        VT_OK(ctx, attend(ctx, &c, &b, VQ_VALUE_ACCUM_F32, of));
        VT_CHECK(memcmp(o8->data, of->data, vt_bytes(of)) == 0, "%s bits %d D %lld: INT8 is not the f32 path", isa,
                 f[i].bits, (long long)f[i].d);
        vt_free(o8);
        vt_free(of);
        built_free(&b);
    }
}

static void test_turbo_pv8_fallback(void) { vt_for_each_isa(1, fallback_on); }

static void test_turbo_pv8_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_rng rng;
    vq_rng_seed(&rng, 3);
    const tcase c = {2, 1, 40, true, false, false};
    built b;
    build(ctx, &c, D, &rng, &b);
    DLTensor *out = vt_new(VT_F32, VT_DIMS(1, HQ, 1, D));
    void *snap = vt_snapshot(out);
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = b.k};
    const vq_attend_opts bad_va = {.value_accum = (vq_value_accum)3}, bad_ks = {.key_scores = (vq_key_scores)-1};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'opts->value_accum': expected VQ_VALUE_ACCUM_AUTO, _F32 or _INT8, got 3",
             vq_fused_sdpa(ctx, b.q, &ek, &b.ev, 0.1f, NULL, out, &bad_va));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'opts->key_scores': expected VQ_KEY_SCORES_AUTO, _F32 or _INT8, got -1",
             vq_fused_sdpa(ctx, b.q, &ek, &b.ev, 0.1f, NULL, out, &bad_ks));
    VT_CHECK(vt_unchanged(out, snap), "a failing call wrote to out");
    free(snap);
    vt_free(out);
    built_free(&b);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_turbo_pv8);
    VT_RUN(test_turbo_pv8_fallback);
    VT_RUN(test_turbo_pv8_errors);
    return vt_finish();
}
