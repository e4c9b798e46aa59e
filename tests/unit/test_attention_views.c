/* test_attention_views.c — what an engine needs from the attention entry
 * points, on every ISA:
 *   - strided views (capacity buffers, transposed layouts) give the results
 *     of compact copies, for every key and value format and every entry point;
 *   - opts->lse_out is the float64 log-sum-exp of the visible scores;
 *   - vq_attention_merge of two halves equals attention over the whole;
 *   - every value format of vq_encoded_values (with several key formats)
 *     against the float64 reference over the library's own dequantized values;
 *   - the skeleton's segmented kv axis (pages + a residual of another kind)
 *     equals one call over the contiguous cache;
 *   - a caller's workspace (vq_ctx_set_workspace) is used and never grown. */
#include <string.h>

#include "attention/attn_formats.h"
#include "attention_ref.h"
#include "harness.h"

/* ---- strided copies ---- */

/* A header whose element (i0, i1, i2, ...) is src's, stored either in a
 * capacity buffer (axes 1 and 2 padded: mode 1) or with axes 1 and 2
 * swapped in memory (mode 2, rank 4 only). Padding holds NaN / 0xA5 bytes,
 * so a read outside the view shows. */
typedef struct strided {
    DLTensor t;
    int64_t shape[4], strides[4];
    DLTensor *big;
} strided;

static DLTensor *strided_copy(const DLTensor *src, int mode, strided *s)
{
    const int nd = src->ndim;
    int64_t bs[4];
    for (int i = 0; i < nd; i++) bs[i] = src->shape[i];
    if (mode == 1) {
        bs[1] += 1;
        bs[2] += 3;
    } else {
        bs[1] = src->shape[2];
        bs[2] = src->shape[1];
    }
    s->big = vt_new(src->dtype, nd, bs);
    if (src->dtype.code == kDLFloat)
        for (int64_t e = 0; e < vt_numel(s->big); e++) vt_set(s->big, e, NAN);
    int64_t bstr[4], acc = 1;
    for (int i = nd - 1; i >= 0; i--) {
        bstr[i] = acc;
        acc *= bs[i];
    }
    for (int i = 0; i < nd; i++) {
        s->shape[i] = src->shape[i];
        s->strides[i] = bstr[i];
    }
    if (mode == 2) {
        s->strides[1] = bstr[2];
        s->strides[2] = bstr[1];
    }
    s->t = *s->big;
    s->t.shape = s->shape;
    s->t.strides = s->strides;
    const int64_t n = vt_numel(src);
    for (int64_t e = 0; e < n; e++) {
        int64_t rem = e, off = 0;
        for (int i = nd - 1; i >= 0; i--) {
            off += (rem % src->shape[i]) * s->strides[i];
            rem /= src->shape[i];
        }
        vt_set(s->big, off, vt_get(src, e));
    }
    return &s->t;
}

/* Reads a strided view back into a compact tensor of the same shape. */
static void gather(const DLTensor *view, DLTensor *dst)
{
    const int64_t n = vt_numel(dst);
    DLTensor flat = *view;
    int64_t one = 1 << 30;
    flat.ndim = 1;
    flat.shape = &one;
    flat.strides = NULL;
    for (int64_t e = 0; e < n; e++) {
        int64_t rem = e, off = 0;
        for (int i = view->ndim - 1; i >= 0; i--) {
            off += (rem % view->shape[i]) * view->strides[i];
            rem /= view->shape[i];
        }
        vt_set(dst, e, vt_get(&flat, off));
    }
}

/* ---- random caches of every format (valid data; decoding is not the point here) ---- */

enum { B = 2, HQ = 4, HKV = 2, SQ = 3, SKV = 45, D = 64, G = 16 };

typedef struct views_case {
    DLTensor *q, *out, *lse, *mask;
    DLTensor *t[8];  /* the cache tensors */
    int n;
} views_case;

static DLTensor *add(views_case *c, DLDataType dt, int ndim, const int64_t *shape)
{
    return c->t[c->n++] = vt_new(dt, ndim, shape);
}

static void free_case(views_case *c)
{
    vt_free(c->q);
    vt_free(c->out);
    vt_free(c->lse);
    vt_free(c->mask);
    for (int i = 0; i < c->n; i++) vt_free(c->t[i]);
}

/* The call under test: the format's tensors (compact or strided) in t. */
typedef vq_status (*views_call)(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask,
                                DLTensor *out, DLTensor *lse);

static vq_status call_f16_sdpa(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask,
                                 DLTensor *out, DLTensor *lse)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_F16, .f16.keys = t[0]};
    const vq_attend_opts o = {.causal = true, .lse_out = lse};
    return vq_fused_sdpa(ctx, q, &k, VT_F16_VALUES(t[1]), 0.125f, mask, out, &o);
}

static vq_status call_kivi(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask, DLTensor *out,
                           DLTensor *lse)
{
    (void)mask;
    const vq_scalar_attend_opts o = {.causal = true, .bits = 2, .lse_out = lse};
    return vq_kivi_fused_attend(ctx, q, t[0], t[1], t[2], t[3], t[4], t[5], G, 0.125f, 0, out, &o);
}

static vq_status call_rabitq(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask, DLTensor *out,
                             DLTensor *lse)
{
    (void)mask;
    const vq_rabitq_attend_opts o = {.score = VQ_RABITQ_SCORE_HAMMING, .v_scale = t[6], .lse_out = lse};
    return vq_rabitq_fused_attend(ctx, q, t[5], t[0], t[1], t[2], t[3], t[4], out, &o);
}

static vq_status call_turbo_turbo(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask,
                                  DLTensor *out, DLTensor *lse)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_TURBO, .turbo = {t[0], t[1], NULL, 3}};
    const vq_encoded_values v = {.format = VQ_VALUES_TURBO, .turbo = {t[2], t[3], NULL, 4}};
    const vq_attend_opts o = {.lse_out = lse};
    return vq_fused_sdpa(ctx, q, &k, &v, 0.125f, mask, out, &o);
}

static vq_status call_rvq_kivi(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask,
                                 DLTensor *out, DLTensor *lse)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_TURBO_RVQ, .rvq = {t[0], t[1], t[2], t[3], NULL, 2, 2}};
    const vq_encoded_values v = {.format = VQ_VALUES_KIVI, .kivi = {t[4], t[5], t[6], 4, G}};
    const vq_attend_opts o = {.causal = true, .lse_out = lse};
    return vq_fused_sdpa(ctx, q, &k, &v, 0.125f, mask, out, &o);
}

static vq_status call_qjl_codebook(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask,
                                   DLTensor *out, DLTensor *lse)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_QJL, .qjl = {t[0], t[1], t[2]}};
    const vq_encoded_values v = {.format = VQ_VALUES_CODEBOOK, .codebook = {t[3], t[4], t[5]}};
    const vq_attend_opts o = {.lse_out = lse};
    return vq_fused_sdpa(ctx, q, &k, &v, 0.125f, mask, out, &o);
}

static vq_status call_vecinfer(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask, DLTensor *out,
                         DLTensor *lse)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_VECINFER, .vecinfer = {t[0], t[1], t[2]}};
    const vq_attend_opts o = {.lse_out = lse};
    return vq_fused_sdpa(ctx, q, &k, VT_F16_VALUES(t[3]), 0.125f, mask, out, &o);
}

static vq_status call_commvq(vq_ctx *ctx, DLTensor *const *t, const DLTensor *q, const DLTensor *mask,
                             DLTensor *out, DLTensor *lse)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_COMMVQ,
                               .commvq = {t[0], t[1], t[2], t[3], t[4], NULL, VQ_ROPE_HALF}};
    const vq_attend_opts o = {.lse_out = lse};
    return vq_fused_sdpa(ctx, q, &k, VT_F16_VALUES(t[5]), 0.125f, mask, out, &o);
}

/* Which of a format's tensors are [B,H,S,...] views (the rest: tables). */
typedef struct views_format {
    const char *name;
    views_call call;
    void (*build)(views_case *c, vq_rng *rng);
    unsigned viewable;  /* bit i: t[i] has a [B,H,S,...] leading shape */
    bool mask;
} views_format;

static void build_f16(views_case *c, vq_rng *rng)
{
    vt_fill_normal(add(c, VT_F16, VT_DIMS(B, HKV, SKV, D)), rng, 0.0, 1.0);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV, D)), rng, 0.0, 1.0);
}

static void build_kivi(views_case *c, vq_rng *rng)
{
    const int64_t GK = (SKV + G - 1) / G;
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D / 4)), rng, 0, 255);
    vt_fill_normal(add(c, VT_F16, VT_DIMS(B, HKV, GK, D)), rng, 0.3, 0.1);
    vt_fill_normal(add(c, VT_F16, VT_DIMS(B, HKV, GK, D)), rng, 0.0, 1.0);
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D / 4)), rng, 0, 255);
    vt_fill_normal(add(c, VT_F16, VT_DIMS(B, HKV, SKV, D / G)), rng, 0.3, 0.1);
    vt_fill_normal(add(c, VT_F16, VT_DIMS(B, HKV, SKV, D / G)), rng, 0.0, 1.0);
}

static void build_rabitq(views_case *c, vq_rng *rng)
{
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D / 8)), rng, 0, 255);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 1.0, 0.1);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 0.0, 0.5);
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D / 2)), rng, 0, 255);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(16)), rng, 0.0, 1.0);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HQ, SQ)), rng, 0.02, 0.005);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 1.0, 0.2);
}

static void build_turbo_turbo(views_case *c, vq_rng *rng)
{
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D)), rng, 0, 7);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 1.0, 0.1);
    vt_fill_uniform_int(add(c, VT_U32, VT_DIMS(B, HKV, SKV, D * 4 / 32)), rng, 0, 0xFFFFFFFFLL);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 1.0, 0.1);
}

static void build_rvq_kivi(views_case *c, vq_rng *rng)
{
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D)), rng, 0, 3);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 1.0, 0.1);
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D)), rng, 0, 3);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 0.3, 0.05);
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D / 2)), rng, 0, 255);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV, D / G)), rng, 0.1, 0.02);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV, D / G)), rng, 0.0, 1.0);
}

static void build_qjl_codebook(views_case *c, vq_rng *rng)
{
    vt_fill_uniform_int(add(c, VT_U32, VT_DIMS(B, HKV, SKV, 4)), rng, 0, 0xFFFFFFFFLL);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 8.0, 1.0);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(128, D)), rng, 0.0, 1.0);
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, D)), rng, 0, 15);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(16)), rng, 0.0, 1.0);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV)), rng, 1.0, 0.2);
}

static void build_vecinfer(views_case *c, vq_rng *rng)
{
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, 16)), rng, 0, 31);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(16, 32, D / 16)), rng, 0.0, 1.0);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(D)), rng, 1.0, 0.1);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV, D)), rng, 0.0, 1.0);
}

static void build_commvq(views_case *c, vq_rng *rng)
{
    vt_fill_uniform_int(add(c, VT_U8, VT_DIMS(B, HKV, SKV, 4)), rng, 0, 15);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(4, 16, D)), rng, 0.0, 1.0);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(64, D / 2)), rng, 0.0, 0.7);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(64, D / 2)), rng, 0.0, 0.7);
    vt_fill_uniform_int(add(c, VT_I32, VT_DIMS(B, SKV)), rng, 0, 63);
    vt_fill_normal(add(c, VT_F32, VT_DIMS(B, HKV, SKV, D)), rng, 0.0, 1.0);
}

static const views_format formats[] = {
    {"plain f16 keys + f32 values", call_f16_sdpa, build_f16, 0x3, true},
    {"KIVI 2-bit (scalar_fused_decode_attend)", call_kivi, build_kivi, 0x3F, false},
    {"RaBitQ Hamming (rabitq_fused_attend)", call_rabitq, build_rabitq, 0x4F, false},
    {"TurboQuant keys + TurboQuant values", call_turbo_turbo, build_turbo_turbo, 0xF, true},
    {"RVQ keys + KIVI 4-bit values", call_rvq_kivi, build_rvq_kivi, 0x7F, true},
    {"QJL keys + codebook values", call_qjl_codebook, build_qjl_codebook, 0x2B, false},
    {"VECINFER keys + plain values", call_vecinfer, build_vecinfer, 0x9, false},
    {"CommVQ keys + plain values", call_commvq, build_commvq, 0x21, false},
};

/* The rabitq q_scale (t[5]) is [B,Hq,Sq] and the CommVQ positions [B,Skv]:
 * rank 3 and 2 views take mode 1 only, and rank 2 keeps its compact form. */
static int view_mode(const DLTensor *t, int mode) { return t->ndim == 4 ? mode : t->ndim == 3 ? 1 : 0; }

static void test_views_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 71);
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++)
        for (int mode = 1; mode <= 2; mode++) {
            const views_format *fm = &formats[f];
            views_case c = {0};
            fm->build(&c, &rng);
            c.q = vt_new(VT_F32, VT_DIMS(B, HQ, SQ, D));
            vt_fill_normal(c.q, &rng, 0.0, 1.0);
            if (fm->mask) {
                c.mask = vt_new(VT_F32, VT_DIMS(B, HQ, SQ, SKV));
                vt_fill_normal(c.mask, &rng, 0.0, 1.0);
            }
            c.out = vt_new(VT_F32, VT_DIMS(B, HQ, SQ, D));
            c.lse = vt_new(VT_F32, VT_DIMS(B, HQ, SQ));
            VT_OK(ctx, fm->call(ctx, c.t, c.q, c.mask, c.out, c.lse));

            strided sv[8], sq, sm, so, sl;
            DLTensor *tv[8];
            for (int i = 0; i < c.n; i++)
                tv[i] = ((fm->viewable >> i) & 1) && view_mode(c.t[i], mode) ? strided_copy(c.t[i], view_mode(c.t[i], mode), &sv[i])
                                                                           : c.t[i];
            DLTensor *q = strided_copy(c.q, mode, &sq), *mask = c.mask ? strided_copy(c.mask, 1, &sm) : NULL;
            DLTensor *out = strided_copy(c.out, mode, &so), *lse = strided_copy(c.lse, 1, &sl);
            vt_poison(so.big);
            vt_poison(sl.big);
            VT_OK(ctx, fm->call(ctx, tv, q, mask, out, lse));
            DLTensor *o2 = vt_like(c.out, VT_F32), *l2 = vt_like(c.lse, VT_F32);
            gather(out, o2);
            gather(lse, l2);
            double *ro = malloc(sizeof(double) * (size_t)vt_numel(c.out)), *rl = malloc(sizeof(double) * (size_t)vt_numel(c.lse));
            for (int64_t e = 0; e < vt_numel(c.out); e++) ro[e] = vt_get(c.out, e);
            for (int64_t e = 0; e < vt_numel(c.lse); e++) rl[e] = vt_get(c.lse, e);
            /* the same arithmetic, up to the order of a few sums (strided
             * rows take per-token paths) */
            VT_CHECK(vt_rel_l2(o2, ro) <= 1e-5 && vt_count_poisoned(o2) == 0, "%s %s mode %d: out rel err %.3g", isa,
                     fm->name, mode, vt_rel_l2(o2, ro));
            VT_CHECK(vt_max_abs(l2, rl) <= 1e-4, "%s %s mode %d: lse max err %.3g", isa, fm->name, mode,
                     vt_max_abs(l2, rl));
            free(ro);
            free(rl);
            vt_free(o2);
            vt_free(l2);
            for (int i = 0; i < c.n; i++)
                if (tv[i] != c.t[i]) vt_free(sv[i].big);
            vt_free(sq.big);
            if (mask) vt_free(sm.big);
            vt_free(so.big);
            vt_free(sl.big);
            free_case(&c);
        }
}

static void test_views(void) { vt_for_each_isa(2, test_views_on); }

/* ---- lse and merge ---- */

/* float64 log-sum-exp of row (b, h, i), causal over the last Sq tokens */
static double ref_lse(const ref_f16_arg *a, int64_t b, int64_t h, int64_t i, bool causal)
{
    const int64_t lim = causal ? a->d.Skv - a->d.Sq + i + 1 : a->d.Skv;
    double mx = -INFINITY, sum = 0.0;
    for (int64_t t = 0; t < lim; t++) mx = fmax(mx, ref_f16_score(a, b, h, i, t));
    for (int64_t t = 0; t < lim; t++) sum += exp(ref_f16_score(a, b, h, i, t) - mx);
    return lim > 0 ? mx + log(sum) : -INFINITY;
}

/* A view of tokens [t0, t0 + n) of k [B,H,S,D] (a byte_offset and strides). */
static DLTensor token_slice(const DLTensor *k, int64_t t0, int64_t n, int64_t shape[4], int64_t strides[4])
{
    DLTensor v = *k;
    for (int i = 0; i < 4; i++) shape[i] = k->shape[i];
    shape[2] = n;
    strides[3] = 1;
    strides[2] = k->shape[3];
    strides[1] = k->shape[2] * k->shape[3];
    strides[0] = k->shape[1] * strides[1];
    v.shape = shape;
    v.strides = strides;
    v.byte_offset = (uint64_t)(t0 * k->shape[3]) * (k->dtype.bits / 8);
    return v;
}

static void test_lse_merge_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    const ref_dims d = {2, 6, 3, 2, 97, 64};
    DLTensor *q = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq, d.D)), *k = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv, d.D));
    DLTensor *v = vt_new(VT_F16, VT_DIMS(d.B, d.Hkv, d.Skv, d.D));
    vt_fill_normal(q, &rng, 0.0, 1.0);
    vt_fill_keys(k, &rng, 2, 3.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);
    const ref_f16_arg arg = {q, k, d, (double)0.125f};
    DLTensor *full = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq, d.D)), *lfull = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq));
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = k};
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 0.125f, NULL, full, &(vq_attend_opts){.lse_out = lfull}));
    double worst = 0.0;
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t h = 0; h < d.Hq; h++)
            for (int64_t i = 0; i < d.Sq; i++)
                worst = fmax(worst, fabs(vt_get(lfull, (b * d.Hq + h) * d.Sq + i) - ref_lse(&arg, b, h, i, false)));
    /* f32 scores of |s| ~ 10: a few ulps of the largest term */
    VT_CHECK(worst <= 2e-5 * 16, "%s: lse differs from float64 by %.3g", isa, worst);

    /* tokens [0, 40) and [40, 97) apart (views into the same buffers), then merged */
    const int64_t cut = 40;
    int64_t sh[4][4], st[4][4];
    DLTensor ka = token_slice(k, 0, cut, sh[0], st[0]), kb = token_slice(k, cut, d.Skv - cut, sh[1], st[1]);
    DLTensor va = token_slice(v, 0, cut, sh[2], st[2]), vb = token_slice(v, cut, d.Skv - cut, sh[3], st[3]);
    DLTensor *oa = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq, d.D)), *ob = vt_new(VT_F16, VT_DIMS(d.B, d.Hq, d.Sq, d.D));
    DLTensor *la = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq)), *lb = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq));
    const vq_encoded_keys eka = {.format = VQ_KEYS_F16, .f16.keys = &ka}, ekb = {.format = VQ_KEYS_F16, .f16.keys = &kb};
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &eka, VT_F16_VALUES(&va), 0.125f, NULL, oa, &(vq_attend_opts){.lse_out = la}));
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &ekb, VT_F16_VALUES(&vb), 0.125f, NULL, ob, &(vq_attend_opts){.lse_out = lb}));
    DLTensor *lm = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq));
    VT_OK(ctx, vq_attention_merge(ctx, oa, la, ob, lb, oa, lm)); /* in place into out_a */
    double *rf = malloc(sizeof(double) * (size_t)vt_numel(full)), *rl = malloc(sizeof(double) * (size_t)vt_numel(lfull));
    for (int64_t e = 0; e < vt_numel(full); e++) rf[e] = vt_get(full, e);
    for (int64_t e = 0; e < vt_numel(lfull); e++) rl[e] = vt_get(lfull, e);
    /* ob is f16: its rounding (2^-11 relative) dominates */
    VT_CHECK(vt_rel_l2(oa, rf) <= 2e-3, "%s: merged halves vs whole: rel err %.3g", isa, vt_rel_l2(oa, rf));
    VT_CHECK(vt_max_abs(lm, rl) <= 1e-4, "%s: merged lse vs whole: %.3g", isa, vt_max_abs(lm, rl));

    /* a side that saw nothing (lse -inf) contributes nothing; both: out 0, lse -inf */
    for (int64_t e = 0; e < vt_numel(lb); e++) vt_set(lb, e, -INFINITY);
    DLTensor *om = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq, d.D));
    VT_OK(ctx, vq_attention_merge(ctx, full, lfull, ob, lb, om, NULL));
    VT_CHECK(vt_max_abs(om, rf) == 0.0, "%s: merging an empty side changed the result", isa);
    VT_OK(ctx, vq_attention_merge(ctx, ob, lb, ob, lb, om, lm));
    VT_CHECK(vt_get(om, 0) == 0.0 && vt_get(lm, 0) == -INFINITY, "%s: two empty sides: out 0, lse -inf", isa);

    /* errors name the argument and write nothing */
    DLTensor *bad = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq + 1));
    void *snap = vt_snapshot(om);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'lse_b'", vq_attention_merge(ctx, full, lfull, ob, bad, om, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'lse_a'", vq_attention_merge(ctx, full, NULL, ob, lb, om, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_attention_merge(ctx, full, lfull, ob, lb, lb, NULL));
    VT_CHECK(vt_unchanged(om, snap), "%s: a failed merge wrote its output", isa);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "opts->lse_out",
             vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 0.125f, NULL, full, &(vq_attend_opts){.lse_out = bad}));
    free(snap);
    free(rf);
    free(rl);
    vt_free(bad);
    vt_free(om);
    vt_free(lm);
    vt_free(oa);
    vt_free(ob);
    vt_free(la);
    vt_free(lb);
    vt_free(full);
    vt_free(lfull);
    vt_free(q);
    vt_free(k);
    vt_free(v);
}

static void test_lse_merge(void) { vt_for_each_isa(2, test_lse_merge_on); }

/* ---- every value format against float64 over the library's dequantized values ---- */

static void check_values(vq_ctx *ctx, const char *isa, const char *what, const vq_encoded_values *ev,
                         const DLTensor *vhat, const DLTensor *q, const DLTensor *k, const ref_dims *d, bool causal)
{
    const int64_t nv = vt_numel(vhat);
    double *vh = malloc(sizeof(double) * (size_t)nv), *ref = malloc(sizeof(double) * (size_t)(d->B * d->Hq * d->Sq * d->D));
    for (int64_t e = 0; e < nv; e++) vh[e] = vt_get(vhat, e);
    const ref_f16_arg arg = {q, k, *d, (double)0.125f};
    ref_attention(d, ref_f16_score, &arg, vh, NULL, 0, 0, causal, ref);
    DLTensor *out = vt_new(VT_F32, VT_DIMS(d->B, d->Hq, d->Sq, d->D));
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = k};
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &ek, ev, 0.125f, NULL, out, &(vq_attend_opts){.causal = causal}));
    /* f32 accumulation over Skv tokens of values of size ~1 */
    VT_CHECK(vt_rel_l2(out, ref) <= 1e-5 && vt_count_poisoned(out) == 0, "%s %s: rel err %.3g", isa, what,
             vt_rel_l2(out, ref));
    vt_free(out);
    free(vh);
    free(ref);
}

static void test_value_formats_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 9);
    const ref_dims d = {1, 8, 2, 5, 77, 128};
    DLTensor *q = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq, d.D)), *k = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv, d.D));
    DLTensor *v = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv, d.D)), *vhat = vt_like(v, VT_F32);
    vt_fill_normal(q, &rng, 0.0, 1.0);
    vt_fill_keys(k, &rng, 2, 3.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);

    for (int bits = 2; bits <= 4; bits += 2) { /* KIVI per-token values, f16 and f32 parameters */
        DLTensor *codes = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D * bits / 8));
        DLTensor *sc = vt_new(bits == 2 ? VT_F16 : VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv, d.D / 32)), *ze = vt_like(sc, sc->dtype);
        VT_OK(ctx, vq_kivi_quantize_values(ctx, v, bits, 32, codes, sc, ze));
        VT_OK(ctx, vq_kivi_dequantize_values(ctx, codes, sc, ze, bits, 32, vhat));
        const vq_encoded_values ev = {.format = VQ_VALUES_KIVI, .kivi = {codes, sc, ze, bits, 32}};
        check_values(ctx, isa, bits == 2 ? "KIVI 2-bit values" : "KIVI 4-bit values", &ev, vhat, q, k, &d, true);
        vt_free(codes);
        vt_free(sc);
        vt_free(ze);
    }
    for (int bits = 2; bits <= 4; bits++) { /* TurboQuant values, u8 and packed u32 codes, a random diagonal */
        DLTensor *idx = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D)), *sc = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv));
        DLTensor *diag = vt_new(VT_F32, VT_DIMS(d.D));
        vt_fill_signs(diag, &rng);
        VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, v, diag, bits, idx, sc, NULL));
        VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, sc, diag, bits, vhat));
        DLTensor *packed = vt_new(VT_U32, VT_DIMS(d.B, d.Hkv, d.Skv, (d.D * bits + 31) / 32));
        VT_OK(ctx, vq_bit_pack(ctx, idx, bits, packed));
        const vq_encoded_values e8 = {.format = VQ_VALUES_TURBO, .turbo = {idx, sc, diag, bits}};
        const vq_encoded_values e32 = {.format = VQ_VALUES_TURBO, .turbo = {packed, sc, diag, bits}};
        check_values(ctx, isa, "TurboQuant values (u8)", &e8, vhat, q, k, &d, bits == 3);
        check_values(ctx, isa, "TurboQuant values (u32 packed)", &e32, vhat, q, k, &d, false);
        /* f16 scales: the same attention as f32 scales holding the f16-rounded values */
        DLTensor *sc16 = vt_like(sc, VT_F16);
        for (int64_t e = 0; e < vt_numel(sc); e++) {
            vt_set(sc16, e, vt_get(sc, e));
            vt_set(sc, e, vt_get(sc16, e));
        }
        VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, idx, sc, diag, bits, vhat));
        const vq_encoded_values e16 = {.format = VQ_VALUES_TURBO, .turbo = {packed, sc16, diag, bits}};
        check_values(ctx, isa, "TurboQuant values (f16 scales)", &e16, vhat, q, k, &d, bits == 2);
        vt_free(sc16);
        vt_free(idx);
        vt_free(sc);
        vt_free(diag);
        vt_free(packed);
    }
    { /* codebook values: 16 centroids, nibble-packed and one per byte, with and without a scale */
        DLTensor *idx = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D)), *cents = vt_new(VT_F32, VT_DIMS(16));
        DLTensor *packed = vt_new(VT_U8, VT_DIMS(d.B, d.Hkv, d.Skv, d.D / 2)), *sc = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv));
        vt_fill_uniform_int(idx, &rng, 0, 15);
        vt_fill_normal(cents, &rng, 0.0, 1.0);
        vt_fill_normal(sc, &rng, 1.0, 0.3);
        VT_OK(ctx, vq_rabitq_pack_values(ctx, idx, packed));
        for (int with_scale = 0; with_scale <= 1; with_scale++) {
            for (int64_t e = 0; e < vt_numel(vhat); e++)
                vt_set(vhat, e, vt_get(cents, (int64_t)vt_get(idx, e)) * (with_scale ? vt_get(sc, e / d.D) : 1.0));
            const vq_encoded_values eu = {.format = VQ_VALUES_CODEBOOK, .codebook = {idx, cents, with_scale ? sc : NULL}};
            const vq_encoded_values ep = {.format = VQ_VALUES_CODEBOOK, .codebook = {packed, cents, with_scale ? sc : NULL}};
            check_values(ctx, isa, "codebook values (bytes)", &eu, vhat, q, k, &d, true);
            check_values(ctx, isa, "codebook values (nibbles)", &ep, vhat, q, k, &d, false);
        }
        vt_free(idx);
        vt_free(cents);
        vt_free(packed);
        vt_free(sc);
    }
    /* errors name the member */
    DLTensor *out = vt_new(VT_F32, VT_DIMS(d.B, d.Hq, d.Sq, d.D));
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = k};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "values.kivi.bits",
             vq_fused_sdpa(ctx, q, &ek, &(vq_encoded_values){.format = VQ_VALUES_KIVI, .kivi = {v, v, v, 3, 32}},
                           0.125f, NULL, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "values.turbo.idx",
             vq_fused_sdpa(ctx, q, &ek, &(vq_encoded_values){.format = VQ_VALUES_TURBO, .turbo = {v, v, NULL, 3}},
                           0.125f, NULL, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "unknown format",
             vq_fused_sdpa(ctx, q, &ek, &(vq_encoded_values){.format = (vq_values_format)9}, 0.125f, NULL, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'values' is NULL", vq_fused_sdpa(ctx, q, &ek, NULL, 0.125f, NULL, out, NULL));
    vt_free(out);
    vt_free(q);
    vt_free(k);
    vt_free(v);
    vt_free(vhat);
}

static void test_value_formats(void) { vt_for_each_isa(2, test_value_formats_on); }

/* ---- segmented kv axis (internal): pages + a residual of another kind ---- */

static void test_segments_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 13);
    /* batch row 0: pages of 32 + 64 tokens + an f16 residual of 7; row 1: one page of 32 + residual 1 */
    enum { P = 32, CAP = 96 };
    const int64_t Hq = 4, Hkv = 2, Sq = 2, Dd = 64, lens[2] = {103, 33};
    DLTensor *k = vt_new(VT_F32, VT_DIMS(2, Hkv, CAP, Dd)), *v = vt_new(VT_F32, VT_DIMS(2, Hkv, CAP, Dd));
    DLTensor *kr = vt_new(VT_F16, VT_DIMS(2, Hkv, 7, Dd)), *vr = vt_new(VT_F16, VT_DIMS(2, Hkv, 7, Dd));
    DLTensor *q = vt_new(VT_F32, VT_DIMS(2, Hq, Sq, Dd));
    vt_fill_keys(k, &rng, 2, 3.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);
    vt_fill_keys(kr, &rng, 2, 3.0);
    vt_fill_normal(vr, &rng, 0.0, 1.0);
    vt_fill_normal(q, &rng, 0.0, 1.0);
    /* the reference: each row's tokens made contiguous (f16 residual as f32) */
    DLTensor *out = vt_new(VT_F32, VT_DIMS(2, Hq, Sq, Dd)), *lse = vt_new(VT_F32, VT_DIMS(2, Hq, Sq));
    double *ref = malloc(sizeof(double) * (size_t)vt_numel(out));
    for (int64_t b = 0; b < 2; b++) {
        const int64_t paged = b == 0 ? 96 : 32, res = lens[b] - paged;
        DLTensor *kc = vt_new(VT_F32, VT_DIMS(1, Hkv, lens[b], Dd)), *vc = vt_new(VT_F32, VT_DIMS(1, Hkv, lens[b], Dd));
        DLTensor *qb = vt_new(VT_F32, VT_DIMS(1, Hq, Sq, Dd)), *ob = vt_new(VT_F32, VT_DIMS(1, Hq, Sq, Dd));
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t t = 0; t < lens[b]; t++)
                for (int64_t c = 0; c < Dd; c++) {
                    const int64_t dst = (h * lens[b] + t) * Dd + c;
                    const bool r = t >= paged;
                    vt_set(kc, dst, r ? vt_get(kr, ((b * Hkv + h) * 7 + t - paged) * Dd + c) : vt_get(k, ((b * Hkv + h) * CAP + t) * Dd + c));
                    vt_set(vc, dst, r ? vt_get(vr, ((b * Hkv + h) * 7 + t - paged) * Dd + c) : vt_get(v, ((b * Hkv + h) * CAP + t) * Dd + c));
                }
        (void)res;
        for (int64_t e = 0; e < vt_numel(qb); e++) vt_set(qb, e, vt_get(q, b * vt_numel(qb) + e));
        const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = kc};
        VT_OK(ctx, vq_fused_sdpa(ctx, qb, &ek, VT_F16_VALUES(vc), 0.125f, NULL, ob, &(vq_attend_opts){.causal = true}));
        for (int64_t e = 0; e < vt_numel(ob); e++) ref[b * vt_numel(ob) + e] = vt_get(ob, e);
        vt_free(kc);
        vt_free(vc);
        vt_free(qb);
        vt_free(ob);
    }
    /* bind the pages (views of k/v at token offsets) and the residuals */
    vq_attn_keys kb[5];
    vq_attn_values vb[5];
    DLTensor views[5][2];
    int64_t shapes[5][2][4], strides[5][2][4];
    const struct { int64_t b, t0, n; bool residual; } segs[5] = {{0, 0, 32, 0}, {0, 32, 64, 0}, {0, 0, 7, 1}, {1, 0, 32, 0}, {1, 0, 1, 1}};
    vq_attn_segment sg[5];
    for (int s = 0; s < 5; s++) {
        const DLTensor *kk = segs[s].residual ? kr : k, *vv = segs[s].residual ? vr : v;
        for (int w = 0; w < 2; w++) {
            const DLTensor *src = w ? vv : kk;
            views[s][w] = token_slice(src, segs[s].t0, segs[s].n, shapes[s][w], strides[s][w]);
            views[s][w].byte_offset += (uint64_t)(segs[s].b * src->shape[1] * src->shape[2] * Dd) * (src->dtype.bits / 8);
            shapes[s][w][0] = 1;
        }
        const vq_attn_dims dims = {1, Hq, Hkv, Sq, segs[s].n, Dd};
        const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = &views[s][0]};
        VT_OK(ctx, vq_attn_bind_keys(ctx, &ek, &dims, 0.125f, &kb[s]));
        VT_OK(ctx, vq_attn_bind_values(ctx, VT_F16_VALUES(&views[s][1]), &dims, &vb[s]));
        sg[s] = (vq_attn_segment){&kb[s], &vb[s], 0, segs[s].n, segs[s].residual ? 1 : 0};
    }
    const int64_t off[3] = {0, 3, 5}, skv[2] = {lens[0], lens[1]};
    const vq_attn_dims dims = {2, Hq, Hkv, Sq, lens[0], Dd};
    for (int splits = 0; splits <= 3; splits += 3) {
        vq_attn_view lv = vq_attn_view_of(lse);
        vq_attn_problem p;
        vq_attn_problem_init(&p, &dims, q, out, &lv);
        p.causal = true;
        p.num_splits = splits;
        p.segs = sg;
        p.seg_off = off;
        p.skv = skv;
        p.kinds[0] = (vq_attn_kind){&kb[0], &vb[0]};
        p.kinds[1] = (vq_attn_kind){&kb[2], &vb[2]};
        p.n_kinds = 2;
        vt_poison(out);
        VT_OK(ctx, vq_attn_run(ctx, &p));
        VT_CHECK(vt_rel_l2(out, ref) <= 1e-5 && vt_count_poisoned(out) == 0, "%s: segments (splits %d) vs contiguous: %.3g",
                 isa, splits, vt_rel_l2(out, ref));
    }
    free(ref);
    vt_free(out);
    vt_free(lse);
    vt_free(q);
    vt_free(k);
    vt_free(v);
    vt_free(kr);
    vt_free(vr);
}

static void test_segments(void) { vt_for_each_isa(2, test_segments_on); }

/* ---- a caller-provided workspace ---- */

static void test_workspace(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 21);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(1, 8, 1, 128)), *k = vt_new(VT_F16, VT_DIMS(1, 2, 300, 128));
    DLTensor *v = vt_new(VT_F16, VT_DIMS(1, 2, 300, 128)), *out = vt_new(VT_F32, VT_DIMS(1, 8, 1, 128));
    vt_fill_normal(q, &rng, 0.0, 1.0);
    vt_fill_normal(k, &rng, 0.0, 1.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = k};
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 0.125f, NULL, out, NULL));
    const size_t peak = vq_ctx_workspace_peak(ctx);
    VT_CHECK(peak > 0, "a call through the skeleton asked for no scratch");
    DLTensor *ref = vt_like(out, VT_F32);
    memcpy(ref->data, out->data, vt_bytes(out));
    /* too small: out of memory, the output untouched, the needed size named */
    void *small = aligned_alloc(64, 64);
    VT_OK(ctx, vq_ctx_set_workspace(ctx, small, 64));
    vt_poison(out);
    void *snap = vt_snapshot(out);
    VT_FAILS(ctx, VQ_ERR_OUT_OF_MEMORY, "vq_ctx_set_workspace", vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 0.125f, NULL, out, NULL));
    VT_CHECK(vt_unchanged(out, snap), "a call without enough workspace wrote its output");
    /* the peak size: the same result, and the workspace is what was used */
    void *mem = aligned_alloc(64, (peak + 63) & ~(size_t)63);
    VT_OK(ctx, vq_ctx_set_workspace(ctx, mem, peak));
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 0.125f, NULL, out, NULL));
    VT_CHECK(memcmp(out->data, ref->data, vt_bytes(out)) == 0, "the workspace changed the result");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "64-byte aligned", vq_ctx_set_workspace(ctx, (char *)mem + 8, 100));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'mem' is NULL", vq_ctx_set_workspace(ctx, NULL, 100));
    VT_OK(ctx, vq_ctx_set_workspace(ctx, NULL, 0)); /* back to the ctx's own scratch */
    VT_OK(ctx, vq_fused_sdpa(ctx, q, &ek, VT_F16_VALUES(v), 0.125f, NULL, out, NULL));
    vq_ctx_free(ctx); /* frees none of the caller's memory */
    free(small);
    free(mem);
    free(snap);
    vt_free(q);
    vt_free(k);
    vt_free(v);
    vt_free(out);
    vt_free(ref);
}

int main(void)
{
    VT_RUN(test_views);
    VT_RUN(test_lse_merge);
    VT_RUN(test_value_formats);
    VT_RUN(test_segments);
    VT_RUN(test_workspace);
    return vt_finish();
}
