/* test_hadamard.c — the randomized Walsh-Hadamard rotation against a float64
 * dense-matrix reference, for every power of two D <= 1024, every ISA, f32
 * and f16 in and out, in place, inverse(forward) == identity, the internal
 * vq_rotate_rows, and every error path. */
#include "codecs/hadamard.h"
#include "harness.h"

/* Sylvester H_D entry: (-1)^popcount(i & j). */
static double h_entry(int64_t i, int64_t j) { return __builtin_popcountll((unsigned long long)(i & j)) & 1 ? -1.0 : 1.0; }

/* ref [rows, d] = rot(x) or rot^-1(x) by the dense definition, in float64. */
static void reference(const DLTensor *x, const float *diag, bool inverse, double *ref)
{
    const int64_t d = x->shape[x->ndim - 1], rows = vt_numel(x) / d;
    const double s = 1.0 / sqrt((double)d);
    double *in = malloc((size_t)d * sizeof *in);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < d; j++) in[j] = vt_get(x, r * d + j) * (diag && !inverse ? diag[j] : 1.0);
        for (int64_t i = 0; i < d; i++) {
            double acc = 0;
            for (int64_t j = 0; j < d; j++) acc += h_entry(i, j) * in[j];
            ref[r * d + i] = acc * s * (diag && inverse ? diag[i] : 1.0);
        }
    }
    free(in);
}

static DLTensor *random_diag(vq_rng *rng, int64_t d)
{
    DLTensor *t = vt_new(VT_F32, VT_DIMS(d));
    vt_fill_signs(t, rng);
    return t;
}

static void check_shape(vq_ctx *ctx, const char *isa, int ndim, const int64_t *shape)
{
    const DLDataType types[3][2] = {{VT_F32, VT_F32}, {VT_F16, VT_F16}, {VT_F16, VT_F32}};
    const int64_t d = shape[ndim - 1];
    vq_rng rng;
    vq_rng_seed(&rng, (uint64_t)d * 7 + (uint64_t)ndim);
    DLTensor *diag = random_diag(&rng, d);
    for (int t = 0; t < 3; t++) {
        for (int variant = 0; variant < 4; variant++) {
            const bool inverse = variant & 1, use_diag = variant & 2;
            DLTensor *x = vt_new(types[t][0], ndim, shape), *out = vt_new(types[t][1], ndim, shape);
            vt_fill_normal(x, &rng, 0.0, 2.0);
            double *ref = malloc(vt_numel(x) * sizeof *ref);
            reference(x, use_diag ? diag->data : NULL, inverse, ref);
            VT_OK(ctx, vq_hadamard(ctx, x, use_diag ? diag : NULL, inverse, out));
            const double err = vt_rel_l2(out, ref);
            VT_CHECK(err <= vt_tol(out), "%s D=%lld types %d inverse %d diag %d: rel err %.3g", isa, (long long)d, t,
                     inverse, use_diag, err);
            VT_CHECK(vt_count_poisoned(out) == 0, "%s D=%lld: unwritten outputs", isa, (long long)d);
            free(ref);
            vt_free(x);
            vt_free(out);
        }
    }
    vt_free(diag);
}

static void each_isa_reference(vq_ctx *ctx, const char *isa)
{
    for (int64_t d = 1; d <= 1024; d *= 2) check_shape(ctx, isa, 2, (const int64_t[]){3, d});
    /* many rows: several tasks per thread, a row count no task size divides */
    check_shape(ctx, isa, 3, (const int64_t[]){3, 101, 64});
    check_shape(ctx, isa, 1, (const int64_t[]){128});
}

static void test_against_dense_reference(void) { vt_for_each_isa(2, each_isa_reference); }

/* inverse(forward(x)) == x, both calls in place (out is x). */
static void each_isa_roundtrip(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    for (int64_t d = 1; d <= 1024; d *= 4) {
        DLTensor *x = vt_new(VT_F32, VT_DIMS(17, d)), *diag = random_diag(&rng, d);
        vt_fill_normal(x, &rng, 0.0, 1.0);
        double *orig = malloc(vt_numel(x) * sizeof *orig);
        for (int64_t i = 0; i < vt_numel(x); i++) orig[i] = vt_get(x, i);
        VT_OK(ctx, vq_hadamard(ctx, x, diag, false, x));
        VT_OK(ctx, vq_hadamard(ctx, x, diag, true, x));
        const double err = vt_rel_l2(x, orig);
        VT_CHECK(err < 1e-6, "%s D=%lld: round trip rel err %.3g", isa, (long long)d, err);
        free(orig);
        vt_free(x);
        vt_free(diag);
    }
    /* f16 in place as well */
    DLTensor *h = vt_new(VT_F16, VT_DIMS(4, 256)), *diag = random_diag(&rng, 256);
    vt_fill_normal(h, &rng, 0.0, 1.0);
    double *orig = malloc(vt_numel(h) * sizeof *orig);
    for (int64_t i = 0; i < vt_numel(h); i++) orig[i] = vt_get(h, i);
    VT_OK(ctx, vq_hadamard(ctx, h, diag, false, h));
    VT_OK(ctx, vq_hadamard(ctx, h, diag, true, h));
    VT_CHECK(vt_rel_l2(h, orig) < 2e-3, "%s f16 round trip %.3g", isa, vt_rel_l2(h, orig));
    free(orig);
    vt_free(h);
    vt_free(diag);
}

static void test_roundtrip_is_identity(void) { vt_for_each_isa(2, each_isa_roundtrip); }

/* The internal entry: vq_rotate_rows on the ctx's ISA, against the dense
 * reference; rows outside [0, n_rows) are untouched. */
static void each_isa_rotate_rows(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 9);
    for (int64_t d = 1; d <= 1024; d *= 2) {
        for (int inverse = 0; inverse < 2; inverse++) {
            DLTensor *x = vt_new(VT_F32, VT_DIMS(4, d)), *diag = random_diag(&rng, d);
            vt_fill_normal(x, &rng, 0.0, 1.0);
            double *ref = malloc(vt_numel(x) * sizeof *ref);
            reference(x, diag->data, inverse, ref);
            for (int64_t i = 3 * d; i < 4 * d; i++) ref[i] = vt_get(x, i); /* row 3 is not passed */
            vq_rotate_rows(ctx, x->data, 3, d, diag->data, inverse);
            VT_CHECK(vt_rel_l2(x, ref) <= 1e-5 && vt_max_abs(x, ref) < 1e-4, "%s D=%lld inverse %d: err %.3g", isa,
                     (long long)d, inverse, vt_rel_l2(x, ref));
            free(ref);
            vt_free(x);
            vt_free(diag);
        }
    }
}

static void test_rotate_rows(void) { vt_for_each_isa(1, each_isa_rotate_rows); }

/* Each bad call fails with its status and a message naming the argument, and
 * leaves the output as it was. */
static void test_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *x = vt_new(VT_F32, VT_DIMS(2, 8)), *out = vt_new(VT_F32, VT_DIMS(2, 8));
    DLTensor *diag = vt_new(VT_F32, VT_DIMS(8)), *diag4 = vt_new(VT_F32, VT_DIMS(4));
    DLTensor *diag_f16 = vt_new(VT_F16, VT_DIMS(8)), *diag2d = vt_new(VT_F32, VT_DIMS(1, 8));
    DLTensor *x_u8 = vt_new(VT_U8, VT_DIMS(2, 8)), *out_bf16 = vt_new(VT_BF16, VT_DIMS(2, 8));
    DLTensor *out_wrong = vt_new(VT_F32, VT_DIMS(2, 16)), *x12 = vt_new(VT_F32, VT_DIMS(2, 12));
    DLTensor *out12 = vt_new(VT_F32, VT_DIMS(2, 12)), *x2048 = vt_new(VT_F32, VT_DIMS(1, 2048));
    DLTensor *out2048 = vt_new(VT_F32, VT_DIMS(1, 2048)), *out_rank = vt_new(VT_F32, VT_DIMS(16));
    vq_rng rng;
    vq_rng_seed(&rng, 1);
    vt_fill_normal(x, &rng, 0, 1);
    vt_fill_signs(diag, &rng);
    void *snap = vt_snapshot(out);

    VT_CHECK(vq_hadamard(NULL, x, NULL, false, out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'x' is NULL", vq_hadamard(ctx, NULL, NULL, false, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out' is NULL", vq_hadamard(ctx, x, NULL, false, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'x': expected dtype f32/f16", vq_hadamard(ctx, x_u8, NULL, false, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected dtype", vq_hadamard(ctx, x, NULL, false, out_bf16));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected shape [2, 8]", vq_hadamard(ctx, x, NULL, false, out_wrong));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected shape [2, 8]", vq_hadamard(ctx, x, NULL, false, out_rank));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'diag'", vq_hadamard(ctx, x, diag4, false, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'diag': expected dtype f32", vq_hadamard(ctx, x, diag_f16, false, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'diag': expected rank 1", vq_hadamard(ctx, x, diag2d, false, out));
    VT_CHECK(vt_unchanged(out, snap), "failed calls wrote nothing");
    void *snap12 = vt_snapshot(out12), *snap2048 = vt_snapshot(out2048);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "D = 12 must be a power of two", vq_hadamard(ctx, x12, NULL, false, out12));
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "D = 2048 exceeds", vq_hadamard(ctx, x2048, NULL, true, out2048));
    VT_CHECK(vt_unchanged(out12, snap12) && vt_unchanged(out2048, snap2048), "failed calls wrote nothing");
    /* a tensor on another device */
    out->device.device_type = kDLCUDA;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': lives on cuda:0, expected the context's device cpu", vq_hadamard(ctx, x, NULL, false, out));
    out->device.device_type = kDLCPU;
    VT_CHECK(vt_unchanged(out, snap), "failed calls wrote nothing");
    free(snap);
    free(snap12);
    free(snap2048);
    DLTensor *all[] = {x, out, diag, diag4, diag_f16, diag2d, x_u8, out_bf16, out_wrong, x12, out12, x2048, out2048, out_rank};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_against_dense_reference);
    VT_RUN(test_roundtrip_is_identity);
    VT_RUN(test_rotate_rows);
    VT_RUN(test_errors);
    return vt_finish();
}
