/* test_turboquant.c — the TurboQuant codecs against float64 references:
 * scalar quantize/dequantize, Hadamard quantize (plain and norm_correct) and
 * dequantize, two-stage RVQ; every ISA, f32 and f16, odd shapes, zero rows,
 * poisoned outputs, statistical quality, and every error path. */
#include "formats/lloyd_max.h"
#include "harness.h"

/* ---- float64 references ---- */

/* Unnormalised Walsh-Hadamard transform in place. */
static void ref_fwht(double *v, int64_t d)
{
    for (int64_t h = 1; h < d; h <<= 1)
        for (int64_t i = 0; i < d; i += 2 * h)
            for (int64_t j = i; j < i + h; j++) {
                const double a = v[j], b = v[j + h];
                v[j] = a + b;
                v[j + h] = a - b;
            }
}

/* out = rot(x) or rot^-1(x) of one row. */
static void ref_rot(const double *x, const float *diag, int64_t d, bool inverse, double *out)
{
    for (int64_t j = 0; j < d; j++) out[j] = x[j] * (diag && !inverse ? diag[j] : 1.0);
    ref_fwht(out, d);
    for (int64_t j = 0; j < d; j++) out[j] *= (diag && inverse ? diag[j] : 1.0) / sqrt((double)d);
}

/* Nearest float64 Lloyd-Max centroid, ties to the lower index. */
static int ref_nearest(double v, int bits)
{
    const double *c = vq_lloyd_max_centroids_f64(bits);
    int best = 0;
    for (int i = 1; i < (1 << bits); i++)
        if (fabs(v - c[i]) < fabs(v - c[best])) best = i;
    return best;
}

/* docs/FORMATS.md §1: integer outputs may differ from the reference only where the
 * reference value is within 1e-6 (relative, on the unit scale of the
 * normalised coordinates) of a decision boundary. */
static bool near_boundary(double v, int bits)
{
    const double *b = vq_lloyd_max_boundaries_f64(bits);
    for (int k = 0; k + 1 < (1 << bits); k++)
        if (fabs(v - b[k]) <= 1e-6 * fmax(1.0, fabs(b[k]))) return true;
    return false;
}

static double *row_of(const DLTensor *t, int64_t r, int64_t d, double *buf)
{
    for (int64_t j = 0; j < d; j++) buf[j] = vt_get(t, r * d + j);
    return buf;
}

/* Elements still holding the poison bytes where the reference says another
 * value: an f16 output may legitimately equal the poison pattern (0xA5A5 is
 * -0.0227), so a bare poison count is not proof of a missed write. */
static int64_t unwritten(const DLTensor *out, const double *ref)
{
    DLTensor one = *out;
    int64_t bad = 0;
    const size_t es = out->dtype.bits / 8;
    for (int64_t i = 0; i < vt_numel(out); i++) {
        one.data = (char *)out->data + i * es;
        one.ndim = 1;
        one.shape = (int64_t[]){1};
        if (vt_count_poisoned(&one) && fabs(vt_get(&one, 0) - ref[i]) > 1e-3 * fabs(ref[i])) bad++;
    }
    return bad;
}

static DLTensor *signs(vq_rng *rng, int64_t d)
{
    DLTensor *t = vt_new(VT_F32, VT_DIMS(d));
    vt_fill_signs(t, rng);
    return t;
}

/* ---- scalar codec ---- */

static void each_isa_scalar(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 21);
    const DLDataType dts[2] = {VT_F32, VT_F16};
    for (int bits = 1; bits <= 8; bits++) {
        for (int t = 0; t < 2; t++) {
            DLTensor *x = vt_new(dts[t], VT_DIMS(10007)), *idx = vt_new(VT_U8, VT_DIMS(10007));
            vt_fill_normal(x, &rng, 0.0, 1.5);
            /* exact ties: a value equal to an f32 boundary goes to the lower centroid */
            const float *bf = vq_lloyd_max_boundaries(bits);
            if (t == 0) vt_set(x, 0, bf[0]), vt_set(x, 1, bf[(1 << bits) - 2]);
            VT_OK(ctx, vq_turboquant_scalar_quantize(ctx, x, bits, idx));
            int wrong = 0, exempt = 0;
            for (int64_t i = 0; i < vt_numel(x); i++) {
                const double v = vt_get(x, i);
                const int got = (int)vt_get(idx, i), want = ref_nearest(v, bits);
                if (got == want) continue;
                if (near_boundary(v, bits) && abs(got - want) == 1) exempt++;
                else wrong++;
            }
            VT_CHECK(wrong == 0 && exempt <= 3, "%s bits %d dtype %d: %d wrong, %d near boundaries", isa, bits, t, wrong,
                     exempt);
            if (t == 0)
                VT_CHECK(vt_get(idx, 0) == 0 && vt_get(idx, 1) == (1 << bits) - 2, "%s bits %d: ties to lower", isa, bits);

            /* dequantize (any idx byte: masked to bits), f32 and f16 out */
            DLTensor *codes = vt_new(VT_U8, VT_DIMS(3, 333));
            vt_fill_uniform_int(codes, &rng, 0, 255);
            DLTensor *out = vt_new(dts[t], VT_DIMS(3, 333));
            VT_OK(ctx, vq_turboquant_scalar_dequantize(ctx, codes, bits, -0.75f, out));
            double *ref = malloc(999 * sizeof *ref);
            const double *c = vq_lloyd_max_centroids_f64(bits);
            for (int64_t i = 0; i < 999; i++) ref[i] = -0.75 * c[(int)vt_get(codes, i) & ((1 << bits) - 1)];
            VT_CHECK(vt_rel_l2(out, ref) <= vt_tol(out), "%s bits %d dequant err %.3g", isa, bits, vt_rel_l2(out, ref));
            /* (u8 indices need no poison check: 0xA5 is a valid index, and
             * every index was compared with the reference above) */
            VT_CHECK(unwritten(out, ref) == 0, "%s: unwritten outputs", isa);
            free(ref);
            vt_free(codes);
            vt_free(out);
            vt_free(x);
            vt_free(idx);
        }
    }
}

static void test_scalar_codec(void) { vt_for_each_isa(2, each_isa_scalar); }

/* ---- Hadamard codec ---- */

typedef struct hq_case {
    int64_t d;
    int bits;
    DLDataType dt;
    bool use_diag, norm_correct;
} hq_case;

/* Quantizes rows (one of them zero) and checks indices, scales and the
 * norm_correct identity against float64; then dequantizes and checks
 * rot^-1(scale * c[idx]). */
static void check_hadamard_case(vq_ctx *ctx, const char *isa, const hq_case *k, vq_rng *rng)
{
    const int64_t d = k->d, rows = 2 * 5;
    DLTensor *x = vt_new(k->dt, VT_DIMS(2, 5, d)), *idx = vt_new(VT_U8, VT_DIMS(2, 5, d));
    DLTensor *scale = vt_new(VT_F32, VT_DIMS(2, 5)), *diag = signs(rng, d);
    vt_fill_keys(x, rng, 2, 8.0);
    for (int64_t j = 0; j < d; j++) vt_set(x, 3 * d + j, 0.0); /* row 3 is zero */
    const vq_turboquant_opts opts = {.norm_correct = k->norm_correct};
    const DLTensor *dg = k->use_diag ? diag : NULL;
    const float *dgp = k->use_diag ? diag->data : NULL;
    VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, dg, k->bits, idx, scale, &opts));

    double *xr = malloc(d * sizeof *xr), *y = malloc(d * sizeof *y), *ref = malloc(rows * d * sizeof *ref);
    const double *c = vq_lloyd_max_centroids_f64(k->bits);
    const float *cf = vq_lloyd_max_centroids(k->bits);
    int wrong = 0, exempt = 0;
    for (int64_t r = 0; r < rows; r++) {
        ref_rot(row_of(x, r, d, xr), dgp, d, false, y);
        double ss = 0;
        for (int64_t j = 0; j < d; j++) ss += y[j] * y[j];
        const double s = sqrt(ss / d);
        const double got_scale = vt_get(scale, r);
        if (s == 0) {
            bool ok = got_scale == 0;
            for (int64_t j = 0; j < d; j++) ok &= vt_get(idx, r * d + j) == (1 << (k->bits - 1)) - 1;
            VT_CHECK(ok, "%s D=%lld bits %d: zero row gives scale 0 and the index nearest 0", isa, (long long)d, k->bits);
            continue;
        }
        int row_exempt = 0;
        for (int64_t j = 0; j < d; j++) {
            const int got = (int)vt_get(idx, r * d + j), want = ref_nearest(y[j] / s, k->bits);
            if (got == want) continue;
            if (near_boundary(y[j] / s, k->bits) && abs(got - want) == 1) row_exempt++;
            else wrong++;
        }
        exempt += row_exempt;
        double want_scale = s, dot = 0, dot_lib = 0;
        for (int64_t j = 0; j < d; j++) {
            dot += c[(int)vt_get(idx, r * d + j)] * y[j];
            dot_lib += (double)cf[(int)vt_get(idx, r * d + j)] * got_scale * y[j];
        }
        if (k->norm_correct && dot > 0) want_scale = ss / dot;
        if (!row_exempt)
            VT_CHECK(fabs(got_scale - want_scale) <= 1e-5 * want_scale, "%s D=%lld bits %d nc %d: scale %.9g vs %.9g", isa,
                     (long long)d, k->bits, k->norm_correct, got_scale, want_scale);
        if (k->norm_correct && dot > 0) /* the property norm_correct exists for: <y_hat, y> = ||y||^2 */
            VT_CHECK(fabs(dot_lib - ss) <= 1e-5 * ss, "%s D=%lld bits %d: <y_hat,y> %.9g vs ||y||^2 %.9g", isa,
                     (long long)d, k->bits, dot_lib, ss);
    }
    VT_CHECK(wrong == 0 && exempt <= 2, "%s D=%lld bits %d dt %d diag %d nc %d: %d wrong, %d near boundaries", isa,
             (long long)d, k->bits, k->dt.bits, k->use_diag, k->norm_correct, wrong, exempt);
    VT_CHECK(vt_count_poisoned(scale) == 0, "%s: unwritten outputs", isa); /* idx: all compared above */

    /* dequantize the library's codes: rot^-1(scale * c[idx]) */
    DLTensor *out = vt_new(k->dt, VT_DIMS(2, 5, d));
    VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, scale, dg, k->bits, out));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < d; j++) y[j] = vt_get(scale, r) * c[(int)vt_get(idx, r * d + j)];
        ref_rot(y, dgp, d, true, ref + r * d);
    }
    VT_CHECK(vt_rel_l2(out, ref) <= vt_tol(out), "%s D=%lld bits %d: dequantize err %.3g", isa, (long long)d, k->bits,
             vt_rel_l2(out, ref));
    VT_CHECK(unwritten(out, ref) == 0, "%s: unwritten dequantize outputs", isa);
    free(xr);
    free(y);
    free(ref);
    vt_free(x);
    vt_free(idx);
    vt_free(scale);
    vt_free(diag);
    vt_free(out);
}

static void each_isa_hadamard(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 31);
    for (int64_t d = 1; d <= 1024; d *= 2)
        for (int bits = 1; bits <= 8; bits++)
            for (int v = 0; v < 8; v++) {
                const hq_case k = {d, bits, v & 1 ? VT_F16 : VT_F32, v & 2, v & 4};
                check_hadamard_case(ctx, isa, &k, &rng);
            }
}

static void test_hadamard_codec(void) { vt_for_each_isa(2, each_isa_hadamard); }

/* Rank 1 input: scale is [1]. */
static void test_hadamard_rank1(void)
{
    vq_ctx *ctx = vt_ctx(1);
    DLTensor *x = vt_new(VT_F32, VT_DIMS(16)), *idx = vt_new(VT_U8, VT_DIMS(16)), *scale = vt_new(VT_F32, VT_DIMS(1));
    DLTensor *out = vt_new(VT_F32, VT_DIMS(16));
    for (int j = 0; j < 16; j++) vt_set(x, j, j - 7.5);
    VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, NULL, 4, idx, scale, NULL));
    VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, scale, NULL, 4, out));
    double err = 0, norm = 0;
    for (int j = 0; j < 16; j++) err += pow(vt_get(out, j) - vt_get(x, j), 2), norm += pow(vt_get(x, j), 2);
    VT_CHECK(err / norm < 0.05, "rank-1 round trip relative MSE %.3g", err / norm);
    vt_free(x);
    vt_free(idx);
    vt_free(scale);
    vt_free(out);
    vq_ctx_free(ctx);
}

/* Gaussian rows: the round trip's relative MSE is the Lloyd-Max MSE (rows
 * normalised to unit RMS are N(0,1) coordinates after the rotation). With
 * 512 x 128 samples the estimate's relative spread is under 1.2%, so 6% is
 * over 5 sigma. norm_correct keeps <x_hat, x> = ||x||^2 on every row. */
static void test_hadamard_quality(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 41);
    const double theory[5] = {0, 0.36338, 0.11748, 0.034548, 0.0095010};
    DLTensor *x = vt_new(VT_F32, VT_DIMS(512, 128)), *idx = vt_new(VT_U8, VT_DIMS(512, 128));
    DLTensor *scale = vt_new(VT_F32, VT_DIMS(512)), *out = vt_new(VT_F32, VT_DIMS(512, 128));
    DLTensor *diag = signs(&rng, 128);
    vt_fill_normal(x, &rng, 0, 1);
    for (int bits = 1; bits <= 4; bits++) {
        VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, diag, bits, idx, scale, NULL));
        VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, scale, diag, bits, out));
        double err = 0, norm = 0;
        for (int64_t i = 0; i < vt_numel(x); i++) err += pow(vt_get(out, i) - vt_get(x, i), 2), norm += pow(vt_get(x, i), 2);
        VT_CHECK(fabs(err / norm - theory[bits]) < 0.06 * theory[bits], "bits %d: relative MSE %.5f vs %.5f", bits,
                 err / norm, theory[bits]);
        const vq_turboquant_opts nc = {.norm_correct = true};
        VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, diag, bits, idx, scale, &nc));
        VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, scale, diag, bits, out));
        double worst = 0;
        for (int64_t r = 0; r < 512; r++) {
            double dot = 0, nn = 0;
            for (int64_t j = 0; j < 128; j++) dot += vt_get(out, r * 128 + j) * vt_get(x, r * 128 + j), nn += pow(vt_get(x, r * 128 + j), 2);
            worst = fmax(worst, fabs(dot - nn) / nn);
        }
        VT_CHECK(worst < 1e-5, "bits %d: norm_correct <x_hat, x> off by %.3g relative", bits, worst);
    }
    vt_free(x);
    vt_free(idx);
    vt_free(scale);
    vt_free(out);
    vt_free(diag);
    vq_ctx_free(ctx);
}

/* ---- RVQ ---- */

static void each_isa_rvq(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 51);
    const int pairs[][2] = {{1, 1}, {2, 2}, {3, 2}, {4, 4}, {1, 8}, {8, 1}, {2, 5}};
    for (int64_t d = 1; d <= 1024; d *= 4) {
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            const int b1 = pairs[p][0], b2 = pairs[p][1];
            const DLDataType dt = p % 2 ? VT_F16 : VT_F32;
            const int64_t rows = 7;
            DLTensor *x = vt_new(dt, VT_DIMS(rows, d)), *diag = signs(&rng, d);
            DLTensor *i1 = vt_new(VT_U8, VT_DIMS(rows, d)), *i2 = vt_new(VT_U8, VT_DIMS(rows, d));
            DLTensor *s1 = vt_new(VT_F32, VT_DIMS(rows)), *s2 = vt_new(VT_F32, VT_DIMS(rows));
            DLTensor *hi = vt_new(VT_U8, VT_DIMS(rows, d)), *hs = vt_new(VT_F32, VT_DIMS(rows));
            DLTensor *out = vt_new(dt, VT_DIMS(rows, d)), *out1 = vt_new(VT_F32, VT_DIMS(rows, d));
            vt_fill_keys(x, &rng, 1, 5.0);
            for (int64_t j = 0; j < d; j++) vt_set(x, 2 * d + j, 0.0); /* row 2 is zero */
            VT_OK(ctx, vq_turboquant_rvq_encode(ctx, x, diag, b1, b2, i1, s1, i2, s2));
            /* stage 1 is exactly the Hadamard codec */
            VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, diag, b1, hi, hs, NULL));
            VT_CHECK(memcmp(hi->data, i1->data, vt_bytes(hi)) == 0 && memcmp(hs->data, s1->data, vt_bytes(hs)) == 0,
                     "%s D=%lld b1 %d: stage 1 differs from vq_turboquant_hadamard_quantize", isa, (long long)d, b1);
            /* stage 2 against float64, from the library's stage 1 */
            double *xr = malloc(d * sizeof *xr), *y = malloc(d * sizeof *y), *ref = malloc(rows * d * sizeof *ref);
            const double *c1 = vq_lloyd_max_centroids_f64(b1), *c2 = vq_lloyd_max_centroids_f64(b2);
            int wrong = 0, exempt = 0;
            for (int64_t r = 0; r < rows; r++) {
                ref_rot(row_of(x, r, d, xr), diag->data, d, false, y);
                double ss = 0;
                for (int64_t j = 0; j < d; j++) {
                    y[j] -= vt_get(s1, r) * c1[(int)vt_get(i1, r * d + j)];
                    ss += y[j] * y[j];
                }
                const double sc2 = sqrt(ss / d);
                int row_exempt = 0;
                for (int64_t j = 0; j < d; j++) {
                    const int got = (int)vt_get(i2, r * d + j);
                    const int want = sc2 > 0 ? ref_nearest(y[j] / sc2, b2) : (1 << (b2 - 1)) - 1;
                    if (got == want) continue;
                    if (sc2 > 0 && near_boundary(y[j] / sc2, b2) && abs(got - want) == 1) row_exempt++;
                    else wrong++;
                }
                exempt += row_exempt;
                /* the residual is small, so its f32 rounding is relatively larger: 1e-4 */
                VT_CHECK(fabs(vt_get(s2, r) - sc2) <= 1e-4 * sc2 + 1e-30, "%s D=%lld: scale2 %.9g vs %.9g", isa,
                         (long long)d, vt_get(s2, r), sc2);
            }
            VT_CHECK(wrong == 0 && exempt <= 2, "%s D=%lld b %d/%d: %d wrong idx2, %d near boundaries", isa, (long long)d,
                     b1, b2, wrong, exempt);
            VT_CHECK(vt_get(s1, 2) == 0 && vt_get(s2, 2) == 0, "%s: zero row scales", isa);
            /* decode against rot^-1(s1 c1[i1] + s2 c2[i2]) */
            VT_OK(ctx, vq_turboquant_rvq_decode(ctx, i1, s1, i2, s2, diag, b1, b2, out));
            for (int64_t r = 0; r < rows; r++) {
                for (int64_t j = 0; j < d; j++)
                    y[j] = vt_get(s1, r) * c1[(int)vt_get(i1, r * d + j)] + vt_get(s2, r) * c2[(int)vt_get(i2, r * d + j)];
                ref_rot(y, diag->data, d, true, ref + r * d);
            }
            VT_CHECK(vt_rel_l2(out, ref) <= vt_tol(out), "%s D=%lld: decode err %.3g", isa, (long long)d, vt_rel_l2(out, ref));
            VT_CHECK(unwritten(out, ref) == 0 && vt_count_poisoned(s2) == 0, "%s: unwritten outputs", isa);
            /* two stages reconstruct better than stage 1 alone (D >= 4: with
             * D = 1 both are exact up to rounding) */
            VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, i1, s1, diag, b1, out1));
            double e1 = 0, e2 = 0;
            for (int64_t i = 0; i < vt_numel(x); i++) {
                e1 += pow(vt_get(out1, i) - vt_get(x, i), 2);
                e2 += pow(vt_get(out, i) - vt_get(x, i), 2);
            }
            if (d >= 4) VT_CHECK(e2 < e1, "%s D=%lld b %d/%d: RVQ error %.4g not below stage 1 %.4g", isa, (long long)d, b1, b2, e2, e1);
            free(xr);
            free(y);
            free(ref);
            DLTensor *all[] = {x, diag, i1, i2, s1, s2, hi, hs, out, out1};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
        }
    }
}

static void test_rvq(void) { vt_for_each_isa(2, each_isa_rvq); }

/* ---- errors: status, a message naming the argument, nothing written ---- */

typedef struct outs { DLTensor *t[4]; void *snap[4]; int n; } outs;

static void snap_all(outs *o)
{
    for (int i = 0; i < o->n; i++) o->snap[i] = vt_snapshot(o->t[i]);
}
static bool unchanged_all(const outs *o)
{
    bool ok = true;
    for (int i = 0; i < o->n; i++) ok &= vt_unchanged(o->t[i], o->snap[i]);
    return ok;
}
static void free_snaps(outs *o)
{
    for (int i = 0; i < o->n; i++) free(o->snap[i]);
}

static void test_errors_scalar(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *x = vt_new(VT_F32, VT_DIMS(4, 6)), *idx = vt_new(VT_U8, VT_DIMS(4, 6)), *bad = vt_new(VT_U8, VT_DIMS(4, 5));
    DLTensor *out = vt_new(VT_F32, VT_DIMS(4, 6)), *x_i32 = vt_new(VT_I32, VT_DIMS(4, 6)), *out_u8 = vt_new(VT_U8, VT_DIMS(4, 6));
    vq_rng rng;
    vq_rng_seed(&rng, 2);
    vt_fill_normal(x, &rng, 0, 1);
    outs o = {{idx, out}, {0}, 2};
    snap_all(&o);
    VT_CHECK(vq_turboquant_scalar_quantize(NULL, x, 2, idx) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'x' is NULL", vq_turboquant_scalar_quantize(ctx, NULL, 2, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out' is NULL", vq_turboquant_scalar_quantize(ctx, x, 2, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'x': expected dtype", vq_turboquant_scalar_quantize(ctx, x_i32, 2, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..8, got 0", vq_turboquant_scalar_quantize(ctx, x, 0, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..8, got 9", vq_turboquant_scalar_quantize(ctx, x, 9, idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out': expected shape [4, 6]", vq_turboquant_scalar_quantize(ctx, x, 2, bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out': expected dtype u8", vq_turboquant_scalar_quantize(ctx, x, 2, out));
    VT_CHECK(vq_turboquant_scalar_dequantize(NULL, idx, 2, 1.0f, out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx' is NULL", vq_turboquant_scalar_dequantize(ctx, NULL, 2, 1.0f, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx': expected dtype u8", vq_turboquant_scalar_dequantize(ctx, x, 2, 1.0f, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..8, got 9", vq_turboquant_scalar_dequantize(ctx, bad, 9, 1.0f, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected dtype", vq_turboquant_scalar_dequantize(ctx, idx, 2, 1.0f, out_u8));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected shape [4, 5]", vq_turboquant_scalar_dequantize(ctx, bad, 2, 1.0f, out));
    VT_CHECK(unchanged_all(&o), "failed calls wrote nothing");
    free_snaps(&o);
    DLTensor *all[] = {x, idx, bad, out, x_i32, out_u8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

static void test_errors_hadamard_and_rvq(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *x = vt_new(VT_F32, VT_DIMS(3, 8)), *idx = vt_new(VT_U8, VT_DIMS(3, 8)), *scale = vt_new(VT_F32, VT_DIMS(3));
    DLTensor *idx2 = vt_new(VT_U8, VT_DIMS(3, 8)), *scale2 = vt_new(VT_F32, VT_DIMS(3));
    DLTensor *x12 = vt_new(VT_F32, VT_DIMS(3, 12)), *idx12 = vt_new(VT_U8, VT_DIMS(3, 12));
    DLTensor *x2k = vt_new(VT_F32, VT_DIMS(1, 2048)), *idx2k = vt_new(VT_U8, VT_DIMS(1, 2048)), *s1 = vt_new(VT_F32, VT_DIMS(1));
    DLTensor *scale_bad = vt_new(VT_F32, VT_DIMS(4)), *scale_rank = vt_new(VT_F32, VT_DIMS(3, 1));
    DLTensor *scale_f16 = vt_new(VT_F16, VT_DIMS(3)), *idx_bad = vt_new(VT_U8, VT_DIMS(3, 4));
    DLTensor *idx_i32 = vt_new(VT_I32, VT_DIMS(3, 8)), *diag4 = vt_new(VT_F32, VT_DIMS(4)), *x_bf16 = vt_new(VT_BF16, VT_DIMS(3, 8));
    DLTensor *out = vt_new(VT_F32, VT_DIMS(3, 8));
    vq_rng rng;
    vq_rng_seed(&rng, 3);
    vt_fill_normal(x, &rng, 0, 1);
    vt_fill_uniform_int(idx, &rng, 0, 3);
    vt_fill_uniform_int(idx2, &rng, 0, 3);
    vt_fill_normal(scale, &rng, 1, 0.1);
    vt_fill_normal(scale2, &rng, 1, 0.1);
    vt_fill_normal(x12, &rng, 0, 1);
    vt_fill_normal(x2k, &rng, 0, 1);

    /* quantize */
    outs o = {{idx, scale, idx2, scale2}, {0}, 4};
    snap_all(&o);
    void *s12 = vt_snapshot(idx12), *s2k = vt_snapshot(idx2k);
    VT_CHECK(vq_turboquant_hadamard_quantize(NULL, x, NULL, 2, idx, scale, NULL) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'x' is NULL", vq_turboquant_hadamard_quantize(ctx, NULL, NULL, 2, idx, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'x': expected dtype", vq_turboquant_hadamard_quantize(ctx, x_bf16, NULL, 2, idx, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out' is NULL", vq_turboquant_hadamard_quantize(ctx, x, NULL, 2, NULL, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'scale_out' is NULL", vq_turboquant_hadamard_quantize(ctx, x, NULL, 2, idx, NULL, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..8, got 0", vq_turboquant_hadamard_quantize(ctx, x, NULL, 0, idx, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..8, got 9", vq_turboquant_hadamard_quantize(ctx, x, NULL, 9, idx, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'diag'", vq_turboquant_hadamard_quantize(ctx, x, diag4, 2, idx, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out': expected shape [3, 8]", vq_turboquant_hadamard_quantize(ctx, x, NULL, 2, idx_bad, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out': expected dtype u8", vq_turboquant_hadamard_quantize(ctx, x, NULL, 2, idx_i32, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'scale_out'", vq_turboquant_hadamard_quantize(ctx, x, NULL, 2, idx, scale_bad, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'scale_out': expected rank 1", vq_turboquant_hadamard_quantize(ctx, x, NULL, 2, idx, scale_rank, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'scale_out': expected dtype f32", vq_turboquant_hadamard_quantize(ctx, x, NULL, 2, idx, scale_f16, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "D = 12 must be a power of two", vq_turboquant_hadamard_quantize(ctx, x12, NULL, 2, idx12, scale, NULL));
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "D = 2048 exceeds", vq_turboquant_hadamard_quantize(ctx, x2k, NULL, 2, idx2k, s1, NULL));
    /* RVQ encode */
    VT_CHECK(vq_turboquant_rvq_encode(NULL, x, NULL, 2, 2, idx, scale, idx2, scale2) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "b1 must be in 1..8, got 0", vq_turboquant_rvq_encode(ctx, x, NULL, 0, 2, idx, scale, idx2, scale2));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "b2 must be in 1..8, got 9", vq_turboquant_rvq_encode(ctx, x, NULL, 2, 9, idx, scale, idx2, scale2));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx2_out' is NULL", vq_turboquant_rvq_encode(ctx, x, NULL, 2, 2, idx, scale, NULL, scale2));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'scale1_out'", vq_turboquant_rvq_encode(ctx, x, NULL, 2, 2, idx, scale_bad, idx2, scale2));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx2_out': expected shape [3, 8]", vq_turboquant_rvq_encode(ctx, x, NULL, 2, 2, idx, scale, idx_bad, scale2));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "D = 12 must be a power of two", vq_turboquant_rvq_encode(ctx, x12, NULL, 2, 2, idx12, scale, idx12, scale2));
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "D = 2048 exceeds", vq_turboquant_rvq_encode(ctx, x2k, NULL, 2, 2, idx2k, s1, idx2k, s1));
    VT_CHECK(unchanged_all(&o) && vt_unchanged(idx12, s12) && vt_unchanged(idx2k, s2k), "failed encoders wrote nothing");
    free_snaps(&o);

    /* decoders */
    void *so = vt_snapshot(out);
    VT_CHECK(vq_turboquant_hadamard_dequantize(NULL, idx, scale, NULL, 2, out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out' is NULL", vq_turboquant_hadamard_dequantize(ctx, idx, scale, NULL, 2, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx' is NULL", vq_turboquant_hadamard_dequantize(ctx, NULL, scale, NULL, 2, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'scale' is NULL", vq_turboquant_hadamard_dequantize(ctx, idx, NULL, NULL, 2, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx': expected shape [3, 8]", vq_turboquant_hadamard_dequantize(ctx, idx_bad, scale, NULL, 2, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'scale'", vq_turboquant_hadamard_dequantize(ctx, idx, scale_bad, NULL, 2, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..8, got 9", vq_turboquant_hadamard_dequantize(ctx, idx, scale, NULL, 9, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected dtype", vq_turboquant_hadamard_dequantize(ctx, idx, scale, NULL, 2, idx_i32));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'diag'", vq_turboquant_hadamard_dequantize(ctx, idx, scale, diag4, 2, out));
    VT_CHECK(vq_turboquant_rvq_decode(NULL, idx, scale, idx2, scale2, NULL, 2, 2, out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx2' is NULL", vq_turboquant_rvq_decode(ctx, idx, scale, NULL, scale2, NULL, 2, 2, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'scale1'", vq_turboquant_rvq_decode(ctx, idx, scale_rank, idx2, scale2, NULL, 2, 2, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "b1 must be in 1..8, got 0", vq_turboquant_rvq_decode(ctx, idx, scale, idx2, scale2, NULL, 0, 2, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "b2 must be in 1..8, got 9", vq_turboquant_rvq_decode(ctx, idx, scale, idx2, scale2, NULL, 2, 9, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "D = 12 must be a power of two", vq_turboquant_rvq_decode(ctx, idx12, scale, idx12, scale2, NULL, 2, 2, x12));
    VT_CHECK(vt_unchanged(out, so), "failed decoders wrote nothing");
    free(so);
    free(s12);
    free(s2k);
    DLTensor *all[] = {x, idx, scale, idx2, scale2, x12, idx12, x2k, idx2k, s1, scale_bad, scale_rank, scale_f16, idx_bad, idx_i32, diag4, x_bf16, out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_scalar_codec);
    VT_RUN(test_hadamard_codec);
    VT_RUN(test_hadamard_rank1);
    VT_RUN(test_hadamard_quality);
    VT_RUN(test_rvq);
    VT_RUN(test_errors_scalar);
    VT_RUN(test_errors_hadamard_and_rvq);
    return vt_finish();
}
