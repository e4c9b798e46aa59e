/* cache_ref.h — the float64 reference of a cache layer: the keys and values
 * a sequence's tokens decode to under the layer's methods (the public
 * encoders and decoders run on the same f16 tokens; the encoded prefix is
 * [0, f(n)) as the header defines it, the rest f16), and the score of a query
 * against each token. Plain loops in float64 where the library has no
 * decoder (RaBitQ Hamming, QJL, CODEBOOK values). */
#ifndef VQ_TEST_CACHE_REF_H
#define VQ_TEST_CACHE_REF_H

#include "cache/cache_internal.h"
#include "cache_test_util.h"

typedef enum { REF_DOT = 0, REF_HAMMING = 1, REF_QJL = 2 } ref_kind;

typedef struct ref_layer {
    int64_t Hkv, n, D, n_enc;
    ref_kind kind;
    double *khat, *vhat;  /* [Hkv][n][D] */
    uint8_t *bits;        /* HAMMING: [Hkv][n][D/8] signs; QJL: u32 words as bytes [Hkv][n][4W] */
    double *mag;          /* HAMMING: k_mag; QJL: ||k|| [Hkv][n] */
    const float *diag;    /* HAMMING: key signs */
    const float *proj;    /* QJL: [m][D] */
    int m;
} ref_layer;

static int64_t ref_n_enc(const vq_cache_layer *L, int R, int64_t n)
{
    if (L->res_cap == 0) return n;
    const int64_t e = (n - R) / L->g * L->g;
    return n - R < 0 ? 0 : e;
}

/* A compact f16 copy [1,Hkv,n,D] of tokens [0, n) of sequence s of x. */
static DLTensor *ref_tokens(const ct_store *st, const DLTensor *x, int64_t s, int64_t n)
{
    DLTensor *t = vt_new(VT_F16, VT_DIMS(1, st->Hkv, n, st->D));
    for (int64_t h = 0; h < st->Hkv; h++)
        memcpy((uint16_t *)t->data + h * n * st->D, (const uint16_t *)x->data + ((s * st->Hkv + h) * st->N) * st->D,
               (size_t)(n * st->D) * 2);
    return t;
}

static DLTensor *ref_table(const vq_cache_table *tb)
{
    DLTensor *t = vt_new(VT_F32, tb->ndim, tb->shape);
    memcpy(t->data, tb->host, sizeof(float) * (size_t)vt_numel(t));
    return t;
}

/* Decoded [Hkv][ne][D] (as the test tensor x_hat [1,Hkv,ne,D]) -> r->khat or vhat rows. */
static void ref_put(const ref_layer *r, double *dst, const DLTensor *xh, int64_t ne)
{
    for (int64_t h = 0; h < r->Hkv; h++)
        for (int64_t t = 0; t < ne; t++)
            for (int64_t c = 0; c < r->D; c++)
                dst[(h * r->n + t) * r->D + c] = vt_get(xh, (h * ne + t) * r->D + c);
}

static void ref_keys(vq_ctx *ctx, const vq_cache_layer *L, ref_layer *r, const DLTensor *kt, const DLTensor *pos)
{
    const vq_key_config *k = &L->cfg.keys;
    const int64_t Hkv = r->Hkv, ne = r->n_enc, D = r->D;
    if (ne == 0) return;
    DLTensor *x = vt_new(VT_F16, VT_DIMS(1, Hkv, ne, D));
    for (int64_t h = 0; h < Hkv; h++)
        memcpy((uint16_t *)x->data + h * ne * D, (const uint16_t *)kt->data + h * r->n * D, (size_t)(ne * D) * 2);
    DLTensor *xh = vt_new(VT_F32, VT_DIMS(1, Hkv, ne, D));
    switch (k->method) {
    case VQ_KEY_F16:
        for (int64_t i = 0; i < vt_numel(x); i++) vt_set(xh, i, vt_get(x, i));
        break;
    case VQ_KEY_KIVI: {
        DLTensor *codes = vt_new(VT_U8, VT_DIMS(1, Hkv, ne, D * k->bits / 8));
        DLTensor *sc = vt_new(VT_F16, VT_DIMS(1, Hkv, ne / k->group_size, D)), *z = vt_like(sc, VT_F16);
        VT_OK(ctx, vq_kivi_quantize_keys(ctx, x, k->bits, k->group_size, codes, sc, z));
        VT_OK(ctx, vq_kivi_dequantize_keys(ctx, codes, sc, z, k->bits, k->group_size, xh));
        vt_free(codes), vt_free(sc), vt_free(z);
        break;
    }
    case VQ_KEY_KIVI_MIX: /* plain loops, as the header states the format */
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t g0 = 0; g0 < ne; g0 += k->group_size) {
                float mn[256], mx[256];
                int wide[256];
                for (int64_t c = 0; c < D; c++) {
                    mn[c] = mx[c] = (float)vt_get(x, (h * ne + g0) * D + c);
                    for (int64_t t = g0; t < g0 + k->group_size; t++) {
                        const float v = (float)vt_get(x, (h * ne + t) * D + c);
                        mn[c] = v < mn[c] ? v : mn[c];
                        mx[c] = v > mx[c] ? v : mx[c];
                    }
                }
                /* wide: the W widest ranges (W = wide_channels, 0 = D/2), ties to the lower channel */
                const int64_t nw = k->wide_channels ? k->wide_channels : D / 2;
                for (int64_t c = 0; c < D; c++) {
                    int64_t above = 0;
                    for (int64_t o = 0; o < D; o++)
                        above += (mx[o] - mn[o]) > (mx[c] - mn[c]) || ((mx[o] - mn[o]) == (mx[c] - mn[c]) && o < c);
                    wide[c] = above < nw;
                }
                for (int64_t c = 0; c < D; c++) {
                    const float maxq = (float)((1 << (wide[c] ? k->bits2 : k->bits)) - 1);
                    const float sc = vq_f16_to_f32(vq_f32_to_f16(mx[c] > mn[c] ? (mx[c] - mn[c]) / maxq : 0.0f));
                    const float z = vq_f16_to_f32(vq_f32_to_f16(mn[c]));
                    for (int64_t t = g0; t < g0 + k->group_size; t++) {
                        float q = ((float)vt_get(x, (h * ne + t) * D + c) - z) / sc;
                        q = q > 0.0f ? q : 0.0f;
                        q = q < maxq ? q : maxq;
                        const double code = sc != 0.0f ? nearbyint((double)q) : 0.0;
                        ((float *)xh->data)[(h * ne + t) * D + c] = (float)(code * (double)sc + (double)z);
                    }
                }
            }
        break;
    case VQ_KEY_TURBO:
    case VQ_KEY_TURBO_RVQ: {
        DLTensor *diag = ref_table(&L->tables[VQ_CT_KDIAG]);
        DLTensor *i1 = vt_new(VT_U8, VT_DIMS(1, Hkv, ne, D)), *s1 = vt_new(VT_F32, VT_DIMS(1, Hkv, ne));
        DLTensor *i2 = vt_like(i1, VT_U8), *s2 = vt_like(s1, VT_F32);
        if (k->method == VQ_KEY_TURBO) {
            const vq_turboquant_opts o = {.norm_correct = k->norm_correct};
            VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, diag, k->bits, i1, s1, &o));
            VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, i1, s1, diag, k->bits, xh));
        } else {
            VT_OK(ctx, vq_turboquant_rvq_encode(ctx, x, diag, k->bits, k->bits2, i1, s1, i2, s2));
            VT_OK(ctx, vq_turboquant_rvq_decode(ctx, i1, s1, i2, s2, diag, k->bits, k->bits2, xh));
        }
        vt_free(diag), vt_free(i1), vt_free(s1), vt_free(i2), vt_free(s2);
        break;
    }
    case VQ_KEY_RABITQ: {
        DLTensor *diag = ref_table(&L->tables[VQ_CT_KDIAG]);
        DLTensor *bits = vt_new(VT_U8, VT_DIMS(1, Hkv, ne, D / 8)), *mag = vt_new(VT_F32, VT_DIMS(1, Hkv, ne));
        const vq_rabitq_encode_opts o = {.mag = k->rabitq_mag};
        VT_OK(ctx, vq_rabitq_encode(ctx, x, diag, bits, mag, &o));
        /* x_hat = rot^-1(mag * sign) */
        for (int64_t i = 0; i < Hkv * ne * D; i++) {
            const int64_t row = i / D, j = i % D;
            const int b = ((const uint8_t *)bits->data)[row * (D / 8) + j / 8] >> (j % 8) & 1;
            ((float *)xh->data)[i] = b ? ((float *)mag->data)[row] : -((float *)mag->data)[row];
        }
        VT_OK(ctx, vq_hadamard(ctx, xh, diag, true, xh));
        if (k->rabitq_score == VQ_RABITQ_SCORE_HAMMING) {
            r->kind = REF_HAMMING;
            r->bits = malloc((size_t)(Hkv * r->n * D / 8));
            r->mag = malloc(sizeof(double) * (size_t)(Hkv * r->n));
            for (int64_t h = 0; h < Hkv; h++)
                for (int64_t t = 0; t < ne; t++) {
                    memcpy(r->bits + (h * r->n + t) * (D / 8), (const uint8_t *)bits->data + (h * ne + t) * (D / 8),
                           (size_t)D / 8);
                    r->mag[h * r->n + t] = ((const float *)mag->data)[h * ne + t];
                }
            r->diag = L->tables[VQ_CT_KDIAG].host;
        }
        vt_free(diag), vt_free(bits), vt_free(mag);
        break;
    }
    case VQ_KEY_QJL: {
        DLTensor *proj = ref_table(&L->tables[VQ_CT_QJL_PROJ]);
        const int m = k->qjl_sketch, W = (m + 31) / 32;
        DLTensor *bits = vt_new(VT_U32, VT_DIMS(1, Hkv, ne, W));
        VT_OK(ctx, vq_qjl_encode(ctx, x, proj, bits));
        r->kind = REF_QJL;
        r->m = m;
        r->proj = L->tables[VQ_CT_QJL_PROJ].host;
        r->bits = malloc((size_t)(Hkv * r->n * W * 4));
        r->mag = malloc(sizeof(double) * (size_t)(Hkv * r->n));
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t t = 0; t < ne; t++) {
                memcpy(r->bits + (h * r->n + t) * W * 4, (const uint32_t *)bits->data + (h * ne + t) * W,
                       (size_t)W * 4);
                double ss = 0;
                for (int64_t c = 0; c < D; c++) ss += vt_get(x, (h * ne + t) * D + c) * vt_get(x, (h * ne + t) * D + c);
                r->mag[h * r->n + t] = sqrt(ss);
            }
        vt_free(proj), vt_free(bits);
        break;
    }
    case VQ_KEY_VECINFER: {
        DLTensor *cb = ref_table(&L->tables[VQ_CT_CODEBOOK]), *sm = ref_table(&L->tables[VQ_CT_SMOOTH]);
        const int64_t M = vt_numel(cb) / (cb->shape[cb->ndim - 2] * cb->shape[cb->ndim - 1]) /
                          (cb->ndim == 4 ? cb->shape[0] : 1);
        DLTensor *idx = vt_new(cb->shape[cb->ndim - 2] <= 256 ? VT_U8 : VT_U16, VT_DIMS(1, Hkv, ne, M));
        VT_OK(ctx, vq_vecinfer_quantize(ctx, x, cb, sm, (int)M, idx));
        VT_OK(ctx, vq_vecinfer_dequant(ctx, idx, cb, sm, xh));
        vt_free(cb), vt_free(sm), vt_free(idx);
        break;
    }
    case VQ_KEY_COMMVQ: {
        DLTensor *cb = ref_table(&L->tables[VQ_CT_CODEBOOK]);
        DLTensor *cs = ref_table(&L->tables[VQ_CT_COS]), *sn = ref_table(&L->tables[VQ_CT_SIN]);
        DLTensor *idx = vt_new(VT_U16, VT_DIMS(1, Hkv, ne, cb->shape[0]));
        VT_OK(ctx, vq_commvq_encode(ctx, x, cb, idx));
        const vq_commvq_opts o = {.rope = k->rope};
        VT_OK(ctx, vq_commvq_decode(ctx, idx, cb, cs, sn, pos, xh, &o));
        vt_free(cb), vt_free(cs), vt_free(sn), vt_free(idx);
        break;
    }
    }
    ref_put(r, r->khat, xh, ne);
    vt_free(x);
    vt_free(xh);
}

static void ref_values(vq_ctx *ctx, const vq_cache_layer *L, ref_layer *r, const DLTensor *vtk)
{
    const vq_value_config *v = &L->cfg.values;
    const int64_t Hkv = r->Hkv, ne = r->n_enc, D = r->D;
    if (ne == 0) return;
    DLTensor *x = vt_new(VT_F16, VT_DIMS(1, Hkv, ne, D));
    for (int64_t h = 0; h < Hkv; h++)
        memcpy((uint16_t *)x->data + h * ne * D, (const uint16_t *)vtk->data + h * r->n * D, (size_t)(ne * D) * 2);
    DLTensor *xh = vt_new(VT_F32, VT_DIMS(1, Hkv, ne, D));
    switch (v->method) {
    case VQ_VALUE_F16:
        for (int64_t i = 0; i < vt_numel(x); i++) vt_set(xh, i, vt_get(x, i));
        break;
    case VQ_VALUE_KIVI: {
        DLTensor *codes = vt_new(VT_U8, VT_DIMS(1, Hkv, ne, D * v->bits / 8));
        DLTensor *sc = vt_new(VT_F16, VT_DIMS(1, Hkv, ne, D / v->group_size)), *z = vt_like(sc, VT_F16);
        VT_OK(ctx, vq_kivi_quantize_values(ctx, x, v->bits, v->group_size, codes, sc, z));
        VT_OK(ctx, vq_kivi_dequantize_values(ctx, codes, sc, z, v->bits, v->group_size, xh));
        vt_free(codes), vt_free(sc), vt_free(z);
        break;
    }
    case VQ_VALUE_CODEBOOK: {
        DLTensor *cents = ref_table(&L->tables[VQ_CT_VCENTS]);
        DLTensor *xn = vt_new(VT_F32, VT_DIMS(1, Hkv, ne, D)), *idx = vt_new(VT_U8, VT_DIMS(1, Hkv, ne, D));
        float *s = malloc(sizeof(float) * (size_t)(Hkv * ne));
        for (int64_t row = 0; row < Hkv * ne; row++) { /* s = ||v|| / sqrt(D), as the header states */
            double ss = 0;
            for (int64_t c = 0; c < D; c++) ss += vt_get(x, row * D + c) * vt_get(x, row * D + c);
            s[row] = (float)sqrt(ss / (double)D);
            const float inv = s[row] > 0.0f ? 1.0f / s[row] : 0.0f;
            for (int64_t c = 0; c < D; c++) ((float *)xn->data)[row * D + c] = (float)vt_get(x, row * D + c) * inv;
        }
        VT_OK(ctx, vq_codebook_quantize(ctx, xn, cents, idx));
        for (int64_t i = 0; i < vt_numel(xh); i++)
            vt_set(xh, i, (double)((float *)cents->data)[((uint8_t *)idx->data)[i]] * s[i / D]);
        free(s), vt_free(cents), vt_free(xn), vt_free(idx);
        break;
    }
    case VQ_VALUE_TURBO: {
        DLTensor *diag = ref_table(&L->tables[VQ_CT_VDIAG]);
        DLTensor *i1 = vt_new(VT_U8, VT_DIMS(1, Hkv, ne, D)), *s1 = vt_new(VT_F32, VT_DIMS(1, Hkv, ne));
        VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, x, diag, v->bits, i1, s1, NULL));
        if (v->scale_f16) /* the scale as the cache stores it */
            for (int64_t i = 0; i < Hkv * ne; i++) ((float *)s1->data)[i] = vq_f16_to_f32(vq_f32_to_f16(((float *)s1->data)[i]));
        VT_OK(ctx, vq_turboquant_hadamard_dequantize(ctx, i1, s1, diag, v->bits, xh));
        vt_free(diag), vt_free(i1), vt_free(s1);
        break;
    }
    }
    ref_put(r, r->vhat, xh, ne);
    vt_free(x);
    vt_free(xh);
}

/* The reference of layer l for sequence s of st with its first n tokens;
 * pre_k (CommVQ: the pre-RoPE keys, appended) and pos [n] i32 when needed. */
static ref_layer ref_build(vq_ctx *ctx, const vq_cache *c, int l, const ct_store *st, int64_t s, int64_t n,
                           const DLTensor *pos)
{
    const vq_cache_layer *L = &c->layers[l];
    ref_layer r = {.Hkv = st->Hkv, .n = n, .D = st->D, .n_enc = ref_n_enc(L, c->R, n)};
    r.khat = calloc((size_t)(r.Hkv * n * r.D), sizeof(double));
    r.vhat = calloc((size_t)(r.Hkv * n * r.D), sizeof(double));
    DLTensor *kt = ref_tokens(st, st->k, s, n), *vtk = ref_tokens(st, st->v, s, n);
    ref_keys(ctx, L, &r, kt, pos);
    ref_values(ctx, L, &r, vtk);
    for (int64_t h = 0; h < r.Hkv; h++) /* the residual window: f16 */
        for (int64_t t = r.n_enc; t < n; t++)
            for (int64_t c2 = 0; c2 < r.D; c2++) {
                r.khat[(h * n + t) * r.D + c2] = vt_get(kt, (h * n + t) * r.D + c2);
                r.vhat[(h * n + t) * r.D + c2] = vt_get(vtk, (h * n + t) * r.D + c2);
            }
    vt_free(kt);
    vt_free(vtk);
    return r;
}

static void ref_free(ref_layer *r)
{
    free(r->khat), free(r->vhat), free(r->bits), free(r->mag);
}

/* out [Hq][Sq][D] and lse [Hq][Sq] of queries q [Hq][Sq][D] (f32 host rows;
 * qrot: the same rows rotated by the key signs, for Hamming) of one sequence:
 * softmax(scale * score) over its n tokens (causal: query i sees tokens
 * < n - Sq + i + 1). */
static void ref_attend(const ref_layer *r, int64_t Hq, int64_t Sq, const float *q, const float *qrot, double scale,
                       bool causal, double *out, double *lse)
{
    const int64_t G = Hq / r->Hkv, D = r->D, n = r->n;
    double *s = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double *sq = malloc(sizeof(double) * (size_t)(r->m ? r->m : 1));
    for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < Sq; i++) {
            const int64_t hk = h / G, lim = causal ? n - Sq + i + 1 : n;
            const float *qr = q + (h * Sq + i) * D;
            if (r->kind == REF_QJL)
                for (int j = 0; j < r->m; j++) {
                    double a = 0;
                    for (int64_t c = 0; c < D; c++) a += (double)r->proj[j * D + c] * qr[c];
                    sq[j] = a;
                }
            double l1 = 0;
            if (r->kind == REF_HAMMING)
                for (int64_t c = 0; c < D; c++) l1 += fabs((double)qrot[(h * Sq + i) * D + c]);
            double mx = -INFINITY;
            for (int64_t t = 0; t < n; t++) {
                double a = 0;
                if (t >= lim) a = -INFINITY;
                else if (t < r->n_enc && r->kind == REF_HAMMING) {
                    const uint8_t *kb = r->bits + (hk * n + t) * (D / 8);
                    const float *y = qrot + (h * Sq + i) * D;
                    int agree = 0;
                    for (int64_t c = 0; c < D; c++) agree += ((y[c] >= 0.0f) == ((kb[c / 8] >> (c % 8)) & 1));
                    a = scale * (2.0 * agree - (double)D) * (l1 / (double)D) * r->mag[hk * n + t];
                } else if (t < r->n_enc && r->kind == REF_QJL) {
                    const uint32_t *kb = (const uint32_t *)(const void *)(r->bits + (hk * n + t) * ((r->m + 31) / 32) * 4);
                    for (int j = 0; j < r->m; j++) a += (kb[j / 32] >> (j % 32) & 1) ? sq[j] : -sq[j];
                    a *= scale * sqrt(acos(-1.0) / 2.0) / r->m * r->mag[hk * n + t];
                } else {
                    for (int64_t c = 0; c < D; c++) a += (double)qr[c] * r->khat[(hk * n + t) * D + c];
                    a *= scale;
                }
                s[t] = a;
                if (a > mx) mx = a;
            }
            double *o = out + (h * Sq + i) * D;
            for (int64_t c = 0; c < D; c++) o[c] = 0;
            if (mx == -INFINITY) {
                lse[h * Sq + i] = -INFINITY;
                continue;
            }
            double sum = 0;
            for (int64_t t = 0; t < n; t++) sum += (s[t] = exp(s[t] - mx));
            for (int64_t t = 0; t < n; t++)
                for (int64_t c = 0; c < D; c++) o[c] += s[t] / sum * r->vhat[(hk * n + t) * D + c];
            lse[h * Sq + i] = mx + log(sum);
        }
    free(s);
    free(sq);
}

/* Relative L2 error of out [n_out] f32 against ref, and the largest error of
 * lse [n_rows] against rl, |a - b| / (1 + |b|) (a NaN counts as an error). */
static void ref_errors(const float *out, const double *ref, int64_t n_out, const float *lse, const double *rl,
                       int64_t n_rows, double *err, double *lerr)
{
    double num = 0, den = 0;
    *lerr = 0;
    for (int64_t i = 0; i < n_out; i++) {
        num += ((double)out[i] - ref[i]) * ((double)out[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    for (int64_t i = 0; i < n_rows; i++) {
        const double a = lse[i], b = rl[i];
        const double e = (a == b) ? 0 : fabs(a - b) / (1.0 + fabs(b));
        if (!(e <= *lerr)) *lerr = e;
    }
    *err = den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
