/* test_cuda_prefill.c — vq_rabitq_prefill_attend on a CUDA ctx against the
 * same call on a CPU ctx (the f32 path, itself tested against float64 in
 * test_attention_rabitq.c), on shapes whose Sq and Skv are not multiples of the
 * kernel's tiles (256 or 128 rows, 64 tokens), GQA 1 and 4, D 40/64/128/256, f16 and
 * f32 q/out, with and without k_const (also -inf entries) and v_scale,
 * 1..16 centroids. Outputs are poisoned (NaN) before each run; fresh random
 * data each run (seed printed). VQ_TEST_QUICK=1 keeps the small cases (for
 * compute-sanitizer). */
#include "skip_without_cuda.h"
#ifdef VQ_TEST_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda_test_util.h"

static vq_rng rng;
static vq_ctx *ctx, *cpu;

typedef struct prefill_case {
    int B, Hq, Hkv, Sq, Skv, D;
    bool f16_q, f16_out, with_const, with_vscale;
    int n_cents;
    int neg_inf; /* k_const entries at -inf: 0 none, 1 about one in five, 2 all (rows give 0) */
} prefill_case;

static bool quick(void) { return getenv("VQ_TEST_QUICK") != NULL; }

static double f16_round(double x) { return vq_f16_to_f32(vq_f32_to_f16((float)x)); }

/* Error bound of the kernel against the f32 CPU path, for one output row.
 * The kernel's only roundings beyond f32 are:
 *  - q to f16 (f32 q only): the score moves by at most
 *    dS = scale * max_t k_mag_t * sum_j |q_j - f16(q_j)|; a softmax output
 *    moves by at most 2 dS max|v| (d out / d s_t = p_t (v_t - out)), 2.2 dS
 *    with the second-order term;
 *  - P * v_scale and v_cents / max|cent| to f16: relative 2^-11 each, so
 *    2^-10 max|v| over the convex combination, plus the subnormal floor
 *    2^-25 per token and operand (Skv * 2^-24 * max|v| in all);
 *  - f32 rounding of the folded score factors (3 ulps of |s|): 2 |s|max 2^-21 max|v|;
 *  - ex2.approx (2^-22 relative) and the CPU path's own f32/exp error: 1e-5 max|v|.
 * f16 outputs add the rounding of each side: 2^-10 |ref| (+ the bound). */
static double row_tol(double maxv, double dS, double smax, int Skv)
{
    return maxv * (ldexp(1, -10) + 2.2 * dS + 2 * smax * ldexp(1, -21) + Skv * ldexp(1, -24) + 1e-5);
}

static void run_case(prefill_case tc)
{
    if (quick() && (int64_t)tc.Sq * tc.Skv * tc.Hq > 3000000) return;
    const int B = tc.B, Hq = tc.Hq, Hkv = tc.Hkv, Sq = tc.Sq, Skv = tc.Skv, D = tc.D, G = Hq / Hkv;
    (void)G;
    const int64_t nkv = (int64_t)B * Hkv * Skv;
    DLTensor *q = vt_new(tc.f16_q ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D));
    DLTensor *sc = vt_new(VT_F32, VT_DIMS(1));
    DLTensor *kb = vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, D / 8)), *km = vt_new(VT_F32, VT_DIMS(B, Hkv, Skv));
    DLTensor *kc = vt_new(VT_F32, VT_DIMS(B, Hkv, Skv)), *vs = vt_new(VT_F32, VT_DIMS(B, Hkv, Skv));
    DLTensor *vi = vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, D / 2)), *ce = vt_new(VT_F32, VT_DIMS(tc.n_cents));
    vt_fill_normal(q, &rng, 0, 1.5);
    vt_set(sc, 0, 1.0 / sqrt((double)D) * (0.8 + 0.4 * vq_rng_uniform(&rng)));
    vt_fill_uniform_int(kb, &rng, 0, 255);
    vt_fill_normal(km, &rng, 0.8, 0.2);
    vt_fill_normal(kc, &rng, 0, 0.5);
    if (tc.neg_inf)
        for (int64_t i = 0; i < nkv; i++)
            if (tc.neg_inf == 2 || vq_rng_next(&rng) % 5 == 0) vt_set(kc, i, -INFINITY);
    vt_fill_normal(vs, &rng, 1, 0.3);
    vt_fill_uniform_int(vi, &rng, 0, 255); /* nibbles past n_cents read the last centroid */
    vt_fill_normal(ce, &rng, 0, 2);

    DLTensor *ref = vt_new(tc.f16_out ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D));
    DLTensor *out = vt_new(tc.f16_out ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D));
    vq_rabitq_attend_opts o = {.v_scale = tc.with_vscale ? vs : NULL};
    VT_OK(cpu, vq_rabitq_prefill_attend(cpu, q, sc, kb, km, tc.with_const || tc.neg_inf ? kc : NULL, vi, ce, ref, &o));

    DLTensor *dq = ct_upload(q), *dsc = ct_upload(sc), *dkb = ct_upload(kb), *dkm = ct_upload(km);
    DLTensor *dkc = ct_upload(kc), *dvs = ct_upload(vs), *dvi = ct_upload(vi), *dce = ct_upload(ce);
    DLTensor *dout = ct_upload(out);
    ct_poison(dout);
    o.v_scale = tc.with_vscale ? dvs : NULL;
    VT_OK(ctx, vq_rabitq_prefill_attend(ctx, dq, dsc, dkb, dkm, tc.with_const || tc.neg_inf ? dkc : NULL, dvi, dce,
                                        dout, &o));
    VT_OK(ctx, vq_ctx_synchronize(ctx));
    ct_download(dout, out);

    /* bound inputs: max|v| over the cache, max mag and |const| per kv head (global is enough) */
    double maxc = 0, maxvs = tc.with_vscale ? 0 : 1, maxmag = 0, maxconst = 0;
    for (int i = 0; i < tc.n_cents; i++) maxc = fmax(maxc, fabs(vt_get(ce, i)));
    for (int64_t i = 0; i < nkv; i++) {
        if (tc.with_vscale) maxvs = fmax(maxvs, fabs(vt_get(vs, i)));
        maxmag = fmax(maxmag, fabs(vt_get(km, i)));
        if ((tc.with_const || tc.neg_inf) && isfinite(vt_get(kc, i))) maxconst = fmax(maxconst, fabs(vt_get(kc, i)));
    }
    const double maxv = maxc * maxvs, scale = vt_get(sc, 0);
    int64_t bad = 0, worst_i = -1;
    double worst = 0, num = 0, den = 0;
    for (int64_t row = 0; row < (int64_t)B * Hq * Sq; row++) {
        double dS = 0, l1 = 0;
        for (int j = 0; j < D; j++) {
            const double x = vt_get(q, row * D + j);
            l1 += fabs(x);
            if (!tc.f16_q) dS += fabs(x - f16_round(x));
        }
        dS *= scale * maxmag;
        const double tol = row_tol(maxv, dS, scale * maxmag * l1 + maxconst, Skv);
        for (int j = 0; j < D; j++) {
            const int64_t i = row * D + j;
            const double r = vt_get(ref, i), g = vt_get(out, i);
            const double t = tol + (tc.f16_out ? ldexp(1, -10) * (fabs(r) + tol) : 0);
            const double e = fabs(g - r);
            num += (g - r) * (g - r);
            den += r * r;
            if (!(e <= t)) bad++;
            if (!(e / t <= worst)) {
                worst = e / t;
                worst_i = i;
            }
        }
    }
    VT_CHECK(bad == 0 && ct_count_nan(out) == 0,
             "prefill B%d Hq%d Hkv%d Sq%d Skv%d D%d q %s out %s%s%s%s cents %d: %lld elements over the bound, "
             "worst err/bound %.3g at %lld (gpu %g, cpu %g), %lld NaN",
             B, Hq, Hkv, Sq, Skv, D, tc.f16_q ? "f16" : "f32", tc.f16_out ? "f16" : "f32",
             tc.with_const ? " const" : "", tc.neg_inf ? (tc.neg_inf == 2 ? " all-inf" : " some-inf") : "",
             tc.with_vscale ? " vscale" : "", tc.n_cents, (long long)bad, worst, (long long)worst_i,
             worst_i >= 0 ? vt_get(out, worst_i) : 0.0, worst_i >= 0 ? vt_get(ref, worst_i) : 0.0,
             (long long)ct_count_nan(out));
    printf("  B%d Hq%d Hkv%d Sq%d Skv%d D%d: rel l2 vs CPU %.3g, worst err/bound %.3g\n", B, Hq, Hkv, Sq, Skv, D,
           den > 0 ? sqrt(num / den) : sqrt(num), worst);
    ct_free(dq); ct_free(dsc); ct_free(dkb); ct_free(dkm); ct_free(dkc); ct_free(dvs); ct_free(dvi); ct_free(dce);
    ct_free(dout);
    vt_free(q); vt_free(sc); vt_free(kb); vt_free(km); vt_free(kc); vt_free(vs); vt_free(vi); vt_free(ce);
    vt_free(ref); vt_free(out);
}

static void test_prefill_shapes(void)
{
    const prefill_case cases[] = {
        /* B Hq Hkv Sq Skv D f16q f16o const vscale ncents neg_inf */
        {1, 1, 1, 1, 1, 64, false, false, false, false, 1, 0},
        {1, 4, 1, 17, 63, 64, true, true, true, false, 16, 0},
        {1, 4, 4, 65, 65, 128, false, true, false, true, 7, 0},
        {2, 4, 1, 200, 1000, 128, true, false, true, true, 16, 0},
        {1, 1, 1, 63, 17, 128, false, false, true, true, 3, 0},
        {1, 8, 2, 1000, 200, 64, true, true, false, false, 16, 0},
        {1, 2, 1, 130, 300, 256, false, false, true, true, 16, 0},
        {1, 2, 2, 70, 90, 40, true, false, true, false, 5, 0},
        {1, 4, 1, 129, 129, 128, true, true, true, true, 16, 1},
        {1, 2, 2, 33, 100, 64, false, false, true, false, 2, 2},
        {1, 4, 2, 1, 1000, 128, false, true, false, true, 12, 0},
        {1, 8, 8, 300, 4096, 128, true, true, false, false, 16, 0},
        {1, 8, 2, 512, 2048, 128, true, true, true, true, 16, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(cases[i]);
}

/* What this backend refuses, with the argument named. */
static void test_backend_errors(void)
{
    DLTensor *q = vt_new(VT_F32, VT_DIMS(1, 1, 2, 8)), *sc = vt_new(VT_F32, VT_DIMS(1));
    DLTensor *kb = vt_new(VT_U8, VT_DIMS(1, 1, 4, 1)), *km = vt_new(VT_F32, VT_DIMS(1, 1, 4));
    DLTensor *vi = vt_new(VT_U8, VT_DIMS(1, 1, 4, 4)), *ce = vt_new(VT_F32, VT_DIMS(4));
    DLTensor *out = vt_new(VT_F32, VT_DIMS(1, 1, 2, 8));
    DLTensor *dq = ct_upload(q), *dsc = ct_upload(sc), *dkb = ct_upload(kb), *dkm = ct_upload(km);
    DLTensor *dvi = ct_upload(vi), *dce = ct_upload(ce), *dout = ct_upload(out);
    dq->shape[2] = 1;
    dout->shape[2] = 1;
    dq->byte_offset = 4; /* aligned to f32, not to 16 bytes */
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "'q' is not",
             vq_rabitq_prefill_attend(ctx, dq, dsc, dkb, dkm, NULL, dvi, dce, dout, NULL));
    ct_free(dq); ct_free(dsc); ct_free(dkb); ct_free(dkm); ct_free(dvi); ct_free(dce); ct_free(dout);
    vt_free(q); vt_free(sc); vt_free(kb); vt_free(km); vt_free(vi); vt_free(ce); vt_free(out);
}

int main(void)
{
    ct_require_device();
    vq_rng_seed(&rng, ct_seed());
    ctx = ct_ctx();
    cpu = vt_ctx(0);
    if (!ctx || !cpu) {
        printf("FAIL: ctx creation\n");
        return 1;
    }
    VT_RUN(test_backend_errors);
    VT_RUN(test_prefill_shapes);
    vq_ctx_free(ctx);
    vq_ctx_free(cpu);
    return vt_finish();
}
#endif /* VQ_TEST_HAVE_CUDA */
