/* test_cuda_nonfinite.c — the header's rule for NaN and ±inf inputs to
 * attention ("Non-finite inputs", conventions) on a CUDA context: the same
 * inputs through the CPU path (which tests/unit/test_attention_nonfinite.c holds
 * to the rule on every ISA) and the GPU, compared element by element:
 *   - a row the CPU gives as all NaN is all NaN on the GPU;
 *   - a row the CPU gives as 0 (every score -inf) is 0 on the GPU;
 *   - every other element is finite on the GPU exactly where it is on the CPU
 *     (a non-finite value may come out as NaN on one and ±inf on the other).
 * Cases: vq_fused_sdpa with plain f16 keys and values (mask +inf, NaN, -inf,
 * fully masked rows, NaN query, NaN key, +inf/-inf scores, NaN/inf values,
 * causal Sq > 1), vq_kivi_fused_attend (NaN key scale, NaN query),
 * vq_rabitq_fused_attend (Hamming and exact scores) and
 * vq_rabitq_prefill_attend (NaN and +inf magnitudes, NaN query), vq_fused_sdpa
 * with f16 TurboQuant value scales (NaN, +inf), and the cache's device
 * encoders (mixed-width KIVI keys, both forms of their key policy; QJL
 * keys, CODEBOOK values, f16 value scales) over a NaN / +inf key and value.
 * Needs a GPU (skips without one). */
#include "skip_without_cuda.h"
#ifdef VQ_TEST_HAVE_CUDA
#include "cuda/kivi_mix_runs.h"
#include "cuda_test_util.h"

enum { HQ = 8, HKV = 2, D = 128, SKV = 300 };

static int64_t at(int64_t sq, int64_t h, int64_t i, int64_t c) { return (h * sq + i) * D + c; }

/* Compares out_gpu (downloaded) with out_cpu, both [1,HQ,sq,D]. */
static void compare(const DLTensor *cpu, const DLTensor *gpu, int64_t sq, const char *what)
{
    for (int64_t h = 0; h < HQ; h++)
        for (int64_t i = 0; i < sq; i++) {
            int cpu_nan = 0, cpu_zero = 0, gpu_nan = 0, gpu_zero = 0, mismatch = 0;
            for (int64_t c = 0; c < D; c++) {
                const double x = vt_get(cpu, at(sq, h, i, c)), y = vt_get(gpu, at(sq, h, i, c));
                cpu_nan += isnan(x);
                gpu_nan += isnan(y);
                cpu_zero += x == 0.0;
                gpu_zero += y == 0.0;
                mismatch += !isfinite(x) != !isfinite(y);
            }
            if (cpu_nan == D)
                VT_CHECK(gpu_nan == D, "%s: row h %lld i %lld: NaN on the CPU, %d of %d NaN on the GPU", what,
                         (long long)h, (long long)i, gpu_nan, D);
            else if (cpu_zero == D)
                VT_CHECK(gpu_zero == D, "%s: row h %lld i %lld: 0 on the CPU, %d of %d zeros on the GPU", what,
                         (long long)h, (long long)i, gpu_zero, D);
            else
                VT_CHECK(mismatch == 0, "%s: row h %lld i %lld: %d elements finite on one side only", what,
                         (long long)h, (long long)i, mismatch);
        }
}

/* ---- plain f16 keys and values ---- */

typedef struct plain {
    DLTensor *q, *k, *v, *mask, *out;
    int64_t sq;
    bool causal, use_mask;
} plain;

static plain f16_new(int64_t sq, bool causal, uint64_t seed)
{
    plain p = {.sq = sq, .causal = causal, .use_mask = true};
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    p.q = vt_new(VT_F16, VT_DIMS(1, HQ, sq, D));
    p.k = vt_new(VT_F16, VT_DIMS(1, HKV, SKV, D));
    p.v = vt_new(VT_F16, VT_DIMS(1, HKV, SKV, D));
    p.mask = vt_new(VT_F32, VT_DIMS(1, HQ, sq, SKV));
    p.out = vt_new(VT_F32, VT_DIMS(1, HQ, sq, D));
    vt_fill_normal(p.q, &rng, 0, 1);
    vt_fill_normal(p.k, &rng, 0, 1);
    vt_fill_normal(p.v, &rng, 0, 1);
    for (int64_t i = 0; i < vt_numel(p.mask); i++) vt_set(p.mask, i, 0.0);
    return p;
}

static void f16_free(plain *p)
{
    vt_free(p->q); vt_free(p->k); vt_free(p->v); vt_free(p->mask); vt_free(p->out);
}

/* Runs p on the CPU and the GPU and compares. */
static void f16_check(vq_ctx *cpu, vq_ctx *gpu, plain *p, const char *what)
{
    const vq_attend_opts opts = {.causal = p->causal};
    vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = p->k};
    vt_poison(p->out);
    VT_OK(cpu, vq_fused_sdpa(cpu, p->q, &ek, VT_F16_VALUES(p->v), 0.0883883f, p->use_mask ? p->mask : NULL, p->out, &opts));
    DLTensor *dq = ct_upload(p->q), *dk = ct_upload(p->k), *dv = ct_upload(p->v), *dm = ct_upload(p->mask);
    DLTensor *dout = ct_upload(p->out), *hout = vt_like(p->out, VT_F32);
    ct_poison(dout);
    ek.f16.keys = dk;
    VT_OK(gpu, vq_fused_sdpa(gpu, dq, &ek, VT_F16_VALUES(dv), 0.0883883f, p->use_mask ? dm : NULL, dout, &opts));
    ct_download(dout, hout);
    compare(p->out, hout, p->sq, what);
    ct_free(dq); ct_free(dk); ct_free(dv); ct_free(dm); ct_free(dout);
    vt_free(hout);
}

static int64_t kv_at(int64_t hk, int64_t t, int64_t c) { return (hk * SKV + t) * D + c; }
static int64_t mask_at(const plain *p, int64_t h, int64_t i, int64_t t) { return (h * p->sq + i) * SKV + t; }

static void test_f16(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    plain p = f16_new(1, false, 1);
    vt_set(p.mask, mask_at(&p, 0, 0, 5), INFINITY);
    vt_set(p.mask, mask_at(&p, 1, 0, 299), NAN);
    vt_set(p.mask, mask_at(&p, 2, 0, 7), -INFINITY);
    for (int t = 0; t < SKV; t++) vt_set(p.mask, mask_at(&p, 3, 0, t), -INFINITY);
    vt_set(p.v, kv_at(0, 100, 3), NAN);   /* kv head 0: rows 0..3; row 3 fully masked stays 0 */
    vt_set(p.v, kv_at(1, 200, 9), INFINITY);
    vt_set(p.q, at(1, 6, 0, 2), NAN);
    f16_check(cpu, gpu, &p, "mask / value / query");
    f16_free(&p);

    p = f16_new(1, false, 2);
    p.use_mask = false;
    vt_set(p.k, kv_at(1, 150, 4), NAN);   /* rows 4..7 NaN */
    f16_check(cpu, gpu, &p, "NaN key");
    for (int h = 0; h < HQ; h++) vt_set(p.q, at(1, h, 0, 0), 1.0);
    vt_set(p.k, kv_at(1, 150, 4), 0.0);
    vt_set(p.k, kv_at(0, 20, 0), INFINITY);   /* +inf scores: rows 0..3 NaN */
    vt_set(p.k, kv_at(1, 21, 0), -INFINITY);  /* -inf scores: token excluded */
    f16_check(cpu, gpu, &p, "+inf / -inf scores");
    f16_free(&p);

    p = f16_new(5, true, 3);
    p.use_mask = false;
    vt_set(p.v, kv_at(0, SKV - 1, 1), NAN);   /* seen by query 4 only */
    vt_set(p.k, kv_at(1, SKV - 2, 4), NAN);   /* seen by queries 3 and 4 */
    f16_check(cpu, gpu, &p, "causal");
    f16_free(&p);
    vq_ctx_free(cpu);
    vq_ctx_free(gpu);
}

/* ---- KIVI affine decode ---- */

static void test_kivi(void)
{
    enum { G = 32, GK = (SKV + G - 1) / G };
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    vq_rng rng;
    vq_rng_seed(&rng, 4);
    DLTensor *q = vt_new(VT_F16, VT_DIMS(1, HQ, 1, D)), *out = vt_new(VT_F32, VT_DIMS(1, HQ, 1, D));
    DLTensor *k = vt_new(VT_F32, VT_DIMS(1, HKV, SKV, D)), *v = vt_new(VT_F32, VT_DIMS(1, HKV, SKV, D));
    DLTensor *kc = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, D / 4)), *vc = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, D / 4));
    DLTensor *ks = vt_new(VT_F16, VT_DIMS(1, HKV, GK, D)), *kz = vt_like(ks, VT_F16);
    DLTensor *vs = vt_new(VT_F16, VT_DIMS(1, HKV, SKV, D / G)), *vz = vt_like(vs, VT_F16);
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(k, &rng, 0, 1);
    vt_fill_normal(v, &rng, 0, 1);
    VT_OK(cpu, vq_kivi_quantize_keys(cpu, k, 2, G, kc, ks, kz));
    VT_OK(cpu, vq_kivi_quantize_values(cpu, v, 2, G, vc, vs, vz));
    vt_set(ks, (1 * GK + 3) * D + 5, NAN);   /* kv head 1: rows 4..7 NaN */
    vt_set(vs, (0 * SKV + 40) * (D / G) + 1, NAN); /* kv head 0: columns 32..63 non-finite */
    vt_set(q, at(1, 2, 0, 9), NAN);
    const vq_scalar_attend_opts o = {.bits = 2};
    vt_poison(out);
    VT_OK(cpu, vq_kivi_fused_attend(cpu, q, kc, ks, kz, vc, vs, vz, G, 0.0883883f, 0, out, &o));
    DLTensor *dq = ct_upload(q), *dkc = ct_upload(kc), *dks = ct_upload(ks), *dkz = ct_upload(kz);
    DLTensor *dvc = ct_upload(vc), *dvs = ct_upload(vs), *dvz = ct_upload(vz), *dout = ct_upload(out);
    DLTensor *hout = vt_like(out, VT_F32);
    ct_poison(dout);
    VT_OK(gpu, vq_kivi_fused_attend(gpu, dq, dkc, dks, dkz, dvc, dvs, dvz, G, 0.0883883f, 0, dout, &o));
    ct_download(dout, hout);
    compare(out, hout, 1, "affine decode");
    ct_free(dq); ct_free(dkc); ct_free(dks); ct_free(dkz); ct_free(dvc); ct_free(dvs); ct_free(dvz); ct_free(dout);
    vt_free(q); vt_free(out); vt_free(k); vt_free(v); vt_free(kc); vt_free(vc); vt_free(ks); vt_free(kz);
    vt_free(vs); vt_free(vz); vt_free(hout);
    vq_ctx_free(cpu);
    vq_ctx_free(gpu);
}

/* ---- RaBitQ decode and prefill ---- */

static void test_rabitq(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    /* mode 0: decode, Hamming scores; 1: decode, exact scores; 2: prefill (exact) */
    for (int mode = 0; mode < 3; mode++) {
        const bool prefill = mode == 2;
        const int64_t sq = prefill ? 64 : 1;
        vq_rng rng;
        vq_rng_seed(&rng, 5 + (uint64_t)prefill);
        DLTensor *q = vt_new(VT_F16, VT_DIMS(1, HQ, sq, D)), *out = vt_new(VT_F32, VT_DIMS(1, HQ, sq, D));
        DLTensor *qs = vt_new(VT_F32, VT_DIMS(1, HQ, sq)), *sc = vt_new(VT_F32, VT_DIMS(1));
        DLTensor *k = vt_new(VT_F32, VT_DIMS(1, HKV, SKV, D)), *kb = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, D / 8));
        DLTensor *km = vt_new(VT_F32, VT_DIMS(1, HKV, SKV)), *vi = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, D / 2));
        DLTensor *ce = vt_new(VT_F32, VT_DIMS(16));
        vt_fill_normal(q, &rng, 0, 1);
        vt_fill_normal(k, &rng, 0, 1);
        vt_fill_normal(ce, &rng, 0, 1);
        vt_fill_uniform_int(vi, &rng, 0, 255);
        for (int64_t i = 0; i < vt_numel(qs); i++) vt_set(qs, i, 0.0883883);
        vt_set(sc, 0, 0.0883883);
        VT_OK(cpu, vq_rabitq_encode(cpu, k, NULL, kb, km, NULL));
        vt_set(km, 0 * SKV + 77, NAN);        /* kv head 0: rows 0..3 NaN */
        vt_set(km, 1 * SKV + 78, INFINITY);   /* kv head 1: NaN rows where the score is +inf */
        vt_set(q, at(sq, 5, 0, 3), NAN);
        const vq_rabitq_attend_opts o = {.score = mode == 1 ? VQ_RABITQ_SCORE_EXACT : VQ_RABITQ_SCORE_HAMMING};
        vt_poison(out);
        if (prefill) VT_OK(cpu, vq_rabitq_prefill_attend(cpu, q, sc, kb, km, NULL, vi, ce, out, &o));
        else VT_OK(cpu, vq_rabitq_fused_attend(cpu, q, qs, kb, km, NULL, vi, ce, out, &o));
        DLTensor *dq = ct_upload(q), *dqs = ct_upload(qs), *dsc = ct_upload(sc), *dkb = ct_upload(kb);
        DLTensor *dkm = ct_upload(km), *dvi = ct_upload(vi), *dce = ct_upload(ce), *dout = ct_upload(out);
        DLTensor *hout = vt_like(out, VT_F32);
        ct_poison(dout);
        if (prefill) VT_OK(gpu, vq_rabitq_prefill_attend(gpu, dq, dsc, dkb, dkm, NULL, dvi, dce, dout, &o));
        else VT_OK(gpu, vq_rabitq_fused_attend(gpu, dq, dqs, dkb, dkm, NULL, dvi, dce, dout, &o));
        ct_download(dout, hout);
        compare(out, hout, sq, prefill ? "rabitq prefill" : mode == 1 ? "rabitq decode (exact)" : "rabitq decode");
        ct_free(dq); ct_free(dqs); ct_free(dsc); ct_free(dkb); ct_free(dkm); ct_free(dvi); ct_free(dce);
        ct_free(dout);
        vt_free(q); vt_free(out); vt_free(qs); vt_free(sc); vt_free(k); vt_free(kb); vt_free(km); vt_free(vi);
        vt_free(ce); vt_free(hout);
    }
    vq_ctx_free(cpu);
    vq_ctx_free(gpu);
}

/* ---- f16 TurboQuant scales (vq_fused_sdpa) and the cache's device
 * encoders (mixed-width KIVI keys, QJL keys, CODEBOOK values, f16 value
 * scales): the CPU and CUDA caches store the same bytes for a token holding
 * a non-finite element, so their attention follows the rule alike ---- */

static void test_formats(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    vq_rng rng;
    vq_rng_seed(&rng, 6);
    DLTensor *q = vt_new(VT_F16, VT_DIMS(1, HQ, 1, D)), *out = vt_new(VT_F32, VT_DIMS(1, HQ, 1, D));
    DLTensor *k = vt_new(VT_F16, VT_DIMS(1, HKV, SKV, D)), *v = vt_new(VT_F16, VT_DIMS(1, HKV, SKV, D));
    DLTensor *vi = vt_new(VT_U8, VT_DIMS(1, HKV, SKV, D)), *vs = vt_new(VT_F32, VT_DIMS(1, HKV, SKV));
    DLTensor *vs16 = vt_new(VT_F16, VT_DIMS(1, HKV, SKV)), *hout = vt_like(out, VT_F32);
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(k, &rng, 0, 1);
    vt_fill_normal(v, &rng, 0, 1);
    VT_OK(cpu, vq_turboquant_hadamard_quantize(cpu, v, NULL, 3, vi, vs, NULL));
    for (int64_t i = 0; i < SKV * HKV; i++) ((uint16_t *)vs16->data)[i] = vq_f32_to_f16(((float *)vs->data)[i]);
    ((uint16_t *)vs16->data)[0 * SKV + 10] = 0x7e00;  /* NaN scale: every column of kv head 0's rows */
    ((uint16_t *)vs16->data)[1 * SKV + 290] = 0x7c00; /* +inf scale */
    vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16 = {k}};
    vq_encoded_values ev = {.format = VQ_VALUES_TURBO};
    ev.turbo.idx = vi, ev.turbo.scale = vs16, ev.turbo.bits = 3;
    vt_poison(out);
    VT_OK(cpu, vq_fused_sdpa(cpu, q, &ek, &ev, 0.0883883f, NULL, out, NULL));
    DLTensor *dq = ct_upload(q), *dk = ct_upload(k), *dvi = ct_upload(vi), *dvs = ct_upload(vs16);
    DLTensor *dout = ct_upload(out);
    ek.f16.keys = dk, ev.turbo.idx = dvi, ev.turbo.scale = dvs;
    ct_poison(dout);
    VT_OK(gpu, vq_fused_sdpa(gpu, dq, &ek, &ev, 0.0883883f, NULL, dout, NULL));
    ct_download(dout, hout);
    compare(out, hout, 1, "turbo values, f16 scales");
    ct_free(dk), ct_free(dvi), ct_free(dvs);

    /* the cache: one sequence, a NaN key in one group, +inf and NaN values */
    vt_set(k, kv_at(1, 40, 7), NAN);        /* kv head 1: its key group's scores */
    vt_set(k, kv_at(0, 200, 3), INFINITY);  /* mixed-width KIVI only (an inf scale: its group's scores NaN) */
    vt_set(k, kv_at(1, 64, 5), NAN);        /* a group's first token: mixed-width KIVI's zero is NaN */
    vt_set(v, kv_at(0, 100, 5), INFINITY);
    vt_set(v, kv_at(1, 250, 9), NAN);
    /* mixed-width keys in both forms of the device's key policy
     * (kivi_mix_runs.h): the run form (groups of 32) and the general one
     * (groups of 16: a tile straddles two) */
    const vq_cache_layer_config cases[] = {
        {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 32, .wide_channels = 48},
         {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true}},
        {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 16, .wide_channels = 48},
         {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true}},
        {{.method = VQ_KEY_QJL}, {.method = VQ_VALUE_CODEBOOK}},
    };
    static const char *const names[] = {"cache: kivimix (run form) x turbo2 f16 scales",
                                        "cache: kivimix (general form) x turbo2 f16 scales", "cache: qjl x codebook"};
    VT_CHECK(vq_cu_kivi_mix_runs(D, 48, 2, 4, 32) && !vq_cu_kivi_mix_runs(D, 48, 2, 4, 16),
             "the kivimix cases reach the run and the general form of the key policy");
    for (int i = 0; i < 3; i++) {
        /* QJL scores an inf key +inf or -inf by the sign of a sum of
         * projections, which another summation order may flip where the
         * sum is near 0: -inf (the token excluded) on one side only */
        if (i == 2) vt_set(k, kv_at(0, 200, 3), 0.5);
        DLTensor *hk = ct_upload(k), *hv = ct_upload(v);
        const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D,
                                     .page_size = 64, .capacity_pages = 8, .max_sequences = 1,
                                     .residual_tokens = 16, .layers = &cases[i]};
        vq_cache *a = NULL, *b = NULL;
        int64_t ia, ib;
        VT_OK(cpu, vq_cache_create(cpu, &cfg, &a));
        VT_OK(gpu, vq_cache_create(gpu, &cfg, &b));
        if (a == NULL || b == NULL) {
            vq_cache_free(a), vq_cache_free(b);
            ct_free(hk), ct_free(hv);
            continue;
        }
        VT_OK(cpu, vq_cache_seq_add(a, &ia));
        VT_OK(gpu, vq_cache_seq_add(b, &ib));
        VT_OK(cpu, vq_cache_append(a, 0, 1, &ia, k, v, NULL));
        VT_OK(gpu, vq_cache_append(b, 0, 1, &ib, hk, hv, NULL));
        vt_poison(out);
        ct_poison(dout);
        const vq_cache_attend_opts f32 = {.key_scores = VQ_KEY_SCORES_F32, .value_accum = VQ_VALUE_ACCUM_F32};
        VT_OK(cpu, vq_cache_attend(a, 0, 1, &ia, q, out, &f32)); /* the arithmetic of the CUDA kernels */
        VT_OK(gpu, vq_cache_attend(b, 0, 1, &ib, dq, dout, NULL));
        ct_download(dout, hout);
        compare(out, hout, 1, names[i]);
        vq_cache_free(a), vq_cache_free(b);
        ct_free(hk), ct_free(hv);
    }
    ct_free(dq), ct_free(dout);
    vt_free(q), vt_free(out), vt_free(k), vt_free(v), vt_free(vi), vt_free(vs), vt_free(vs16), vt_free(hout);
    vq_ctx_free(cpu);
    vq_ctx_free(gpu);
}

int main(void)
{
    ct_require_device();
    VT_RUN(test_f16);
    VT_RUN(test_kivi);
    VT_RUN(test_rabitq);
    VT_RUN(test_formats);
    return vt_finish();
}
#endif
