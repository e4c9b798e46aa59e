/* test_attention_rabitq.c — vq_rabitq_fused_attend (Hamming and exact
 * scores, packed/unpacked values bit-identical, clamped indices, v_scale,
 * k_const, causal) and vq_rabitq_prefill_attend against the float64
 * reference, every ISA; integer p.V (vq_value_accum INT8) against the
 * header's bound, its float64 formulation and its typical error, and its
 * kernel against the scalar one on odd inputs; AUTO's choice; the fused
 * block kernel against the separate ones; and the error paths. */
#include "attention/attn_kernels.h"
#include "attention_ref.h"
#include "harness.h"

typedef struct rq_case {
    int64_t B, Hq, Hkv, Sq, Skv, D;
    int n_cents;
    bool packed, exact, causal, with_const, with_vscale, f16_q;
    int splits;
} rq_case;

typedef struct rq {
    ref_dims d;
    bool exact;
    DLTensor *q, *q_scale, *k_bits, *k_mag, *k_const, *v_idx, *v_packed, *v_cents, *v_scale;
    double *vhat;
    double prefill_scale; /* < 0: per-row q_scale (fused); else the prefill's one scale */
} rq;

static void rq_make(rq *x, const rq_case *k, vq_rng *rng)
{
    const ref_dims d = {k->B, k->Hq, k->Hkv, k->Sq, k->Skv, k->D};
    *x = (rq){.d = d, .exact = k->exact, .prefill_scale = -1.0};
    x->q = vt_new(k->f16_q ? VT_F16 : VT_F32, VT_DIMS(d.B, d.Hq, d.Sq, d.D));
    vt_fill_normal(x->q, rng, 0.0, 1.0);
    x->q_scale = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq));
    for (int64_t i = 0; i < vt_numel(x->q_scale); i++) vt_set(x->q_scale, i, (0.5 + vq_rng_uniform(rng)) / sqrt((double)d.D));
    x->k_bits = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D / 8));
    vt_fill_uniform_int(x->k_bits, rng, 0, 255);
    x->k_mag = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv));
    vt_fill_normal(x->k_mag, rng, 1.0, 0.3);
    if (k->with_const) {
        x->k_const = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv));
        vt_fill_normal(x->k_const, rng, 0.0, 1.0);
    }
    if (k->with_vscale) {
        x->v_scale = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv));
        vt_fill_normal(x->v_scale, rng, 1.0, 0.5);
    }
    x->v_cents = vt_new(VT_F32, VT_DIMS(k->n_cents));
    vt_fill_normal(x->v_cents, rng, 0.0, 1.0);
    /* unpacked indices run past n_cents (clamped) unless they must fit a nibble */
    x->v_idx = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D));
    vt_fill_uniform_int(x->v_idx, rng, 0, k->packed || k->n_cents <= 16 ? 15 : k->n_cents + 9);
    x->v_packed = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D / 2));
    const uint8_t *u = x->v_idx->data;
    uint8_t *pk = x->v_packed->data;
    for (int64_t i = 0; i < vt_numel(x->v_packed); i++) pk[i] = (uint8_t)((u[2 * i] & 15) | ((u[2 * i + 1] & 15) << 4));
    const int64_t nv = vt_numel(x->v_idx);
    x->vhat = malloc(sizeof(double) * (size_t)nv);
    for (int64_t i = 0; i < nv; i++) {
        const int64_t ci = u[i] < k->n_cents ? u[i] : k->n_cents - 1;
        x->vhat[i] = vt_get(x->v_cents, ci) * (x->v_scale ? vt_get(x->v_scale, i / d.D) : 1.0);
    }
}

static void rq_free(rq *x)
{
    DLTensor *all[] = {x->q, x->q_scale, x->k_bits, x->k_mag, x->k_const, x->v_idx, x->v_packed, x->v_cents, x->v_scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    free(x->vhat);
}

static double rq_score(const void *arg, int64_t b, int64_t h, int64_t i, int64_t t)
{
    const rq *x = arg;
    const ref_dims *d = &x->d;
    const int64_t hk = h / (d->Hq / d->Hkv), row = (b * d->Hq + h) * d->Sq + i, tok = (b * d->Hkv + hk) * d->Skv + t;
    const uint8_t *kb = (const uint8_t *)x->k_bits->data + tok * d->D / 8;
    double dot = 0.0;
    int64_t ham = 0;
    for (int64_t c = 0; c < d->D; c++) {
        const double qc = vt_get(x->q, row * d->D + c);
        const int bit = (kb[c / 8] >> (c % 8)) & 1;
        dot += bit ? qc : -qc;
        ham += (qc >= 0.0) != bit;
    }
    const double qs = x->prefill_scale >= 0 ? x->prefill_scale : vt_get(x->q_scale, row);
    const double core = x->exact ? dot : (double)(d->D - 2 * ham);
    return core * qs * vt_get(x->k_mag, tok) + (x->k_const ? vt_get(x->k_const, tok) : 0.0);
}

static void run_fused(vq_ctx *ctx, const char *isa, const rq_case *k, vq_rng *rng)
{
    rq x;
    rq_make(&x, k, rng);
    const ref_dims *d = &x.d;
    DLTensor *out = vt_new(VT_F32, VT_DIMS(d->B, d->Hq, d->Sq, d->D));
    double *ref = malloc(sizeof(double) * (size_t)vt_numel(out));
    ref_attention(d, rq_score, &x, x.vhat, NULL, 0, 0, k->causal, ref);
    const vq_rabitq_attend_opts opts = {.score = k->exact ? VQ_RABITQ_SCORE_EXACT : VQ_RABITQ_SCORE_HAMMING,
                                        .v_scale = x.v_scale, .causal = k->causal, .num_splits = k->splits,
                                        .value_accum = VQ_VALUE_ACCUM_F32};
    VT_OK(ctx, vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, x.k_const,
                                      k->packed ? x.v_packed : x.v_idx, x.v_cents, out, &opts));
    const double err = vt_rel_l2(out, ref);
    VT_CHECK(err <= vt_tol(out), "%s exact %d packed %d nc %d Hq%lld Hkv%lld Sq%lld Skv%lld D%lld causal %d: rel err %.3g",
             isa, k->exact, k->packed, k->n_cents, (long long)d->Hq, (long long)d->Hkv, (long long)d->Sq,
             (long long)d->Skv, (long long)d->D, k->causal, err);
    VT_CHECK(vt_count_poisoned(out) == 0, "%s: unwritten output", isa);
    if (k->n_cents <= 16) { /* the other value layout must give the very same bytes */
        DLTensor *out2 = vt_new(VT_F32, VT_DIMS(d->B, d->Hq, d->Sq, d->D));
        VT_OK(ctx, vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, x.k_const,
                                          k->packed ? x.v_idx : x.v_packed, x.v_cents, out2, &opts));
        VT_CHECK(memcmp(out->data, out2->data, vt_bytes(out)) == 0, "%s: packed and unpacked values differ", isa);
        vt_free(out2);
    }
    free(ref);
    vt_free(out);
    rq_free(&x);
}

static void run_prefill(vq_ctx *ctx, const char *isa, const rq_case *k, vq_rng *rng)
{
    rq x;
    rq_make(&x, k, rng);
    x.exact = true;
    x.prefill_scale = (double)(float)(1.0 / sqrt((double)x.d.D));
    const ref_dims *d = &x.d;
    DLTensor *scale = vt_new(VT_F32, VT_DIMS(1));
    vt_set(scale, 0, x.prefill_scale);
    DLTensor *out = vt_new(k->f16_q ? VT_F16 : VT_F32, VT_DIMS(d->B, d->Hq, d->Sq, d->D));
    double *ref = malloc(sizeof(double) * (size_t)vt_numel(out));
    ref_attention(d, rq_score, &x, x.vhat, NULL, 0, 0, false, ref);
    const vq_rabitq_attend_opts opts = {.v_scale = x.v_scale, .num_splits = k->splits};
    VT_OK(ctx, vq_rabitq_prefill_attend(ctx, x.q, scale, x.k_bits, x.k_mag, x.k_const, x.v_packed, x.v_cents, out,
                                        &opts));
    const double err = vt_rel_l2(out, ref);
    VT_CHECK(err <= vt_tol(out), "%s prefill Hq%lld Hkv%lld Sq%lld Skv%lld D%lld: rel err %.3g", isa,
             (long long)d->Hq, (long long)d->Hkv, (long long)d->Sq, (long long)d->Skv, (long long)d->D, err);
    VT_CHECK(vt_count_poisoned(out) == 0, "%s: unwritten output", isa);
    free(ref);
    vt_free(out);
    vt_free(scale);
    rq_free(&x);
}

static void cases_on(vq_ctx *ctx, const char *isa)
{
    static const rq_case fused[] = {
        /* B Hq Hkv Sq Skv  D   nc  packed exact causal const vscale f16q splits */
        {1, 1, 1, 1, 1, 64, 16, true, false, false, false, false, false, 0},
        {1, 3, 1, 1, 7, 96, 11, true, true, false, true, true, false, 0},
        {2, 8, 2, 4, 97, 128, 16, false, false, true, true, false, true, 3},
        {1, 8, 1, 33, 97, 64, 37, false, true, true, false, true, false, 0},
        {1, 4, 4, 1, 4097, 128, 16, true, false, false, true, true, false, 0},
        {1, 6, 2, 4, 300, 256, 5, false, true, true, true, false, false, 7},
        {1, 3, 3, 33, 40, 8, 256, false, false, false, false, false, false, 1},
        /* few rows (direct paths): unpacked gather and unpacked 16-entry table */
        {1, 4, 2, 1, 50, 64, 40, false, false, false, false, true, false, 0},
        {1, 2, 2, 3, 33, 128, 7, false, false, true, true, false, false, 0},
        /* 1-2 rows with 16-entry tables: byte-plane strips of 32 columns */
        {1, 4, 2, 1, 45, 96, 16, false, false, false, false, true, false, 0},
        {1, 2, 1, 1, 40, 256, 13, true, false, false, true, false, false, 0},
    };
    static const rq_case prefill[] = {
        {1, 4, 1, 70, 97, 64, 16, true, true, false, true, true, false, 0},
        {1, 3, 3, 33, 7, 96, 9, true, true, false, false, false, true, 2},
        {2, 8, 2, 1, 300, 128, 16, true, true, false, true, false, false, 0},
        {1, 2, 2, 130, 130, 256, 16, true, true, false, false, true, false, 0},
    };
    vq_rng rng;
    vq_rng_seed(&rng, 99);
    for (size_t c = 0; c < sizeof fused / sizeof fused[0]; c++) run_fused(ctx, isa, &fused[c], &rng);
    for (size_t c = 0; c < sizeof prefill / sizeof prefill[0]; c++) run_prefill(ctx, isa, &prefill[c], &rng);
}

static void test_rabitq_attend(void) { vt_for_each_isa(2, cases_on); }

/* Integer p.V in float64 from the exact probabilities: per row and block of
 * 32 tokens (cut at the causal limit, as the skeleton cuts them) w = p *
 * v_scale rounded against max|w| / 255 (no w < 0) or / 127, centroids as the library rounds them
 * (vq_attn_cb8_round). ref_q: that formulation; ref_c: exact weights with
 * the rounded centroids (what is left differs from out by the weight
 * rounding alone); bound: the header's bound on |out - exact|; var: the
 * variance of out - ref_c if each weight's rounding error is uniform in
 * +-step / 2. */
static void cb8_reference(const rq *x, bool causal, const int8_t *cq, double cstep, double *ref_q, double *ref_c,
                          double *bound, double *var)
{
    const ref_dims *d = &x->d;
    const int nc = (int)x->v_cents->shape[0];
    const uint8_t *u = x->v_idx->data;
    double *s = malloc(sizeof(double) * (size_t)d->Skv);
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->Hq; h++)
            for (int64_t i = 0; i < d->Sq; i++) {
                const int64_t hk = h / (d->Hq / d->Hkv), lim = causal ? d->Skv - d->Sq + i + 1 : d->Skv;
                const int64_t row = (b * d->Hq + h) * d->Sq + i, bh = b * d->Hkv + hk;
                const double sum = ref_row_probs(rq_score, x, b, h, i, lim, s);
                double *oq = ref_q + row * d->D, *oc = ref_c + row * d->D, *ob = bound + row * d->D, *ov = var + row * d->D;
                for (int64_t c = 0; c < d->D; c++) oq[c] = oc[c] = ob[c] = ov[c] = 0.0;
                for (int64_t t0 = 0; t0 < lim; t0 += 32) {
                    const int64_t t1 = t0 + 32 < lim ? t0 + 32 : lim;
                    double amax = 0.0;
                    bool nonneg = true;
                    for (int64_t t = t0; t < t1; t++) {
                        const double w = s[t] * (x->v_scale ? vt_get(x->v_scale, bh * d->Skv + t) : 1.0);
                        amax = fmax(amax, fabs(w));
                        nonneg = nonneg && !(w < 0.0);
                    }
                    /* uint8 weights where none is negative, else int8 */
                    const double L = nonneg ? 255.0 : 127.0, step = amax / L;
                    for (int64_t t = t0; t < t1; t++) {
                        const double w = s[t] * (x->v_scale ? vt_get(x->v_scale, bh * d->Skv + t) : 1.0);
                        const double wq = amax > 0 ? rint(w / amax * L) * step : 0.0;
                        for (int64_t c = 0; c < d->D; c++) {
                            const int64_t xi = (bh * d->Skv + t) * d->D + c, ci = u[xi] < nc ? u[xi] : nc - 1;
                            const double cent = vt_get(x->v_cents, ci), cr = cstep * cq[ci];
                            oq[c] += wq * cr / sum;
                            oc[c] += w * cr / sum;
                            ob[c] += (step / 2 * fabs(cent) + (fabs(w) + step / 2) * cstep / 2) / sum;
                            ov[c] += step * step / 12.0 * cr * cr / (sum * sum);
                        }
                    }
                }
            }
    free(s);
}

/* One D = 128 case with integer p.V on this ISA: within the header's bound
 * of the exact attention everywhere, close to the integer formulation's
 * float64 value (its roundings can flip at ties: 1e-4), and with the
 * typical error of random weight roundings; packed and unpacked the same. */
static void cb8_case(vq_ctx *ctx, const char *isa, const rq_case *k, vq_rng *rng)
{
    rq x;
    rq_make(&x, k, rng);
    const ref_dims *d = &x.d;
    int8_t cq[16];
    float cstep = 0.0f;
    VT_CHECK(vq_attn_cb8_round(x.v_cents->data, k->n_cents, cq, &cstep), "centroids not roundable");
    DLTensor *out = vt_new(VT_F32, VT_DIMS(d->B, d->Hq, d->Sq, d->D));
    const int64_t n = vt_numel(out);
    double *ref = malloc(sizeof(double) * (size_t)n * 5), *ref_q = ref + n, *ref_c = ref_q + n, *bound = ref_c + n,
           *var = bound + n;
    ref_attention(d, rq_score, &x, x.vhat, NULL, 0, 0, k->causal, ref);
    cb8_reference(&x, k->causal, cq, cstep, ref_q, ref_c, bound, var);
    const vq_rabitq_attend_opts opts = {.score = k->exact ? VQ_RABITQ_SCORE_EXACT : VQ_RABITQ_SCORE_HAMMING,
                                        .v_scale = x.v_scale, .causal = k->causal, .num_splits = k->splits,
                                        .value_accum = VQ_VALUE_ACCUM_INT8};
    VT_OK(ctx, vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, x.k_const,
                                      k->packed ? x.v_packed : x.v_idx, x.v_cents, out, &opts));
    double worst = 0.0, vsum = 0.0, se = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double o = vt_get(out, i), slack = 1e-5 * (fabs(ref[i]) + 1.0);
        worst = fmax(worst, fabs(o - ref[i]) / (bound[i] + slack));
        vsum += var[i];
        se += (o - ref_c[i]) * (o - ref_c[i]);
    }
    const double err_q = vt_rel_l2(out, ref_q);
    VT_CHECK(worst <= 1.0, "%s cb8 Hq%lld Hkv%lld Sq%lld Skv%lld: error / header bound = %.3g", isa,
             (long long)d->Hq, (long long)d->Hkv, (long long)d->Sq, (long long)d->Skv, worst);
    VT_CHECK(err_q <= 1e-4, "%s cb8 Skv%lld: rel err against the integer formulation %.3g", isa, (long long)d->Skv,
             err_q);
    /* mean square error against its expectation under uniform rounding errors: 4x, as a sample of n
     * outputs, and because weights far below the step all round to 0 (errors of one sign, ~1.5x in
     * rms at Skv 4097) */
    VT_CHECK(se <= 4.0 * vsum + 1e-12 * (double)n, "%s cb8 Skv%lld: mean square error %.3g, expected %.3g", isa,
             (long long)d->Skv, se / (double)n, vsum / (double)n);
    /* the header's typical error against the exact attention: ~1e-3 C S (here 0.4-2.6e-3) */
    double see = 0.0, C = 0.0, S = 1.0;
    for (int64_t i = 0; i < n; i++) see += (vt_get(out, i) - ref[i]) * (vt_get(out, i) - ref[i]);
    for (int i = 0; i < k->n_cents; i++) C = fmax(C, fabs(vt_get(x.v_cents, i)));
    for (int64_t i = 0; x.v_scale && i < vt_numel(x.v_scale); i++) S = i ? fmax(S, fabs(vt_get(x.v_scale, i))) : fabs(vt_get(x.v_scale, i));
    VT_CHECK(sqrt(see / (double)n) <= 5e-3 * C * S, "%s cb8 Skv%lld: rms error %.3g C S", isa, (long long)d->Skv,
             sqrt(see / (double)n) / (C * S));
    VT_CHECK(vt_count_poisoned(out) == 0, "%s: unwritten output", isa);
    DLTensor *out2 = vt_new(VT_F32, VT_DIMS(d->B, d->Hq, d->Sq, d->D));
    VT_OK(ctx, vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, x.k_const,
                                      k->packed ? x.v_idx : x.v_packed, x.v_cents, out2, &opts));
    VT_CHECK(memcmp(out->data, out2->data, vt_bytes(out)) == 0, "%s cb8: packed and unpacked values differ", isa);
    vt_free(out2);
    free(ref);
    vt_free(out);
    rq_free(&x);
}

static void cb8_cases_on(vq_ctx *ctx, const char *isa)
{
    static const rq_case cases[] = {
        /* B Hq Hkv Sq Skv  D   nc  packed exact causal const vscale f16q splits: tails, 1-64 rows, splits */
        {1, 1, 1, 1, 1, 128, 16, true, false, false, false, false, false, 0},
        {1, 4, 1, 1, 31, 128, 16, false, false, false, true, true, false, 0},
        {2, 8, 2, 1, 97, 128, 11, true, true, false, false, true, true, 3},
        {1, 32, 4, 1, 1000, 128, 16, true, false, false, true, false, false, 0},
        {1, 6, 2, 5, 70, 128, 9, false, false, true, false, true, false, 0},
        {1, 4, 4, 1, 1025, 128, 16, true, false, false, true, true, false, 2},
        {1, 16, 1, 5, 130, 128, 1, true, false, true, false, false, false, 0},
    };
    vq_rng rng;
    vq_rng_seed(&rng, 2468);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) cb8_case(ctx, isa, &cases[c], &rng);
}

static void test_rabitq_cb8(void) { vt_for_each_isa(2, cb8_cases_on); }

/* AUTO takes integer p.V in decode exactly where the ISA has the SIMD
 * kernel (bit for bit INT8 there, F32 elsewhere); prefill's AUTO is F32; a
 * layout the kernel does not take (D 64) runs F32 when INT8 is asked for. */
static void cb8_auto_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 77);
    for (int D = 64; D <= 128; D += 64) {
        rq x;
        const rq_case k = {1, 8, 2, 1, 300, D, 16, true, false, false, false, true, false, 0};
        rq_make(&x, &k, &rng);
        DLTensor *o[3];
        static const vq_value_accum modes[3] = {VQ_VALUE_ACCUM_AUTO, VQ_VALUE_ACCUM_F32, VQ_VALUE_ACCUM_INT8};
        for (int m = 0; m < 3; m++) {
            o[m] = vt_new(VT_F32, VT_DIMS(1, 8, 1, D));
            const vq_rabitq_attend_opts opts = {.v_scale = x.v_scale, .value_accum = modes[m]};
            VT_OK(ctx, vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents,
                                              o[m], &opts));
        }
        const size_t bytes = sizeof(float) * 8 * (size_t)D;
        const bool fast = vq_attn_kernels_for(ctx->isa)->cb8_fast && D == 128;
        VT_CHECK(memcmp(o[0]->data, o[fast ? 2 : 1]->data, bytes) == 0, "%s D%d: AUTO is not %s", isa, D,
                 fast ? "INT8" : "F32");
        VT_CHECK((memcmp(o[1]->data, o[2]->data, bytes) != 0) == (D == 128), "%s D%d: INT8 %s F32", isa, D,
                 D == 128 ? "equals" : "differs from");
        if (D == 128) { /* prefill: AUTO = F32, INT8 on request */
            DLTensor *scale = vt_new(VT_F32, VT_DIMS(1));
            vt_set(scale, 0, 0.0625);
            DLTensor *p[2];
            for (int m = 0; m < 2; m++) {
                p[m] = vt_new(VT_F32, VT_DIMS(1, 8, 1, D));
                const vq_rabitq_attend_opts opts = {.v_scale = x.v_scale, .value_accum = m ? VQ_VALUE_ACCUM_INT8 : VQ_VALUE_ACCUM_AUTO};
                VT_OK(ctx, vq_rabitq_prefill_attend(ctx, x.q, scale, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents,
                                                    p[m], &opts));
            }
            DLTensor *pf = vt_new(VT_F32, VT_DIMS(1, 8, 1, D));
            const vq_rabitq_attend_opts opts = {.v_scale = x.v_scale, .value_accum = VQ_VALUE_ACCUM_F32};
            VT_OK(ctx, vq_rabitq_prefill_attend(ctx, x.q, scale, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents, pf,
                                                &opts));
            VT_CHECK(memcmp(p[0]->data, pf->data, bytes) == 0, "%s: prefill AUTO is not F32", isa);
            VT_CHECK(memcmp(p[1]->data, pf->data, bytes) != 0, "%s: prefill INT8 equals F32", isa);
            vt_free(pf);
            vt_free(p[0]);
            vt_free(p[1]);
            vt_free(scale);
        }
        for (int m = 0; m < 3; m++) vt_free(o[m]);
        rq_free(&x);
    }
}

static void test_rabitq_cb8_auto(void) { vt_for_each_isa(2, cb8_auto_on); }

/* Weights below 127 / FLT_MAX (v_scale 1e-39: 127 / max|w| would overflow)
 * round to 0 on every ISA: no NaN, no undefined conversion (UBSan), an
 * output of that order (the F32 path gives ~1e-39). */
static void cb8_tiny_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    rq x;
    const rq_case k = {1, 4, 1, 1, 70, 128, 16, true, false, false, false, true, false, 0};
    rq_make(&x, &k, &rng);
    for (int64_t i = 0; i < vt_numel(x.v_scale); i++) vt_set(x.v_scale, i, i % 3 ? 1e-39 : 0.0);
    DLTensor *out = vt_new(VT_F32, VT_DIMS(1, 4, 1, 128));
    const vq_rabitq_attend_opts opts = {.v_scale = x.v_scale, .value_accum = VQ_VALUE_ACCUM_INT8};
    VT_OK(ctx, vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents, out, &opts));
    double worst = 0.0;
    for (int64_t i = 0; i < vt_numel(out); i++) worst = isfinite(vt_get(out, i)) ? fmax(worst, fabs(vt_get(out, i))) : INFINITY;
    VT_CHECK(worst <= 1e-37, "%s cb8 tiny weights: largest |out| %.3g", isa, worst);
    vt_free(out);
    rq_free(&x);
}

static void test_rabitq_cb8_tiny(void) { vt_for_each_isa(2, cb8_tiny_on); }

/* Every ISA's codebook_pv8 kernel gives the scalar kernel's outputs to f32
 * rounding (attn_kernels.h), NaN where it has NaN: rows without negative
 * weights (uint8) and with (int8), rows of zeros, maxima near the smallest
 * normal, NaN / inf weights, 1-5 rows, partial blocks, 1-16 centroids. */
static void cb8_kernels_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa), *ref = vq_attn_kernels_for(VQ_ISA_SCALAR);
    vq_rng rng;
    vq_rng_seed(&rng, 1515);
    enum { RMAX = 5, BN = 32 };
    float w[RMAX * BN], o[2][RMAX * 128], cents[16], cstep = 0.0f;
    uint8_t idx[BN * 64];
    int8_t cq[16];
    for (int it = 0; it < 300; it++) {
        const int R = 1 + it % RMAX, n = it % 4 == 0 ? 1 + (int)(vq_rng_next(&rng) % BN) : BN;
        const int n_cents = 1 + (int)(vq_rng_next(&rng) % 16);
        for (int i = 0; i < n_cents; i++) cents[i] = (float)vq_rng_normal(&rng);
        VT_CHECK(vq_attn_cb8_round(cents, n_cents, cq, &cstep), "it %d: centroids not roundable", it);
        for (int j = 0; j < BN * 64; j++) idx[j] = (uint8_t)vq_rng_next(&rng);
        for (int r = 0; r < R; r++) {
            const int kind = (it + r) % 6; /* 0-2: no negative weight, 3: signed, 4: zeros, 5: special */
            for (int j = 0; j < BN; j++) {
                const uint64_t u = vq_rng_next(&rng) % 16;
                float x = (float)vq_rng_normal(&rng);
                x = kind <= 2 ? fabsf(x) : kind == 4 ? 0.0f : x;
                if (kind == 5) x = u == 0 ? NAN : u == 1 ? INFINITY : u == 2 ? x * 1e-38f : x;
                if (it % 7 == 3) x *= 1e-37f;
                w[r * BN + j] = j < n ? x : NAN; /* past n: never read */
            }
        }
        for (int c = 0; c < R * 128; c++) o[0][c] = o[1][c] = (float)vq_rng_normal(&rng);
        k->codebook_pv8(R, n, idx, 64, cq, cstep, w, BN, o[0], 128);
        ref->codebook_pv8(R, n, idx, 64, cq, cstep, w, BN, o[1], 128);
        for (int c = 0; c < R * 128; c++) {
            const int r = c / 128;
            float mag = 1.0f; /* the terms' magnitude: what the f32 roundings are relative to */
            for (int j = 0; j < n; j++) mag += isfinite(w[r * BN + j]) ? fabsf(w[r * BN + j]) * 127.0f * cstep : 0.0f;
            const float a = o[0][c], b = o[1][c];
            const bool ok = isnan(b) ? isnan(a) : isinf(b) ? a == b : fabsf(a - b) <= 1e-5f * (fabsf(b) + mag);
            VT_CHECK(ok, "%s cb8 it %d R %d n %d [%d]: %g, scalar %g", isa, it, R, n, c, (double)a, (double)b);
        }
    }
}

static void test_rabitq_cb8_kernels(void) { vt_for_each_isa(1, cb8_kernels_on); }

/* Every ISA's hamming_score (where it has one) gives the scores of the
 * format's hamming() + formula, (D - 2 ham) * qs * mag + cnst, to FMA
 * rounding, NaN where they are NaN, +-inf where they are: D 64-256 (128 the
 * SIMD path), 1-33 tokens (partial steps), 1-6 rows, with and without
 * k_const, NaN / inf / zero / tiny query scales, magnitudes and constants. */
static float rq_odd(vq_rng *rng, bool special);
static void ham_kernels_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa), *ref = vq_attn_kernels_for(VQ_ISA_SCALAR);
    if (k->hamming_score == NULL) return;
    vq_rng rng;
    vq_rng_seed(&rng, 1418);
    enum { RMAX = 6, NMAX = 33, LDQ = 40, LDS = 40 };
    static const int Ds[4] = {128, 64, 256, 136};
    uint8_t qb[RMAX * LDQ], kb[NMAX * 32];
    float qs[RMAX * 2], mag[NMAX], cn[NMAX], s[RMAX * LDS];
    int32_t ham[RMAX * LDS];
    for (int it = 0; it < 400; it++) {
        const int D = Ds[it % 7 < 4 ? 0 : it % 4], R = 1 + it % RMAX, n = 1 + (int)(vq_rng_next(&rng) % NMAX);
        const bool with_const = it % 3 != 0, special = it % 5 == 0;
        for (size_t i = 0; i < sizeof qb; i++) qb[i] = (uint8_t)vq_rng_next(&rng);
        for (size_t i = 0; i < sizeof kb; i++) kb[i] = (uint8_t)vq_rng_next(&rng);
        for (int r = 0; r < 2 * RMAX; r++) qs[r] = fabsf(rq_odd(&rng, special && it % 2 == 0));
        for (int j = 0; j < NMAX; j++) {
            mag[j] = fabsf(rq_odd(&rng, special && it % 3 == 1));
            cn[j] = rq_odd(&rng, special);
        }
        for (int i = 0; i < RMAX * LDS; i++) s[i] = -1.0f; /* past n: left alone */
        k->hamming_score(R, n, D, qb, LDQ, qs, 2, kb, mag, with_const ? cn : NULL, s, LDS);
        ref->hamming(R, n, D / 8, qb, LDQ, kb, ham, LDS);
        for (int r = 0; r < R; r++)
            for (int j = 0; j < LDS; j++) {
                const float a = s[r * LDS + j];
                if (j >= n) {
                    VT_CHECK(a == -1.0f, "%s ham it %d: s[%d][%d] past n %d written", isa, it, r, j, n);
                    continue;
                }
                const float b = (float)(D - 2 * ham[r * LDS + j]) * qs[2 * r] * mag[j] + (with_const ? cn[j] : 0.0f);
                const float tol = 1e-6f * (fabsf(b) + (with_const ? fabsf(cn[j]) : 0.0f));
                const bool ok = isnan(b) ? isnan(a) : isinf(b) ? a == b : fabsf(a - b) <= tol;
                VT_CHECK(ok, "%s ham it %d D %d R %d n %d [%d][%d]: %g, hamming + formula %g", isa, it, D, R, n, r, j,
                         (double)a, (double)b);
            }
    }
}

static void test_rabitq_ham_kernels(void) { vt_for_each_isa(1, ham_kernels_on); }

/* A float for the block kernel check: ordinary, sometimes 0 or tiny, and
 * where `special` NaN or +-inf (scores NaN / +-inf: the non-finite rule). */
static float rq_odd(vq_rng *rng, bool special)
{
    const float x = (float)vq_rng_normal(rng);
    switch (vq_rng_next(rng) % 48) {
    case 0: return 0.0f;
    case 1: return x * 1e-38f;
    case 2: return special ? NAN : x;
    case 3: return special ? INFINITY : x;
    case 4: return special ? -INFINITY : x;
    default: return x;
    }
}

/* The fused RaBitQ block kernel (kern->rabitq_block, where an ISA has one)
 * gives the sequence hamming_score, poison, softmax, rescale, codebook_pv8
 * of the same ISA bit for bit (o, m, d, poison flags): 1-4 rows, first
 * blocks (m = -inf, d = 0) and later ones, runs of 1-3 blocks with gaps
 * between them (the steps), with and without k_const, NaN / inf in the
 * query scales, magnitudes and constants, prefetch ranges set or not. */
static void rabitq_block_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa);
    if (k->rabitq_block == NULL) return;
    vq_rng rng;
    vq_rng_seed(&rng, 1416);
    enum { BN = 32, D = 128, NBMAX = 3, GAP = 2, QPF = 5 }; /* block i at i * (1 + gap) slots; QPF floats per row */
    enum { SLOTS = NBMAX * GAP };
    static uint8_t kb[SLOTS][BN * 16], vi[SLOTS][BN * 64];
    static float mag[SLOTS][BN], cn[SLOTS][BN];
    float qp[4 * QPF], s[4 * BN], alpha[4], cents[16], cstep = 0.0f;
    float o[2][4 * D], m[2][4], d[2][4];
    int8_t cq[16];
    bool bad[2][4];
    for (int it = 0; it < 600; it++) {
        const int R = 1 + it % 4, nb = 1 + (it / 4) % NBMAX, gap = (it / 12) % GAP;
        const bool with_const = it % 2 == 1, special = it % 5 == 0;
        const int n_cents = 1 + (int)(vq_rng_next(&rng) % 16);
        for (int i = 0; i < n_cents; i++) cents[i] = (float)vq_rng_normal(&rng);
        VT_CHECK(vq_attn_cb8_round(cents, n_cents, cq, &cstep), "it %d: centroids not roundable", it);
        for (int r = 0; r < R; r++) {
            qp[r * QPF] = fabsf(rq_odd(&rng, special && it % 3 == 0)) * 0.05f;
            for (int c = 0; c < D / 8; c++) ((uint8_t *)(qp + r * QPF + 1))[c] = (uint8_t)vq_rng_next(&rng);
        }
        for (int i = 0; i < SLOTS; i++) {
            for (int j = 0; j < BN * 16; j++) kb[i][j] = (uint8_t)vq_rng_next(&rng);
            for (int j = 0; j < BN * 64; j++) vi[i][j] = (uint8_t)vq_rng_next(&rng);
            for (int j = 0; j < BN; j++) {
                mag[i][j] = fabsf(rq_odd(&rng, special && it % 2 == 0));
                cn[i][j] = rq_odd(&rng, special && it % 4 == 1);
            }
        }
        vt_init_block_state(&rng, it, R, D, bad, m, d, o[0], o[1]);
        const int64_t sl = 1 + gap; /* slots per block step */
        vq_attn_rabitq_block b = {kb[0], mag[0], with_const ? cn[0] : NULL, vi[0], cq, cstep, {NULL, NULL, NULL},
                                  {0, 0, 0}, nb, 0, {sl * BN * 16, sl * BN * 4, sl * BN * 4, sl * BN * 64}};
        if (it % 3 == 0) { /* prefetches of the next block but for the last (addresses only: never read as data) */
            b.pf_nb = nb - 1;
            const void *next[3] = {kb[sl], mag[sl], vi[sl]};
            for (int j = 0; j < 3; j++) {
                b.pf[j] = next[j];
                b.pf_bytes[j] = 256;
            }
        }
        const uint8_t *qb = (const uint8_t *)(qp + 1);
        k->rabitq_block(R, &b, qb, QPF * 4, qp, QPF, o[0], D, m[0], d[0], bad[0]);
        for (int i = 0; i < nb; i++) {
            const int si = (int)(i * sl);
            k->hamming_score(R, BN, D, qb, QPF * 4, qp, QPF, kb[si], mag[si], with_const ? cn[si] : NULL, s, BN);
            vt_softmax_step(k, R, BN, s, BN, bad[1], m[1], d[1], alpha, o[1], D);
            k->codebook_pv8(R, BN, vi[si], 64, cq, cstep, s, BN, o[1], D);
        }
        vt_check_block_state(isa, "rabitq block", it, R, nb, D, bad, m, d, o[0], o[1]);
    }
}

static void test_rabitq_block(void) { vt_for_each_isa(1, rabitq_block_on); }

/* Through the public API the fused path (runs of blocks), one fused call per
 * block (VQ_ATTN_ONE_BLOCK) and the separate kernels (VQ_ATTN_UNFUSED) give
 * the same bytes on every ISA: GQA 4 and 1, a partial last block, k_const,
 * splits, causal rows (blocks the hook does not take), v_scale (idem). */
static void block_paths_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 1417);
    static const rq_case cases[] = {
        {1, 8, 2, 1, 300, 128, 16, true, false, false, false, false, false, 0},
        {2, 4, 4, 1, 257, 128, 11, true, false, false, true, false, false, 3},
        {1, 12, 3, 1, 96, 128, 16, true, false, false, true, false, true, 1},
        {1, 2, 1, 2, 130, 128, 16, true, false, true, false, false, false, 0},
        {1, 8, 2, 1, 200, 128, 16, true, false, false, false, true, false, 0},
    };
    static const char *env[3] = {NULL, "VQ_ATTN_ONE_BLOCK", "VQ_ATTN_UNFUSED"};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const rq_case *k = &cases[ci];
        rq x;
        rq_make(&x, k, &rng);
        DLTensor *out[3];
        for (int e = 0; e < 3; e++) {
            out[e] = vt_new(VT_F32, VT_DIMS(k->B, k->Hq, k->Sq, k->D));
            const vq_rabitq_attend_opts opts = {.v_scale = x.v_scale, .causal = k->causal, .num_splits = k->splits};
            if (env[e]) setenv(env[e], "1", 1);
            VT_OK(ctx, vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, x.k_const, x.v_packed, x.v_cents,
                                              out[e], &opts));
            if (env[e]) unsetenv(env[e]);
        }
        for (int e = 1; e < 3; e++)
            VT_CHECK(memcmp(out[0]->data, out[e]->data, vt_bytes(out[0])) == 0, "%s case %zu: fused and %s differ", isa,
                     ci, env[e]);
        for (int e = 0; e < 3; e++) vt_free(out[e]);
        rq_free(&x);
    }
}

static void test_rabitq_block_paths(void) { vt_for_each_isa(2, block_paths_on); }

static void test_rabitq_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 8);
    rq x;
    const rq_case k = {1, 4, 2, 2, 40, 64, 16, true, false, false, true, true, false, 0};
    rq_make(&x, &k, &rng);
    DLTensor *out = vt_new(VT_F32, VT_DIMS(1, 4, 2, 64));
    DLTensor *scale = vt_new(VT_F32, VT_DIMS(1));
    vt_set(scale, 0, 0.125);
    void *snap = vt_snapshot(out);
    DLTensor *c17 = vt_new(VT_F32, VT_DIMS(17));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "16",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_packed, c17, out, NULL));
    DLTensor *c300 = vt_new(VT_F32, VT_DIMS(300));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "256",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_idx, c300, out, NULL));
    DLTensor *qs_bad = vt_new(VT_F32, VT_DIMS(1, 4, 3));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "q_scale",
             vq_rabitq_fused_attend(ctx, x.q, qs_bad, x.k_bits, x.k_mag, NULL, x.v_idx, x.v_cents, out, NULL));
    DLTensor *kb_bad = vt_new(VT_U8, VT_DIMS(1, 2, 40, 4));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "k_bits",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, kb_bad, x.k_mag, NULL, x.v_idx, x.v_cents, out, NULL));
    DLTensor *mag16 = vt_new(VT_F16, VT_DIMS(1, 2, 40));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "k_mag",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, mag16, NULL, x.v_idx, x.v_cents, out, NULL));
    DLTensor *kc_bad = vt_new(VT_F32, VT_DIMS(1, 2, 41));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "k_const",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, kc_bad, x.v_idx, x.v_cents, out, NULL));
    DLTensor *vi_bad = vt_new(VT_U8, VT_DIMS(1, 2, 40, 16));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "v_idx",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, NULL, vi_bad, x.v_cents, out, NULL));
    const vq_rabitq_attend_opts vs_bad = {.v_scale = kc_bad};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "v_scale",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_idx, x.v_cents, out, &vs_bad));
    const vq_rabitq_attend_opts va_bad = {.value_accum = (vq_value_accum)7};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "value_accum",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_idx, x.v_cents, out, &va_bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "value_accum",
             vq_rabitq_prefill_attend(ctx, x.q, scale, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents, out, &va_bad));
    const vq_rabitq_attend_opts sc_bad = {.score = (vq_rabitq_score)5};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "score",
             vq_rabitq_fused_attend(ctx, x.q, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_idx, x.v_cents, out, &sc_bad));
    DLTensor *q3 = vt_new(VT_F32, VT_DIMS(1, 3, 2, 64));
    DLTensor *qs3 = vt_new(VT_F32, VT_DIMS(1, 3, 2));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "mismatched heads",
             vq_rabitq_fused_attend(ctx, q3, qs3, x.k_bits, x.k_mag, NULL, x.v_idx, x.v_cents, out, NULL));
    DLTensor *q300 = vt_new(VT_F32, VT_DIMS(1, 4, 2, 264));
    DLTensor *o300 = vt_new(VT_F32, VT_DIMS(1, 4, 2, 264));
    void *snap300 = vt_snapshot(o300);
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "> 256",
             vq_rabitq_fused_attend(ctx, q300, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_idx, x.v_cents, o300, NULL));
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "> 256",
             vq_rabitq_prefill_attend(ctx, q300, scale, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents, o300, NULL));
    DLTensor *q60 = vt_new(VT_F32, VT_DIMS(1, 4, 2, 60));
    DLTensor *o60 = vt_new(VT_F32, VT_DIMS(1, 4, 2, 60));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "multiple of 8",
             vq_rabitq_fused_attend(ctx, q60, x.q_scale, x.k_bits, x.k_mag, NULL, x.v_idx, x.v_cents, o60, NULL));
    /* prefill: unpacked values, bad scale, non-default opts */
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "v_idx",
             vq_rabitq_prefill_attend(ctx, x.q, scale, x.k_bits, x.k_mag, NULL, x.v_idx, x.v_cents, out, NULL));
    DLTensor *scale2 = vt_new(VT_F32, VT_DIMS(2));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "scale",
             vq_rabitq_prefill_attend(ctx, x.q, scale2, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents, out, NULL));
    const vq_rabitq_attend_opts causal = {.causal = true};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "causal",
             vq_rabitq_prefill_attend(ctx, x.q, scale, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents, out, &causal));
    DLTensor *obf = vt_new(VT_BF16, VT_DIMS(1, 4, 2, 64));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'",
             vq_rabitq_prefill_attend(ctx, x.q, scale, x.k_bits, x.k_mag, NULL, x.v_packed, x.v_cents, obf, NULL));
    VT_CHECK(vt_unchanged(out, snap) && vt_unchanged(o300, snap300), "a failing call wrote to out");
    free(snap);
    free(snap300);
    DLTensor *all[] = {out, scale, c17, c300, qs_bad, kb_bad, mag16, kc_bad, vi_bad, q3, qs3, q300, o300, q60, o60, scale2, obf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    rq_free(&x);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_rabitq_attend);
    VT_RUN(test_rabitq_cb8);
    VT_RUN(test_rabitq_cb8_auto);
    VT_RUN(test_rabitq_cb8_tiny);
    VT_RUN(test_rabitq_cb8_kernels);
    VT_RUN(test_rabitq_ham_kernels);
    VT_RUN(test_rabitq_block);
    VT_RUN(test_rabitq_block_paths);
    VT_RUN(test_rabitq_errors);
    return vt_finish();
}
