/* test_attention_turbo_qk8.c — integer key scores of TurboQuant and RVQ
 * keys (vq_attend_opts.key_scores = VQ_KEY_SCORES_INT8; veloxquant.h,
 * vq_key_scores, "TurboQuant keys") on every ISA: the kernel
 * (codebook_qk8) equal to the scalar reference integer for integer; the
 * attention against a float64 one over the decoded keys within the bound
 * the header derives from the per-score error, and against the float64
 * value of the integer formulation (the same roundings) to f32 rounding;
 * u8 and packed codes alike;
 * AUTO and F32 the float path in vq_fused_sdpa; layouts the kernel does not
 * take exactly the float path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "formats/lloyd_max.h"
#include "attention_ref.h"
#include "harness.h"
#include "veloxquant.h"

enum { HQ = 8, HKV = 2, D = 128 };

/* ---- the kernel ---- */

static void kernel_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa), *ref = vq_attn_kernels_for(VQ_ISA_SCALAR);
    vq_rng rng;
    vq_rng_seed(&rng, 21);
    enum { LDI = 80, LDX = 144, LDS = 40 }; /* strides past the rows: nothing there is read */
    uint8_t *idx = malloc(32 * LDI);
    int8_t cq[16], *xq = malloc(5 * LDX);
    int32_t got[5 * LDS], want[5 * LDS];
    for (int it = 0; it < 40; it++) {
        const int R = 1 + it % 5, n = 1 + (it * 7) % 32;
        for (int i = 0; i < 32 * LDI; i++) idx[i] = (uint8_t)(vq_rng_next(&rng) >> 56);
        for (int i = 0; i < 16; i++) cq[i] = (int8_t)((int)(vq_rng_next(&rng) % 255) - 127);
        for (int i = 0; i < 5 * LDX; i++) xq[i] = (int8_t)((int)(vq_rng_next(&rng) % 255) - 127);
        if (it == 0) { /* the extremes: every product at 127 x 127 */
            memset(cq, 127, sizeof cq);
            memset(xq, 127, 5 * LDX);
        }
        for (int i = 0; i < 5 * LDS; i++) got[i] = want[i] = 0x5a5a5a5a;
        k->codebook_qk8(R, n, idx, LDI, cq, xq, LDX, got, LDS);
        ref->codebook_qk8(R, n, idx, LDI, cq, xq, LDX, want, LDS);
        VT_CHECK(memcmp(got, want, sizeof got) == 0, "%s codebook_qk8 R %d n %d: differs from the scalar kernel", isa, R,
                 n);
    }
    free(idx);
    free(xq);
}

static void test_turbo_qk8_kernel(void) { vt_for_each_isa(1, kernel_on); }

/* nibbles3 (3-bit rows to nibble rows, what the 3-bit stages are scored
 * and accumulated from) equal to the scalar kernel, rows at a stride past
 * their 48 bytes. */
static void nibbles3_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa), *ref = vq_attn_kernels_for(VQ_ISA_SCALAR);
    vq_rng rng;
    vq_rng_seed(&rng, 23);
    enum { LDR = 53 };
    uint8_t rows[32 * LDR], got[32 * 64], want[32 * 64];
    for (int it = 0; it < 10; it++) {
        const int n = 1 + it * 3;
        for (int i = 0; i < 32 * LDR; i++) rows[i] = (uint8_t)(vq_rng_next(&rng) >> 56);
        memset(got, 0xa5, sizeof got);
        memset(want, 0xa5, sizeof want);
        k->nibbles3(n, rows, LDR, got);
        ref->nibbles3(n, rows, LDR, want);
        VT_CHECK(memcmp(got, want, sizeof got) == 0, "%s nibbles3 n %d: differs from the scalar kernel", isa, n);
    }
}

static void test_turbo_nibbles3(void) { vt_for_each_isa(1, nibbles3_on); }

/* mix_nibbles (KIVI_MIX rows to nibble rows) equal to the scalar kernel on
 * awkward shapes: nibble and 2-bit parts below, at and past 16 bytes, rows
 * at their length or a stride past it, the block's last row at the end of
 * its buffer (a read past it is an ASan error), and nothing written more
 * than 32 bytes past the output. */
static void mix_nibbles_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa), *ref = vq_attn_kernels_for(VQ_ISA_SCALAR);
    vq_rng rng;
    vq_rng_seed(&rng, 29);
    static const int shapes[][3] = {{12, 10, 0}, {2, 15, 3}, {16, 8, 0}, {30, 17, 1}, {0, 16, 0},
                                    {48, 20, 5}, {8, 1, 0},  {64, 32, 0}, {96, 40, 7}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t nwb = shapes[si][0], nb2 = shapes[si][1], ldr = nwb + nb2 + shapes[si][2], ldo = nwb + 2 * nb2;
        for (int n = 1; n <= 32; n += 5) {
            uint8_t *rows = malloc((size_t)((n - 1) * ldr + nwb + nb2));
            uint8_t *got = malloc((size_t)(n * ldo + 64)), *want = malloc((size_t)(n * ldo + 64));
            for (int64_t i = 0; i < (n - 1) * ldr + nwb + nb2; i++) rows[i] = (uint8_t)(vq_rng_next(&rng) >> 56);
            memset(got, 0xa5, (size_t)(n * ldo + 64));
            memset(want, 0xa5, (size_t)(n * ldo + 64));
            k->mix_nibbles(n, rows, ldr, nwb, nb2, got);
            ref->mix_nibbles(n, rows, ldr, nwb, nb2, want);
            VT_CHECK(memcmp(got, want, (size_t)(n * ldo)) == 0, "%s mix_nibbles nwb %lld nb2 %lld n %d: differs from scalar",
                     isa, (long long)nwb, (long long)nb2, n);
            bool untouched = true;
            for (int64_t i = n * ldo + 32; i < n * ldo + 64; i++) untouched &= got[i] == 0xa5;
            VT_CHECK(untouched, "%s mix_nibbles nwb %lld nb2 %lld n %d: wrote past the 32 bytes of room", isa,
                     (long long)nwb, (long long)nb2, n);
            free(rows), free(got), free(want);
        }
    }
}

static void test_mix_nibbles(void) { vt_for_each_isa(1, mix_nibbles_on); }

/* ---- attention ---- */

typedef struct kcase {
    int b1, b2; /* stage widths; b2 = 0: TurboQuant, else RVQ */
    int Sq, Skv;
    bool packed, causal, norm_correct;
} kcase;

typedef struct built {
    DLTensor *q, *v, *diag, *khat;
    DLTensor *idx[2], *sc[2], *codes[2]; /* codes: the u8 codes of each stage */
    vq_encoded_keys ek;
    int64_t d;
} built;

static DLTensor *maybe_pack(vq_ctx *ctx, DLTensor *idx, int bits, bool packed)
{
    if (!packed) return idx;
    DLTensor *p = vt_new(VT_U32, VT_DIMS(idx->shape[0], idx->shape[1], idx->shape[2], (idx->shape[3] * bits + 31) / 32));
    VT_OK(ctx, vq_bit_pack(ctx, idx, bits, p));
    return p;
}

static void build(vq_ctx *ctx, const kcase *c, int64_t d, vq_rng *rng, built *b)
{
    memset(b, 0, sizeof *b);
    b->d = d;
    b->q = vt_new(VT_F32, VT_DIMS(1, HQ, c->Sq, d));
    b->v = vt_new(VT_F32, VT_DIMS(1, HKV, c->Skv, d));
    b->diag = vt_new(VT_F32, VT_DIMS(d));
    b->khat = vt_new(VT_F32, VT_DIMS(1, HKV, c->Skv, d));
    DLTensor *k = vt_new(VT_F32, VT_DIMS(1, HKV, c->Skv, d));
    vt_fill_normal(b->q, rng, 0.0, 1.5);
    vt_fill_normal(b->v, rng, 0.0, 1.0);
    vt_fill_keys(k, rng, 3, 5.0);
    vt_fill_signs(b->diag, rng);
    for (int s = 0; s < 2; s++) {
        b->idx[s] = vt_new(VT_U8, VT_DIMS(1, HKV, c->Skv, d));
        b->sc[s] = vt_new(VT_F32, VT_DIMS(1, HKV, c->Skv));
    }
    if (c->b2 == 0) {
        const vq_turboquant_opts o = {.norm_correct = c->norm_correct};
        VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, k, b->diag, c->b1, b->idx[0], b->sc[0], &o));
        VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, b->idx[0], b->sc[0], b->diag, c->b1, b->khat));
        b->codes[0] = b->idx[0];
        b->idx[0] = maybe_pack(ctx, b->idx[0], c->b1, c->packed);
        b->ek = (vq_encoded_keys){.format = VQ_KEYS_TURBO, .turbo = {b->idx[0], b->sc[0], b->diag, c->b1}};
    } else {
        VT_OK(ctx, vq_turboquant_rvq_encode(ctx, k, b->diag, c->b1, c->b2, b->idx[0], b->sc[0], b->idx[1], b->sc[1]));
        VT_OK(ctx, vq_turboquant_rvq_decode(ctx, b->idx[0], b->sc[0], b->idx[1], b->sc[1], b->diag, c->b1, c->b2,
                                            b->khat));
        b->codes[0] = b->idx[0];
        b->codes[1] = b->idx[1];
        b->idx[0] = maybe_pack(ctx, b->idx[0], c->b1, c->packed);
        b->idx[1] = maybe_pack(ctx, b->idx[1], c->b2, c->packed);
        b->ek = (vq_encoded_keys){.format = VQ_KEYS_TURBO_RVQ,
                                  .rvq = {b->idx[0], b->sc[0], b->idx[1], b->sc[1], b->diag, c->b1, c->b2}};
    }
    vt_free(k);
}

static void built_free(built *b)
{
    for (int s = 0; s < 2; s++)
        if (b->codes[s] != b->idx[s]) vt_free(b->codes[s]);
    DLTensor *all[] = {b->q, b->v, b->diag, b->khat, b->idx[0], b->sc[0], b->idx[1], b->sc[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
}

static vq_status attend(vq_ctx *ctx, const kcase *c, const built *b, vq_key_scores ks, DLTensor *out)
{
    const vq_attend_opts o = {.causal = c->causal, .key_scores = ks};
    return vq_fused_sdpa(ctx, b->q, &b->ek, VT_F16_VALUES(b->v), 1.0f / sqrtf((float)b->d), NULL, out, &o);
}

/* The exact attention over the decoded keys, float64 (ref [HQ][Sq][d]), and
 * per output the header's bound: a row's scores each move by at most eps
 * (the sum over stages of scale_j * amax * D * C * (2 + 1/254) / 254, amax
 * the row's largest |rotated, scaled query|, C the stage's largest
 * centroid), so its probabilities by at most a factor exp(2 eps) and each
 * output channel by at most (exp(2 eps) - 1) * max_j |v_j - out|. */

/* The integer formulation in float64 (ref_q [HQ][Sq][d]): the rotated row
 * as the library rounds it (f32 rotation and scale, xq = rint(qp * 127 /
 * amax)), the centroids rounded (vq_attn_cb8_round), scores sum over stages
 * of (qstep * cstep * scale_j) * sum_c xq_c cq[code_c], then attention. */
static void reference_int8(vq_ctx *ctx, const kcase *c, const built *b, double *ref_q)
{
    const int64_t d = b->d, G = HQ / HKV;
    const float scale = 1.0f / sqrtf((float)d);
    DLTensor *y = vt_like(b->q, VT_F32);
    VT_OK(ctx, vq_hadamard(ctx, b->q, b->diag, false, y));
    int8_t cq[2][16];
    float cstep[2];
    for (int st = 0; st < (c->b2 ? 2 : 1); st++) {
        const int bits = st ? c->b2 : c->b1;
        VT_CHECK(vq_attn_cb8_round(vq_lloyd_max_centroids(bits), 1 << bits, cq[st], &cstep[st]), "centroids");
    }
    double *table = calloc((size_t)(HQ * c->Sq * c->Skv), sizeof(double));
    int *xq = malloc(sizeof(int) * (size_t)d);
    for (int64_t h = 0; h < HQ; h++)
        for (int64_t i = 0; i < c->Sq; i++) {
            const int64_t hk = h / G, row = h * c->Sq + i, seen = c->causal ? c->Skv - c->Sq + i + 1 : c->Skv;
            double *s = table + row * c->Skv;
            float amax = 0.0f;
            for (int64_t e = 0; e < d; e++) amax = fmaxf(amax, fabsf((float)vt_get(y, row * d + e) * scale));
            const float inv = 127.0f / amax;
            for (int64_t e = 0; e < d; e++) xq[e] = (int)rintf((float)vt_get(y, row * d + e) * scale * inv);
            for (int64_t t = 0; t < seen; t++) {
                s[t] = 0.0;
                for (int st = 0; st < (c->b2 ? 2 : 1); st++) {
                    int64_t acc = 0;
                    for (int64_t e = 0; e < d; e++) acc += xq[e] * cq[st][(int)vt_get(b->codes[st], (hk * c->Skv + t) * d + e)];
                    s[t] += (double)acc * (double)(amax / 127.0f) * cstep[st] * vt_get(b->sc[st], hk * c->Skv + t);
                }
            }
        }
    const ref_dims rd = {1, HQ, HKV, c->Sq, c->Skv, d};
    const ref_table_arg ta = {table, rd};
    double *vh = ref_doubles(b->v);
    ref_attention(&rd, ref_table_score, &ta, vh, NULL, 0, 0, c->causal, ref_q, NULL);
    free(vh);
    free(table);
    free(xq);
    vt_free(y);
}

static void reference(vq_ctx *ctx, const kcase *c, const built *b, double *ref, double *bound)
{
    static const double cmax[5] = {0.0, 0.798, 1.510, 2.152, 2.733};
    const int64_t d = b->d, G = HQ / HKV;
    const double scale = 1.0 / sqrt((double)d);
    const ref_dims rd = {1, HQ, HKV, c->Sq, c->Skv, d};
    const ref_f16_arg arg = {b->q, b->khat, rd, scale};
    double *vh = ref_doubles(b->v);
    ref_attention(&rd, ref_f16_score, &arg, vh, NULL, 0, 0, c->causal, ref, NULL);
    DLTensor *y = vt_like(b->q, VT_F32);
    VT_OK(ctx, vq_hadamard(ctx, b->q, b->diag, false, y));
    for (int64_t h = 0; h < HQ; h++)
        for (int64_t i = 0; i < c->Sq; i++) {
            const int64_t hk = h / G, row = h * c->Sq + i, seen = c->causal ? c->Skv - c->Sq + i + 1 : c->Skv;
            double amax = 0.0, eps = 0.0;
            for (int64_t e = 0; e < d; e++) amax = fmax(amax, fabs(vt_get(y, row * d + e)) * scale);
            for (int64_t t = 0; t < seen; t++) {
                double e_t = 0.0;
                for (int st = 0; st < (c->b2 ? 2 : 1); st++)
                    e_t += fabs(vt_get(b->sc[st], hk * c->Skv + t)) * amax * (double)d * cmax[st ? c->b2 : c->b1] *
                           (2.0 + 1.0 / 254.0) / 254.0;
                eps = fmax(eps, e_t);
            }
            for (int64_t e = 0; e < d; e++) {
                const double o = ref[row * d + e];
                double spread = 0.0;
                for (int64_t t = 0; t < seen; t++) spread = fmax(spread, fabs(vh[(hk * c->Skv + t) * d + e] - o));
                bound[row * d + e] = expm1(2.0 * eps) * spread + 1e-5 * (fabs(o) + 1.0);
            }
        }
    free(vh);
    vt_free(y);
}

static const kcase cases[] = {
    {2, 0, 1, 1000, true, false, true},  {2, 0, 1, 77, false, false, false}, {4, 0, 1, 1000, true, false, true},
    {4, 0, 3, 513, true, true, false},   {3, 0, 1, 300, true, false, true},  {1, 0, 1, 100, false, false, false},
    {2, 2, 1, 1000, true, false, false}, {2, 2, 3, 65, false, true, false},  {4, 2, 1, 4097, true, false, false},
};

static void cases_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 31);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const kcase *c = &cases[ci];
        built b;
        build(ctx, c, D, &rng, &b);
        DLTensor *o8 = vt_new(VT_F32, VT_DIMS(1, HQ, c->Sq, D)), *of = vt_like(o8, VT_F32), *oa = vt_like(o8, VT_F32);
        VT_OK(ctx, attend(ctx, c, &b, VQ_KEY_SCORES_INT8, o8));
        VT_OK(ctx, attend(ctx, c, &b, VQ_KEY_SCORES_F32, of));
        VT_OK(ctx, attend(ctx, c, &b, VQ_KEY_SCORES_AUTO, oa));
        const int64_t n = vt_numel(o8);
        double *ref = malloc(sizeof(double) * (size_t)n * 3), *bound = ref + n, *ref_q = bound + n;
        reference(ctx, c, &b, ref, bound);
        reference_int8(ctx, c, &b, ref_q);
        VT_CHECK(vt_rel_l2(o8, ref_q) <= 1e-5, "%s b%d/%d Skv %d: rel err against the integer formulation %.3g", isa,
                 c->b1, c->b2, c->Skv, vt_rel_l2(o8, ref_q));
        double worst = 0.0;
        for (int64_t e = 0; e < n; e++) worst = fmax(worst, fabs(vt_get(o8, e) - ref[e]) / bound[e]);
        VT_CHECK(worst <= 1.0, "%s b%d/%d Sq %d Skv %d: error / header bound = %.3g", isa, c->b1, c->b2, c->Sq, c->Skv,
                 worst);
        VT_CHECK(vt_rel_l2(of, ref) <= 2e-5, "%s b%d/%d: the f32 path, rel err %.3g", isa, c->b1, c->b2,
                 vt_rel_l2(of, ref));
        VT_CHECK(memcmp(oa->data, of->data, vt_bytes(of)) == 0, "%s b%d/%d: AUTO is not F32 in vq_fused_sdpa", isa,
                 c->b1, c->b2);
        VT_CHECK(memcmp(o8->data, of->data, vt_bytes(of)) != 0, "%s b%d/%d: INT8 gave the f32 path's bytes", isa, c->b1,
                 c->b2);
        VT_CHECK(vt_count_poisoned(o8) == 0, "%s: unwritten output", isa);
        free(ref);
        vt_free(o8);
        vt_free(of);
        vt_free(oa);
        built_free(&b);
    }
}

static void test_turbo_qk8(void) { vt_for_each_isa(2, cases_on); }

/* The same codes u8 and packed: the same nibble rows, the same bytes. */
static void layouts_on(vq_ctx *ctx, const char *isa)
{
    for (int b1 = 2; b1 <= 4; b1++) {
        DLTensor *out[2];
        for (int packed = 0; packed < 2; packed++) {
            vq_rng rng;
            vq_rng_seed(&rng, 41);
            const kcase c = {b1, b1 == 3 ? 2 : 0, 1, 200, packed != 0, false, false};
            built b;
            build(ctx, &c, D, &rng, &b);
            out[packed] = vt_new(VT_F32, VT_DIMS(1, HQ, 1, D));
            VT_OK(ctx, attend(ctx, &c, &b, VQ_KEY_SCORES_INT8, out[packed]));
            built_free(&b);
        }
        VT_CHECK(memcmp(out[0]->data, out[1]->data, vt_bytes(out[0])) == 0, "%s b%d: u8 and packed codes differ", isa,
                 b1);
        vt_free(out[0]);
        vt_free(out[1]);
    }
}

static void test_turbo_qk8_layouts(void) { vt_for_each_isa(1, layouts_on); }

/* Where the kernel does not apply, INT8 is the f32 path, bit for bit. */
static void fallback_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    const struct {
        int b1, b2;
        int64_t d;
    } f[] = {{4, 0, 64}, {5, 0, 128}, {8, 0, 128}, {2, 6, 128}, {2, 2, 256}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const kcase c = {f[i].b1, f[i].b2, 1, 100, true, false, false};
        built b;
        build(ctx, &c, f[i].d, &rng, &b);
        DLTensor *o8 = vt_new(VT_F32, VT_DIMS(1, HQ, 1, f[i].d)), *of = vt_like(o8, VT_F32);
        VT_OK(ctx, attend(ctx, &c, &b, VQ_KEY_SCORES_INT8, o8));
        VT_OK(ctx, attend(ctx, &c, &b, VQ_KEY_SCORES_F32, of));
        VT_CHECK(memcmp(o8->data, of->data, vt_bytes(of)) == 0, "%s b%d/%d D %lld: INT8 is not the f32 path", isa,
                 f[i].b1, f[i].b2, (long long)f[i].d);
        vt_free(o8);
        vt_free(of);
        built_free(&b);
    }
}

static void test_turbo_qk8_fallback(void) { vt_for_each_isa(1, fallback_on); }

/* A non-finite query element: INT8 follows the float path's rule (the same
 * rows non-finite, the others finite). */
static void nonfinite_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 9);
    const kcase c = {2, 0, 1, 90, true, false, false};
    const double bad[2] = {NAN, INFINITY};
    for (int k = 0; k < 2; k++) {
        built b;
        build(ctx, &c, D, &rng, &b);
        vt_set(b.q, 3 * D + 17, bad[k]); /* query row 3 */
        DLTensor *o8 = vt_new(VT_F32, VT_DIMS(1, HQ, 1, D)), *of = vt_like(o8, VT_F32);
        VT_OK(ctx, attend(ctx, &c, &b, VQ_KEY_SCORES_INT8, o8));
        VT_OK(ctx, attend(ctx, &c, &b, VQ_KEY_SCORES_F32, of));
        int64_t differ = 0;
        for (int64_t e = 0; e < vt_numel(o8); e++) differ += isfinite(vt_get(o8, e)) != isfinite(vt_get(of, e));
        VT_CHECK(differ == 0, "%s %s query: %lld outputs finite on one path only", isa, k ? "inf" : "NaN",
                 (long long)differ);
        vt_free(o8);
        vt_free(of);
        built_free(&b);
    }
}

static void test_turbo_qk8_nonfinite(void) { vt_for_each_isa(1, nonfinite_on); }

int main(void)
{
    VT_RUN(test_turbo_qk8_kernel);
    VT_RUN(test_turbo_nibbles3);
    VT_RUN(test_mix_nibbles);
    VT_RUN(test_turbo_qk8);
    VT_RUN(test_turbo_qk8_layouts);
    VT_RUN(test_turbo_qk8_fallback);
    VT_RUN(test_turbo_qk8_nonfinite);
    return vt_finish();
}
