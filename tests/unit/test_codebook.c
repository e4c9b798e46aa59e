/* test_codebook.c — the scalar value encoder (docs/FORMATS.md §11): vq_codebook_quantize
 * against a brute-force float64 nearest centroid on every ISA, and
 * vq_lloyd_max_fit against a plain float64 Lloyd iteration; exact ties,
 * statistical quality on N(0,1), and every error path. */
#include "formats/lloyd_max.h"
#include "harness.h"

static int ref_nearest(double x, const float *c, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (fabs(x - c[i]) < fabs(x - c[best])) best = i;
    return best;
}

/* Within 1e-6 (relative, at least on the unit scale) of a midpoint. */
static bool near_midpoint(double x, const float *c, int n)
{
    for (int i = 0; i + 1 < n; i++) {
        const double m = 0.5 * ((double)c[i] + c[i + 1]);
        if (fabs(x - m) <= 1e-6 * fmax(1.0, fabs(m))) return true;
    }
    return false;
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void each_isa_quantize(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 61);
    const int sizes[] = {1, 2, 3, 7, 15, 16, 17, 100, 255, 256};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int n = sizes[s];
        DLTensor *cents = vt_new(VT_F32, VT_DIMS(n));
        vt_fill_normal(cents, &rng, 0.0, 2.0);
        qsort(cents->data, (size_t)n, 4, cmp_float);
        if (n > 4) ((float *)cents->data)[2] = ((float *)cents->data)[1]; /* a duplicate centroid */
        const float *c = cents->data;
        for (int t = 0; t < 2; t++) {
            DLTensor *x = vt_new(t ? VT_F16 : VT_F32, VT_DIMS(3, 1001)), *idx = vt_new(VT_U8, VT_DIMS(3, 1001));
            vt_fill_normal(x, &rng, 0.0, 2.5);
            VT_OK(ctx, vq_codebook_quantize(ctx, x, cents, idx));
            int wrong = 0, exempt = 0;
            for (int64_t i = 0; i < vt_numel(x); i++) {
                const double v = vt_get(x, i);
                const int got = (int)vt_get(idx, i), want = ref_nearest(v, c, n);
                if (got == want) continue;
                if (near_midpoint(v, c, n)) exempt++;
                else wrong++;
            }
            VT_CHECK(wrong == 0 && exempt <= 2, "%s n %d dtype %d: %d wrong, %d near midpoints", isa, n, t, wrong, exempt);
            vt_free(x);
            vt_free(idx);
        }
        vt_free(cents);
    }
    /* exact ties go to the lower index; beyond the ends clamp */
    DLTensor *cents = vt_new(VT_F32, VT_DIMS(3)), *x = vt_new(VT_F32, VT_DIMS(9)), *idx = vt_new(VT_U8, VT_DIMS(9));
    const float cv[3] = {0, 1, 3}, xv[9] = {0.5f, 2.0f, -100, 100, 0.49999997f, 0.50000006f, 1, 3, -0.0f};
    const int want[9] = {0, 1, 0, 2, 0, 1, 1, 2, 0};
    memcpy(cents->data, cv, sizeof cv);
    memcpy(x->data, xv, sizeof xv);
    VT_OK(ctx, vq_codebook_quantize(ctx, x, cents, idx));
    for (int i = 0; i < 9; i++) VT_CHECK(vt_get(idx, i) == want[i], "%s x=%g: idx %g, want %d", isa, xv[i], vt_get(idx, i), want[i]);
    vt_free(cents);
    vt_free(x);
    vt_free(idx);
}

static void test_quantize(void) { vt_for_each_isa(2, each_isa_quantize); }

/* The plain float64 Lloyd iteration the library must reproduce: same
 * quantile init, brute-force nearest assignment (ties lower), empty cells
 * keep their centroid. */
static void ref_fit(const DLTensor *samples, int n, int iters, double *c)
{
    const int64_t N = vt_numel(samples);
    float *s = malloc((size_t)N * 4);
    for (int64_t i = 0; i < N; i++) s[i] = (float)vt_get(samples, i);
    qsort(s, (size_t)N, 4, cmp_float);
    for (int i = 0; i < n; i++) c[i] = s[(int64_t)((i + 0.5) * (double)N / n)];
    double *sum = malloc((size_t)n * sizeof *sum);
    int64_t *cnt = malloc((size_t)n * sizeof *cnt);
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++) sum[i] = 0, cnt[i] = 0;
        for (int64_t k = 0; k < N; k++) {
            int best = 0;
            for (int i = 1; i < n; i++)
                if (fabs(s[k] - c[i]) < fabs(s[k] - c[best])) best = i;
            sum[best] += s[k];
            cnt[best]++;
        }
        for (int i = 0; i < n; i++)
            if (cnt[i]) c[i] = sum[i] / cnt[i];
    }
    free(s);
    free(sum);
    free(cnt);
}

static void test_fit_matches_reference(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 71);
    const int ns[] = {1, 2, 4, 16, 64};
    const int iters[] = {1, 7, 30};
    for (int t = 0; t < 2; t++) {
        DLTensor *samples = vt_new(t ? VT_F16 : VT_F32, VT_DIMS(3001));
        vt_fill_keys(samples, &rng, 0, 1.0);
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
            for (size_t b = 0; b < sizeof iters / sizeof iters[0]; b++) {
                const int n = ns[a];
                DLTensor *out = vt_new(VT_F32, VT_DIMS(n));
                double ref[256];
                ref_fit(samples, n, iters[b], ref);
                VT_OK(ctx, vq_lloyd_max_fit(ctx, samples, n, iters[b], out));
                double worst = 0;
                bool ascending = true;
                for (int i = 0; i < n; i++) {
                    worst = fmax(worst, fabs(vt_get(out, i) - ref[i]) / fmax(1.0, fabs(ref[i])));
                    ascending &= i == 0 || vt_get(out, i) >= vt_get(out, i - 1);
                }
                VT_CHECK(worst < 1e-6 && ascending, "dtype %d n %d iters %d: off by %.3g, ascending %d", t, n, iters[b],
                         worst, ascending);
                vt_free(out);
            }
        }
        vt_free(samples);
    }
    /* many repeated values: empty cells keep their centroid, still ascending */
    DLTensor *rep = vt_new(VT_F32, VT_DIMS(100)), *out = vt_new(VT_F32, VT_DIMS(8)), *out2 = vt_new(VT_F32, VT_DIMS(8));
    for (int i = 0; i < 100; i++) vt_set(rep, i, i % 3);
    double ref[8];
    ref_fit(rep, 8, 5, ref);
    VT_OK(ctx, vq_lloyd_max_fit(ctx, rep, 8, 5, out));
    for (int i = 0; i < 8; i++) VT_CHECK(vt_get(out, i) == ref[i], "repeated samples: c[%d] %g vs %g", i, vt_get(out, i), ref[i]);
    VT_OK(ctx, vq_lloyd_max_fit(ctx, rep, 8, 5, out2));
    VT_CHECK(memcmp(out->data, out2->data, 32) == 0, "deterministic");
    vt_free(rep);
    vt_free(out);
    vt_free(out2);
    vq_ctx_free(ctx);
}

/* Fitted to 2^16 N(0,1) samples, 16 levels converge to the Lloyd-Max table:
 * the inner centroids' sampling spread is ~0.01 and the outermost cell's
 * (~1000 samples, sd ~0.35) ~0.015, so 0.06 is over 4 sigma everywhere. */
static void test_fit_recovers_lloyd_max(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 81);
    DLTensor *samples = vt_new(VT_F32, VT_DIMS(65536)), *out = vt_new(VT_F32, VT_DIMS(16));
    vt_fill_normal(samples, &rng, 0, 1);
    VT_OK(ctx, vq_lloyd_max_fit(ctx, samples, 16, 300, out));
    const float *lm = vq_lloyd_max_centroids(4);
    double worst = 0;
    for (int i = 0; i < 16; i++) worst = fmax(worst, fabs(vt_get(out, i) - lm[i]));
    VT_CHECK(worst < 0.06, "fitted codebook differs from Lloyd-Max by %.3g", worst);
    vt_free(samples);
    vt_free(out);
    vq_ctx_free(ctx);
}

static void test_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *x = vt_new(VT_F32, VT_DIMS(4, 5)), *idx = vt_new(VT_U8, VT_DIMS(4, 5)), *cents = vt_new(VT_F32, VT_DIMS(4));
    DLTensor *c2d = vt_new(VT_F32, VT_DIMS(2, 2)), *c257 = vt_new(VT_F32, VT_DIMS(257)), *c16 = vt_new(VT_F16, VT_DIMS(4));
    DLTensor *idx_bad = vt_new(VT_U8, VT_DIMS(4, 4)), *idx_u16 = vt_new(VT_U16, VT_DIMS(4, 5)), *x_u8 = vt_new(VT_U8, VT_DIMS(4, 5));
    vq_rng rng;
    vq_rng_seed(&rng, 4);
    vt_fill_normal(x, &rng, 0, 1);
    const float cv[4] = {-1, 0, 1, 2};
    memcpy(cents->data, cv, sizeof cv);
    for (int i = 0; i < 257; i++) vt_set(c257, i, i);
    void *snap = vt_snapshot(idx);
    VT_CHECK(vq_codebook_quantize(NULL, x, cents, idx) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'x' is NULL", vq_codebook_quantize(ctx, NULL, cents, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cents' is NULL", vq_codebook_quantize(ctx, x, NULL, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out' is NULL", vq_codebook_quantize(ctx, x, cents, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'x': expected dtype", vq_codebook_quantize(ctx, x_u8, cents, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cents': expected rank 1", vq_codebook_quantize(ctx, x, c2d, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cents': expected dtype f32", vq_codebook_quantize(ctx, x, c16, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cents': at most 256 centroids", vq_codebook_quantize(ctx, x, c257, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out': expected shape [4, 5]", vq_codebook_quantize(ctx, x, cents, idx_bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out': expected dtype u8", vq_codebook_quantize(ctx, x, cents, idx_u16));
    ((float *)cents->data)[2] = -5;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cents' must be ascending: element 2", vq_codebook_quantize(ctx, x, cents, idx));
    ((float *)cents->data)[2] = NAN;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cents': element 2 is not finite", vq_codebook_quantize(ctx, x, cents, idx));
    VT_CHECK(vt_unchanged(idx, snap), "failed quantize wrote nothing");
    free(snap);

    DLTensor *samples = vt_new(VT_F32, VT_DIMS(10)), *s2d = vt_new(VT_F32, VT_DIMS(2, 5)), *out = vt_new(VT_F32, VT_DIMS(4));
    DLTensor *out5 = vt_new(VT_F32, VT_DIMS(5)), *out_f16 = vt_new(VT_F16, VT_DIMS(4)), *s_i32 = vt_new(VT_I32, VT_DIMS(10));
    vt_fill_normal(samples, &rng, 0, 1);
    snap = vt_snapshot(out);
    VT_CHECK(vq_lloyd_max_fit(NULL, samples, 4, 3, out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples' is NULL", vq_lloyd_max_fit(ctx, NULL, 4, 3, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples': expected rank 1", vq_lloyd_max_fit(ctx, s2d, 4, 3, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples': expected dtype", vq_lloyd_max_fit(ctx, s_i32, 4, 3, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "n_cents must be in 1..256, got 0", vq_lloyd_max_fit(ctx, samples, 0, 3, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "n_cents must be in 1..256, got 257", vq_lloyd_max_fit(ctx, samples, 257, 3, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "fewer than n_cents = 11", vq_lloyd_max_fit(ctx, samples, 11, 3, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "iters must be >= 1, got 0", vq_lloyd_max_fit(ctx, samples, 4, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cents_out' is NULL", vq_lloyd_max_fit(ctx, samples, 4, 3, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "axis 0 must be n_cents = 4", vq_lloyd_max_fit(ctx, samples, 4, 3, out5));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cents_out': expected dtype f32", vq_lloyd_max_fit(ctx, samples, 4, 3, out_f16));
    vt_set(samples, 7, INFINITY);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples': element 7 is not finite", vq_lloyd_max_fit(ctx, samples, 4, 3, out));
    VT_CHECK(vt_unchanged(out, snap), "failed fit wrote nothing");
    free(snap);
    DLTensor *all[] = {x, idx, cents, c2d, c257, c16, idx_bad, idx_u16, x_u8, samples, s2d, out, out5, out_f16, s_i32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_quantize);
    VT_RUN(test_fit_matches_reference);
    VT_RUN(test_fit_recovers_lloyd_max);
    VT_RUN(test_errors);
    return vt_finish();
}
