/* test_qjl.c — QJL sign sketches: projection stream, encoder, symmetric and
 * asymmetric estimators against float64 plain-loop references on every ISA
 * and awkward shapes; the statistical properties of both estimators over many
 * independent projections; every error path. */
#include "harness.h"

static int64_t words_of(int64_t m) { return (m + 31) / 32; }

/* Bit j of row `row` of a u32 sketch tensor with W words per row. */
static int sketch_bit(const DLTensor *bits, int64_t row, int64_t j)
{
    const uint32_t *w = (const uint32_t *)bits->data + row * bits->shape[bits->ndim - 1];
    return (int)((w[j / 32] >> (j % 32)) & 1u);
}

/* float64 (S x)_j of row r of x [n, d] and the size of its terms (for the
 * decision-boundary allowance). */
static double ref_proj(const float *S, int64_t d, const DLTensor *x, int64_t r, int64_t j, double *mag)
{
    double acc = 0, a = 0;
    for (int64_t c = 0; c < d; c++) {
        const double t = (double)S[j * d + c] * vt_get(x, r * d + c);
        acc += t;
        a += fabs(t);
    }
    if (mag) *mag = a;
    return acc;
}

static void test_projection_stream(void)
{
    float out[3 * 5];
    VT_CHECK(vq_qjl_projection(9, 3, 5, out) == VQ_OK, "projection");
    vq_rng rng;
    vq_rng_seed(&rng, 9);
    int same = 1;
    for (int i = 0; i < 15; i++) same &= out[i] == (float)vq_rng_normal(&rng);
    VT_CHECK(same, "projection is the vq_rng_normal stream of the seed, row-major");
    VT_CHECK(vq_qjl_projection(9, 0, 5, out) == VQ_ERR_INVALID_ARGUMENT, "m = 0");
    VT_CHECK(vq_qjl_projection(9, 3, 0, out) == VQ_ERR_INVALID_ARGUMENT, "d = 0");
    VT_CHECK(vq_qjl_projection(9, 3, 5, NULL) == VQ_ERR_INVALID_ARGUMENT, "out NULL");
    VT_CHECK(vq_qjl_projection(9, INT64_MAX / 2, 5, out) == VQ_ERR_INVALID_ARGUMENT, "m * d overflows");
}

/* One shape: keys [b, h, n, d], queries [b, h, d], sketch m. */
static void run_case(vq_ctx *ctx, const char *isa, int64_t b, int64_t h, int64_t n, int64_t d, int64_t m,
                     DLDataType dt, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "%s B=%lld H=%lld N=%lld D=%lld m=%lld %s", isa, (long long)b, (long long)h,
             (long long)n, (long long)d, (long long)m, dt.bits == 16 ? "f16" : "f32");
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    DLTensor *keys = vt_new(dt, VT_DIMS(b, h, n, d)), *q = vt_new(dt, VT_DIMS(b, h, d));
    DLTensor *S = vt_new(VT_F32, VT_DIMS(m, d));
    vt_fill_keys(keys, &rng, 2, 6.0);
    vt_fill_normal(q, &rng, 0, 1);
    VT_CHECK(vq_qjl_projection(seed, m, d, S->data) == VQ_OK, "projection");
    const float *Sf = S->data;
    const int64_t w = words_of(m), rows = b * h * n;
    DLTensor *kbits = vt_new(VT_U32, VT_DIMS(b, h, n, w)), *qbits = vt_new(VT_U32, VT_DIMS(b, h, w));
    VT_OK(ctx, vq_qjl_encode(ctx, keys, S, kbits));
    VT_OK(ctx, vq_qjl_encode(ctx, q, S, qbits));

    /* encoder: bit j = ((S k)_j >= 0), unused bits 0; a flip is accepted only
     * where (S k)_j is within 1e-5 of the size of its terms of zero */
    int64_t wrong = 0, dirty = 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < m; j++) {
            double mag;
            const double p = ref_proj(Sf, d, keys, r, j, &mag);
            wrong += sketch_bit(kbits, r, j) != (p >= 0) && fabs(p) > 1e-5 * mag;
        }
        for (int64_t j = m; j < w * 32; j++) dirty += sketch_bit(kbits, r, j);
    }
    VT_CHECK(wrong == 0 && dirty == 0, "%s: %lld wrong bits, %lld unused bits set", what, (long long)wrong,
             (long long)dirty);

    /* norms */
    DLTensor *qn = vt_new(VT_F32, VT_DIMS(b, h)), *kn = vt_new(VT_F32, VT_DIMS(b, h, n));
    for (int64_t i = 0; i < rows; i++) {
        double s = 0;
        for (int64_t c = 0; c < d; c++) s += vt_get(keys, i * d + c) * vt_get(keys, i * d + c);
        vt_set(kn, i, sqrt(s));
    }
    for (int64_t l = 0; l < b * h; l++) vt_set(qn, l, 0.5 + (double)l);

    /* symmetric estimator: cos(pi * ham / m) [* ||q|| * ||k||] */
    DLTensor *out = vt_new(VT_F32, VT_DIMS(b, h, n)), *out_n = vt_like(out, VT_F32);
    VT_OK(ctx, vq_qjl_inner_product(ctx, qbits, kbits, (int)d, (int)m, out, NULL));
    const vq_qjl_inner_product_opts norms = {qn, kn};
    VT_OK(ctx, vq_qjl_inner_product(ctx, qbits, kbits, (int)d, (int)m, out_n, &norms));
    double *ref = malloc((size_t)rows * sizeof *ref), *ref_n = malloc((size_t)rows * sizeof *ref_n);
    for (int64_t i = 0; i < rows; i++) {
        int ham = 0;
        for (int64_t j = 0; j < m; j++) ham += sketch_bit(qbits, i / n, j) != sketch_bit(kbits, i, j);
        ref[i] = cos(M_PI * ham / (double)m);
        ref_n[i] = ref[i] * vt_get(qn, i / n) * vt_get(kn, i);
    }
    VT_CHECK(vt_count_poisoned(out) == 0 && vt_count_poisoned(out_n) == 0, "%s: unwritten output", what);
    VT_CHECK(vt_rel_l2(out, ref) <= 1e-5, "%s: inner product rel err %g", what, vt_rel_l2(out, ref));
    VT_CHECK(vt_rel_l2(out_n, ref_n) <= 1e-5, "%s: normed inner product rel err %g", what, vt_rel_l2(out_n, ref_n));

    /* asymmetric score: sqrt(pi/2)/m * ||k|| * sum_j (S q)_j sign_j */
    DLTensor *score = vt_like(out, VT_F32);
    VT_OK(ctx, vq_qjl_score(ctx, q, S, kbits, kn, score));
    for (int64_t i = 0; i < rows; i++) {
        double acc = 0;
        for (int64_t j = 0; j < m; j++)
            acc += ref_proj(Sf, d, q, i / n, j, NULL) * (sketch_bit(kbits, i, j) ? 1.0 : -1.0);
        ref[i] = sqrt(M_PI / 2) / (double)m * vt_get(kn, i) * acc;
    }
    VT_CHECK(vt_count_poisoned(score) == 0, "%s: unwritten score", what);
    VT_CHECK(vt_rel_l2(score, ref) <= 1e-5, "%s: score rel err %g", what, vt_rel_l2(score, ref));

    free(ref);
    free(ref_n);
    DLTensor *all[] = {keys, q, S, kbits, qbits, qn, kn, out, out_n, score};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
}

static void qjl_all_cases(vq_ctx *ctx, const char *isa)
{
    static const int64_t lens[] = {1, 7, 97}, dims[] = {64, 96, 128, 256}, ms[] = {32, 80, 256, 7};
    int n = 0;
    for (int si = 0; si < 3; si++)
        for (int di = 0; di < 4; di++, n++)
            run_case(ctx, isa, 1 + n % 2, 2, lens[si], dims[di], ms[n % 4], n % 3 ? VT_F32 : VT_F16, 40 + (uint64_t)n);
}

static void test_qjl_vs_reference(void) { vt_for_each_isa(2, qjl_all_cases); }

/* Rank-1 query: query [D], key_bits [N, W], out [N]; query_norm [1]. */
static void test_qjl_rank1(void)
{
    vq_ctx *ctx = vt_ctx(1);
    const int64_t d = 64, m = 40, n = 5;
    vq_rng rng;
    vq_rng_seed(&rng, 8);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(d)), *k = vt_new(VT_F32, VT_DIMS(n, d)), *S = vt_new(VT_F32, VT_DIMS(m, d));
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(k, &rng, 0, 1);
    vq_qjl_projection(3, m, d, S->data);
    DLTensor *qb = vt_new(VT_U32, VT_DIMS(2)), *kb = vt_new(VT_U32, VT_DIMS(n, 2));
    DLTensor *qn = vt_new(VT_F32, VT_DIMS(1)), *kn = vt_new(VT_F32, VT_DIMS(n));
    DLTensor *o1 = vt_new(VT_F32, VT_DIMS(n)), *o2 = vt_like(o1, VT_F32);
    vt_set(qn, 0, 2.0);
    for (int64_t i = 0; i < n; i++) vt_set(kn, i, 1.0);
    VT_OK(ctx, vq_qjl_encode(ctx, q, S, qb));
    VT_OK(ctx, vq_qjl_encode(ctx, k, S, kb));
    VT_OK(ctx, vq_qjl_inner_product(ctx, qb, kb, (int)d, (int)m, o1, NULL));
    const vq_qjl_inner_product_opts norms = {qn, kn};
    VT_OK(ctx, vq_qjl_inner_product(ctx, qb, kb, (int)d, (int)m, o2, &norms));
    int ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= vt_get(o2, i) == 2.0 * vt_get(o1, i);
    VT_CHECK(ok, "query_norm [1] scales a rank-1 query");
    VT_OK(ctx, vq_qjl_score(ctx, q, S, kb, kn, o1));
    VT_CHECK(vt_count_poisoned(o1) == 0, "rank-1 score written");
    DLTensor *all[] = {q, k, S, qb, kb, qn, kn, o1, o2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

/* ---- statistics over independent projections ----
 *
 * Fixed unit query q and keys k_i = ||k_i|| (c_i q + sqrt(1 - c_i^2) u_i) with
 * u_i a unit vector orthogonal to q, so q.k_i = ||k_i|| c_i and the angle is
 * theta_i = acos(c_i). T projections S (m rows each, fresh seed per trial).
 *
 * Asymmetric score: for one Gaussian row s, (s.q, s.k) are jointly normal and
 * E[(s.q) sign(s.k)] = sqrt(2/pi) q.k / ||k||, E[(s.q)^2] = ||q||^2, so the
 * estimate X = sqrt(pi/2)/m ||k|| sum_j (s_j.q) sign(s_j.k) has E[X] = q.k and
 * Var[X] = (pi/2 ||q||^2 ||k||^2 - (q.k)^2) / m. The mean of T trials must be
 * within 5 standard deviations sqrt(Var/T) of q.k (two-sided p ~ 6e-7 per check).
 *
 * Symmetric estimator: each row's signs differ with probability p = theta/pi,
 * so H/m (H the Hamming distance, recovered as acos(out)/pi) has mean p and
 * variance p(1-p)/m; its T-mean must be within 5 sqrt(p(1-p)/(mT)) of p. The
 * output cos(pi H/m) itself then has mean cos(theta) up to the Jensen bias
 * (pi^2/2) p(1-p)/m and a sampling error of at most pi times that of H/m. */
static void test_qjl_statistics(void)
{
    vq_ctx *ctx = vt_ctx(2);
    enum { D = 64, M = 128, K = 5, T = 400 };
    const double c[K] = {0.9, 0.5, 0.0, -0.3, -0.95}, norm[K] = {1.0, 2.0, 0.5, 3.0, 1.5};
    vq_rng rng;
    vq_rng_seed(&rng, 2024);
    double qv[D], u[D];
    double s = 0;
    for (int i = 0; i < D; i++) { qv[i] = vq_rng_normal(&rng); s += qv[i] * qv[i]; }
    for (int i = 0; i < D; i++) qv[i] /= sqrt(s);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(D)), *k = vt_new(VT_F32, VT_DIMS(K, D)), *kn = vt_new(VT_F32, VT_DIMS(K));
    for (int i = 0; i < D; i++) vt_set(q, i, qv[i]);
    double qk[K];
    for (int j = 0; j < K; j++) {
        /* u: a random vector made orthogonal to q (Gram-Schmidt), unit length */
        double dq = 0, nu = 0;
        for (int i = 0; i < D; i++) { u[i] = vq_rng_normal(&rng); dq += u[i] * vt_get(q, i); }
        for (int i = 0; i < D; i++) { u[i] -= dq * vt_get(q, i); nu += u[i] * u[i]; }
        double kk = 0, dot = 0;
        for (int i = 0; i < D; i++) {
            vt_set(k, j * D + i, norm[j] * (c[j] * vt_get(q, i) + sqrt(1 - c[j] * c[j]) * u[i] / sqrt(nu)));
            kk += vt_get(k, j * D + i) * vt_get(k, j * D + i);
            dot += vt_get(k, j * D + i) * vt_get(q, i);
        }
        vt_set(kn, j, sqrt(kk));
        qk[j] = dot;   /* q.k of the f32 vectors actually encoded */
    }
    DLTensor *S = vt_new(VT_F32, VT_DIMS(M, D)), *kb = vt_new(VT_U32, VT_DIMS(K, M / 32)),
             *qb = vt_new(VT_U32, VT_DIMS(M / 32)), *score = vt_new(VT_F32, VT_DIMS(K)), *cosv = vt_like(score, VT_F32);
    double sum_score[K] = {0}, sum_p[K] = {0}, sum_cos[K] = {0};
    for (int t = 0; t < T; t++) {
        vq_qjl_projection(1000 + (uint64_t)t, M, D, S->data);
        VT_OK(ctx, vq_qjl_encode(ctx, k, S, kb));
        VT_OK(ctx, vq_qjl_encode(ctx, q, S, qb));
        VT_OK(ctx, vq_qjl_score(ctx, q, S, kb, kn, score));
        VT_OK(ctx, vq_qjl_inner_product(ctx, qb, kb, D, M, cosv, NULL));
        for (int j = 0; j < K; j++) {
            sum_score[j] += vt_get(score, j);
            const double cj = vt_get(cosv, j);
            sum_p[j] += acos(cj < -1 ? -1 : cj > 1 ? 1 : cj) / M_PI;
            sum_cos[j] += cj;
        }
    }
    for (int j = 0; j < K; j++) {
        const double kk = vt_get(kn, j);
        const double var = (M_PI / 2 * kk * kk - qk[j] * qk[j]) / M;
        const double mean = sum_score[j] / T;
        VT_CHECK(fabs(mean - qk[j]) <= 5 * sqrt(var / T), "score mean %g vs q.k %g (5 sigma = %g)", mean, qk[j],
                 5 * sqrt(var / T));
        const double p = acos(qk[j] / kk) / M_PI, vp = p * (1 - p) / M;
        const double mp = sum_p[j] / T, mc = sum_cos[j] / T;
        VT_CHECK(fabs(mp - p) <= 5 * sqrt(vp / T) + 1e-6, "angle/pi mean %g vs %g", mp, p);
        VT_CHECK(fabs(mc - cos(M_PI * p)) <= 5 * M_PI * sqrt(vp / T) + M_PI * M_PI / 2 * vp + 1e-6,
                 "cos estimate mean %g vs cos(angle) %g", mc, cos(M_PI * p));
    }
    DLTensor *all[] = {q, k, kn, S, kb, qb, score, cosv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

/* ---- errors ---- */

static void test_qjl_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    const vq_status E = VQ_ERR_INVALID_ARGUMENT;
    DLTensor *keys = vt_new(VT_F32, VT_DIMS(2, 5, 64)), *q = vt_new(VT_F32, VT_DIMS(2, 64));
    DLTensor *S = vt_new(VT_F32, VT_DIMS(40, 64)), *S16 = vt_like(S, VT_F16), *S63 = vt_new(VT_F32, VT_DIMS(40, 63));
    DLTensor *S3 = vt_new(VT_F32, VT_DIMS(1, 40, 64));
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    vt_fill_normal(keys, &rng, 0, 1);
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(S, &rng, 0, 1);
    DLTensor *kb = vt_new(VT_U32, VT_DIMS(2, 5, 2)), *qb = vt_new(VT_U32, VT_DIMS(2, 2));
    VT_OK(ctx, vq_qjl_encode(ctx, keys, S, kb));
    VT_OK(ctx, vq_qjl_encode(ctx, q, S, qb));
    DLTensor *bits = vt_new(VT_U32, VT_DIMS(2, 5, 2)), *bits_u8 = vt_like(bits, VT_U8);
    DLTensor *bits_w3 = vt_new(VT_U32, VT_DIMS(2, 5, 3)), *bits_lead = vt_new(VT_U32, VT_DIMS(2, 4, 2));
    DLTensor *out = vt_new(VT_F32, VT_DIMS(2, 5)), *out16 = vt_like(out, VT_F16), *out_bad = vt_new(VT_F32, VT_DIMS(2, 4));
    DLTensor *kn = vt_new(VT_F32, VT_DIMS(2, 5)), *kn_bad = vt_new(VT_F32, VT_DIMS(5)), *qn_bad = vt_new(VT_F32, VT_DIMS(3));
    DLTensor *kn16 = vt_like(kn, VT_F16), *kb_rank = vt_new(VT_U32, VT_DIMS(2, 5, 1, 2));
    vt_fill_normal(kn, &rng, 1, 0.1);
    void *s_bits = vt_snapshot(bits), *s_out = vt_snapshot(out);

    VT_CHECK(vq_qjl_encode(NULL, keys, S, bits) == E, "NULL ctx");
    VT_FAILS(ctx, E, "'keys' is NULL", vq_qjl_encode(ctx, NULL, S, bits));
    VT_FAILS(ctx, E, "'projection' is NULL", vq_qjl_encode(ctx, keys, NULL, bits));
    VT_FAILS(ctx, E, "'bits_out' is NULL", vq_qjl_encode(ctx, keys, S, NULL));
    VT_FAILS(ctx, E, "'keys': expected dtype f32/f16", vq_qjl_encode(ctx, bits_u8, S, bits));
    VT_FAILS(ctx, E, "'projection': expected dtype f32", vq_qjl_encode(ctx, keys, S16, bits));
    VT_FAILS(ctx, E, "'projection': expected rank 2", vq_qjl_encode(ctx, keys, S3, bits));
    VT_FAILS(ctx, E, "'projection'", vq_qjl_encode(ctx, keys, S63, bits));
    VT_FAILS(ctx, E, "'bits_out': expected dtype u32", vq_qjl_encode(ctx, keys, S, bits_u8));
    VT_FAILS(ctx, E, "ceil(m/32)", vq_qjl_encode(ctx, keys, S, bits_w3));
    VT_FAILS(ctx, E, "'bits_out'", vq_qjl_encode(ctx, keys, S, bits_lead));

    VT_FAILS(ctx, E, "'head_dim' must be >= 1", vq_qjl_inner_product(ctx, qb, kb, 0, 40, out, NULL));
    VT_FAILS(ctx, E, "'sketch_dim' must be >= 1", vq_qjl_inner_product(ctx, qb, kb, 64, 0, out, NULL));
    VT_FAILS(ctx, E, "ceil(sketch_dim/32)", vq_qjl_inner_product(ctx, qb, kb, 64, 70, out, NULL));
    VT_FAILS(ctx, E, "'query_bits' is NULL", vq_qjl_inner_product(ctx, NULL, kb, 64, 40, out, NULL));
    VT_FAILS(ctx, E, "'key_bits': expected rank 3", vq_qjl_inner_product(ctx, qb, kb_rank, 64, 40, out, NULL));
    VT_FAILS(ctx, E, "'out'", vq_qjl_inner_product(ctx, qb, kb, 64, 40, out_bad, NULL));
    VT_FAILS(ctx, E, "'out': expected dtype f32", vq_qjl_inner_product(ctx, qb, kb, 64, 40, out16, NULL));
    const vq_qjl_inner_product_opts bad_qn = {qn_bad, NULL}, bad_kn = {NULL, kn16}, bad_kn2 = {NULL, kn_bad};
    VT_FAILS(ctx, E, "'query_norm'", vq_qjl_inner_product(ctx, qb, kb, 64, 40, out, &bad_qn));
    VT_FAILS(ctx, E, "'key_norm': expected dtype f32", vq_qjl_inner_product(ctx, qb, kb, 64, 40, out, &bad_kn));
    VT_FAILS(ctx, E, "'key_norm'", vq_qjl_inner_product(ctx, qb, kb, 64, 40, out, &bad_kn2));

    VT_FAILS(ctx, E, "'key_norm' is NULL", vq_qjl_score(ctx, q, S, kb, NULL, out));
    VT_FAILS(ctx, E, "'query' is NULL", vq_qjl_score(ctx, NULL, S, kb, kn, out));
    VT_FAILS(ctx, E, "'projection'", vq_qjl_score(ctx, q, S63, kb, kn, out));
    VT_FAILS(ctx, E, "'key_bits'", vq_qjl_score(ctx, q, S, bits_w3, kn, out));
    VT_FAILS(ctx, E, "'key_bits': expected rank 4", vq_qjl_score(ctx, keys, S, kb, kn, out));
    VT_FAILS(ctx, E, "'out'", vq_qjl_score(ctx, q, S, kb, kn, out_bad));
    VT_FAILS(ctx, E, "'key_norm'", vq_qjl_score(ctx, q, S, kb, kn_bad, out));
    VT_CHECK(vt_unchanged(bits, s_bits) && vt_unchanged(out, s_out), "a failing call wrote output");
    free(s_bits);
    free(s_out);
    DLTensor *all[] = {keys, q, S, S16, S63, S3, kb, qb, bits, bits_u8, bits_w3, bits_lead, out, out16, out_bad,
                       kn, kn_bad, qn_bad, kn16, kb_rank};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_projection_stream);
    VT_RUN(test_qjl_vs_reference);
    VT_RUN(test_qjl_rank1);
    VT_RUN(test_qjl_statistics);
    VT_RUN(test_qjl_errors);
    return vt_finish();
}
