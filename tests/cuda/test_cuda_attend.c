/* test_cuda_attend.c — the CUDA decode-attention kernels (KIVI affine and
 * RaBitQ) against float64 references written as plain loops, on awkward and
 * large shapes, GQA ratios 1..8, causal and not, f16 and f32. Outputs are
 * poisoned (NaN) before each run; fresh random data each run (seed printed). */
#include "skip_without_cuda.h"
#ifdef VQ_TEST_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda_test_util.h"

static vq_rng rng;
static vq_ctx *ctx;

/* The fast decode kernels load tiles two ways (VQ_CUDA_DECODE_STAGED); every
 * case runs with both. */
static const char *load_mode = "direct";
static void set_load_mode(int staged)
{
    load_mode = staged ? "staged" : "direct";
    setenv("VQ_CUDA_DECODE_STAGED", staged ? "1" : "0", 1);
}

/* ---- float64 attention over decoded keys/values ----
 * khat [B,Hkv,Skv,D], vhat [B,Hkv,Skv,D], logits(b,hq,sq,t) computed by the
 * caller into s; here softmax + weighted sum for one row. */
static void softmax_row(const double *s, int Skv, int lim, const double *vh, int D, double *o)
{
    double m = -INFINITY;
    for (int t = 0; t <= lim && t < Skv; t++) m = s[t] > m ? s[t] : m;
    for (int d = 0; d < D; d++) o[d] = 0;
    if (m == -INFINITY) return;
    double l = 0;
    for (int t = 0; t <= lim && t < Skv; t++) {
        const double p = exp(s[t] - m);
        l += p;
        for (int d = 0; d < D; d++) o[d] += p * vh[(int64_t)t * D + d];
    }
    for (int d = 0; d < D; d++) o[d] /= l;
}

/* Packs codes [rows, D] (one per element) into [rows, D*bits/8] bytes in the
 * library's bit order (element i at stream bits [i*bits, (i+1)*bits)). */
static void pack_codes(const int *codes, int64_t rows, int D, int bits, DLTensor *out)
{
    uint8_t *o = out->data;
    const int rb = D * bits / 8;
    memset(o, 0, (size_t)rows * rb);
    for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < D; c++) o[r * rb + c * bits / 8] |= (uint8_t)(codes[r * D + c] << ((c * bits) % 8));
}

typedef struct kivi_case {
    int B, Hq, Hkv, Sq, Skv, D, bits, g;
    bool f16_scales, f16_out, causal, packed;
    int nsg;
} kivi_case;

/* VQ_TEST_QUICK=1 (used under compute-sanitizer) keeps the small cases only. */
static bool skip_large(int64_t Skv) { return getenv("VQ_TEST_QUICK") != NULL && Skv > 5000; }

static void run_kivi(kivi_case tc)
{
    if (skip_large(tc.Skv)) return;
    const int B = tc.B, Hq = tc.Hq, Hkv = tc.Hkv, Sq = tc.Sq, Skv = tc.Skv, D = tc.D, g = tc.g;
    const int GK = (Skv + g - 1) / g, GV = (D + g - 1) / g, G = Hq / Hkv;
    const int64_t nkv = (int64_t)B * Hkv * Skv;
    const DLDataType sdt = tc.f16_scales ? VT_F16 : VT_F32;
    DLTensor *q = vt_new(VT_F32, VT_DIMS(B, Hq, Sq, D));
    vt_fill_normal(q, &rng, 0, 1);
    const int maxc = (1 << tc.bits) - 1;
    int *kc = malloc(sizeof(int) * nkv * D), *vc = malloc(sizeof(int) * nkv * D);
    for (int64_t i = 0; i < nkv * D; i++) {
        kc[i] = (int)(vq_rng_next(&rng) % (uint64_t)(maxc + 1));
        vc[i] = (int)(vq_rng_next(&rng) % (uint64_t)(maxc + 1));
    }
    const int cb = tc.packed ? D * tc.bits / 8 : D;
    DLTensor *kcod = vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, cb)), *vcod = vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, cb));
    if (tc.packed) {
        pack_codes(kc, nkv, D, tc.bits, kcod);
        pack_codes(vc, nkv, D, tc.bits, vcod);
    } else {
        for (int64_t i = 0; i < nkv * D; i++) {
            ((uint8_t *)kcod->data)[i] = (uint8_t)kc[i];
            ((uint8_t *)vcod->data)[i] = (uint8_t)vc[i];
        }
    }
    DLTensor *ks = vt_new(sdt, VT_DIMS(B, Hkv, GK, D)), *kz = vt_new(sdt, VT_DIMS(B, Hkv, GK, D));
    DLTensor *vs = vt_new(sdt, VT_DIMS(B, Hkv, Skv, GV)), *vz = vt_new(sdt, VT_DIMS(B, Hkv, Skv, GV));
    vt_fill_normal(ks, &rng, 0.3, 0.1);
    vt_fill_normal(kz, &rng, -0.5, 0.3);
    vt_fill_normal(vs, &rng, 0.3, 0.1);
    vt_fill_normal(vz, &rng, -0.5, 0.3);
    const double scale = 1.0 / sqrt((double)D);

    /* float64 reference */
    double *kh = malloc(sizeof(double) * nkv * D), *vh = malloc(sizeof(double) * nkv * D);
    for (int64_t bh = 0; bh < (int64_t)B * Hkv; bh++)
        for (int t = 0; t < Skv; t++)
            for (int c = 0; c < D; c++) {
                const int64_t i = (bh * Skv + t) * D + c;
                const int64_t ki = (bh * GK + t / g) * D + c, vi = (bh * Skv + t) * GV + c / g;
                kh[i] = kc[i] * vt_get(ks, ki) + vt_get(kz, ki);
                vh[i] = vc[i] * vt_get(vs, vi) + vt_get(vz, vi);
            }
    double *ref = malloc(sizeof(double) * (size_t)B * Hq * Sq * D), *s = malloc(sizeof(double) * Skv);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hq; h++)
            for (int i = 0; i < Sq; i++) {
                const int64_t bh = (int64_t)b * Hkv + h / G, row = ((int64_t)b * Hq + h) * Sq + i;
                for (int t = 0; t < Skv; t++) {
                    double acc = 0;
                    for (int c = 0; c < D; c++) acc += vt_get(q, row * D + c) * kh[(bh * Skv + t) * D + c];
                    s[t] = scale * acc;
                }
                softmax_row(s, Skv, tc.causal ? Skv - Sq + i : Skv - 1, vh + bh * Skv * D, D, ref + row * D);
            }

    DLTensor *out = vt_new(tc.f16_out ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D));
    DLTensor *dq = ct_upload(q), *dkc = ct_upload(kcod), *dks = ct_upload(ks), *dkz = ct_upload(kz);
    DLTensor *dvc = ct_upload(vcod), *dvs = ct_upload(vs), *dvz = ct_upload(vz), *dout = ct_upload(out);
    ct_poison(dout);
    vq_scalar_attend_opts o = {.causal = tc.causal, .bits = tc.packed ? tc.bits : 0};
    VT_OK(ctx, vq_kivi_fused_attend(ctx, dq, dkc, dks, dkz, dvc, dvs, dvz, g, (float)scale, tc.nsg,
                                                  dout, &o));
    VT_OK(ctx, vq_ctx_synchronize(ctx));
    ct_download(dout, out);
    const double err = vt_rel_l2(out, ref);
    VT_CHECK(ct_count_nan(out) == 0 && err < vt_tol(out),
             "affine (%s) B%d Hq%d Hkv%d Sq%d Skv%d D%d bits%d g%d%s%s%s: rel err %.3g, %lld unwritten", load_mode,
             B, Hq, Hkv, Sq, Skv, D, tc.bits, g, tc.f16_scales ? " f16-scales" : "", tc.causal ? " causal" : "",
             tc.packed ? " packed" : " u8", err, (long long)ct_count_nan(out));
    ct_free(dq); ct_free(dkc); ct_free(dks); ct_free(dkz); ct_free(dvc); ct_free(dvs); ct_free(dvz); ct_free(dout);
    vt_free(q); vt_free(kcod); vt_free(vcod); vt_free(ks); vt_free(kz); vt_free(vs); vt_free(vz); vt_free(out);
    free(kc); free(vc); free(kh); free(vh); free(ref); free(s);
}

static void test_kivi_decode(void)
{
    const kivi_case cases[] = {
        /* B Hq Hkv Sq Skv D bits g f16s f16o causal packed nsg */
        {1, 1, 1, 1, 1, 8, 2, 1, false, false, false, true, 0},
        {1, 4, 4, 1, 7, 64, 2, 32, true, false, false, true, 0},
        {2, 8, 2, 1, 97, 128, 2, 32, true, false, false, true, 0},
        {1, 6, 2, 1, 97, 96, 4, 7, false, false, false, true, 0},
        {1, 8, 1, 1, 300, 128, 8, 64, false, true, false, false, 3},
        {2, 4, 4, 3, 129, 64, 2, 16, true, false, true, true, 0},
        {1, 16, 2, 2, 4097, 256, 4, 32, true, false, true, true, 0},
        {1, 3, 1, 5, 200, 128, 8, 5, false, false, true, false, 2},
        {1, 32, 8, 1, 32768, 128, 2, 32, true, true, false, true, 0},
        {1, 32, 32, 1, 8192, 128, 2, 128, true, false, false, true, 0},
        {3, 12, 4, 1, 1000, 128, 4, 64, true, false, false, true, 32},
    };
    for (int staged = 0; staged < 2; staged++) {
        set_load_mode(staged);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_kivi(cases[i]);
    }
}

typedef struct rabitq_case {
    int B, Hq, Hkv, Sq, Skv, D;
    bool exact, packed, with_const, with_vscale, causal, f16_out, f16_q;
    int n_cents, nsplit;
} rabitq_case;

static void run_rabitq(rabitq_case tc)
{
    if (skip_large(tc.Skv)) return;
    const int B = tc.B, Hq = tc.Hq, Hkv = tc.Hkv, Sq = tc.Sq, Skv = tc.Skv, D = tc.D, G = Hq / Hkv;
    const int64_t nkv = (int64_t)B * Hkv * Skv;
    DLTensor *q = vt_new(tc.f16_q ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D));
    DLTensor *qs = vt_new(VT_F32, VT_DIMS(B, Hq, Sq));
    DLTensor *kb = vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, D / 8)), *km = vt_new(VT_F32, VT_DIMS(B, Hkv, Skv));
    DLTensor *kcn = vt_new(VT_F32, VT_DIMS(B, Hkv, Skv)), *vsc = vt_new(VT_F32, VT_DIMS(B, Hkv, Skv));
    DLTensor *vi = vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, tc.packed ? D / 2 : D));
    DLTensor *cents = vt_new(VT_F32, VT_DIMS(tc.n_cents));
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(qs, &rng, 1.0 / sqrt((double)D), 0.02);
    vt_fill_uniform_int(kb, &rng, 0, 255);
    vt_fill_normal(km, &rng, 0.8, 0.1);
    vt_fill_normal(kcn, &rng, 0, 0.3);
    vt_fill_normal(vsc, &rng, 1, 0.2);
    vt_fill_normal(cents, &rng, 0, 1);
    /* unpacked indices may exceed n_cents (they read the last centroid) */
    int *idx = malloc(sizeof(int) * nkv * D);
    for (int64_t i = 0; i < nkv * D; i++)
        idx[i] = (int)(vq_rng_next(&rng) % (uint64_t)(tc.packed ? tc.n_cents : tc.n_cents + 3));
    uint8_t *vd = vi->data;
    for (int64_t i = 0; i < nkv * D; i++) {
        if (!tc.packed) vd[i] = (uint8_t)idx[i];
        else if (i % 2 == 0) vd[i / 2] = (uint8_t)idx[i];
        else vd[i / 2] |= (uint8_t)(idx[i] << 4);
    }
    double *vh = malloc(sizeof(double) * nkv * D);
    for (int64_t i = 0; i < nkv * D; i++) {
        const int k = idx[i] < tc.n_cents ? idx[i] : tc.n_cents - 1;
        vh[i] = vt_get(cents, k) * (tc.with_vscale ? vt_get(vsc, i / D) : 1.0);
    }
    double *ref = malloc(sizeof(double) * (size_t)B * Hq * Sq * D), *s = malloc(sizeof(double) * Skv);
    const uint8_t *kbd = kb->data;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hq; h++)
            for (int i = 0; i < Sq; i++) {
                const int64_t bh = (int64_t)b * Hkv + h / G, row = ((int64_t)b * Hq + h) * Sq + i;
                for (int t = 0; t < Skv; t++) {
                    const int64_t kt = bh * Skv + t;
                    double dot = 0;
                    int ham = 0;
                    for (int j = 0; j < D; j++) {
                        const int bit = (kbd[kt * (D / 8) + j / 8] >> (j % 8)) & 1;
                        const double qj = vt_get(q, row * D + j);
                        dot += bit ? qj : -qj;
                        ham += bit != (qj >= 0);
                    }
                    const double base = tc.exact ? dot : (double)(D - 2 * ham);
                    s[t] = base * vt_get(qs, row) * vt_get(km, kt) + (tc.with_const ? vt_get(kcn, kt) : 0.0);
                }
                softmax_row(s, Skv, tc.causal ? Skv - Sq + i : Skv - 1, vh + bh * Skv * D, D, ref + row * D);
            }

    DLTensor *out = vt_new(tc.f16_out ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D));
    DLTensor *dq = ct_upload(q), *dqs = ct_upload(qs), *dkb = ct_upload(kb), *dkm = ct_upload(km);
    DLTensor *dkc = ct_upload(kcn), *dvs = ct_upload(vsc), *dvi = ct_upload(vi), *dce = ct_upload(cents);
    DLTensor *dout = ct_upload(out);
    ct_poison(dout);
    vq_rabitq_attend_opts o = {.score = tc.exact ? VQ_RABITQ_SCORE_EXACT : VQ_RABITQ_SCORE_HAMMING,
                               .v_scale = tc.with_vscale ? dvs : NULL,
                               .causal = tc.causal,
                               .num_splits = tc.nsplit};
    VT_OK(ctx, vq_rabitq_fused_attend(ctx, dq, dqs, dkb, dkm, tc.with_const ? dkc : NULL, dvi, dce, dout, &o));
    VT_OK(ctx, vq_ctx_synchronize(ctx));
    ct_download(dout, out);
    const double err = vt_rel_l2(out, ref);
    VT_CHECK(ct_count_nan(out) == 0 && err < vt_tol(out),
             "rabitq (%s) B%d Hq%d Hkv%d Sq%d Skv%d D%d %s %s%s%s%s: rel err %.3g, %lld unwritten", load_mode, B, Hq,
             Hkv, Sq, Skv, D,
             tc.exact ? "exact" : "hamming", tc.packed ? "packed" : "u8", tc.with_const ? " const" : "",
             tc.with_vscale ? " vscale" : "", tc.causal ? " causal" : "", err, (long long)ct_count_nan(out));
    ct_free(dq); ct_free(dqs); ct_free(dkb); ct_free(dkm); ct_free(dkc); ct_free(dvs); ct_free(dvi); ct_free(dce);
    ct_free(dout);
    vt_free(q); vt_free(qs); vt_free(kb); vt_free(km); vt_free(kcn); vt_free(vsc); vt_free(vi); vt_free(cents);
    vt_free(out);
    free(idx); free(vh); free(ref); free(s);
}

static void test_rabitq_decode(void)
{
    const rabitq_case cases[] = {
        /* B Hq Hkv Sq Skv D exact packed const vscale causal f16o f16q ncents nsplit */
        {1, 1, 1, 1, 1, 8, false, true, false, false, false, false, false, 16, 0},
        {1, 4, 4, 1, 7, 64, true, true, true, false, false, false, false, 16, 0},
        {2, 8, 2, 1, 97, 128, false, false, true, true, false, false, true, 5, 0},
        {1, 6, 2, 3, 97, 96, true, false, false, true, true, true, false, 200, 0},
        {1, 8, 1, 1, 4097, 256, true, true, true, true, false, false, false, 16, 7},
        {2, 3, 1, 4, 300, 128, false, true, false, false, true, false, false, 16, 0},
        {1, 32, 8, 1, 32768, 128, true, true, false, false, false, true, true, 16, 0},
        {1, 32, 32, 1, 8192, 128, false, true, false, false, false, false, false, 16, 0},
    };
    for (int staged = 0; staged < 2; staged++) {
        set_load_mode(staged);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_rabitq(cases[i]);
    }
}

/* What this backend refuses, and CUDA errors mapped to statuses. */
static void test_backend_errors(void)
{
    VT_FAILS(ctx, VQ_ERR_DEVICE, "cudaErrorInvalidValue", vq_cuda_check(ctx, cudaErrorInvalidValue, "probe"));
    VT_FAILS(ctx, VQ_ERR_OUT_OF_MEMORY, "cudaErrorMemoryAllocation",
             vq_cuda_check(ctx, cudaErrorMemoryAllocation, "probe"));
    void *a = NULL, *b = NULL;
    VT_OK(ctx, vq_cuda_scratch(ctx, 1000, &a));
    VT_OK(ctx, vq_cuda_scratch(ctx, 10, &b));
    VT_CHECK(a == b && a != NULL, "scratch not reused");
    VT_OK(ctx, vq_cuda_scratch(ctx, 1 << 24, &b));
    VT_CHECK(b != NULL, "scratch not grown");

    DLTensor *q = vt_new(VT_F32, VT_DIMS(1, 1, 1, 12)), *qs = vt_new(VT_F32, VT_DIMS(1, 1, 1));
    DLTensor *kb = vt_new(VT_U8, VT_DIMS(1, 1, 4, 2)), *km = vt_new(VT_F32, VT_DIMS(1, 1, 4));
    DLTensor *vi = vt_new(VT_U8, VT_DIMS(1, 1, 4, 12)), *ce = vt_new(VT_F32, VT_DIMS(4));
    DLTensor *out = vt_new(VT_F32, VT_DIMS(1, 1, 1, 12));
    DLTensor *dq = ct_upload(q), *dqs = ct_upload(qs), *dkb = ct_upload(kb), *dkm = ct_upload(km);
    DLTensor *dvi = ct_upload(vi), *dce = ct_upload(ce), *dout = ct_upload(out);
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "D % 8 == 0",
             vq_cuda_rabitq_fused_attend(ctx, dq, dqs, dkb, dkm, NULL, dvi, dce, dout, NULL));
    dq->shape[3] = 8;
    dq->byte_offset = 4; /* misaligned view */
    dout->shape[3] = 8;
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "16-byte aligned",
             vq_cuda_rabitq_fused_attend(ctx, dq, dqs, dkb, dkm, NULL, dvi, dce, dout, NULL));
    ct_free(dq); ct_free(dqs); ct_free(dkb); ct_free(dkm); ct_free(dvi); ct_free(dce); ct_free(dout);
    vt_free(q); vt_free(qs); vt_free(kb); vt_free(km); vt_free(vi); vt_free(ce); vt_free(out);
}

/* A ctx on a caller's stream enqueues there. */
static void test_user_stream(void)
{
    cudaStream_t st;
    VT_CHECK(cudaStreamCreate(&st) == cudaSuccess, "cudaStreamCreate");
    vq_ctx_config cfg = {.backend = VQ_BACKEND_CUDA, .stream = st};
    vq_ctx *c2 = NULL;
    VT_CHECK(vq_ctx_create(&cfg, &c2) == VQ_OK, "ctx on stream");
    vq_ctx *saved = ctx;
    ctx = c2;
    run_rabitq((rabitq_case){1, 8, 2, 1, 1000, 128, true, true, true, true, false, false, false, 16, 0});
    ctx = saved;
    vq_ctx_free(c2);
    cudaStreamDestroy(st);
}

int main(void)
{
    ct_require_device();
    vq_rng_seed(&rng, ct_seed());
    ctx = ct_ctx();
    if (!ctx) {
        printf("FAIL: CUDA ctx creation\n");
        return 1;
    }
    VT_RUN(test_backend_errors);
    VT_RUN(test_kivi_decode);
    VT_RUN(test_rabitq_decode);
    VT_RUN(test_user_stream);
    vq_ctx_free(ctx);
    return vt_finish();
}
#endif /* VQ_TEST_HAVE_CUDA */
