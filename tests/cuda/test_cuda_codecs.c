/* test_cuda_codecs.c — every codec on a CUDA context against the CPU path
 * (VQ_ISA=scalar, the readable reference every CPU ISA is itself tested
 * against in the codec's own test file), on the CPU suite's shapes: D = 64,
 * 96, 128, 256 (powers of two where the codec rotates) and N = 1, 7, 97, 4097
 * rows, f16 and f32, fresh random data each run (seed printed; VQ_TEST_SEED
 * replays one). GPU outputs are poisoned (0xFF bytes: NaN for floats) before
 * each run.
 *
 * Float outputs must be within the tolerance of docs/FORMATS.md §1 of the CPU's (relative L2
 * 1e-5 for f32, 2e-3 for f16) with no NaN left. Integer outputs must be equal,
 * except where docs/FORMATS.md §1 allows a difference: a code or bit may differ when
 * its float64 decision value lies within 1e-5 (relative to the quantities
 * compared) of the decision boundary; each such flip is verified against a
 * float64 recomputation, counted and printed. Rows downstream of a flip (the
 * second RVQ stage, later CommVQ stages, a norm-corrected scale) are not
 * compared, since a legitimate flip changes them.
 *
 * Exits 77 (skipped) without a CUDA device. VQ_TEST_QUICK=1 keeps N <= 97
 * (for compute-sanitizer runs). */
#include <time.h>

#include "harness.h"

#include "skip_without_cuda.h"
#ifdef VQ_TEST_HAVE_CUDA
#include <cuda_runtime_api.h>

static vq_rng rng;
static vq_ctx *cpu, *gpu;
static cudaStream_t stream;
static int n_cases;            /* shapes run per test, for the summary */
static int64_t n_flips, n_ints; /* near-boundary flips among integers compared */
static double worst_err;       /* largest relative L2 error of a float output */

static const int64_t DS[] = {64, 96, 128, 256};
static const int64_t NS[] = {1, 7, 97, 4097};

#define FOR_SHAPES(d, n, pow2_only)                                                         \
    for (int di_ = 0; di_ < 4; di_++)                                                       \
        for (int ni_ = 0; ni_ < 4; ni_++)                                                   \
            for (int64_t d = DS[di_], n = NS[ni_], once_ = 1; once_; once_ = 0)             \
                if (((pow2_only) && !vq_is_pow2(d)) || (n > 97 && getenv("VQ_TEST_QUICK"))) \
                    ;                                                                        \
                else

/* ---- device mirrors ---- */

static void cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "FATAL: %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

/* Every tensor of a case, host or device, is freed by case_done(). */
static DLTensor *host_list[64], *dev_list[64];
static int n_host, n_dev;

static DLTensor *keep(DLTensor *t)
{
    if (n_host == 64) exit(2);
    host_list[n_host++] = t;
    return t;
}
#define hnew(...) keep(vt_new(__VA_ARGS__))

/* A device tensor of h's shape and dtype (contents undefined). */
static DLTensor *dev_like(const DLTensor *h)
{
    DLTensor *d = vt_new(h->dtype, h->ndim, h->shape);
    free(d->data);
    cuda_ok(cudaMalloc(&d->data, vt_bytes(h) + 64), "cudaMalloc");
    d->device.device_type = kDLCUDA;
    d->device.device_id = 0;
    if (n_dev == 64) exit(2);
    dev_list[n_dev++] = d;
    return d;
}

/* A device copy of a host tensor. */
static DLTensor *up(const DLTensor *h)
{
    DLTensor *d = dev_like(h);
    cuda_ok(cudaMemcpy(d->data, h->data, vt_bytes(h), cudaMemcpyHostToDevice), "upload");
    return d;
}

/* Frees the case's tensors (after its last out_fetch: nothing is queued). */
static void case_done(void)
{
    for (int i = 0; i < n_dev; i++) {
        cudaFree(dev_list[i]->data);
        dev_list[i]->data = NULL;
        vt_free(dev_list[i]);
    }
    for (int i = 0; i < n_host; i++) vt_free(host_list[i]);
    n_dev = n_host = 0;
    n_cases++;
}

/* An output: the CPU's (host), the GPU's (device, poisoned) and the GPU's
 * copied back. */
typedef struct out_t { DLTensor *cpu, *dev, *gpu; } out_t;

static out_t out_new(DLDataType dt, int ndim, const int64_t *shape)
{
    out_t o = {hnew(dt, ndim, shape), NULL, hnew(dt, ndim, shape)};
    o.dev = dev_like(o.cpu);
    cuda_ok(cudaMemsetAsync(o.dev->data, 0xFF, vt_bytes(o.cpu), stream), "poison");
    return o;
}

/* Waits for the ctx's stream (the library never does) and copies back. */
static void out_fetch(out_t *o)
{
    cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda_ok(cudaGetLastError(), "a kernel");
    cuda_ok(cudaMemcpy(o->gpu->data, o->dev->data, vt_bytes(o->gpu), cudaMemcpyDeviceToHost), "download");
}

/* Float outputs: no NaN left by the poison, relative L2 within the
 * tolerance; rows of row_len elements flagged in skip_row (if not NULL) are
 * left out. */
static void expect_close_rows(const char *what, const out_t *o, const bool *skip_row, int64_t row_len)
{
    const int64_t n = vt_numel(o->cpu);
    double num = 0.0, den = 0.0;
    int64_t nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (skip_row && skip_row[i / row_len]) continue;
        const double c = vt_get(o->cpu, i), g = vt_get(o->gpu, i);
        if (isnan(g)) nan++;
        else num += (g - c) * (g - c);
        den += c * c;
    }
    const double err = den > 0.0 ? sqrt(num / den) : sqrt(num);
    const double tol = vq_dtype_of(o->cpu) == VQ_DT_F32 ? 1e-5 : 2e-3;
    VT_CHECK(nan == 0, "%s: %lld of %lld elements unwritten (NaN)", what, (long long)nan, (long long)n);
    VT_CHECK(err <= tol, "%s: relative L2 error %.3g > %.0e", what, err, tol);
    if (err > worst_err) worst_err = err;
}

static void expect_close(const char *what, const out_t *o) { expect_close_rows(what, o, NULL, 1); }

/* Integer outputs: equal everywhere. */
static void expect_equal(const char *what, const out_t *o)
{
    const int64_t n = vt_numel(o->cpu);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (vt_get(o->cpu, i) != vt_get(o->gpu, i)) {
            if (first < 0) first = i;
            bad++;
        }
    VT_CHECK(bad == 0, "%s: %lld of %lld differ (first at %lld: cpu %g, gpu %g)", what, (long long)bad, (long long)n,
             (long long)first, first >= 0 ? vt_get(o->cpu, first) : 0.0, first >= 0 ? vt_get(o->gpu, first) : 0.0);
    n_ints += n;
}

/* Records one allowed flip after checking that it is one: `margin` is the
 * float64 distance of the decision value from its boundary, `scale` the
 * size of the quantities compared. */
static void expect_flip(const char *what, int64_t at, double margin, double scale, bool adjacent)
{
    VT_CHECK(adjacent && fabs(margin) <= 1e-5 * scale,
             "%s: element %lld differs %s the decision boundary (margin %.3g, scale %.3g)", what, (long long)at,
             adjacent ? "away from" : "by more than one level from", margin, scale);
    n_flips++;
}

static void summary(void)
{
    printf("  %d shapes; worst relative L2 error %.2e; %lld near-boundary flips among %lld integer outputs\n",
           n_cases, worst_err, (long long)n_flips, (long long)n_ints);
    n_cases = 0;
    worst_err = 0.0;
    n_flips = n_ints = 0;
}

static DLDataType float_dt(int64_t k) { return k % 2 ? VT_F16 : VT_F32; }

/* rows [n, d] of normal values (seen as keys: a few outlier channels). */
static DLTensor *random_rows(DLDataType dt, int ndim, const int64_t *shape)
{
    DLTensor *t = hnew(dt, ndim, shape);
    vt_fill_keys(t, &rng, 2, 6.0);
    return t;
}

/* float64 rot(x) of row r of x [.., d]: H (diag ⊙ x) / sqrt(d). */
static void rot64(const DLTensor *x, int64_t r, int64_t d, const DLTensor *diag, double *y)
{
    for (int64_t j = 0; j < d; j++) y[j] = vt_get(x, r * d + j) * (diag ? vt_get(diag, j) : 1.0);
    for (int64_t h = 1; h < d; h <<= 1)
        for (int64_t i = 0; i < d; i += 2 * h)
            for (int64_t j = i; j < i + h; j++) {
                const double a = y[j], b = y[j + h];
                y[j] = a + b;
                y[j + h] = a - b;
            }
    for (int64_t j = 0; j < d; j++) y[j] /= sqrt((double)d);
}

/* ---- bit packing ---- */

static void test_bitpack(void)
{
    static const int BITS[] = {1, 3, 8, 13, 16};
    int k = 0;
    FOR_SHAPES(d, n, false) {
        const int bits = BITS[k % 5];
        const int64_t len = k % 2 ? d - 1 : d;  /* odd lengths leave a partial last word */
        const DLDataType dt = bits <= 8 && k % 3 == 0 ? VT_U8 : (k % 3 == 1 ? VT_U16 : VT_I32);
        DLTensor *idx = hnew(dt, VT_DIMS(n, len));
        vt_fill_uniform_int(idx, &rng, 0, dt.bits == 8 ? 255 : 65535);  /* high bits test the masking */
        DLTensor *idx_d = up(idx);
        const int64_t w = (len * bits + 31) / 32;
        out_t p = out_new(VT_U32, VT_DIMS(n, w));
        VT_OK(cpu, vq_bit_pack(cpu, idx, bits, p.cpu));
        VT_OK(gpu, vq_bit_pack(gpu, idx_d, bits, p.dev));
        out_fetch(&p);
        expect_equal("vq_bit_pack", &p);

        DLTensor *packed_d = up(p.cpu);
        out_t u = out_new(bits <= 8 && k % 2 ? VT_U8 : VT_I32, VT_DIMS(n, len));
        VT_OK(cpu, vq_bit_unpack(cpu, p.cpu, bits, len, u.cpu));
        VT_OK(gpu, vq_bit_unpack(gpu, packed_d, bits, len, u.dev));
        out_fetch(&u);
        expect_equal("vq_bit_unpack", &u);
        case_done();
        k++;
    }
    summary();
}

/* ---- Hadamard ---- */

static void test_hadamard(void)
{
    int k = 0;
    FOR_SHAPES(d, n, true) {
        for (int inverse = 0; inverse < 2; inverse++) {
            DLTensor *x = random_rows(float_dt(k), VT_DIMS(n, d));
            DLTensor *diag = k % 3 ? hnew(VT_F32, VT_DIMS(d)) : NULL;
            if (diag) vt_fill_signs(diag, &rng);
            DLTensor *x_d = up(x), *diag_d = diag ? up(diag) : NULL;
            out_t o = out_new(float_dt(k / 2), VT_DIMS(n, d));
            VT_OK(cpu, vq_hadamard(cpu, x, diag, inverse, o.cpu));
            VT_OK(gpu, vq_hadamard(gpu, x_d, diag_d, inverse, o.dev));
            out_fetch(&o);
            expect_close("vq_hadamard", &o);
            if (vq_dtype_of(x) == vq_dtype_of(o.cpu)) {  /* in place: out is x */
                VT_OK(gpu, vq_hadamard(gpu, x_d, diag_d, inverse, x_d));
                DLTensor *saved = o.dev;
                o.dev = x_d;
                out_fetch(&o);
                o.dev = saved;
                expect_close("vq_hadamard in place", &o);
            }
            k++;
        }
        case_done();
    }
    /* the extremes of the row kernel: D = 8 (fewer butterflies than a warp) and 1024 */
    for (int64_t d = 8; d <= 1024; d *= 128) {
        DLTensor *x = random_rows(VT_F32, VT_DIMS(33, d)), *x_d = up(x);
        out_t o = out_new(VT_F32, VT_DIMS(33, d));
        VT_OK(cpu, vq_hadamard(cpu, x, NULL, false, o.cpu));
        VT_OK(gpu, vq_hadamard(gpu, x_d, NULL, false, o.dev));
        out_fetch(&o);
        expect_close("vq_hadamard D = 8 / 1024", &o);
        case_done();
    }
    summary();
}

/* ---- TurboQuant ---- */

/* The Lloyd-Max boundaries of `bits` as doubles. */
static void lloyd(int bits, float *cents, float *bounds)
{
    VT_CHECK(vq_lloyd_max_codebook(bits, cents, bounds) == VQ_OK, "lloyd max table %d", bits);
}

static void test_turbo_scalar(void)
{
    int k = 0;
    FOR_SHAPES(d, n, false) {
        const int bits = 1 + k % 8;
        DLTensor *x = random_rows(float_dt(k), VT_DIMS(n, d)), *x_d = up(x);
        out_t q = out_new(VT_U8, VT_DIMS(n, d));
        VT_OK(cpu, vq_turboquant_scalar_quantize(cpu, x, bits, q.cpu));
        VT_OK(gpu, vq_turboquant_scalar_quantize(gpu, x_d, bits, q.dev));
        out_fetch(&q);
        expect_equal("vq_turboquant_scalar_quantize", &q);  /* same f32 comparisons: exact */

        DLTensor *idx = hnew(VT_U8, VT_DIMS(n, d));
        vt_fill_uniform_int(idx, &rng, 0, 255);  /* beyond 2^bits: masked */
        DLTensor *idx_d = up(idx);
        out_t o = out_new(float_dt(k + 1), VT_DIMS(n, d));
        VT_OK(cpu, vq_turboquant_scalar_dequantize(cpu, idx, bits, 0.73f, o.cpu));
        VT_OK(gpu, vq_turboquant_scalar_dequantize(gpu, idx_d, bits, 0.73f, o.dev));
        out_fetch(&o);
        expect_close("vq_turboquant_scalar_dequantize", &o);
        case_done();
        k++;
    }
    summary();
}

/* Checks the codes of one quantization stage of row r, given the float64
 * decision values v [d] (the row divided by its scale): equal, or adjacent
 * levels with v at their boundary. Returns whether the row's codes agree. */
static bool check_stage_row(const char *what, const out_t *idx, int64_t r, int64_t d, const double *v,
                            const float *bounds)
{
    bool same = true;
    for (int64_t j = 0; j < d; j++) {
        const int c = (int)vt_get(idx->cpu, r * d + j), g = (int)vt_get(idx->gpu, r * d + j);
        if (c == g) continue;
        same = false;
        const int lo = c < g ? c : g;
        expect_flip(what, r * d + j, v[j] - (double)bounds[lo], fabs((double)bounds[lo]) + 1.0, abs(c - g) == 1);
    }
    n_ints += d;
    return same;
}

/* The decision values y / (||y|| / sqrt(d)) of a rotated row. */
static double normalise(const double *y, int64_t d, double *v)
{
    double ss = 0.0;
    for (int64_t j = 0; j < d; j++) ss += y[j] * y[j];
    const double s = sqrt(ss / (double)d);
    for (int64_t j = 0; j < d; j++) v[j] = s > 0.0 ? y[j] / s : 0.0;
    return s;
}

static void test_turbo_hadamard(void)
{
    float cents[256], bounds[255];
    double *y = malloc(sizeof(double) * 256), *v = malloc(sizeof(double) * 256);
    int k = 0;
    FOR_SHAPES(d, n, true) {
        const int bits = 1 + (k * 3) % 8;
        const bool nc = k % 2;
        lloyd(bits, cents, bounds);
        DLTensor *x = random_rows(float_dt(k / 2), VT_DIMS(n, d)), *x_d = up(x);
        DLTensor *diag = k % 3 ? hnew(VT_F32, VT_DIMS(d)) : NULL;
        if (diag) vt_fill_signs(diag, &rng);
        DLTensor *diag_d = diag ? up(diag) : NULL;
        const vq_turboquant_opts opts = {.norm_correct = nc};
        out_t idx = out_new(VT_U8, VT_DIMS(n, d)), sc = out_new(VT_F32, VT_DIMS(n));
        VT_OK(cpu, vq_turboquant_hadamard_quantize(cpu, x, diag, bits, idx.cpu, sc.cpu, &opts));
        VT_OK(gpu, vq_turboquant_hadamard_quantize(gpu, x_d, diag_d, bits, idx.dev, sc.dev, &opts));
        out_fetch(&idx);
        out_fetch(&sc);
        bool *skip = calloc((size_t)n, sizeof(bool));
        for (int64_t r = 0; r < n; r++) {
            rot64(x, r, d, diag, y);
            normalise(y, d, v);
            skip[r] = !check_stage_row("vq_turboquant_hadamard_quantize idx", &idx, r, d, v, bounds) && nc;
        }
        expect_close_rows("vq_turboquant_hadamard_quantize scale", &sc, skip, 1);

        /* decode the CPU's codes */
        out_t o = out_new(float_dt(k), VT_DIMS(n, d));
        DLTensor *idx_d = up(idx.cpu), *sc_d = up(sc.cpu);
        VT_OK(cpu, vq_turboquant_hadamard_dequantize(cpu, idx.cpu, sc.cpu, diag, bits, o.cpu));
        VT_OK(gpu, vq_turboquant_hadamard_dequantize(gpu, idx_d, sc_d, diag_d, bits, o.dev));
        out_fetch(&o);
        expect_close("vq_turboquant_hadamard_dequantize", &o);
        free(skip);
        case_done();
        k++;
    }
    free(y);
    free(v);
    summary();
}

static void test_turbo_rvq(void)
{
    float c1[256], b1s[255], c2[256], b2s[255];
    double *y = malloc(sizeof(double) * 256), *v = malloc(sizeof(double) * 256);
    int k = 0;
    FOR_SHAPES(d, n, true) {
        const int b1 = 1 + k % 4, b2 = 1 + (k * 5) % 8;
        lloyd(b1, c1, b1s);
        lloyd(b2, c2, b2s);
        DLTensor *x = random_rows(float_dt(k), VT_DIMS(n, d)), *x_d = up(x);
        DLTensor *diag = hnew(VT_F32, VT_DIMS(d));
        vt_fill_signs(diag, &rng);
        DLTensor *diag_d = up(diag);
        out_t i1 = out_new(VT_U8, VT_DIMS(n, d)), s1 = out_new(VT_F32, VT_DIMS(n));
        out_t i2 = out_new(VT_U8, VT_DIMS(n, d)), s2 = out_new(VT_F32, VT_DIMS(n));
        VT_OK(cpu, vq_turboquant_rvq_encode(cpu, x, diag, b1, b2, i1.cpu, s1.cpu, i2.cpu, s2.cpu));
        VT_OK(gpu, vq_turboquant_rvq_encode(gpu, x_d, diag_d, b1, b2, i1.dev, s1.dev, i2.dev, s2.dev));
        out_fetch(&i1);
        out_fetch(&s1);
        out_fetch(&i2);
        out_fetch(&s2);
        bool *skip = calloc((size_t)n, sizeof(bool));
        for (int64_t r = 0; r < n; r++) {
            rot64(x, r, d, diag, y);
            normalise(y, d, v);
            if (!check_stage_row("vq_turboquant_rvq_encode idx1", &i1, r, d, v, b1s)) {
                skip[r] = true;  /* the residual, hence stage 2, legitimately differs */
                continue;
            }
            const double a = vt_get(s1.cpu, r);
            for (int64_t j = 0; j < d; j++) y[j] -= a * c1[(int)vt_get(i1.cpu, r * d + j)];
            normalise(y, d, v);
            check_stage_row("vq_turboquant_rvq_encode idx2", &i2, r, d, v, b2s);
        }
        expect_close("vq_turboquant_rvq_encode scale1", &s1);
        expect_close_rows("vq_turboquant_rvq_encode scale2", &s2, skip, 1);

        out_t o = out_new(float_dt(k + 1), VT_DIMS(n, d));
        DLTensor *i1_d = up(i1.cpu), *s1_d = up(s1.cpu), *i2_d = up(i2.cpu), *s2_d = up(s2.cpu);
        VT_OK(cpu, vq_turboquant_rvq_decode(cpu, i1.cpu, s1.cpu, i2.cpu, s2.cpu, diag, b1, b2, o.cpu));
        VT_OK(gpu, vq_turboquant_rvq_decode(gpu, i1_d, s1_d, i2_d, s2_d, diag_d, b1, b2, o.dev));
        out_fetch(&o);
        expect_close("vq_turboquant_rvq_decode", &o);
        free(skip);
        case_done();
        k++;
    }
    free(y);
    free(v);
    summary();
}

/* ---- KIVI affine ---- */

static void test_kivi(void)
{
    static const int G[] = {1, 32, 5, 128};
    int k = 0;
    FOR_SHAPES(d, n, false) {
        for (int keys = 0; keys < 2; keys++, k++) {
            const bool packed = k % 2;
            const int bits = packed ? (k % 3 == 0 ? 2 : k % 3 == 1 ? 4 : 8) : 1 + k % 8, g = G[(k / 2) % 4];
            const DLDataType pdt = k % 3 == 0 ? VT_F16 : VT_F32;
            DLTensor *x = random_rows(float_dt(k / 2), VT_DIMS(1, 2, n, d)), *x_d = up(x);
            const int64_t gs = keys ? (n + g - 1) / g : n, gd = keys ? d : (d + g - 1) / g;
            out_t codes = out_new(VT_U8, VT_DIMS(1, 2, n, packed ? d * bits / 8 : d));
            out_t sc = out_new(pdt, VT_DIMS(1, 2, gs, gd)), z = out_new(pdt, VT_DIMS(1, 2, gs, gd));
            out_t o = out_new(float_dt(k), VT_DIMS(1, 2, n, d));
            const char *what = keys ? "vq_kivi_quantize_keys" : "vq_kivi_quantize_values";
            if (keys) {
                VT_OK(cpu, vq_kivi_quantize_keys(cpu, x, bits, g, codes.cpu, sc.cpu, z.cpu));
                VT_OK(gpu, vq_kivi_quantize_keys(gpu, x_d, bits, g, codes.dev, sc.dev, z.dev));
            } else {
                VT_OK(cpu, vq_kivi_quantize_values(cpu, x, bits, g, codes.cpu, sc.cpu, z.cpu));
                VT_OK(gpu, vq_kivi_quantize_values(gpu, x_d, bits, g, codes.dev, sc.dev, z.dev));
            }
            out_fetch(&codes);
            out_fetch(&sc);
            out_fetch(&z);
            expect_equal(what, &codes);  /* IEEE division and rounding on both: exact */
            expect_close(what, &sc);
            expect_close(what, &z);

            DLTensor *c_d = up(codes.cpu), *s_d = up(sc.cpu), *z_d = up(z.cpu);
            if (keys) {
                VT_OK(cpu, vq_kivi_dequantize_keys(cpu, codes.cpu, sc.cpu, z.cpu, bits, g, o.cpu));
                VT_OK(gpu, vq_kivi_dequantize_keys(gpu, c_d, s_d, z_d, bits, g, o.dev));
            } else {
                VT_OK(cpu, vq_kivi_dequantize_values(cpu, codes.cpu, sc.cpu, z.cpu, bits, g, o.cpu));
                VT_OK(gpu, vq_kivi_dequantize_values(gpu, c_d, s_d, z_d, bits, g, o.dev));
            }
            out_fetch(&o);
            expect_close(keys ? "vq_kivi_dequantize_keys" : "vq_kivi_dequantize_values", &o);
        }
        case_done();
    }
    summary();
}

/* ---- RaBitQ, scalar codebook ---- */

static void test_rabitq(void)
{
    double *y = malloc(sizeof(double) * 256);
    int k = 0;
    FOR_SHAPES(d, n, true) {
        DLTensor *x = random_rows(float_dt(k), VT_DIMS(n, d)), *x_d = up(x);
        DLTensor *diag = k % 3 ? hnew(VT_F32, VT_DIMS(d)) : NULL;
        if (diag) vt_fill_signs(diag, &rng);
        DLTensor *diag_d = diag ? up(diag) : NULL;
        const vq_rabitq_encode_opts opts = {.mag = k % 2 ? VQ_RABITQ_MAG_UNBIASED : VQ_RABITQ_MAG_L1};
        out_t bits = out_new(VT_U8, VT_DIMS(n, d / 8)), mag = out_new(VT_F32, VT_DIMS(n));
        VT_OK(cpu, vq_rabitq_encode(cpu, x, diag, bits.cpu, mag.cpu, &opts));
        VT_OK(gpu, vq_rabitq_encode(gpu, x_d, diag_d, bits.dev, mag.dev, &opts));
        out_fetch(&bits);
        out_fetch(&mag);
        for (int64_t r = 0; r < n; r++) {
            rot64(x, r, d, diag, y);
            double ss = 0.0;
            for (int64_t j = 0; j < d; j++) ss += y[j] * y[j];
            for (int64_t j = 0; j < d; j++) {
                const int64_t byte = r * (d / 8) + j / 8;
                const int c = ((int)vt_get(bits.cpu, byte) >> (j % 8)) & 1;
                const int g = ((int)vt_get(bits.gpu, byte) >> (j % 8)) & 1;
                if (c != g) expect_flip("vq_rabitq_encode bits", r * d + j, y[j], sqrt(ss / (double)d), true);
            }
            n_ints += d;
        }
        expect_close("vq_rabitq_encode k_mag", &mag);

        DLTensor *qb = hnew(VT_U8, VT_DIMS(d / 8)), *kb = hnew(VT_U8, VT_DIMS(n, d / 8));
        DLTensor *cx = hnew(VT_F32, VT_DIMS(n)), *scale = hnew(VT_F32, VT_DIMS(1));
        vt_fill_uniform_int(qb, &rng, 0, 255);
        vt_fill_uniform_int(kb, &rng, 0, 255);
        vt_fill_normal(cx, &rng, 0.0, 1.0);
        vt_set(scale, 0, 0.37);
        DLTensor *qb_d = up(qb), *kb_d = up(kb), *cx_d = up(cx), *scale_d = up(scale);
        out_t hs = out_new(VT_F32, VT_DIMS(n));
        VT_OK(cpu, vq_rabitq_hamming_score(cpu, qb, kb, cx, scale, hs.cpu));
        VT_OK(gpu, vq_rabitq_hamming_score(gpu, qb_d, kb_d, cx_d, scale_d, hs.dev));
        out_fetch(&hs);
        expect_close("vq_rabitq_hamming_score", &hs);

        DLTensor *vi = hnew(VT_U8, VT_DIMS(n, d));
        vt_fill_uniform_int(vi, &rng, 0, 255);
        DLTensor *vi_d = up(vi);
        out_t pk = out_new(VT_U8, VT_DIMS(n, d / 2));
        VT_OK(cpu, vq_rabitq_pack_values(cpu, vi, pk.cpu));
        VT_OK(gpu, vq_rabitq_pack_values(gpu, vi_d, pk.dev));
        out_fetch(&pk);
        expect_equal("vq_rabitq_pack_values", &pk);

        case_done();
        k++;
    }
    free(y);
    summary();
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void test_codebook(void)
{
    static const int NC[] = {1, 2, 16, 256};
    int k = 0;
    FOR_SHAPES(d, n, false) {
        const int nc = NC[k % 4];
        DLTensor *cents = hnew(VT_F32, VT_DIMS(nc));
        vt_fill_normal(cents, &rng, 0.0, 1.5);
        float *c = cents->data;
        qsort(c, (size_t)nc, sizeof(float), cmp_float);
        for (int i = 1; i < nc; i++)
            if (vq_rng_next(&rng) % 5 == 0) c[i] = c[i - 1];  /* repeated centroids */
        DLTensor *x = random_rows(float_dt(k), VT_DIMS(n, d)), *x_d = up(x), *cents_d = up(cents);
        out_t idx = out_new(VT_U8, VT_DIMS(n, d));
        VT_OK(cpu, vq_codebook_quantize(cpu, x, cents, idx.cpu));
        VT_OK(gpu, vq_codebook_quantize(gpu, x_d, cents_d, idx.dev));
        out_fetch(&idx);
        expect_equal("vq_codebook_quantize", &idx);  /* the same midpoints and comparisons: exact */
        case_done();
        k++;
    }
    summary();
}

/* ---- QJL ---- */

static void test_qjl(void)
{
    static const int64_t MS[] = {32, 71, 256};
    int k = 0;
    FOR_SHAPES(d, n, false) {
        const int64_t m = MS[k % 3], w = (m + 31) / 32;
        DLTensor *x = random_rows(float_dt(k), VT_DIMS(n, d)), *x_d = up(x);
        DLTensor *S = hnew(VT_F32, VT_DIMS(m, d));
        vt_fill_normal(S, &rng, 0.0, 1.0);
        DLTensor *S_d = up(S);
        out_t bits = out_new(VT_U32, VT_DIMS(n, w));
        VT_OK(cpu, vq_qjl_encode(cpu, x, S, bits.cpu));
        VT_OK(gpu, vq_qjl_encode(gpu, x_d, S_d, bits.dev));
        out_fetch(&bits);
        for (int64_t r = 0; r < n; r++) {
            double xx = 0.0;
            for (int64_t c = 0; c < d; c++) xx += vt_get(x, r * d + c) * vt_get(x, r * d + c);
            for (int64_t j = 0; j < 32 * w; j++) {
                const int64_t word = r * w + j / 32;
                const int cb = ((uint32_t)vt_get(bits.cpu, word) >> (j % 32)) & 1u;
                const int gb = ((uint32_t)vt_get(bits.gpu, word) >> (j % 32)) & 1u;
                if (cb == gb) continue;
                if (j >= m) {
                    VT_CHECK(false, "vq_qjl_encode: padding bit %lld of row %lld is set", (long long)j, (long long)r);
                    continue;
                }
                double p = 0.0, ss = 0.0;
                for (int64_t c = 0; c < d; c++) {
                    p += vt_get(S, j * d + c) * vt_get(x, r * d + c);
                    ss += vt_get(S, j * d + c) * vt_get(S, j * d + c);
                }
                expect_flip("vq_qjl_encode bits", r * m + j, p, sqrt(ss * xx), true);
            }
            n_ints += m;
        }

        /* estimators over two query rows: query [2, ..], keys [2, n, ..] */
        DLTensor *qb = hnew(VT_U32, VT_DIMS(2, w)), *kb = hnew(VT_U32, VT_DIMS(2, n, w));
        vt_fill_uniform_int(qb, &rng, 0, UINT32_MAX);
        vt_fill_uniform_int(kb, &rng, 0, UINT32_MAX);
        DLTensor *qn = hnew(VT_F32, VT_DIMS(2)), *kn = hnew(VT_F32, VT_DIMS(2, n));
        vt_fill_uniform_int(qn, &rng, 1, 9);
        vt_fill_normal(kn, &rng, 3.0, 1.0);
        DLTensor *qb_d = up(qb), *kb_d = up(kb), *qn_d = up(qn), *kn_d = up(kn);
        out_t ip = out_new(VT_F32, VT_DIMS(2, n));
        const vq_qjl_inner_product_opts o_cpu = {k % 2 ? qn : NULL, k % 2 ? kn : NULL};
        const vq_qjl_inner_product_opts o_gpu = {k % 2 ? qn_d : NULL, k % 2 ? kn_d : NULL};
        VT_OK(cpu, vq_qjl_inner_product(cpu, qb, kb, (int)d, (int)m, ip.cpu, &o_cpu));
        VT_OK(gpu, vq_qjl_inner_product(gpu, qb_d, kb_d, (int)d, (int)m, ip.dev, &o_gpu));
        out_fetch(&ip);
        expect_close("vq_qjl_inner_product", &ip);

        DLTensor *q = random_rows(float_dt(k + 1), VT_DIMS(2, d)), *q_d = up(q);
        out_t sc = out_new(VT_F32, VT_DIMS(2, n));
        VT_OK(cpu, vq_qjl_score(cpu, q, S, kb, kn, sc.cpu));
        VT_OK(gpu, vq_qjl_score(gpu, q_d, S_d, kb_d, kn_d, sc.dev));
        out_fetch(&sc);
        expect_close("vq_qjl_score", &sc);

        case_done();
        k++;
    }
    summary();
}

/* ---- VecInfer ---- */

/* float64 ||x' - centroid||^2 of (row, subspace m) for code c, x' = k / s. */
static double vecinfer_dist(const DLTensor *keys, const DLTensor *cb, const DLTensor *sm, int64_t row, int64_t m, int64_t c,
                      int64_t H, int64_t S, int64_t d, int64_t M, int64_t C)
{
    const int64_t dsub = d / M, h = (row / S) % H;
    const int64_t cb0 = ((cb->ndim == 4 ? h * M : 0) + m) * C * dsub + c * dsub, s0 = sm->ndim == 2 ? h * d : 0;
    double acc = 0.0;
    for (int64_t j = 0; j < dsub; j++) {
        const int64_t ch = m * dsub + j;
        const double diff = vt_get(keys, row * d + ch) / vt_get(sm, s0 + ch) - vt_get(cb, cb0 + j);
        acc += diff * diff;
    }
    return acc;
}

/* Codes idx [rows, M] of CPU and GPU: equal, or a float64 near-tie. */
static void check_vecinfer_codes(const char *what, const out_t *idx, const DLTensor *keys, const DLTensor *cb,
                           const DLTensor *sm, int64_t H, int64_t S, int64_t d, int64_t M, int64_t C)
{
    const int64_t rows = vt_numel(idx->cpu) / M;
    for (int64_t i = 0; i < rows * M; i++) {
        const int64_t c = (int64_t)vt_get(idx->cpu, i), g = (int64_t)vt_get(idx->gpu, i);
        if (c == g) continue;
        VT_CHECK(g >= 0 && g < C, "%s: code %lld out of range", what, (long long)g);
        if (g < 0 || g >= C) continue;
        const double dc = vecinfer_dist(keys, cb, sm, i / M, i % M, c, H, S, d, M, C);
        const double dg = vecinfer_dist(keys, cb, sm, i / M, i % M, g, H, S, d, M, C);
        expect_flip(what, i, dg - dc, dc, true);
    }
    n_ints += rows * M;
}

static void test_vecinfer(void)
{
    static const int64_t DSUB[] = {2, 8, 32}, CS[] = {16, 256, 300};
    int k = 0;
    FOR_SHAPES(d, n, false) {
        const int64_t H = 2, dsub = DSUB[k % 3], M = d / dsub, C = CS[(k / 3) % 3];
        const DLDataType idt = C <= 256 ? VT_U8 : VT_U16;
        DLTensor *keys = random_rows(float_dt(k), VT_DIMS(1, H, n, d)), *keys_d = up(keys);
        DLTensor *cb = k % 2 ? hnew(VT_F32, VT_DIMS(H, M, C, dsub)) : hnew(VT_F32, VT_DIMS(M, C, dsub));
        vt_fill_normal(cb, &rng, 0.0, 1.0);
        DLTensor *sm = k % 4 < 2 ? hnew(VT_F32, VT_DIMS(H, d)) : hnew(VT_F32, VT_DIMS(d));
        for (int64_t i = 0; i < vt_numel(sm); i++) vt_set(sm, i, 0.5 + 2.0 * vq_rng_uniform(&rng));
        DLTensor *cb_d = up(cb), *sm_d = up(sm);

        out_t idx = out_new(idt, VT_DIMS(1, H, n, M));
        VT_OK(cpu, vq_vecinfer_quantize(cpu, keys, cb, sm, (int)M, idx.cpu));
        VT_OK(gpu, vq_vecinfer_quantize(gpu, keys_d, cb_d, sm_d, (int)M, idx.dev));
        out_fetch(&idx);
        check_vecinfer_codes("vq_vecinfer_quantize", &idx, keys, cb, sm, H, n, d, M, C);

        /* encode_decode: the codes as above, keys_out = the CPU's decode of the GPU's codes */
        out_t idx2 = out_new(idt, VT_DIMS(1, H, n, M)), ko = out_new(float_dt(k + 1), VT_DIMS(1, H, n, d));
        VT_OK(cpu, vq_vecinfer_quantize(cpu, keys, cb, sm, (int)M, idx2.cpu));
        VT_OK(gpu, vq_vecinfer_encode_decode(gpu, keys_d, cb_d, sm_d, (int)M, idx2.dev, ko.dev));
        out_fetch(&idx2);
        out_fetch(&ko);
        check_vecinfer_codes("vq_vecinfer_encode_decode", &idx2, keys, cb, sm, H, n, d, M, C);
        VT_OK(cpu, vq_vecinfer_dequant(cpu, idx2.gpu, cb, sm, ko.cpu));
        expect_close("vq_vecinfer_encode_decode keys_out", &ko);

        /* dequant of valid random codes */
        DLTensor *ri = hnew(idt, VT_DIMS(1, H, n, M));
        vt_fill_uniform_int(ri, &rng, 0, C - 1);
        DLTensor *ri_d = up(ri);
        out_t dq = out_new(float_dt(k), VT_DIMS(1, H, n, d));
        VT_OK(cpu, vq_vecinfer_dequant(cpu, ri, cb, sm, dq.cpu));
        VT_OK(gpu, vq_vecinfer_dequant(gpu, ri_d, cb_d, sm_d, dq.dev));
        out_fetch(&dq);
        expect_close("vq_vecinfer_dequant", &dq);

        /* query tables: [B,H,D] or [B,H,Sq,D] */
        DLTensor *q = k % 2 ? random_rows(float_dt(k), VT_DIMS(1, H, 3, d))
                            : random_rows(float_dt(k), VT_DIMS(1, H, d));
        DLTensor *q_d = up(q);
        out_t lut = k % 2 ? out_new(VT_F32, VT_DIMS(1, H, 3, M, C)) : out_new(VT_F32, VT_DIMS(1, H, M, C));
        VT_OK(cpu, vq_vecinfer_query_lut(cpu, q, cb, sm, lut.cpu));
        VT_OK(gpu, vq_vecinfer_query_lut(gpu, q_d, cb_d, sm_d, lut.dev));
        out_fetch(&lut);
        expect_close("vq_vecinfer_query_lut", &lut);

        case_done();
        k++;
    }
    summary();
}

/* ---- CommVQ ---- */

static void test_commvq(void)
{
    static const int64_t RS[] = {1, 2, 4}, CS[] = {16, 256};
    double *res = malloc(sizeof(double) * 256);
    int k = 0;
    FOR_SHAPES(d, n, false) {
        const int64_t H = 2, R = RS[k % 3], C = CS[(k / 3) % 2], P = n + 3;
        const DLDataType idt = k % 3 == 0 ? VT_I32 : (k % 3 == 1 ? VT_U16 : VT_U8);
        DLTensor *cb = hnew(VT_F32, VT_DIMS(R, C, d));
        vt_fill_normal(cb, &rng, 0.0, 1.0);
        DLTensor *idx = hnew(idt, VT_DIMS(1, H, n, R));
        vt_fill_uniform_int(idx, &rng, 0, C - 1);
        DLTensor *cs = hnew(VT_F32, VT_DIMS(P, d / 2)), *sn = hnew(VT_F32, VT_DIMS(P, d / 2));
        for (int64_t i = 0; i < P * d / 2; i++) {
            const double a = 6.283185307179586 * vq_rng_uniform(&rng);
            vt_set(cs, i, cos(a));
            vt_set(sn, i, sin(a));
        }
        DLTensor *pos = k % 2 ? hnew(VT_I32, VT_DIMS(1, n)) : hnew(VT_I32, VT_DIMS(n));
        vt_fill_uniform_int(pos, &rng, 0, P - 1);
        DLTensor *scale = hnew(VT_F32, VT_DIMS(1, H, n));
        vt_fill_normal(scale, &rng, 1.0, 0.3);
        DLTensor *cb_d = up(cb), *idx_d = up(idx), *cs_d = up(cs), *sn_d = up(sn), *pos_d = up(pos);
        DLTensor *scale_d = up(scale);
        const vq_rope_layout rope = k % 4 < 2 ? VQ_ROPE_HALF : VQ_ROPE_INTERLEAVED;
        const vq_commvq_opts oc = {rope, k % 2 ? scale : NULL}, og = {rope, k % 2 ? scale_d : NULL};
        out_t o = out_new(float_dt(k / 2), VT_DIMS(1, H, n, d));
        VT_OK(cpu, vq_commvq_decode(cpu, idx, cb, cs, sn, pos, o.cpu, &oc));
        VT_OK(gpu, vq_commvq_decode(gpu, idx_d, cb_d, cs_d, sn_d, pos_d, o.dev, &og));
        out_fetch(&o);
        expect_close("vq_commvq_decode", &o);

        /* greedy encoder: stage by stage; a near-tie flip ends the row's comparison */
        DLTensor *keys = random_rows(float_dt(k), VT_DIMS(1, H, n, d)), *keys_d = up(keys);
        out_t e = out_new(idt, VT_DIMS(1, H, n, R));
        VT_OK(cpu, vq_commvq_encode(cpu, keys, cb, e.cpu));
        VT_OK(gpu, vq_commvq_encode(gpu, keys_d, cb_d, e.dev));
        out_fetch(&e);
        for (int64_t row = 0; row < H * n; row++) {
            for (int64_t j = 0; j < d; j++) res[j] = vt_get(keys, row * d + j);
            for (int64_t r = 0; r < R; r++) {
                const int64_t c = (int64_t)vt_get(e.cpu, row * R + r), g = (int64_t)vt_get(e.gpu, row * R + r);
                n_ints++;
                if (c != g) {
                    double dc = 0.0, dg = 0.0;
                    for (int64_t j = 0; j < d && g >= 0 && g < C; j++) {
                        const double a = res[j] - vt_get(cb, (r * C + c) * d + j);
                        const double b = res[j] - vt_get(cb, (r * C + g) * d + j);
                        dc += a * a;
                        dg += b * b;
                    }
                    expect_flip("vq_commvq_encode", row * R + r, dg - dc, dc, g >= 0 && g < C);
                    break;
                }
                for (int64_t j = 0; j < d; j++) res[j] -= vt_get(cb, (r * C + c) * d + j);
            }
        }
        case_done();
        k++;
    }
    free(res);
    summary();
}

/* ---- what the CUDA path does not do ---- */

static void test_cpu_only(void)
{
    DLTensor *s2 = hnew(VT_F32, VT_DIMS(64, 8)), *s1 = hnew(VT_F32, VT_DIMS(64));
    vt_fill_normal(s2, &rng, 0.0, 1.0);
    vt_fill_normal(s1, &rng, 0.0, 1.0);
    DLTensor *s2_d = up(s2), *s1_d = up(s1);
    out_t km = out_new(VT_F32, VT_DIMS(4, 8)), lm = out_new(VT_F32, VT_DIMS(4));
    out_t cv = out_new(VT_F32, VT_DIMS(2, 4, 8)), sf = out_new(VT_F32, VT_DIMS(8));
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "CPU contexts only", vq_kmeans(gpu, s2_d, 4, 2, 7, km.dev));
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "CPU contexts only", vq_lloyd_max_fit(gpu, s1_d, 4, 2, lm.dev));
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "CPU contexts only", vq_commvq_train(gpu, s2_d, 2, 4, 1, 7, cv.dev));
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "CPU contexts only", vq_vecinfer_smooth_factors(gpu, s2_d, sf.dev));

    /* the shared-memory limit of vq_qjl_score */
    DLTensor *q = hnew(VT_F32, VT_DIMS(1, 64)), *S = hnew(VT_F32, VT_DIMS(12288, 64));
    DLTensor *kb = hnew(VT_U32, VT_DIMS(1, 3, 384)), *kn = hnew(VT_F32, VT_DIMS(1, 3));
    DLTensor *q_d = up(q), *S_d = dev_like(S), *kb_d = dev_like(kb), *kn_d = dev_like(kn);
    out_t sc = out_new(VT_F32, VT_DIMS(1, 3));
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "must be at most", vq_qjl_score(gpu, q_d, S_d, kb_d, kn_d, sc.dev));
    out_fetch(&sc);
    for (int i = 0; i < 3; i++) VT_CHECK(isnan(vt_get(sc.gpu, i)), "vq_qjl_score wrote output %d on failure", i);
    case_done();
}

int main(void)
{
    if (!vq_backend_available(VQ_BACKEND_CUDA)) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    setenv("VQ_ISA", "scalar", 1);  /* the CPU reference path */
    const char *env = getenv("VQ_TEST_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu (VQ_TEST_SEED=%llu replays it)\n", (unsigned long long)seed, (unsigned long long)seed);
    vq_rng_seed(&rng, seed);
    cpu = vt_ctx(0);
    cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
    const vq_ctx_config cfg = {.backend = VQ_BACKEND_CUDA, .device = 0, .stream = stream};
    if (vq_ctx_create(&cfg, &gpu) != VQ_OK) {
        fprintf(stderr, "cannot create a CUDA context\n");
        return 1;
    }
    VT_RUN(test_bitpack);
    VT_RUN(test_hadamard);
    VT_RUN(test_turbo_scalar);
    VT_RUN(test_turbo_hadamard);
    VT_RUN(test_turbo_rvq);
    VT_RUN(test_kivi);
    VT_RUN(test_rabitq);
    VT_RUN(test_codebook);
    VT_RUN(test_qjl);
    VT_RUN(test_vecinfer);
    VT_RUN(test_commvq);
    VT_RUN(test_cpu_only);
    vq_ctx_free(gpu);
    vq_ctx_free(cpu);
    cudaStreamDestroy(stream);
    return vt_finish();
}
#endif
