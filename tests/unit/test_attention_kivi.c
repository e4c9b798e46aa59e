/* test_attention_kivi.c — vq_kivi_fused_attend (KIVI group-affine
 * cache: one code per byte, 2/4-bit packed, f32/f16 scales) against the
 * float64 reference, every ISA, awkward shapes, groups not dividing Skv or D,
 * GQA 1/3/4/8, causal, splits; and its error paths. Every case runs with both
 * key-score paths: F32 against the exact reference; INT8 (the default where
 * the layout allows) against a reference that rounds the query to int8 the
 * way the header states (so the integer kernels must match it to f32
 * accuracy), and against the exact reference within the header's bound. */
#include "attention/attn_kernels.h"
#include "attention_ref.h"
#include "harness.h"

typedef struct kivi_case {
    int64_t B, Hq, Hkv, Sq, Skv, D;
    int bits;        /* 2, 4 packed; 8 one code per byte */
    int g;
    bool f16_scales, causal;
    int nsg;
} kivi_case;

typedef struct kivi {
    ref_dims d;
    int bits, g;
    uint8_t *kc, *vc;    /* unpacked codes [B,Hkv,Skv,D] */
    DLTensor *k_codes, *v_codes, *k_scale, *k_zero, *v_scale, *v_zero, *q;
    double *khat, *vhat; /* [B,Hkv,Skv,D] */
    double scale;
} kivi;

/* codes [rows][D] -> tensor [rows][D*bits/8] in the library's bit order */
static void pack_codes(const uint8_t *codes, int64_t rows, int64_t D, int bits, DLTensor *out)
{
    uint8_t *o = out->data;
    const int64_t w = D * bits / 8;
    memset(o, 0, (size_t)(rows * w));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < D; c++) o[r * w + c * bits / 8] |= (uint8_t)(codes[r * D + c] << (c * bits % 8));
}

static void kivi_make(kivi *kv, const kivi_case *k, vq_rng *rng)
{
    const ref_dims d = {k->B, k->Hq, k->Hkv, k->Sq, k->Skv, k->D};
    const int64_t GK = (d.Skv + k->g - 1) / k->g, GV = (d.D + k->g - 1) / k->g, ntok = d.B * d.Hkv * d.Skv;
    const DLDataType st = k->f16_scales ? VT_F16 : VT_F32;
    *kv = (kivi){.d = d, .bits = k->bits, .g = k->g, .scale = 1.0 / sqrt((double)d.D)};
    kv->kc = malloc((size_t)(ntok * d.D));
    kv->vc = malloc((size_t)(ntok * d.D));
    const int maxc = (1 << k->bits) - 1;
    for (int64_t x = 0; x < ntok * d.D; x++) {
        kv->kc[x] = (uint8_t)(vq_rng_next(rng) % (uint64_t)(maxc + 1));
        kv->vc[x] = (uint8_t)(vq_rng_next(rng) % (uint64_t)(maxc + 1));
    }
    kv->k_codes = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D * k->bits / 8));
    kv->v_codes = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D * k->bits / 8));
    pack_codes(kv->kc, ntok, d.D, k->bits, kv->k_codes);
    pack_codes(kv->vc, ntok, d.D, k->bits, kv->v_codes);
    kv->k_scale = vt_new(st, VT_DIMS(d.B, d.Hkv, GK, d.D));
    kv->k_zero = vt_new(st, VT_DIMS(d.B, d.Hkv, GK, d.D));
    kv->v_scale = vt_new(st, VT_DIMS(d.B, d.Hkv, d.Skv, GV));
    kv->v_zero = vt_new(st, VT_DIMS(d.B, d.Hkv, d.Skv, GV));
    vt_fill_normal(kv->k_scale, rng, 0.0, 2.0 / maxc);
    vt_fill_normal(kv->k_zero, rng, 0.0, 1.0);
    vt_fill_normal(kv->v_scale, rng, 0.0, 2.0 / maxc);
    vt_fill_normal(kv->v_zero, rng, 0.0, 1.0);
    kv->q = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq, d.D));
    vt_fill_normal(kv->q, rng, 0.0, 1.0);
    kv->khat = malloc(sizeof(double) * (size_t)(ntok * d.D));
    kv->vhat = malloc(sizeof(double) * (size_t)(ntok * d.D));
    for (int64_t bh = 0; bh < d.B * d.Hkv; bh++)
        for (int64_t t = 0; t < d.Skv; t++)
            for (int64_t c = 0; c < d.D; c++) {
                const int64_t x = (bh * d.Skv + t) * d.D + c;
                const int64_t ks = (bh * GK + t / k->g) * d.D + c, vs = (bh * d.Skv + t) * GV + c / k->g;
                kv->khat[x] = kv->kc[x] * vt_get(kv->k_scale, ks) + vt_get(kv->k_zero, ks);
                kv->vhat[x] = kv->vc[x] * vt_get(kv->v_scale, vs) + vt_get(kv->v_zero, vs);
            }
}

static void kivi_free(kivi *kv)
{
    DLTensor *all[] = {kv->k_codes, kv->v_codes, kv->k_scale, kv->k_zero, kv->v_scale, kv->v_zero, kv->q};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    free(kv->kc);
    free(kv->vc);
    free(kv->khat);
    free(kv->vhat);
}

static double kivi_score(const void *arg, int64_t b, int64_t h, int64_t i, int64_t t)
{
    const kivi *kv = arg;
    const ref_dims *d = &kv->d;
    const int64_t hk = h / (d->Hq / d->Hkv);
    double acc = 0.0;
    for (int64_t c = 0; c < d->D; c++)
        acc += vt_get(kv->q, ((b * d->Hq + h) * d->Sq + i) * d->D + c) *
               kv->khat[((b * d->Hkv + hk) * d->Skv + t) * d->D + c];
    return acc * (double)(float)kv->scale;
}

/* The integer path's query row (b, h, i) against key group grp, rounded
 * with the f32 operations the header states: xq [D] in channel order, the
 * step, and the per-score bound's factor step / 2. */
static void kivi_q8(const kivi *kv, int64_t b, int64_t h, int64_t i, int64_t grp, float *qp, int32_t *xq, float *step)
{
    const ref_dims *d = &kv->d;
    const int64_t hk = h / (d->Hq / d->Hkv), GK = (d->Skv + kv->g - 1) / kv->g;
    float x[256], amax = 0.0f;
    for (int64_t c = 0; c < d->D; c++) {
        qp[c] = (float)vt_get(kv->q, ((b * d->Hq + h) * d->Sq + i) * d->D + c) * (float)kv->scale;
        x[c] = qp[c] * (float)vt_get(kv->k_scale, ((b * d->Hkv + hk) * GK + grp) * d->D + c);
        amax = fabsf(x[c]) > amax ? fabsf(x[c]) : amax;
    }
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t c = 0; c < d->D; c++) xq[c] = (int32_t)lrintf(x[c] * inv);
    *step = amax / 127.0f;
}

/* score of the int8 path: step * (xq . code) + qp . zero, in float64 */
static double kivi_score_q8(const void *arg, int64_t b, int64_t h, int64_t i, int64_t t)
{
    const kivi *kv = arg;
    const ref_dims *d = &kv->d;
    const int64_t hk = h / (d->Hq / d->Hkv), GK = (d->Skv + kv->g - 1) / kv->g, grp = t / kv->g;
    float qp[256], step;
    int32_t xq[256];
    kivi_q8(kv, b, h, i, grp, qp, xq, &step);
    int64_t dot = 0;
    double qz = 0.0;
    for (int64_t c = 0; c < d->D; c++) {
        const int64_t x = ((b * d->Hkv + hk) * d->Skv + t) * d->D + c;
        dot += (int64_t)xq[c] * kv->kc[x];
        qz += (double)qp[c] * vt_get(kv->k_zero, ((b * d->Hkv + hk) * GK + grp) * d->D + c);
    }
    return (double)step * (double)dot + qz;
}

/* The header's bound on the int8 path's outputs against the exact ones: per
 * row, eps = max over visible tokens of step/2 * sum_c code_c (plus f32
 * slack), and |out_c - ref_c| <= (exp(2 eps) - 1) * max_t |v_hat[t][c] - ref_c|.
 * Returns the largest ratio |out - ref| / bound over the output (<= 1 holds). */
static double q8_bound_ratio(const kivi *kv, bool causal, const DLTensor *out, const double *ref)
{
    const ref_dims *d = &kv->d;
    double worst = 0.0;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->Hq; h++)
            for (int64_t i = 0; i < d->Sq; i++) {
                const int64_t hk = h / (d->Hq / d->Hkv), lim = causal ? d->Skv - d->Sq + i + 1 : d->Skv;
                const int64_t row = (b * d->Hq + h) * d->Sq + i;
                double eps = 0.0;
                for (int64_t t = 0; t < lim; t++) {
                    float qp[256], step;
                    int32_t xq[256];
                    kivi_q8(kv, b, h, i, t / kv->g, qp, xq, &step);
                    double codes = 0.0, mag = 0.0;
                    for (int64_t c = 0; c < d->D; c++) {
                        const int64_t x = ((b * d->Hkv + hk) * d->Skv + t) * d->D + c;
                        codes += kv->kc[x];
                        mag += fabs((double)qp[c] * kv->khat[x]);
                    }
                    const double e = step / 2.0 * codes + 1e-5 * (mag + step * 127.0 * codes);
                    eps = e > eps ? e : eps;
                }
                for (int64_t c = 0; c < d->D; c++) {
                    double spread = 0.0;
                    for (int64_t t = 0; t < lim; t++) {
                        const double dv = fabs(kv->vhat[((b * d->Hkv + hk) * d->Skv + t) * d->D + c] - ref[row * d->D + c]);
                        spread = dv > spread ? dv : spread;
                    }
                    const double bound = expm1(2.0 * eps) * spread + 1e-5 * (fabs(ref[row * d->D + c]) + spread);
                    const double err = fabs(vt_get(out, row * d->D + c) - ref[row * d->D + c]);
                    if (bound > 0 && err / bound > worst) worst = err / bound;
                    if (bound == 0 && err > 0) worst = INFINITY;
                }
            }
    return worst;
}

static void run_case(vq_ctx *ctx, const char *isa, const kivi_case *k, vq_key_scores ks, vq_rng *rng)
{
    kivi kv;
    kivi_make(&kv, k, rng);
    const ref_dims *d = &kv.d;
    const bool int8 = ks != VQ_KEY_SCORES_F32 && vq_attn_q8_supported(k->bits, d->D);
    DLTensor *out = vt_new(VT_F32, VT_DIMS(d->B, d->Hq, d->Sq, d->D));
    double *ref = malloc(sizeof(double) * (size_t)vt_numel(out));
    ref_attention(d, int8 ? kivi_score_q8 : kivi_score, &kv, kv.vhat, NULL, 0, 0, k->causal, ref, NULL);
    /* bits = 0 lets the layout be detected; 8 must be said when D*8/8 == D anyway */
    /* f32 p.V: these cases check the key paths (integer p.V: pv8_case below) */
    const vq_scalar_attend_opts opts = {
        .causal = k->causal, .bits = k->bits == 8 ? 0 : k->bits, .key_scores = ks, .value_accum = VQ_VALUE_ACCUM_F32};
    VT_OK(ctx, vq_kivi_fused_attend(ctx, kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale,
                                             kv.v_zero, k->g, (float)kv.scale, k->nsg, out, &opts));
    const double err = vt_rel_l2(out, ref);
    VT_CHECK(err <= vt_tol(out),
             "%s scores %d bits %d g %d Hq%lld Hkv%lld Sq%lld Skv%lld D%lld causal %d nsg %d: rel err %.3g", isa,
             (int)ks, k->bits, k->g, (long long)d->Hq, (long long)d->Hkv, (long long)d->Sq, (long long)d->Skv,
             (long long)d->D, k->causal, k->nsg, err);
    if (int8) {
        ref_attention(d, kivi_score, &kv, kv.vhat, NULL, 0, 0, k->causal, ref, NULL);
        const double ratio = q8_bound_ratio(&kv, k->causal, out, ref);
        VT_CHECK(ratio <= 1.0, "%s int8 bits %d D%lld Skv%lld: error / header bound = %.3g", isa, k->bits,
                 (long long)d->D, (long long)d->Skv, ratio);
    }
    VT_CHECK(vt_count_poisoned(out) == 0, "%s: unwritten output", isa);
    free(ref);
    vt_free(out);
    kivi_free(&kv);
}

static void cases_on(vq_ctx *ctx, const char *isa)
{
    static const kivi_case cases[] = {
        /* B Hq Hkv Sq Skv  D   bits g  f16   causal nsg */
        {1, 1, 1, 1, 1, 64, 2, 32, true, false, 0},
        {1, 3, 1, 1, 7, 96, 4, 32, false, false, 0},
        {2, 8, 2, 4, 97, 128, 2, 32, true, true, 3},
        {1, 8, 1, 33, 97, 64, 8, 7, false, true, 0},
        {1, 4, 4, 1, 4097, 128, 2, 32, true, false, 0},
        {1, 6, 2, 4, 300, 256, 4, 20, true, true, 5},
        {1, 16, 2, 1, 130, 128, 8, 128, false, false, 32},
        {1, 3, 3, 33, 50, 8, 4, 3, false, true, 1},
        /* few rows (direct paths): byte codes with groups splitting 8-lane chunks, strips of 16 */
        {1, 2, 2, 2, 97, 64, 8, 12, false, true, 0},
        {1, 4, 1, 1, 200, 256, 4, 16, true, false, 2},
        {1, 2, 1, 1, 70, 128, 2, 16, false, false, 0},
        /* layouts of the integer scores (2-bit D 128/256, 4-bit D 64..256): tails of 16 tokens, 5 and 8 rows */
        {1, 8, 2, 1, 77, 64, 4, 32, false, false, 0},
        {1, 4, 1, 3, 100, 256, 2, 32, true, true, 0},
        {2, 12, 4, 2, 65, 128, 4, 16, false, true, 2},
        {1, 5, 1, 1, 33, 128, 2, 64, false, false, 0},
        {1, 16, 2, 1, 50, 192, 4, 32, false, false, 0},
        /* 2-bit half chunks (16 bytes per row at D 64, 48 at 192): 1-5 rows, tails, f32 and f16 scales */
        {1, 9, 3, 1, 100, 64, 2, 32, true, false, 0},
        {1, 5, 1, 1, 37, 64, 2, 32, false, false, 0},
        {2, 8, 4, 3, 70, 64, 2, 16, false, true, 2},
        {1, 8, 2, 1, 83, 192, 2, 32, true, false, 0},
        /* direct p.V: groups of 24 (not whole 16-lane registers) and a 64-column strip inside a group of 128 */
        {1, 3, 1, 1, 45, 128, 4, 24, true, false, 0},
        {1, 2, 1, 1, 40, 256, 2, 128, false, false, 0},
        /* three rows a kv head (2 + 1), groups over several blocks (the rows quantised once per group and task) */
        {1, 9, 3, 1, 300, 64, 4, 128, true, false, 3},
        {1, 6, 2, 1, 290, 128, 2, 64, false, false, 2},
    };
    static const vq_key_scores paths[] = {VQ_KEY_SCORES_F32, VQ_KEY_SCORES_AUTO, VQ_KEY_SCORES_INT8};
    vq_rng rng;
    vq_rng_seed(&rng, 1234);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            /* AUTO is INT8 wherever the layout allows: once (first cases) is enough to see it */
            if (paths[p] == VQ_KEY_SCORES_AUTO && c > 3) continue;
            run_case(ctx, isa, &cases[c], paths[p], &rng);
        }
}

static void test_kivi_decode(void) { vt_for_each_isa(2, cases_on); }

/* Integer p.V (vq_value_accum) in float64, from the exact probabilities of
 * exact (f32-path) scores: per row, block of 32 tokens (cut at the row's
 * causal limit, as the skeleton cuts them) and value group, w = p * v_scale
 * rounded against step = max|w| / 127. ref_q: that formulation; ref: the
 * exact attention; bound [rows * D]: the header's bound on |out - ref|,
 * sum over blocks of max|w| / 254 * sum_j code_jc, over d; var: the
 * variance of out - ref if each rounding error is uniform in +-step / 2. */
static void pv8_reference(const kivi *kv, bool causal, double *ref_q, double *ref, double *bound, double *var)
{
    const ref_dims *d = &kv->d;
    const int64_t GV = d->D / 32;
    double *s = malloc(sizeof(double) * (size_t)d->Skv);
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->Hq; h++)
            for (int64_t i = 0; i < d->Sq; i++) {
                const int64_t hk = h / (d->Hq / d->Hkv), lim = causal ? d->Skv - d->Sq + i + 1 : d->Skv;
                const int64_t row = (b * d->Hq + h) * d->Sq + i, bh = b * d->Hkv + hk;
                const double sum = ref_row_probs(kivi_score, kv, b, h, i, lim, s);
                double *oq = ref_q + row * d->D, *oe = ref + row * d->D, *ob = bound + row * d->D, *ov = var + row * d->D;
                for (int64_t c = 0; c < d->D; c++) oq[c] = oe[c] = ob[c] = ov[c] = 0.0;
                for (int64_t t0 = 0; t0 < lim; t0 += 32)
                    for (int64_t gi = 0; gi < GV; gi++) {
                        const int64_t t1 = t0 + 32 < lim ? t0 + 32 : lim;
                        double amax = 0.0;
                        for (int64_t t = t0; t < t1; t++)
                            amax = fmax(amax, fabs(s[t] * vt_get(kv->v_scale, (bh * d->Skv + t) * GV + gi)));
                        for (int64_t t = t0; t < t1; t++) {
                            const int64_t vi = (bh * d->Skv + t) * GV + gi;
                            const double w = s[t] * vt_get(kv->v_scale, vi);
                            const double wq = amax > 0 ? rint(w / amax * 127.0) * amax / 127.0 : 0.0;
                            for (int64_t c = 32 * gi; c < 32 * gi + 32; c++) {
                                const int64_t x = (bh * d->Skv + t) * d->D + c;
                                oq[c] += (wq * kv->vc[x] + s[t] * vt_get(kv->v_zero, vi)) / sum;
                                oe[c] += s[t] * kv->vhat[x] / sum;
                                ob[c] += amax / 254.0 * kv->vc[x] / sum;
                                ov[c] += amax * amax / (127.0 * 127.0 * 12.0) * kv->vc[x] * kv->vc[x] / (sum * sum);
                            }
                        }
                    }
            }
    free(s);
}

/* One KIVI 2-bit g = 32 D = 128 case with integer p.V on this ISA: within
 * the header's bound of the exact attention everywhere, close to the integer
 * formulation's float64 value (its roundings can flip at ties: 1e-4), and
 * with the typical error of random roundings (the variance from pv8_reference). */
static void pv8_case(vq_ctx *ctx, const char *isa, const kivi_case *k, vq_rng *rng)
{
    kivi kv;
    kivi_make(&kv, k, rng);
    const ref_dims *d = &kv.d;
    DLTensor *out = vt_new(VT_F32, VT_DIMS(d->B, d->Hq, d->Sq, d->D));
    const int64_t n = vt_numel(out);
    double *ref_q = malloc(sizeof(double) * (size_t)n * 4), *ref = ref_q + n, *bound = ref + n, *var = bound + n;
    pv8_reference(&kv, k->causal, ref_q, ref, bound, var);
    const vq_scalar_attend_opts opts = {.causal = k->causal, .bits = 2, .key_scores = VQ_KEY_SCORES_F32,
                                        .value_accum = VQ_VALUE_ACCUM_INT8};
    VT_OK(ctx, vq_kivi_fused_attend(ctx, kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale,
                                             kv.v_zero, 32, (float)kv.scale, k->nsg, out, &opts));
    double worst = 0.0, vsum = 0.0;
    for (int64_t x = 0; x < n; x++) {
        const double slack = 1e-5 * (fabs(ref[x]) + 1.0);
        worst = fmax(worst, fabs(vt_get(out, x) - ref[x]) / (bound[x] + slack));
    }
    for (int64_t x = 0; x < n; x++) vsum += var[x];
    const double err_q = vt_rel_l2(out, ref_q);
    VT_CHECK(worst <= 1.0, "%s pv8 Hq%lld Hkv%lld Sq%lld Skv%lld: error / header bound = %.3g", isa,
             (long long)d->Hq, (long long)d->Hkv, (long long)d->Sq, (long long)d->Skv, worst);
    VT_CHECK(err_q <= 1e-4, "%s pv8 Skv%lld: rel err against the integer formulation %.3g", isa, (long long)d->Skv,
             err_q);
    double se = 0.0;
    for (int64_t x = 0; x < n; x++) se += (vt_get(out, x) - ref[x]) * (vt_get(out, x) - ref[x]);
    /* mean square error against its expectation under uniform rounding errors (2x: a sample of n outputs) */
    VT_CHECK(se <= 2.0 * vsum + 1e-12 * (double)n, "%s pv8 Skv%lld: mean square error %.3g, expected %.3g", isa,
             (long long)d->Skv, se / (double)n, vsum / (double)n);
    VT_CHECK(vt_count_poisoned(out) == 0, "%s: unwritten output", isa);
    free(ref_q);
    vt_free(out);
    kivi_free(&kv);
}

static void pv8_cases_on(vq_ctx *ctx, const char *isa)
{
    static const kivi_case cases[] = {
        /* B Hq Hkv Sq Skv  D   bits g  f16   causal nsg: tails of 4 and 32 tokens, 1-8 rows, splits, prefill */
        {1, 1, 1, 1, 1, 128, 2, 32, true, false, 0},
        {1, 4, 1, 1, 31, 128, 2, 32, false, false, 0},
        {2, 8, 2, 1, 97, 128, 2, 32, true, false, 3},
        {1, 32, 4, 1, 1000, 128, 2, 32, true, false, 0},
        {1, 6, 2, 5, 70, 128, 2, 32, false, true, 0},
        {1, 4, 4, 1, 4097, 128, 2, 32, true, false, 2},
    };
    vq_rng rng;
    vq_rng_seed(&rng, 4321);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) pv8_case(ctx, isa, &cases[c], &rng);
}

static void test_kivi_pv8(void) { vt_for_each_isa(2, pv8_cases_on); }

/* AUTO takes integer p.V exactly where the ISA has the SIMD kernel: the
 * output equals INT8's there and F32's elsewhere (bit for bit, same ctx). */
static void auto_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 99);
    kivi kv;
    const kivi_case k = {1, 8, 2, 1, 300, 128, 2, 32, true, false, 0};
    kivi_make(&kv, &k, &rng);
    DLTensor *o[3];
    static const vq_value_accum modes[3] = {VQ_VALUE_ACCUM_AUTO, VQ_VALUE_ACCUM_F32, VQ_VALUE_ACCUM_INT8};
    for (int m = 0; m < 3; m++) {
        o[m] = vt_new(VT_F32, VT_DIMS(1, 8, 1, 128));
        const vq_scalar_attend_opts opts = {.bits = 2, .value_accum = modes[m]};
        VT_OK(ctx, vq_kivi_fused_attend(ctx, kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes,
                                                 kv.v_scale, kv.v_zero, 32, (float)kv.scale, 0, o[m], &opts));
    }
    const bool fast = vq_attn_kernels_for(ctx->isa)->pv8_fast;
    VT_CHECK(memcmp(o[0]->data, o[fast ? 2 : 1]->data, sizeof(float) * 8 * 128) == 0, "%s: AUTO is not %s", isa,
             fast ? "INT8" : "F32");
    VT_CHECK(memcmp(o[1]->data, o[2]->data, sizeof(float) * 8 * 128) != 0, "%s: INT8 equals F32", isa);
    for (int m = 0; m < 3; m++) vt_free(o[m]);
    kivi_free(&kv);
}

static void test_kivi_pv8_auto(void) { vt_for_each_isa(2, auto_on); }

/* A float drawn for the kernel checks below: mostly ordinary, sometimes 0,
 * huge where `huge` (products overflow), tiny (maxima below 127 / FLT_MAX)
 * or, where `special`, NaN / SNaN / +-inf. Zero terms are never huge: where
 * their sums overflow, the order of the sum (free on every ISA) decides. */
static float odd_float(vq_rng *rng, bool special, bool huge)
{
    const uint64_t u = vq_rng_next(rng) % 64;
    const float x = (float)(vq_rng_normal(rng));
    if (u == 0) return 0.0f;
    if (u == 1) return huge ? x * 1e30f : x;
    if (u == 2) return x * 1e-38f;
    if (!special || u > 6) return x;
    return u == 3 ? NAN : u == 4 ? __builtin_nansf("") : u == 5 ? INFINITY : -INFINITY;
}


/* Every ISA's kivi_q8 gives the scalar kernel's int8 planes and steps bit
 * for bit (the integer scores then agree exactly) and its zero sums to f32
 * rounding, and kivi_pv8 gives its outputs to f32 rounding, NaN where it
 * has NaN: ordinary rows, rows of zeros, overflowing products, maxima below
 * 127 / FLT_MAX, NaN / SNaN / inf in q, scale, zero, p and v_scale, 1-5 rows,
 * partial blocks. */
static void int8_kernels_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa), *ref = vq_attn_kernels_for(VQ_ISA_SCALAR);
    vq_rng rng;
    vq_rng_seed(&rng, 1414);
    enum { RMAX = 5, DMAX = 256 };
    float q[RMAX * DMAX], sc[DMAX], ze[DMAX], dz[2][2 * RMAX];
    int8_t xq[2][RMAX * DMAX];
    for (int it = 0; it < 400; it++) {
        const int bits = it % 2 ? 4 : 2, D = 64 * (1 + (int)(vq_rng_next(&rng) % 4)), R = 1 + it % RMAX;
        if (!vq_attn_q8_supported(bits, D)) continue;
        const bool special = it % 3 == 0, zero_rows = it % 7 == 0;
        for (int c = 0; c < R * D; c++) q[c] = zero_rows && c < D ? 0.0f : odd_float(&rng, special, true);
        for (int c = 0; c < D; c++) {
            sc[c] = odd_float(&rng, special && it % 2 == 0, true);
            ze[c] = odd_float(&rng, special && it % 4 == 0, false);
        }
        k->kivi_q8(R, D, bits, q, D, sc, ze, xq[0], dz[0]);
        ref->kivi_q8(R, D, bits, q, D, sc, ze, xq[1], dz[1]);
        for (int r = 0; r < R; r++) {
            const bool fin = !isnan(dz[1][2 * r]);
            VT_CHECK(vt_same_float(dz[0][2 * r], dz[1][2 * r]), "%s q8 it %d row %d: step %g, scalar %g", isa, it, r,
                     (double)dz[0][2 * r], (double)dz[1][2 * r]);
            VT_CHECK(!fin || memcmp(xq[0] + r * D, xq[1] + r * D, (size_t)D) == 0, "%s q8 it %d row %d: planes differ",
                     isa, it, r);
            const float z0 = dz[0][2 * r + 1], z1 = dz[1][2 * r + 1];
            VT_CHECK(!fin || fabsf(z0 - z1) <= 1e-5f * (fabsf(z1) + 1e-30f) * (float)D, "%s q8 it %d: zero sum %g, scalar %g",
                     isa, it, (double)z0, (double)z1);
        }
    }
    enum { BN = 32 };
    float p[RMAX * BN], vs[BN * 4], vz[BN * 4], o[2][RMAX * 128];
    uint8_t codes[BN * 32];
    for (int it = 0; it < 300; it++) {
        const int R = 1 + it % RMAX, n = it % 4 == 0 ? 1 + (int)(vq_rng_next(&rng) % BN) : BN;
        const bool special = it % 5 == 0;
        for (int j = 0; j < BN * 32; j++) codes[j] = (uint8_t)vq_rng_next(&rng);
        for (int j = 0; j < R * BN; j++) p[j] = j % BN < n ? fabsf(odd_float(&rng, special && it % 2 == 0, true)) : NAN;
        for (int j = 0; j < BN * 4; j++) {
            vs[j] = j / 4 < n ? odd_float(&rng, special, true) : NAN; /* past n: never read */
            vz[j] = j / 4 >= n ? NAN : it % 10 == 0 ? 0.0f : odd_float(&rng, false, false); /* 0: no NaN from p . vz */
        }
        if (it % 10 == 5) { /* w = inf * 0 = NaN: quiet NaNs that a max would skip; p . vz = +-inf, not NaN */
            p[0] = INFINITY;
            for (int g = 0; g < 4; g++) vs[g] = 0.0f;
        }
        for (int c = 0; c < R * 128; c++) o[0][c] = o[1][c] = (float)vq_rng_normal(&rng);
        k->kivi_pv8(R, n, codes, 32, vs, vz, p, BN, o[0], 128);
        ref->kivi_pv8(R, n, codes, 32, vs, vz, p, BN, o[1], 128);
        for (int c = 0; c < R * 128; c++) {
            const int r = c / 128, gi = (c % 128) / 32;
            float mag = 1.0f; /* the terms' magnitude: what the f32 roundings of the sums are relative to */
            for (int j = 0; j < n; j++) {
                const float t = fabsf(p[r * BN + j]) * (3.0f * fabsf(vs[4 * j + gi]) + fabsf(vz[4 * j + gi]));
                mag += isfinite(t) ? t : 0.0f;
            }
            const float a = o[0][c], b = o[1][c];
            const bool ok = isnan(b) ? isnan(a) : isinf(b) ? a == b : fabsf(a - b) <= 1e-5f * (fabsf(b) + mag);
            VT_CHECK(ok, "%s pv8 it %d R %d n %d [%d]: %g, scalar %g", isa, it, R, n, c, (double)a, (double)b);
            /* zero vz: o + step * isum, one rounding each on every ISA, so the
             * same float exactly when the integer sums are the scalar's */
            VT_CHECK(it % 10 != 0 || vt_same_float(a, b), "%s pv8 it %d R %d n %d [%d]: %a, scalar %a (vz 0: exact)",
                     isa, it, R, n, c, (double)a, (double)b);
        }
    }
}

static void test_int8_kernels(void) { vt_for_each_isa(1, int8_kernels_on); }

/* The fused block kernel (kivi_int8_block, where an ISA has one) against the
 * same ISA's sequence kivi_q8, kivi_qk8, poison, softmax, rescale,
 * kivi_pv8 on each block of a run of 1-3 (one call): o, m, d and the
 * poison flags bit for bit (NaN matching NaN), 1-4 rows, f16 and f32
 * scales, first and later blocks (m = -inf or finite, alpha 1 or not), NaN /
 * SNaN / inf in q, the key scale and zero, and the value scale; rows already
 * poisoned; the blocks' arrays at steps of one block or more. */
static void kivi_int8_block_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa);
    if (k->kivi_int8_block == NULL) return;
    vq_rng rng;
    vq_rng_seed(&rng, 1415);
    enum { BN = 32, D = 128, NBMAX = 3, GAP = 2 }; /* block i at i * (1 + gap) blocks, gap < GAP */
    enum { SLOTS = NBMAX * GAP };
    static float ks[SLOTS][D], kz[SLOTS][D], vs[SLOTS][BN * 4], vz[SLOTS][BN * 4];
    static uint16_t ks16[SLOTS][D], kz16[SLOTS][D], vs16[SLOTS][BN * 4], vz16[SLOTS][BN * 4];
    static uint8_t kc[SLOTS][BN * 32], vc[SLOTS][BN * 32];
    float q[4 * D], s[4 * BN], alpha[4], ksf[D], kzf[D], vsf[BN * 4], vzf[BN * 4];
    float o[2][4 * D], m[2][4], d[2][4];
    int8_t xq[4 * D];
    float dz[8];
    bool bad[2][4];
    for (int it = 0; it < 600; it++) {
        const int R = 1 + it % 4, n = VQ_ATTN_KIVI_INT8_N, nb = 1 + (it / 4) % NBMAX, gap = (it / 12) % GAP;
        const bool f16 = it % 2 == 1, special = it % 5 == 0;
        for (int c = 0; c < R * D; c++) q[c] = odd_float(&rng, special && it % 3 == 0, false) * 0.1f;
        for (int i = 0; i < SLOTS; i++) {
            for (int c = 0; c < D; c++) {
                ks[i][c] = odd_float(&rng, special && it % 4 == 0 && i == 0, false) * 0.2f;
                kz[i][c] = odd_float(&rng, special && it % 8 == 0 && i == nb - 1, false) * 0.2f;
            }
            for (int j = 0; j < BN * 4; j++) {
                vs[i][j] = odd_float(&rng, special && it % 2 == 0, false);
                vz[i][j] = odd_float(&rng, false, false);
            }
            for (int j = 0; j < BN * 32; j++) {
                kc[i][j] = (uint8_t)vq_rng_next(&rng);
                vc[i][j] = (uint8_t)vq_rng_next(&rng);
            }
            for (int c = 0; c < D; c++) {
                ks16[i][c] = vq_f32_to_f16(ks[i][c]);
                kz16[i][c] = vq_f32_to_f16(kz[i][c]);
            }
            for (int j = 0; j < BN * 4; j++) {
                vs16[i][j] = vq_f32_to_f16(vs[i][j]);
                vz16[i][j] = vq_f32_to_f16(vz[i][j]);
            }
        }
        vt_init_block_state(&rng, it, R, D, bad, m, d, o[0], o[1]);
        const int64_t sl = 1 + gap, esz = f16 ? 2 : 4; /* slots per block step */
        vq_attn_kivi_int8_block b = {kc[0], vc[0], f16 ? (const void *)ks16[0] : ks[0],
                                 f16 ? (const void *)kz16[0] : kz[0], f16 ? (const void *)vs16[0] : vs[0],
                                 f16 ? (const void *)vz16[0] : vz[0], f16, {NULL, NULL, NULL, NULL, NULL, NULL},
                                 {0, 0, 0, 0, 0, 0}, nb, 0, {0, 0, 0, 0, 0, 0}};
        const int64_t step[6] = {sl * BN * 32, sl * D * esz, sl * D * esz, sl * BN * 32, sl * BN * 4 * esz,
                                 sl * BN * 4 * esz};
        for (int j = 0; j < 6; j++) b.step[j] = step[j];
        if (it % 3 == 0) { /* prefetches of the next block but for the last (addresses only: never read as data) */
            b.pf_nb = nb - 1;
            const void *next[6] = {kc[sl], ks[sl], kz[sl], vc[sl], vs[sl], vz[sl]};
            for (int j = 0; j < 6; j++) {
                b.pf[j] = next[j];
                b.pf_bytes[j] = 256;
            }
        }
        k->kivi_int8_block(R, &b, q, D, o[0], D, m[0], d[0], bad[0]);
        for (int i = 0; i < nb; i++) { /* the sequence gets the f16 values converted */
            const int si = (int)(i * sl);
            if (f16) {
                k->cvt_f16(D, ks16[si], ksf);
                k->cvt_f16(D, kz16[si], kzf);
                k->cvt_f16(BN * 4, vs16[si], vsf);
                k->cvt_f16(BN * 4, vz16[si], vzf);
            } else {
                memcpy(ksf, ks[si], sizeof ksf);
                memcpy(kzf, kz[si], sizeof kzf);
                memcpy(vsf, vs[si], sizeof vsf);
                memcpy(vzf, vz[si], sizeof vzf);
            }
            k->kivi_q8(R, D, 2, q, D, ksf, kzf, xq, dz);
            k->kivi_qk8(R, n, D, 2, kc[si], 32, xq, dz, s, BN);
            vt_softmax_step(k, R, n, s, BN, bad[1], m[1], d[1], alpha, o[1], D);
            k->kivi_pv8(R, n, vc[si], 32, vsf, vzf, s, BN, o[1], D);
        }
        vt_check_block_state(isa, "kivi_int8", it, R, nb, D, bad, m, d, o[0], o[1]);
    }
}

static void test_kivi_int8_block(void) { vt_for_each_isa(1, kivi_int8_block_on); }

static void test_kivi_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    kivi kv;
    const kivi_case k = {1, 4, 2, 1, 40, 64, 2, 32, false, false, 0};
    kivi_make(&kv, &k, &rng);
    DLTensor *out = vt_new(VT_F32, VT_DIMS(1, 4, 1, 64));
    void *snap = vt_snapshot(out);
#define CALL(q_, kc_, ks_, kz_, vc_, vs_, vz_, g_, nsg_, opts_) \
    vq_kivi_fused_attend(ctx, q_, kc_, ks_, kz_, vc_, vs_, vz_, g_, 0.125f, nsg_, out, opts_)
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "group_size",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 0, 0, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "k_scale",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 16, 0, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "nsg",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 32, 33, NULL));
    const vq_scalar_attend_opts b3 = {.bits = 3};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 32, 0, &b3));
    const vq_scalar_attend_opts ks9 = {.key_scores = (vq_key_scores)9};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "key_scores",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 32, 0, &ks9));
    const vq_scalar_attend_opts va9 = {.value_accum = (vq_value_accum)9};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "value_accum",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 32, 0, &va9));
    const vq_scalar_attend_opts b4 = {.bits = 4};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "k_codes",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 32, 0, &b4));
    DLTensor *q3 = vt_new(VT_F32, VT_DIMS(1, 3, 1, 64));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "mismatched heads",
             CALL(q3, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 32, 0, NULL));
    DLTensor *q3d = vt_new(VT_F32, VT_DIMS(4, 1, 64));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "rank",
             CALL(q3d, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 32, 0, NULL));
    DLTensor *zf16 = vt_new(VT_F16, VT_DIMS(1, 2, 2, 64));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "k_zero",
             CALL(kv.q, kv.k_codes, kv.k_scale, zf16, kv.v_codes, kv.v_scale, kv.v_zero, 32, 0, NULL));
    DLTensor *vs_bad = vt_new(VT_F32, VT_DIMS(1, 2, 40, 3));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "v_scale",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, vs_bad, kv.v_zero, 32, 0, NULL));
    DLTensor *vc4 = vt_new(VT_U8, VT_DIMS(1, 2, 40, 32));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "v_codes",
             CALL(kv.q, kv.k_codes, kv.k_scale, kv.k_zero, vc4, kv.v_scale, kv.v_zero, 32, 0, NULL));
    DLTensor *kcf = vt_new(VT_F32, VT_DIMS(1, 2, 40, 16));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "dtype",
             CALL(kv.q, kcf, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale, kv.v_zero, 32, 0, NULL));
    DLTensor *q300 = vt_new(VT_F32, VT_DIMS(1, 4, 1, 264));
    DLTensor *o300 = vt_new(VT_F32, VT_DIMS(1, 4, 1, 264));
    void *snap300 = vt_snapshot(o300);
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "> 256",
             vq_kivi_fused_attend(ctx, q300, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale,
                                           kv.v_zero, 32, 1.0f, 0, o300, NULL));
    DLTensor *q60 = vt_new(VT_F32, VT_DIMS(1, 4, 1, 60));
    DLTensor *o60 = vt_new(VT_F32, VT_DIMS(1, 4, 1, 60));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "multiple of 8",
             vq_kivi_fused_attend(ctx, q60, kv.k_codes, kv.k_scale, kv.k_zero, kv.v_codes, kv.v_scale,
                                           kv.v_zero, 32, 1.0f, 0, o60, NULL));
#undef CALL
    VT_CHECK(vt_unchanged(out, snap) && vt_unchanged(o300, snap300), "a failing call wrote to out");
    free(snap);
    free(snap300);
    DLTensor *all[] = {out, q3, q3d, zf16, vs_bad, vc4, kcf, q300, o300, q60, o60};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    kivi_free(&kv);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_kivi_decode);
    VT_RUN(test_kivi_pv8);
    VT_RUN(test_kivi_pv8_auto);
    VT_RUN(test_int8_kernels);
    VT_RUN(test_kivi_int8_block);
    VT_RUN(test_kivi_errors);
    return vt_finish();
}
