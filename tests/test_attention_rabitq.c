/* test_attention_rabitq.c — vq_rabitq_fused_attend (Hamming and exact
 * scores, packed/unpacked values bit-identical, clamped indices, v_scale,
 * k_const, causal) and vq_rabitq_prefill_attend against the float64
 * reference, every ISA; and their error paths. */
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
                                        .v_scale = x.v_scale, .causal = k->causal, .num_splits = k->splits};
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
    VT_RUN(test_rabitq_errors);
    return vt_finish();
}
