/* test_codecs_nonfinite.c — the header's rule for NaN and ±inf inputs to the
 * encoders (conventions, "Non-finite inputs"): the call succeeds, every code
 * is written and stays in its range, on every ISA. Rows without a non-finite
 * element are not affected: their codes equal those of the same rows encoded
 * alone. Inputs: [1, H, S, D] f32 with NaN, +inf and -inf planted in a few
 * rows (the first rows of head 0); for KIVI keys the unaffected rows start
 * at the next key group. */
#include "harness.h"

enum { H = 2, S = 24, D = 64, BAD_ROWS = 3 };

static DLTensor *g_x;      /* the input with non-finite elements */
static DLTensor *g_clean;  /* the same rows, all finite */
static const char *g_isa;

static void make_inputs(void)
{
    vq_rng rng;
    vq_rng_seed(&rng, 9);
    g_x = vt_new(VT_F32, VT_DIMS(1, H, S, D));
    vt_fill_normal(g_x, &rng, 0, 1);
    g_clean = vt_like(g_x, VT_F32);
    memcpy(g_clean->data, g_x->data, vt_bytes(g_x));
    vt_set(g_x, 0 * D + 5, NAN);
    vt_set(g_x, 1 * D + 0, INFINITY);
    vt_set(g_x, 2 * D + 63, -INFINITY);
}

/* Bit streams (RaBitQ, QJL) hold any byte, the poison pattern included:
 * encode twice over different fills instead; equal results = all written. */
static void check_written(const DLTensor *t, const void *first, const char *what)
{
    VT_CHECK(memcmp(t->data, first, vt_bytes(t)) == 0, "%s (%s): some bytes were not written", what, g_isa);
}

/* Codes of a rows x cols code tensor: written (limit < 256: not the
 * poison), < limit; rows >= BAD_ROWS of
 * head 0 and every row of head 1 equal to `clean`'s. */
static void check_codes_from(const DLTensor *codes, const DLTensor *clean, int64_t per_row, double limit, int64_t first_clean,
                             const char *what)
{
    int64_t poisoned = limit <= 256 ? vt_count_poisoned(codes) : 0, out_of_range = 0, differ = 0;
    for (int64_t i = 0; i < vt_numel(codes); i++) {
        const double c = vt_get(codes, i);
        out_of_range += !(c >= 0 && c < limit);
        if (i / per_row >= first_clean && clean) differ += c != vt_get(clean, i);
    }
    VT_CHECK(poisoned == 0 && out_of_range == 0, "%s (%s): %lld unwritten, %lld out of [0, %g)", what, g_isa,
             (long long)poisoned, (long long)out_of_range, limit);
    if (clean) VT_CHECK(differ == 0, "%s (%s): %lld codes of finite rows changed", what, g_isa, (long long)differ);
}

static void check_codes(const DLTensor *codes, const DLTensor *clean, int64_t per_row, double limit, const char *what)
{
    check_codes_from(codes, clean, per_row, limit, BAD_ROWS, what);
}

static void encoders(vq_ctx *ctx, const char *isa)
{
    g_isa = isa;
    /* KIVI keys (per channel over groups of 8 tokens: the bad rows spoil group 0 only) and values */
    {
        DLTensor *c = vt_new(VT_U8, VT_DIMS(1, H, S, D)), *s = vt_new(VT_F32, VT_DIMS(1, H, S / 8, D));
        DLTensor *z = vt_like(s, VT_F32), *c0 = vt_like(c, VT_U8);
        DLTensor *vs = vt_new(VT_F32, VT_DIMS(1, H, S, D / 16)), *vz = vt_like(vs, VT_F32);
        VT_OK(ctx, vq_kivi_quantize_values(ctx, g_clean, 4, 16, c0, vs, vz));
        vt_poison(c);
        VT_OK(ctx, vq_kivi_quantize_values(ctx, g_x, 4, 16, c, vs, vz));
        check_codes(c, c0, D, 16, "affine values");
        VT_OK(ctx, vq_kivi_quantize_keys(ctx, g_clean, 4, 8, c0, s, z));
        vt_poison(c);
        VT_OK(ctx, vq_kivi_quantize_keys(ctx, g_x, 4, 8, c, s, z));
        check_codes_from(c, c0, D, 16, 8, "affine keys"); /* group 0 (tokens 0..7) holds the bad rows */
        vt_free(c); vt_free(s); vt_free(z); vt_free(c0); vt_free(vs); vt_free(vz);
    }
    /* TurboQuant scalar, Hadamard and RVQ; RaBitQ */
    {
        DLTensor *idx = vt_new(VT_U8, VT_DIMS(1, H, S, D)), *idx0 = vt_like(idx, VT_U8);
        DLTensor *sc = vt_new(VT_F32, VT_DIMS(1, H, S)), *idx2 = vt_like(idx, VT_U8), *sc2 = vt_like(sc, VT_F32);
        vt_poison(idx);
        VT_OK(ctx, vq_turboquant_scalar_quantize(ctx, g_clean, 3, idx0));
        VT_OK(ctx, vq_turboquant_scalar_quantize(ctx, g_x, 3, idx));
        check_codes(idx, idx0, D, 8, "turbo scalar");
        VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, g_clean, NULL, 3, idx0, sc, NULL));
        vt_poison(idx);
        VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, g_x, NULL, 3, idx, sc, NULL));
        check_codes(idx, idx0, D, 8, "turbo hadamard");
        vt_poison(idx);
        vt_poison(idx2);
        VT_OK(ctx, vq_turboquant_rvq_encode(ctx, g_x, NULL, 2, 2, idx, sc, idx2, sc2));
        check_codes(idx, NULL, D, 4, "rvq stage 1");
        check_codes(idx2, NULL, D, 4, "rvq stage 2");
        DLTensor *kb = vt_new(VT_U8, VT_DIMS(1, H, S, D / 8)), *kb0 = vt_like(kb, VT_U8);
        VT_OK(ctx, vq_rabitq_encode(ctx, g_clean, NULL, kb0, sc, NULL));
        memset(kb->data, 0x00, vt_bytes(kb));
        VT_OK(ctx, vq_rabitq_encode(ctx, g_x, NULL, kb, sc, NULL));
        void *first = vt_snapshot(kb);
        memset(kb->data, 0xFF, vt_bytes(kb));
        VT_OK(ctx, vq_rabitq_encode(ctx, g_x, NULL, kb, sc, NULL));
        check_written(kb, first, "rabitq");
        free(first);
        check_codes(kb, kb0, D / 8, 257, "rabitq");
        vt_free(idx); vt_free(idx0); vt_free(sc); vt_free(idx2); vt_free(sc2); vt_free(kb); vt_free(kb0);
    }
    /* scalar codebook values, QJL signs, VecInfer product VQ, CommVQ */
    {
        vq_rng rng;
        vq_rng_seed(&rng, 10);
        DLTensor *cents = vt_new(VT_F32, VT_DIMS(16));
        for (int i = 0; i < 16; i++) vt_set(cents, i, -2.0 + 0.25 * i);
        DLTensor *idx = vt_new(VT_U8, VT_DIMS(1, H, S, D)), *idx0 = vt_like(idx, VT_U8);
        VT_OK(ctx, vq_codebook_quantize(ctx, g_clean, cents, idx0));
        vt_poison(idx);
        VT_OK(ctx, vq_codebook_quantize(ctx, g_x, cents, idx));
        check_codes(idx, idx0, D, 16, "codebook");

        enum { M = 64 };
        float proj[M * D];
        VT_OK(ctx, vq_qjl_projection(3, M, D, proj));
        DLTensor *pt = vt_new(VT_F32, VT_DIMS(M, D));
        memcpy(pt->data, proj, sizeof proj);
        DLTensor *bits = vt_new(VT_U32, VT_DIMS(1, H, S, M / 32)), *bits0 = vt_like(bits, VT_U32);
        VT_OK(ctx, vq_qjl_encode(ctx, g_clean, pt, bits0));
        memset(bits->data, 0x00, vt_bytes(bits));
        VT_OK(ctx, vq_qjl_encode(ctx, g_x, pt, bits));
        void *first = vt_snapshot(bits);
        memset(bits->data, 0xFF, vt_bytes(bits));
        VT_OK(ctx, vq_qjl_encode(ctx, g_x, pt, bits));
        check_written(bits, first, "qjl");
        free(first);
        check_codes(bits, bits0, M / 32, 4294967296.0, "qjl");

        enum { PM = 8, PC = 16 };
        DLTensor *cb = vt_new(VT_F32, VT_DIMS(PM, PC, D / PM)), *sm = vt_new(VT_F32, VT_DIMS(D));
        vt_fill_normal(cb, &rng, 0, 1);
        for (int i = 0; i < D; i++) vt_set(sm, i, 1.0);
        DLTensor *pi = vt_new(VT_U8, VT_DIMS(1, H, S, PM)), *pi0 = vt_like(pi, VT_U8);
        VT_OK(ctx, vq_vecinfer_quantize(ctx, g_clean, cb, sm, PM, pi0));
        vt_poison(pi);
        VT_OK(ctx, vq_vecinfer_quantize(ctx, g_x, cb, sm, PM, pi));
        check_codes(pi, pi0, PM, PC, "vecinfer");

        DLTensor *ccb = vt_new(VT_F32, VT_DIMS(2, PC, D)), *ci = vt_new(VT_U8, VT_DIMS(1, H, S, 2));
        DLTensor *ci0 = vt_like(ci, VT_U8);
        vt_fill_normal(ccb, &rng, 0, 1);
        VT_OK(ctx, vq_commvq_encode(ctx, g_clean, ccb, ci0));
        vt_poison(ci);
        VT_OK(ctx, vq_commvq_encode(ctx, g_x, ccb, ci));
        check_codes(ci, ci0, 2, PC, "commvq");
        vt_free(cents); vt_free(idx); vt_free(idx0); vt_free(pt); vt_free(bits); vt_free(bits0); vt_free(cb);
        vt_free(sm); vt_free(pi); vt_free(pi0); vt_free(ccb); vt_free(ci); vt_free(ci0);
    }
}

static void test_encoders(void) { vt_for_each_isa(2, encoders); }

int main(void)
{
    make_inputs();
    VT_RUN(test_encoders);
    vt_free(g_x);
    vt_free(g_clean);
    return vt_finish();
}
