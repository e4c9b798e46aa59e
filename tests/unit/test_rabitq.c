/* test_rabitq.c — RaBitQ: the layout helpers of format_rabitq.h; the encoder,
 * Hamming scorer and value packer against float64 plain-loop references on
 * every ISA and awkward shapes; the statistics of the exact score over random
 * rotations (unbiased magnitude vs the L1 magnitude); every error path. */
#include "formats/format_rabitq.h"
#include "harness.h"

static void test_format_rabitq(void)
{
    vq_rng rng;
    vq_rng_seed(&rng, 2);
    uint8_t a[128], b[128];
    for (int i = 0; i < 128; i++) { a[i] = (uint8_t)vq_rng_next(&rng); b[i] = (uint8_t)vq_rng_next(&rng); }
    int bad = 0, ham = 0;
    for (int j = 0; j < 1024; j++) {
        const int bit = (a[j / 8] >> (j % 8)) & 1;
        bad += vq_rabitq_sign(a, j) != (bit ? 1.0f : -1.0f);
        ham += bit != ((b[j / 8] >> (j % 8)) & 1);
        bad += vq_rabitq_nibble(a, j % 256) != (uint32_t)((j % 256) % 2 ? a[(j % 256) / 2] >> 4 : a[(j % 256) / 2] & 15);
    }
    VT_CHECK(bad == 0, "%d sign/nibble mismatches", bad);
    VT_CHECK(vq_rabitq_hamming(a, b, 128) == ham, "hamming %d vs %d", vq_rabitq_hamming(a, b, 128), ham);
    VT_CHECK(vq_popcount32(0xffffffffu) == 32 && vq_popcount32(0x80000001u) == 2, "popcount");
    const uint32_t w[2] = {0x80000001u, 0x2u};
    VT_CHECK(vq_bit_u32(w, 0) == 1 && vq_bit_u32(w, 31) == 1 && vq_bit_u32(w, 30) == 0 && vq_bit_u32(w, 33) == 1,
             "u32 stream order");
    VT_CHECK(vq_rabitq_pack_pair(0x13, 0x2f) == 0xf3, "pack pair masks and orders nibbles");
    VT_CHECK(vq_rabitq_clamp_index(20, 16) == 15 && vq_rabitq_clamp_index(3, 16) == 3, "clamp");
    VT_CHECK(vq_rabitq_hamming_logit(64, 10, 0.5f, 2.0f, 1.0f) == 45.0f, "hamming logit (64-20)*.5*2+1");
    VT_CHECK(vq_rabitq_exact_logit(3.0f, 0.5f, 2.0f, -1.0f) == 2.0f, "exact logit");
}

/* ---------------------------------------------------------------- references */

/* float64 rot(x) = H_D (diag . x) / sqrt(D), H_D[i][j] = (-1)^popcount(i & j)
 * (the Sylvester matrix), as a plain O(D^2) loop. mag[i] = sum_j |terms|. */
static void ref_rotate(const double *x, const float *diag, int64_t d, double *y, double *mag)
{
    for (int64_t i = 0; i < d; i++) {
        double acc = 0, a = 0;
        for (int64_t j = 0; j < d; j++) {
            const double t = (__builtin_popcountll((unsigned long long)(i & j)) & 1 ? -1.0 : 1.0) * x[j] *
                             (diag ? diag[j] : 1.0);
            acc += t;
            a += fabs(t);
        }
        y[i] = acc / sqrt((double)d);
        if (mag) mag[i] = a / sqrt((double)d);
    }
}

/* keys [b, h, n, d] against the reference: bits (a flip accepted only where
 * y_j is within 1e-5 of its terms' size of 0), both magnitudes. */
static void run_encode_case(vq_ctx *ctx, const char *isa, int64_t b, int64_t n, int64_t d, DLDataType dt,
                            int with_diag, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "%s B=%lld N=%lld D=%lld %s %s", isa, (long long)b, (long long)n, (long long)d,
             dt.bits == 16 ? "f16" : "f32", with_diag ? "diag" : "no diag");
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    const int64_t h = 2, rows = b * h * n;
    DLTensor *keys = vt_new(dt, VT_DIMS(b, h, n, d)), *diag = vt_new(VT_F32, VT_DIMS(d));
    vt_fill_keys(keys, &rng, 2, 8.0);
    for (int64_t c = 0; c < d; c++) vt_set(keys, c, 0.0);   /* row 0 is a zero key */
    VT_CHECK(vq_random_signs(seed, d, diag->data) == VQ_OK, "signs");
    DLTensor *bits = vt_new(VT_U8, VT_DIMS(b, h, n, d / 8)), *bits2 = vt_like(bits, VT_U8);
    DLTensor *mag_l1 = vt_new(VT_F32, VT_DIMS(b, h, n)), *mag_ub = vt_like(mag_l1, VT_F32);
    const vq_rabitq_encode_opts ub = {VQ_RABITQ_MAG_UNBIASED};
    VT_OK(ctx, vq_rabitq_encode(ctx, keys, with_diag ? diag : NULL, bits, mag_l1, NULL));
    VT_OK(ctx, vq_rabitq_encode(ctx, keys, with_diag ? diag : NULL, bits2, mag_ub, &ub));
    VT_CHECK(memcmp(bits->data, bits2->data, vt_bytes(bits)) == 0, "%s: bits depend on the magnitude option", what);
    VT_CHECK(vt_count_poisoned(mag_l1) == 0 && vt_count_poisoned(mag_ub) == 0, "%s: unwritten magnitudes", what);

    double *x = malloc((size_t)d * sizeof *x), *y = malloc((size_t)d * sizeof *y), *tm = malloc((size_t)d * sizeof *tm);
    double *ref_l1 = malloc((size_t)rows * sizeof *ref_l1), *ref_ub = malloc((size_t)rows * sizeof *ref_ub);
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < d; c++) x[c] = vt_get(keys, r * d + c);
        ref_rotate(x, with_diag ? diag->data : NULL, d, y, tm);
        double l1 = 0, l2 = 0;
        for (int64_t j = 0; j < d; j++) {
            l1 += fabs(y[j]);
            l2 += y[j] * y[j];
            const int bit = (((const uint8_t *)bits->data)[r * (d / 8) + j / 8] >> (j % 8)) & 1;
            wrong += bit != (y[j] >= 0) && fabs(y[j]) > 1e-5 * tm[j];
        }
        ref_l1[r] = l1 / (double)d;
        ref_ub[r] = l1 > 0 ? l2 / l1 : 0;
    }
    VT_CHECK(wrong == 0, "%s: %lld wrong sign bits", what, (long long)wrong);
    VT_CHECK(vt_rel_l2(mag_l1, ref_l1) <= 1e-5, "%s: L1 magnitude rel err %g", what, vt_rel_l2(mag_l1, ref_l1));
    VT_CHECK(vt_rel_l2(mag_ub, ref_ub) <= 1e-5, "%s: unbiased magnitude rel err %g", what, vt_rel_l2(mag_ub, ref_ub));
    /* zero key: all bits 1, magnitudes 0 */
    int ones = 1;
    for (int64_t i = 0; i < d / 8; i++) ones &= ((const uint8_t *)bits->data)[i] == 0xff;
    VT_CHECK(ones && vt_get(mag_l1, 0) == 0.0 && vt_get(mag_ub, 0) == 0.0, "%s: zero key", what);
    free(x); free(y); free(tm); free(ref_l1); free(ref_ub);
    DLTensor *all[] = {keys, diag, bits, bits2, mag_l1, mag_ub};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
}

/* qbits [nb], bits [n, nb]: popcount(q XOR b) * scale + cx against a bit loop. */
static void run_hamming_case(vq_ctx *ctx, const char *isa, int64_t n, int64_t nb, uint64_t seed)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    DLTensor *qb = vt_new(VT_U8, VT_DIMS(nb)), *kb = vt_new(VT_U8, VT_DIMS(n, nb));
    DLTensor *cx = vt_new(VT_F32, VT_DIMS(n)), *scale = vt_new(VT_F32, VT_DIMS(1)), *out = vt_new(VT_F32, VT_DIMS(n));
    vt_fill_uniform_int(qb, &rng, 0, 255);
    vt_fill_uniform_int(kb, &rng, 0, 255);
    vt_fill_normal(cx, &rng, 0, 3);
    vt_set(scale, 0, -0.37);
    VT_OK(ctx, vq_rabitq_hamming_score(ctx, qb, kb, cx, scale, out));
    double *ref = malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++) {
        int ham = 0;
        for (int64_t j = 0; j < nb * 8; j++)
            ham += ((((const uint8_t *)qb->data)[j / 8] ^ ((const uint8_t *)kb->data)[i * nb + j / 8]) >> (j % 8)) & 1;
        ref[i] = ham * (double)(float)-0.37 + vt_get(cx, i);
    }
    VT_CHECK(vt_count_poisoned(out) == 0, "%s: unwritten scores", isa);
    VT_CHECK(vt_rel_l2(out, ref) <= 1e-6, "%s N=%lld bytes=%lld: hamming score rel err %g", isa, (long long)n,
             (long long)nb, vt_rel_l2(out, ref));
    free(ref);
    DLTensor *all[] = {qb, kb, cx, scale, out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
}

static void rabitq_all_cases(vq_ctx *ctx, const char *isa)
{
    static const int64_t lens[] = {1, 7, 97}, dims[] = {8, 64, 128, 256, 1024};
    int n = 0;
    for (int si = 0; si < 3; si++)
        for (int di = 0; di < 5; di++, n++)
            run_encode_case(ctx, isa, 1 + n % 2, dims[di] == 1024 && lens[si] == 97 ? 5 : lens[si], dims[di],
                            n % 3 ? VT_F32 : VT_F16, n % 4 != 1, 70 + (uint64_t)n);
    static const int64_t nbs[] = {1, 8, 12, 32, 64, 100, 128};
    for (int si = 0; si < 3; si++)
        for (int bi = 0; bi < 7; bi++) run_hamming_case(ctx, isa, lens[si], nbs[bi], 90 + (uint64_t)(si * 7 + bi));
}

static void test_rabitq_vs_reference(void) { vt_for_each_isa(2, rabitq_all_cases); }

static void test_rabitq_pack_values(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 4);
    static const int64_t halves[] = {1, 5, 64, 40000};
    for (int i = 0; i < 4; i++) {
        const int64_t n = halves[i];
        DLTensor *v = vt_new(VT_U8, VT_DIMS(3, 2 * n)), *out = vt_new(VT_U8, VT_DIMS(3, n));
        vt_fill_uniform_int(v, &rng, 0, 255);   /* high nibbles must be dropped */
        VT_OK(ctx, vq_rabitq_pack_values(ctx, v, out));
        int64_t bad = 0;
        const uint8_t *vi = v->data, *o = out->data;
        for (int64_t k = 0; k < 3 * n; k++) {
            bad += o[k] != (uint8_t)((vi[2 * k] & 15) | ((vi[2 * k + 1] & 15) << 4));
            bad += vq_rabitq_nibble(o + (k / n) * n, 2 * (k % n)) != (vi[2 * k] & 15u);
            bad += vq_rabitq_nibble(o + (k / n) * n, 2 * (k % n) + 1) != (vi[2 * k + 1] & 15u);
        }
        VT_CHECK(bad == 0, "n=%lld: %lld packed bytes wrong", (long long)n, (long long)bad);
        vt_free(v);
        vt_free(out);
    }
    vq_ctx_free(ctx);
}

/* ---- statistics of the exact score over random rotations ----
 *
 * For a fixed unit query q and keys k_i with known q.k_i, each trial draws a
 * fresh diagonal (vq_random_signs, seed t), encodes the keys and forms the
 * exact score X = (rot(q) . sign(rot(k))) * k_mag with rot(q) from the float64
 * reference. With VQ_RABITQ_MAG_UNBIASED, E[X] = q.k over the rotation: the
 * mean of T trials must lie within 5 standard errors s/sqrt(T) of q.k, s the
 * sample standard deviation of X (the variance has no closed form for the
 * randomized Hadamard; 5 standard errors leave a false-failure rate ~6e-7).
 *
 * With the L1 magnitude the score is X * r, r = ||y||_1^2 / (D ||y||_2^2),
 * and r <= 1 by Cauchy-Schwarz, row by row (checked exactly). For y close to
 * Gaussian E[r] = 2/pi + O(1/D), so the score is biased toward 0: for q.k > 0
 * its mean must lie more than 5 standard errors below q.k, and its mean ratio
 * r within 0.05 of 2/pi at D = 64 (the O(1/D) term is (1 - 2/pi)/D ~ 0.006).
 *
 * The last key has two 6x outlier channels. Unbiasedness is exact for a Haar
 * random rotation; the randomized Hadamard only draws the diagonal, and when
 * two channels hold most of the energy rot(k) takes few distinct magnitudes,
 * so the estimator keeps a small bias there (measured: mean 0.599 for q.k =
 * 0.627 at D = 64, T = 3000). That key is checked only for the L1 shrinkage;
 * the unbiasedness check runs on the keys without outliers. */
static void test_rabitq_statistics(void)
{
    vq_ctx *ctx = vt_ctx(2);
    enum { D = 64, K = 5, T = 3000 };
    const double c[K] = {0.8, 0.4, 0.0, -0.5, 0.6}, norm[K] = {1.0, 2.0, 1.5, 0.7, 1.0};
    vq_rng rng;
    vq_rng_seed(&rng, 77);
    double qv[D], u[D], s = 0;
    for (int i = 0; i < D; i++) { qv[i] = vq_rng_normal(&rng); s += qv[i] * qv[i]; }
    for (int i = 0; i < D; i++) qv[i] = (double)(float)(qv[i] / sqrt(s));
    DLTensor *k = vt_new(VT_F32, VT_DIMS(K, D));
    double qk[K];
    for (int j = 0; j < K; j++) {
        double dq = 0, nu = 0, dot = 0;
        for (int i = 0; i < D; i++) { u[i] = vq_rng_normal(&rng); dq += u[i] * qv[i]; }
        for (int i = 0; i < D; i++) { u[i] -= dq * qv[i]; nu += u[i] * u[i]; }
        for (int i = 0; i < D; i++) {
            /* the last key has two outlier channels, as real keys do */
            const double o = j == K - 1 && (i == 3 || i == 40) ? 6.0 : 1.0;
            vt_set(k, j * D + i, o * norm[j] * (c[j] * qv[i] + sqrt(1 - c[j] * c[j]) * u[i] / sqrt(nu)));
            dot += vt_get(k, j * D + i) * qv[i];
        }
        qk[j] = dot;
    }
    DLTensor *diag = vt_new(VT_F32, VT_DIMS(D)), *bits = vt_new(VT_U8, VT_DIMS(K, D / 8));
    DLTensor *m_ub = vt_new(VT_F32, VT_DIMS(K)), *m_l1 = vt_like(m_ub, VT_F32);
    const vq_rabitq_encode_opts ub = {VQ_RABITQ_MAG_UNBIASED};
    double sx[K] = {0}, sxx[K] = {0}, sy[K] = {0}, syy[K] = {0}, sr = 0;
    int r_above_one = 0;
    for (int t = 0; t < T; t++) {
        vq_random_signs(5000 + (uint64_t)t, D, diag->data);
        VT_OK(ctx, vq_rabitq_encode(ctx, k, diag, bits, m_ub, &ub));
        VT_OK(ctx, vq_rabitq_encode(ctx, k, diag, bits, m_l1, NULL));
        double rq[D];
        ref_rotate(qv, diag->data, D, rq, NULL);
        for (int j = 0; j < K; j++) {
            double dot = 0;
            for (int i = 0; i < D; i++) dot += rq[i] * vq_rabitq_sign((const uint8_t *)bits->data + j * (D / 8), i);
            const double x = dot * vt_get(m_ub, j), y = dot * vt_get(m_l1, j);
            const double r = vt_get(m_l1, j) / vt_get(m_ub, j);
            r_above_one += r > 1 + 1e-6;
            sr += r;
            sx[j] += x; sxx[j] += x * x;
            sy[j] += y; syy[j] += y * y;
        }
    }
    VT_CHECK(r_above_one == 0, "%d rows with L1/unbiased magnitude ratio > 1", r_above_one);
    VT_CHECK(fabs(sr / (T * K) - 2 / M_PI) < 0.05, "mean shrink factor %g, expected near 2/pi", sr / (T * K));
    for (int j = 0; j < K; j++) {
        const double mx = sx[j] / T, se_x = sqrt((sxx[j] / T - mx * mx) / (T - 1));
        const double my = sy[j] / T, se_y = sqrt((syy[j] / T - my * my) / (T - 1));
        if (j < K - 1)
            VT_CHECK(fabs(mx - qk[j]) <= 5 * se_x, "key %d: unbiased mean %g vs q.k %g (5 se = %g)", j, mx, qk[j], 5 * se_x);
        if (qk[j] > 0.1)
            VT_CHECK(my < qk[j] - 5 * se_y, "key %d: L1 mean %g not biased low vs q.k %g (5 se = %g)", j, my, qk[j],
                     5 * se_y);
    }
    DLTensor *all[] = {k, diag, bits, m_ub, m_l1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

/* ---- errors ---- */

static void test_rabitq_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    const vq_status E = VQ_ERR_INVALID_ARGUMENT;
    DLTensor *keys = vt_new(VT_F32, VT_DIMS(2, 3, 64)), *bits = vt_new(VT_U8, VT_DIMS(2, 3, 8));
    DLTensor *mag = vt_new(VT_F32, VT_DIMS(2, 3)), *diag = vt_new(VT_F32, VT_DIMS(64));
    vq_rng rng;
    vq_rng_seed(&rng, 6);
    vt_fill_normal(keys, &rng, 0, 1);
    vt_fill_signs(diag, &rng);
    DLTensor *k96 = vt_new(VT_F32, VT_DIMS(2, 3, 96)), *k4 = vt_new(VT_F32, VT_DIMS(2, 3, 4));
    DLTensor *k2048 = vt_new(VT_F32, VT_DIMS(1, 2048)), *k1 = vt_new(VT_F32, VT_DIMS(64));
    DLTensor *ku8 = vt_like(keys, VT_U8), *diag32 = vt_new(VT_F32, VT_DIMS(32)), *diag16 = vt_like(diag, VT_F16);
    DLTensor *bits7 = vt_new(VT_U8, VT_DIMS(2, 3, 7)), *bits_lead = vt_new(VT_U8, VT_DIMS(2, 4, 8));
    DLTensor *mag_bad = vt_new(VT_F32, VT_DIMS(2, 4)), *mag16 = vt_like(mag, VT_F16);
    void *s_bits = vt_snapshot(bits), *s_mag = vt_snapshot(mag);
    const vq_rabitq_encode_opts bad_mag = {(vq_rabitq_mag)7};

    VT_CHECK(vq_rabitq_encode(NULL, keys, diag, bits, mag, NULL) == E, "NULL ctx");
    VT_FAILS(ctx, E, "'keys' is NULL", vq_rabitq_encode(ctx, NULL, diag, bits, mag, NULL));
    VT_FAILS(ctx, E, "'k_bits_out' is NULL", vq_rabitq_encode(ctx, keys, diag, NULL, mag, NULL));
    VT_FAILS(ctx, E, "'k_mag_out' is NULL", vq_rabitq_encode(ctx, keys, diag, bits, NULL, NULL));
    VT_FAILS(ctx, E, "'keys': expected rank 2..8", vq_rabitq_encode(ctx, k1, diag, bits, mag, NULL));
    VT_FAILS(ctx, E, "'keys': expected dtype f32/f16", vq_rabitq_encode(ctx, ku8, diag, bits, mag, NULL));
    VT_FAILS(ctx, E, "must be a power of two", vq_rabitq_encode(ctx, k96, NULL, bits, mag, NULL));
    VT_FAILS(ctx, E, "must be a multiple of 8", vq_rabitq_encode(ctx, k4, NULL, bits, mag, NULL));
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "exceeds the supported maximum", vq_rabitq_encode(ctx, k2048, NULL, bits, mag, NULL));
    VT_FAILS(ctx, E, "'diag'", vq_rabitq_encode(ctx, keys, diag32, bits, mag, NULL));
    VT_FAILS(ctx, E, "'diag': expected dtype f32", vq_rabitq_encode(ctx, keys, diag16, bits, mag, NULL));
    VT_FAILS(ctx, E, "D/8", vq_rabitq_encode(ctx, keys, diag, bits7, mag, NULL));
    VT_FAILS(ctx, E, "'k_bits_out'", vq_rabitq_encode(ctx, keys, diag, bits_lead, mag, NULL));
    VT_FAILS(ctx, E, "'k_mag_out'", vq_rabitq_encode(ctx, keys, diag, bits, mag_bad, NULL));
    VT_FAILS(ctx, E, "'k_mag_out': expected dtype f32", vq_rabitq_encode(ctx, keys, diag, bits, mag16, NULL));
    VT_FAILS(ctx, E, "'opts->mag'", vq_rabitq_encode(ctx, keys, diag, bits, mag, &bad_mag));

    DLTensor *qb = vt_new(VT_U8, VT_DIMS(8)), *kb = vt_new(VT_U8, VT_DIMS(5, 8)), *cx = vt_new(VT_F32, VT_DIMS(5));
    DLTensor *sc = vt_new(VT_F32, VT_DIMS(1)), *out = vt_new(VT_F32, VT_DIMS(5)), *kb9 = vt_new(VT_U8, VT_DIMS(5, 9));
    DLTensor *sc2 = vt_new(VT_F32, VT_DIMS(2)), *cx4 = vt_new(VT_F32, VT_DIMS(4)), *out6 = vt_new(VT_F32, VT_DIMS(6));
    DLTensor *qb2 = vt_new(VT_U8, VT_DIMS(1, 8)), *kb16 = vt_like(kb, VT_U16);
    vt_fill_uniform_int(qb, &rng, 0, 255);
    vt_fill_uniform_int(kb, &rng, 0, 255);
    vt_fill_normal(cx, &rng, 0, 1);
    vt_set(sc, 0, 1.0);
    void *s_out = vt_snapshot(out);
    VT_FAILS(ctx, E, "'qbits' is NULL", vq_rabitq_hamming_score(ctx, NULL, kb, cx, sc, out));
    VT_FAILS(ctx, E, "'qbits': expected rank 1", vq_rabitq_hamming_score(ctx, qb2, kb, cx, sc, out));
    VT_FAILS(ctx, E, "'bits'", vq_rabitq_hamming_score(ctx, qb, kb9, cx, sc, out));
    VT_FAILS(ctx, E, "'cx'", vq_rabitq_hamming_score(ctx, qb, kb, cx4, sc, out));
    VT_FAILS(ctx, E, "'scale'", vq_rabitq_hamming_score(ctx, qb, kb, cx, sc2, out));
    VT_FAILS(ctx, E, "'out'", vq_rabitq_hamming_score(ctx, qb, kb, cx, sc, out6));
    VT_FAILS(ctx, E, "'bits': expected dtype u8", vq_rabitq_hamming_score(ctx, qb, kb16, cx, sc, out));

    DLTensor *v = vt_new(VT_U8, VT_DIMS(3, 7)), *vo = vt_new(VT_U8, VT_DIMS(3, 3)), *v8 = vt_new(VT_U8, VT_DIMS(3, 8));
    DLTensor *vo4 = vt_new(VT_U8, VT_DIMS(2, 4)), *vof = vt_new(VT_F32, VT_DIMS(3, 4));
    void *s_vo = vt_snapshot(vo), *s_vo4 = vt_snapshot(vo4);
    VT_FAILS(ctx, E, "must be even", vq_rabitq_pack_values(ctx, v, vo));
    VT_FAILS(ctx, E, "'v_idx' is NULL", vq_rabitq_pack_values(ctx, NULL, vo));
    VT_FAILS(ctx, E, "'out'", vq_rabitq_pack_values(ctx, v8, vo));
    VT_FAILS(ctx, E, "'out'", vq_rabitq_pack_values(ctx, v8, vo4));
    VT_FAILS(ctx, E, "'out': expected dtype u8", vq_rabitq_pack_values(ctx, v8, vof));
    VT_FAILS(ctx, E, "'v_idx': expected dtype u8", vq_rabitq_pack_values(ctx, vof, vo));

    VT_CHECK(vt_unchanged(bits, s_bits) && vt_unchanged(mag, s_mag) && vt_unchanged(out, s_out) &&
                 vt_unchanged(vo, s_vo) && vt_unchanged(vo4, s_vo4),
             "a failing call wrote output");
    free(s_bits); free(s_mag); free(s_out); free(s_vo); free(s_vo4);
    DLTensor *all[] = {keys, bits, mag, diag, k96, k4, k2048, k1, ku8, diag32, diag16, bits7, bits_lead, mag_bad,
                       mag16, qb, kb, kb16, cx, sc, out, kb9, sc2, cx4, out6, qb2, v, vo, v8, vo4, vof};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_format_rabitq);
    VT_RUN(test_rabitq_vs_reference);
    VT_RUN(test_rabitq_pack_values);
    VT_RUN(test_rabitq_statistics);
    VT_RUN(test_rabitq_errors);
    return vt_finish();
}
