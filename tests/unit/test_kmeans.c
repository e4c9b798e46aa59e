/* test_kmeans.c — vq_kmeans: k-means++ seeds are samples (and distinct while
 * distinct samples remain), one Lloyd round equals a float64 reference
 * round, the objective never increases, planted clusters are recovered, the
 * result is deterministic for a seed whatever the thread count; every ISA and
 * every error path. */
#include "harness.h"

/* sum_i min_c ||x_i - cents_c||^2 in float64. */
static double objective(const DLTensor *x, const DLTensor *cents)
{
    const int64_t N = x->shape[0], d = x->shape[1], C = cents->shape[0];
    double total = 0;
    for (int64_t i = 0; i < N; i++) {
        double best = INFINITY;
        for (int64_t c = 0; c < C; c++) {
            double e = 0;
            for (int64_t t = 0; t < d; t++) {
                const double diff = vt_get(x, i * d + t) - vt_get(cents, c * d + t);
                e += diff * diff;
            }
            best = fmin(best, e);
        }
        total += best;
    }
    return total;
}

/* Row c of cents equals some row of x: returns that row, or -1. */
static int64_t matching_sample(const DLTensor *x, const DLTensor *cents, int64_t c)
{
    const int64_t N = x->shape[0], d = x->shape[1];
    for (int64_t i = 0; i < N; i++)
        if (memcmp((const float *)x->data + i * d, (const float *)cents->data + c * d, (size_t)d * sizeof(float)) == 0)
            return i;
    return -1;
}

/* One Lloyd round in float64 from cents0: means of the samples nearest each
 * centroid (ties to the lower index), empty clusters unchanged. */
static double *ref_lloyd_round(const DLTensor *x, const DLTensor *cents0)
{
    const int64_t N = x->shape[0], d = x->shape[1], C = cents0->shape[0];
    double *sum = calloc((size_t)(C * d), sizeof *sum), *cnt = calloc((size_t)C, sizeof *cnt);
    for (int64_t i = 0; i < N; i++) {
        double best = INFINITY;
        int64_t bc = 0;
        for (int64_t c = 0; c < C; c++) {
            double e = 0;
            for (int64_t t = 0; t < d; t++) {
                const double diff = vt_get(x, i * d + t) - vt_get(cents0, c * d + t);
                e += diff * diff;
            }
            if (e < best) { best = e; bc = c; }
        }
        for (int64_t t = 0; t < d; t++) sum[bc * d + t] += vt_get(x, i * d + t);
        cnt[bc] += 1;
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t t = 0; t < d; t++)
            sum[c * d + t] = cnt[c] > 0 ? sum[c * d + t] / cnt[c] : vt_get(cents0, c * d + t);
    free(cnt);
    return sum;
}

static void check_seeding_and_round(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 11);
    const int64_t N = 300, d = 7, C = 37;
    DLTensor *x = vt_new(VT_F32, VT_DIMS(N, d));
    vt_fill_normal(x, &rng, 0.0, 1.0);
    DLTensor *c0 = vt_new(VT_F32, VT_DIMS(C, d)), *c1 = vt_new(VT_F32, VT_DIMS(C, d));
    VT_OK(ctx, vq_kmeans(ctx, x, (int)C, 0, 5, c0));
    int not_sample = 0, repeated = 0;
    for (int64_t c = 0; c < C; c++) {
        const int64_t i = matching_sample(x, c0, c);
        not_sample += i < 0;
        for (int64_t e = 0; e < c; e++) repeated += memcmp((float *)c0->data + e * d, (float *)c0->data + c * d, d * 4) == 0;
    }
    VT_CHECK(not_sample == 0 && repeated == 0, "%s: k-means++ seeds: %d not samples, %d repeated", isa, not_sample, repeated);
    VT_OK(ctx, vq_kmeans(ctx, x, (int)C, 1, 5, c1));
    double *ref = ref_lloyd_round(x, c0);
    VT_CHECK(vt_rel_l2(c1, ref) <= 1e-5, "%s: one Lloyd round rel err %g", isa, vt_rel_l2(c1, ref));
    free(ref);

    /* C == N with distinct samples: k-means++ picks every sample once (a
     * chosen sample has weight 0 and can never be drawn again) */
    DLTensor *all = vt_new(VT_F32, VT_DIMS(N, d));
    VT_OK(ctx, vq_kmeans(ctx, x, (int)N, 0, 9, all));
    char *seen = calloc((size_t)N, 1);
    int dup = 0;
    for (int64_t c = 0; c < N; c++) {
        const int64_t i = matching_sample(x, all, c);
        if (i < 0 || seen[i]) dup++;
        else seen[i] = 1;
    }
    VT_CHECK(dup == 0, "%s: C == N seeding is not a permutation (%d misses)", isa, dup);
    free(seen);
    vt_free(all);
    vt_free(x);
    vt_free(c0);
    vt_free(c1);
}

static void check_objective_monotone(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 12);
    const int64_t N = 500, d = 8, C = 16;
    DLTensor *x = vt_new(VT_F32, VT_DIMS(N, d)), *cents = vt_new(VT_F32, VT_DIMS(C, d));
    vt_fill_keys(x, &rng, 1, 4.0);
    double prev = INFINITY;
    int worse = 0;
    for (int it = 0; it <= 8; it++) {
        VT_OK(ctx, vq_kmeans(ctx, x, (int)C, it, 77, cents));
        const double obj = objective(x, cents);
        /* assignments decided in f32 may flip a float64 tie: allow 1e-6 relative */
        worse += obj > prev * (1.0 + 1e-6);
        prev = obj;
    }
    VT_CHECK(worse == 0, "%s: the objective increased %d times", isa, worse);
    vt_free(x);
    vt_free(cents);
}

/* C well-separated Gaussian blobs (centres 40 apart per axis, sigma 1) of
 * 100 points each: every centre is matched by a centroid within 1.0. The
 * mean of 100 points errs by sigma/10 per axis, ~0.4 in norm over d = 16;
 * 1.0 is beyond 5 standard deviations of that norm. */
static void check_planted(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 13);
    const int64_t C = 8, per = 100, d = 16, N = C * per;
    double centre[8][16];
    for (int64_t c = 0; c < C; c++)
        for (int64_t t = 0; t < d; t++) centre[c][t] = 40.0 * (double)((c >> (t % 3)) & 1) + (t == 15 ? 40.0 * c : 0);
    DLTensor *x = vt_new(VT_F32, VT_DIMS(N, d)), *cents = vt_new(VT_F32, VT_DIMS(C, d));
    for (int64_t i = 0; i < N; i++)
        for (int64_t t = 0; t < d; t++) vt_set(x, i * d + t, centre[i % C][t] + vq_rng_normal(&rng));
    VT_OK(ctx, vq_kmeans(ctx, x, (int)C, 20, 3, cents));
    int missed = 0;
    for (int64_t c = 0; c < C; c++) {
        double best = INFINITY;
        for (int64_t k = 0; k < C; k++) {
            double e = 0;
            for (int64_t t = 0; t < d; t++) e += pow(vt_get(cents, k * d + t) - centre[c][t], 2);
            best = fmin(best, sqrt(e));
        }
        missed += best > 1.0;
    }
    VT_CHECK(missed == 0, "%s: %d planted centres not recovered", isa, missed);
    vt_free(x);
    vt_free(cents);
}

static void check_determinism(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 14);
    const int64_t N = 30000, d = 12, C = 20;  /* enough samples for several tasks per phase */
    DLTensor *x = vt_new(VT_F32, VT_DIMS(N, d));
    vt_fill_normal(x, &rng, 0.0, 1.0);
    DLTensor *a = vt_new(VT_F32, VT_DIMS(C, d)), *b = vt_new(VT_F32, VT_DIMS(C, d)), *e = vt_new(VT_F32, VT_DIMS(C, d));
    VT_OK(ctx, vq_kmeans(ctx, x, (int)C, 5, 1234, a));
    /* the same seed on a one-thread ctx of the same ISA */
    setenv("VQ_ISA", isa, 1);
    vq_ctx *one = vt_ctx(1);
    VT_OK(one, vq_kmeans(one, x, (int)C, 5, 1234, b));
    vq_ctx_free(one);
    VT_CHECK(memcmp(a->data, b->data, vt_bytes(a)) == 0, "%s: same seed, different centroids across thread counts", isa);
    VT_OK(ctx, vq_kmeans(ctx, x, (int)C, 5, 1234, b));
    VT_CHECK(memcmp(a->data, b->data, vt_bytes(a)) == 0, "%s: same seed, different centroids", isa);
    VT_OK(ctx, vq_kmeans(ctx, x, (int)C, 5, 1235, e));
    VT_CHECK(memcmp(a->data, e->data, vt_bytes(a)) != 0, "%s: another seed gives the same centroids", isa);
    vt_free(x);
    vt_free(a);
    vt_free(b);
    vt_free(e);
}

/* Fewer distinct samples than centroids: seeding falls back to uniform
 * draws and must still return samples, without reading past N. */
static void check_degenerate(vq_ctx *ctx, const char *isa)
{
    const int64_t N = 10, d = 3, C = 10;
    DLTensor *x = vt_new(VT_F32, VT_DIMS(N, d)), *cents = vt_new(VT_F32, VT_DIMS(C, d));
    for (int64_t i = 0; i < N * d; i++) vt_set(x, i, (double)((i / d) % 2));  /* two distinct rows */
    VT_OK(ctx, vq_kmeans(ctx, x, (int)C, 3, 8, cents));
    int odd = 0;
    for (int64_t i = 0; i < C * d; i++) odd += vt_get(cents, i) != 0.0 && vt_get(cents, i) != 1.0;
    VT_CHECK(odd == 0, "%s: centroids of two distinct points are not those points (%d values)", isa, odd);
    VT_CHECK(objective(x, cents) == 0.0, "%s: objective %g", isa, objective(x, cents));
    vt_free(x);
    vt_free(cents);
}

static void test_seeding_and_round(void) { vt_for_each_isa(3, check_seeding_and_round); }
static void test_objective_monotone(void) { vt_for_each_isa(2, check_objective_monotone); }
static void test_planted(void) { vt_for_each_isa(2, check_planted); }
static void test_determinism(void) { vt_for_each_isa(3, check_determinism); }
static void test_degenerate(void) { vt_for_each_isa(2, check_degenerate); }

static void test_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *x = vt_new(VT_F32, VT_DIMS(10, 4)), *out = vt_new(VT_F32, VT_DIMS(3, 4));
    DLTensor *x1 = vt_new(VT_F32, VT_DIMS(40)), *xh = vt_new(VT_F16, VT_DIMS(10, 4)), *bad = vt_new(VT_F32, VT_DIMS(3, 5));
    vq_rng rng;
    vq_rng_seed(&rng, 1);
    vt_fill_normal(x, &rng, 0, 1);
    VT_CHECK(vq_kmeans(NULL, x, 3, 1, 0, out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples' is NULL", vq_kmeans(ctx, NULL, 3, 1, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples': expected rank 2", vq_kmeans(ctx, x1, 3, 1, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples': expected dtype f32", vq_kmeans(ctx, xh, 3, 1, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'centroids_out' is NULL", vq_kmeans(ctx, x, 3, 1, 0, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "C must be in 1..N = 10", vq_kmeans(ctx, x, 0, 1, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "C must be in 1..N = 10 (the samples), got 11", vq_kmeans(ctx, x, 11, 1, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "iters must be >= 0, got -1", vq_kmeans(ctx, x, 3, -1, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'centroids_out': expected shape [3, 4], got [3, 5]", vq_kmeans(ctx, x, 3, 1, 0, bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'centroids_out': expected shape [2, 4], got [3, 4]", vq_kmeans(ctx, x, 2, 1, 0, out));
    VT_CHECK(vt_count_poisoned(out) == vt_numel(out) && vt_count_poisoned(bad) == vt_numel(bad), "output written");
    vt_free(x);
    vt_free(out);
    vt_free(x1);
    vt_free(xh);
    vt_free(bad);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_seeding_and_round);
    VT_RUN(test_objective_monotone);
    VT_RUN(test_planted);
    VT_RUN(test_determinism);
    VT_RUN(test_degenerate);
    VT_RUN(test_errors);
    return vt_finish();
}
