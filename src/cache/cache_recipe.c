/* cache_recipe.c — sink tokens and exact transforms (header section 5,
 * "Sinks and transforms"): they wrap the page and window path of a layer.
 *
 * Append: each sequence's tokens are split at its sink boundary; the tokens
 * past it are transformed (f32) into one staging block and appended by the
 * page path (vq_cache_append_tokens) for the sequences that have any; only
 * after that succeeded are the sink rows written and fitted tables kept, so
 * a failure changes nothing. A sequence's sink rows depend only on their
 * positions, so any chunking gives the same sinks, and the page path sees
 * the same tokens in the same order: appending token by token still equals
 * appending all at once.
 *
 * Attend: queries are divided by the key scales (f32), attended by the page
 * path for the rows that see tokens past the sinks (grouped by how many
 * leading rows of a sequence are sink positions, so each group is one
 * causal call), then merged with the sinks in float64 through the
 * log-sum-exp, and the value mean added back.
 *
 * On a CUDA cache the same steps run on the device (src/cuda/cuda_recipe.c):
 * the fits and the sink rows are computed here from downloaded rows (a
 * sequence's first chunk and first S tokens only), everything else there. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cache/cache_tensor.h"
#ifdef VQ_WITH_CUDA
#include "cache/cache_cuda.h"
#endif

size_t vq_cache_sink_bytes(const vq_cache *c) { return (size_t)2 * (size_t)c->Hkv * (size_t)c->S * (size_t)c->D * 2; }

size_t vq_cache_xf_bytes(const vq_cache *c, int l)
{
    return c->layers[l].xf_tables ? (size_t)3 * (size_t)c->Hkv * (size_t)c->D * sizeof(float) : 0;
}

static bool xf_on(const vq_cache_transforms *t) { return t->center_keys || t->center_values || t->smooth; }

/* Whether a sequence of layer L fits some of its tables itself. */
static bool needs_fit(const vq_cache_layer *L)
{
    return (L->xf.center_keys && !L->xf_given[VQ_XF_KEY_MEAN]) ||
           (L->xf.center_values && !L->xf_given[VQ_XF_VALUE_MEAN]) || (L->xf.smooth && !L->xf_given[VQ_XF_KEY_SCALE]);
}

/* Host staging of this file's calls, kept (never the page path's buffers,
 * which the calls in between use). */
static void *recipe_scratch(vq_cache *c, size_t bytes)
{
    if (c->recipe.size >= bytes) return c->recipe.p;
    void *p = realloc(c->recipe.p, bytes);
    if (p == NULL) {
        vq_fail(c->ctx, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of staging", bytes);
        return NULL;
    }
    c->recipe.p = p;
    c->recipe.size = bytes;
    return p;
}

/* ---- create ---- */

static const char *const xf_fields[3] = {"key_mean", "value_mean", "key_scale"};
static const char *const xf_switches[3] = {"center_keys", "center_values", "smooth"};

/* A table (host memory on either backend) checked as vq_check_tensor
 * checks the ctx's own tensors, rank and dtype, strides, data. */
static vq_status check_host(vq_ctx *ctx, const DLTensor *t, const char *name)
{
    char dev[48];
    VQ_RETURN_IF(ctx, t != NULL && t->device.device_type != kDLCPU, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s': tables are host memory (cpu), got %s", name,
                 vq_device_name((int)t->device.device_type, (int)t->device.device_id, dev, sizeof dev));
    DLTensor h = t ? *t : (DLTensor){0};
    if (vq_ctx_is_cuda(ctx)) h.device = (DLDevice){kDLCUDA, ctx->device}; /* the device rule is the one above */
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, t ? &h : NULL, name, VQ_DTM_F32, 2, 2));
    return VQ_OK;
}

static vq_status check_table(vq_ctx *ctx, const DLTensor *t, int l, int i, int Hkv, int D)
{
    char name[80];
    snprintf(name, sizeof name, "cfg->transforms[%d].%s", l, xf_fields[i]);
    VQ_FORWARD_IF_ERROR(check_host(ctx, t, name));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, t, name, 2, (const int64_t[]){Hkv, D}));
    const float *x = vq_data(t);
    const bool scale = i == VQ_XF_KEY_SCALE;
    for (int64_t j = 0; j < (int64_t)Hkv * D; j++)
        VQ_RETURN_IF(ctx, scale ? !(x[j] >= 0x1p-24f && x[j] <= 0x1p24f) : !isfinite(x[j]), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s': element [%lld, %lld] is %g, expected %s", name, (long long)(j / D),
                     (long long)(j % D), (double)x[j], scale ? "a scale in [2^-24, 2^24]" : "a finite value");
    return VQ_OK;
}

static void xf_tables(const vq_cache_transforms *t, const DLTensor *tabs[3], const bool *on[3])
{
    tabs[0] = t->key_mean, tabs[1] = t->value_mean, tabs[2] = t->key_scale;
    on[0] = &t->center_keys, on[1] = &t->center_values, on[2] = &t->smooth;
}

vq_status vq_cache_recipe_check(vq_ctx *ctx, int sink, const vq_cache_transforms *transforms, int L, int Hkv, int D)
{
    VQ_RETURN_IF(ctx, sink < 0 || sink > VQ_CACHE_MAX_SINK_TOKENS, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->sink_tokens': expected 0..%d, got %d", VQ_CACHE_MAX_SINK_TOKENS, sink);
    for (int l = 0; transforms && l < L; l++) {
        const DLTensor *tabs[3];
        const bool *on[3];
        xf_tables(&transforms[l], tabs, on);
        for (int i = 0; i < 3; i++) {
            VQ_RETURN_IF(ctx, tabs[i] != NULL && !*on[i], VQ_ERR_INVALID_ARGUMENT,
                         "argument 'cfg->transforms[%d].%s' is given but %s is false", l, xf_fields[i],
                         xf_switches[i]);
            if (tabs[i]) VQ_FORWARD_IF_ERROR(check_table(ctx, tabs[i], l, i, Hkv, D));
        }
    }
    return VQ_OK;
}

vq_status vq_cache_recipe_config(vq_cache *c, const vq_cache_config *cfg)
{
    vq_ctx *ctx = c->ctx;
    VQ_FORWARD_IF_ERROR(vq_cache_recipe_check(ctx, cfg->sink_tokens, cfg->transforms, c->L, c->Hkv, c->D));
    c->S = cfg->sink_tokens;
    const size_t n = (size_t)c->Hkv * (size_t)c->D;
    for (int l = 0; cfg->transforms && l < c->L; l++) {
        const vq_cache_transforms *t = &cfg->transforms[l];
        vq_cache_layer *L = &c->layers[l];
        const DLTensor *tabs[3];
        const bool *on[3];
        xf_tables(t, tabs, on);
        if (!xf_on(t)) continue;
        VQ_RETURN_IF(ctx, L->cfg.keys.method == VQ_KEY_COMMVQ, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->transforms[%d]': layer %d has CommVQ keys, appended before RoPE, where a key "
                     "mean or channel scale does not move every score of a query alike",
                     l, l);
        L->xf = (vq_cache_transforms){t->center_keys, t->center_values, t->smooth, NULL, NULL, NULL};
        L->xf_tables = malloc(3 * n * sizeof(float));
        VQ_RETURN_IF(ctx, L->xf_tables == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate transform tables");
        for (size_t i = 0; i < 3 * n; i++) L->xf_tables[i] = i < 2 * n ? 0.0f : 1.0f;
        for (int i = 0; i < 3; i++) {
            if (tabs[i] == NULL) continue;
            memcpy(L->xf_tables + (size_t)i * n, vq_data(tabs[i]), sizeof(float) * n);
            L->xf_given[i] = true;
        }
    }
    for (int l = 0; c->S > 0 && l < c->L; l++)
        VQ_RETURN_IF(ctx, c->layers[l].cfg.keys.method == VQ_KEY_COMMVQ, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->sink_tokens': layer %d has CommVQ keys, appended before RoPE; sink tokens "
                     "are attended as post-RoPE keys",
                     l);
    return VQ_OK;
}

bool vq_cache_recipe_seq_alloc(const vq_cache *c, int l, vq_cache_seq_layer *sl)
{
    const vq_cache_layer *L = &c->layers[l];
    vq_cache *mc = (vq_cache *)(uintptr_t)c; /* the device copies come from the cache's allocator */
    sl->dev_stale = true;
    if (c->S > 0 && (sl->sink = calloc(1, vq_cache_sink_bytes(c))) == NULL) return false;
    if (c->S > 0 && c->cuda && (sl->sink_dev = vq_cache_mem_alloc(mc, vq_cache_sink_bytes(c))) == NULL) return false;
    if (L->xf_tables == NULL) return true;
    if ((sl->xf = malloc(vq_cache_xf_bytes(c, l))) == NULL) return false;
    if (c->cuda && (sl->xf_dev = vq_cache_mem_alloc(mc, vq_cache_xf_bytes(c, l))) == NULL) return false;
    memcpy(sl->xf, L->xf_tables, vq_cache_xf_bytes(c, l));
    sl->xf_set = !needs_fit(L);
    return true;
}

void vq_cache_recipe_seq_free(vq_cache *c, vq_cache_seq_layer *sl)
{
    free(sl->sink);
    free(sl->xf);
    vq_cache_mem_free(c, sl->sink_dev);
    vq_cache_mem_free(c, sl->xf_dev);
    sl->sink = sl->sink_dev = NULL;
    sl->xf = sl->xf_dev = NULL;
}

void vq_cache_recipe_forget_tables(const vq_cache *c, int l, vq_cache_seq_layer *sl)
{
    const vq_cache_layer *L = &c->layers[l];
    if (sl->xf == NULL) return;
    memcpy(sl->xf, L->xf_tables, vq_cache_xf_bytes(c, l));
    sl->xf_set = !needs_fit(L);
    sl->dev_stale = true;
}

/* Rows [0, T) of every head (H of them) of sequence i of a CUDA cache's
 * device tensor x, downloaded (after the ctx's queued work) into buf as a
 * compact host tensor *out [1, H, T, D] of x's dtype: the statistics of a
 * fit and the sink rows are computed on the host, as on a CPU cache. */
static vq_status download_rows(vq_cache *c, const vq_cache_tensor *x, int64_t i, int64_t H, int64_t T, char *buf,
                               vq_cache_tensor *out)
{
    const int64_t D = c->D, row = D * x->esz;
    for (int64_t h = 0; h < H; h++) {
        char *dst = buf + h * T * row;
        if (T == 1 || x->stride[2] == D) {
            VQ_FORWARD_IF_ERROR(c->ctx->ops->download(c->ctx, dst, vq_cache_at(x, i, h, 0), (size_t)(T * row)));
            continue;
        }
        for (int64_t t = 0; t < T; t++)
            VQ_FORWARD_IF_ERROR(c->ctx->ops->download(c->ctx, dst + t * row, vq_cache_at(x, i, h, t), (size_t)row));
    }
    *out = (vq_cache_tensor){.base = buf, .dt = x->dt, .esz = x->esz, .shape = {1, H, T, D},
                             .stride = {H * T * D, T * D, D, 1}};
    return VQ_OK;
}

/* Sequence i's k, v (and q when not NULL) rows [0, T) as host tensors (its
 * sequence `*hi` of them): the tensors themselves on a CPU cache, host
 * copies in host scratch 0 on a CUDA cache. */
static vq_status host_chunk(vq_cache *c, const vq_cache_tensor *kvq, bool with_q, int64_t i, int64_t T,
                            vq_cache_tensor *out, int64_t *hi)
{
    const int n = with_q ? 3 : 2;
    if (!c->cuda) {
        for (int j = 0; j < n; j++) out[j] = kvq[j];
        *hi = i;
        return VQ_OK;
    }
    const size_t part = (size_t)((int64_t)c->Hq * T * c->D * 4);
    char *buf = vq_cache_host_scratch(c, 0, (size_t)n * part);
    if (buf == NULL) return VQ_ERR_OUT_OF_MEMORY;
    for (int j = 0; j < n; j++)
        VQ_FORWARD_IF_ERROR(download_rows(c, &kvq[j], i, j == 2 ? c->Hq : c->Hkv, T, buf + (size_t)j * part, &out[j]));
    *hi = 0;
    return VQ_OK;
}

/* ---- fitting ---- */

/* Tables of one sequence from its first chunk (sequence i of k, v, q; T
 * tokens) into tab [3][Hkv * D], which holds the layer's given tables. */
static void fit_one(const vq_cache *c, const vq_cache_layer *L, const vq_cache_tensor *k, const vq_cache_tensor *v,
                    const vq_cache_tensor *q, int64_t i, int64_t T, float *tab)
{
    const int D = c->D, Hkv = c->Hkv, G = c->Hq / c->Hkv;
    const int64_t kvd = (int64_t)Hkv * D;
    float *mk = tab, *mv = tab + kvd, *sk = tab + 2 * kvd;
    /* the sequence's first token (the attention sink, whose keys and
     * values are far from the rest) stays out of the statistics */
    const int64_t t0 = T > 1 ? 1 : 0;
    for (int h = 0; h < Hkv; h++)
        for (int e = 0; e < D; e++) {
            double a = 0, b = 0;
            for (int64_t t = t0; t < T; t++) {
                a += vq_load_f(vq_cache_at(k, i, h, t), k->dt, e);
                b += vq_load_f(vq_cache_at(v, i, h, t), v->dt, e);
            }
            if (L->xf.center_keys && !L->xf_given[VQ_XF_KEY_MEAN]) mk[h * D + e] = (float)(a / (double)(T - t0));
            if (L->xf.center_values && !L->xf_given[VQ_XF_VALUE_MEAN]) mv[h * D + e] = (float)(b / (double)(T - t0));
        }
    if (!L->xf.smooth || L->xf_given[VQ_XF_KEY_SCALE]) return;
    for (int h = 0; h < Hkv; h++) {
        double logsum = 0;
        for (int e = 0; e < D; e++) {
            const int64_t j = (int64_t)h * D + e;
            double kk = 0, qq = 0;
            for (int64_t t = t0; t < T; t++) {
                const float kc = vq_load_f(vq_cache_at(k, i, h, t), k->dt, e) - mk[j];
                const double x = kc;
                kk += x * x;
                for (int g = 0; g < G; g++) {
                    const double y = vq_load_f(vq_cache_at(q, i, h * G + g, t), q->dt, e);
                    qq += y * y;
                }
            }
            const double r = sqrt(sqrt(qq / (double)((T - t0) * G) + 1e-12) / sqrt(kk / (double)(T - t0) + 1e-12));
            sk[j] = (float)r;
            logsum += log(r);
        }
        const double gm = exp(logsum / D);
        for (int e = 0; e < D; e++) {
            const double x = sk[(int64_t)h * D + e] / gm;
            sk[(int64_t)h * D + e] = (float)(x < 0.125 ? 0.125 : x > 8 ? 8 : x);
        }
    }
}

/* The ids' sequence layers, distinct and live. */
static vq_status find_all(vq_cache *c, int layer, int n_seq, const int64_t *ids, vq_cache_seq_layer **sls)
{
    for (int i = 0; i < n_seq; i++) VQ_FORWARD_IF_ERROR(vq_cache_seq_layer_of(c, layer, ids, i, &sls[i]));
    return VQ_OK;
}

vq_status vq_cache_fit_transforms(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *k,
                                  const DLTensor *v, const DLTensor *q)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    vq_ctx *ctx = c->ctx;
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_cache_check_batch(c, layer, n_seq, seq_ids));
    vq_cache_tensor kv[3];
    VQ_FORWARD_IF_ERROR(
        vq_cache_check_tensor(c, k, "k", VQ_DTM_F16_F32, 4, (const int64_t[]){n_seq, c->Hkv, -1, c->D}, &kv[0]));
    const int64_t T = kv[0].shape[2];
    VQ_RETURN_IF(ctx, T < 1, VQ_ERR_INVALID_ARGUMENT, "argument 'k': a chunk of %lld tokens, expected >= 1",
                 (long long)T);
    VQ_FORWARD_IF_ERROR(
        vq_cache_check_tensor(c, v, "v", VQ_DTM_F16_F32, 4, (const int64_t[]){n_seq, c->Hkv, T, c->D}, &kv[1]));
    const vq_cache_layer *L = &c->layers[layer];
    if (q != NULL)
        VQ_FORWARD_IF_ERROR(
            vq_cache_check_tensor(c, q, "q", VQ_DTM_F16_F32, 4, (const int64_t[]){n_seq, c->Hq, T, c->D}, &kv[2]));
    VQ_RETURN_IF(ctx, q == NULL && L->xf.smooth && !L->xf_given[VQ_XF_KEY_SCALE], VQ_ERR_INVALID_ARGUMENT,
                 "argument 'q' is NULL, but layer %d fits its key scales (smooth) from the queries", layer);
    /* scratch: sequence layers, then the fitted tables (kept only when all are fitted) */
    const size_t xfn = L->xf_tables ? (size_t)3 * (size_t)c->Hkv * (size_t)c->D : 0;
    const size_t head = (sizeof(void *) * (size_t)n_seq + 63) & ~(size_t)63;
    unsigned char *hs = recipe_scratch(c, head + sizeof(float) * xfn * (size_t)n_seq);
    if (hs == NULL) return VQ_ERR_OUT_OF_MEMORY;
    vq_cache_seq_layer **sls = (vq_cache_seq_layer **)(void *)hs;
    float *fit = (float *)(void *)(hs + head);
    VQ_FORWARD_IF_ERROR(find_all(c, layer, n_seq, seq_ids, sls));
    for (int i = 0; i < n_seq; i++) {
        if (sls[i]->xf == NULL || sls[i]->xf_set) continue;
        vq_cache_tensor h[3];
        int64_t hi;
        VQ_FORWARD_IF_ERROR(host_chunk(c, kv, q != NULL, i, T, h, &hi));
        memcpy(fit + (size_t)i * xfn, sls[i]->xf, sizeof(float) * xfn);
        fit_one(c, L, &h[0], &h[1], q ? &h[2] : NULL, hi, T, fit + (size_t)i * xfn);
    }
    for (int i = 0; i < n_seq; i++) {
        if (sls[i]->xf == NULL || sls[i]->xf_set) continue;
        memcpy(sls[i]->xf, fit + (size_t)i * xfn, sizeof(float) * xfn);
        sls[i]->xf_set = true;
        sls[i]->dev_stale = true;
    }
    return VQ_OK;
}

/* D contiguous elements of dt at src -> dst f32: f16 rows by the ctx's
 * conversion kernel (exact, as vq_half_to_float), which every decode step
 * runs for each new token and the sinks of every kv head. */
static void load_row(const vq_cache *c, const void *src, vq_dtype dt, int D, float *dst)
{
    if (dt == VQ_DT_F16) {
        vq_attn_kernels_for(c->ctx->isa)->cvt_f16(D, (const uint16_t *)src, dst);
        return;
    }
    for (int e = 0; e < D; e++) dst[e] = vq_load_f(src, dt, e);
}

/* ---- append ---- */

/* Row t of head h of sequence i of x, transformed by tab (NULL: as is),
 * into dst [D] f32: keys (k - mk) * s, values v - mv. */
static void transform_row(const vq_cache *c, const vq_cache_tensor *x, int64_t i, int h, int64_t t, const float *tab,
                          int64_t kvd, bool key, int D, float *dst)
{
    load_row(c, vq_cache_at(x, i, h, t), x->dt, D, dst);
    if (tab == NULL) return;
    const float *m = tab + (key ? 0 : kvd) + (int64_t)h * D, *s = tab + 2 * kvd + (int64_t)h * D;
    if (key)
        for (int e = 0; e < D; e++) dst[e] = (dst[e] - m[e]) * s[e];
    else
        for (int e = 0; e < D; e++) dst[e] -= m[e];
}

vq_status vq_cache_recipe_append(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *k,
                                 const DLTensor *v, const DLTensor *positions)
{
    vq_ctx *ctx = c->ctx;
    vq_cache_tensor kv[2];
    VQ_FORWARD_IF_ERROR(
        vq_cache_check_tensor(c, k, "k", VQ_DTM_F16_F32, 4, (const int64_t[]){n_seq, c->Hkv, -1, c->D}, &kv[0]));
    const int64_t m = kv[0].shape[2];
    VQ_FORWARD_IF_ERROR(vq_cache_check_tensor(c, v, "v", VQ_DTM(kv[0].dt), 4, (const int64_t[]){n_seq, c->Hkv, m, c->D},
                                              &kv[1]));
    if (positions) { /* read by CommVQ layers only, which take no sinks or transforms: checked, not read */
        vq_cache_tensor pt;
        VQ_FORWARD_IF_ERROR(
            vq_cache_check_tensor(c, positions, "positions", VQ_DTM_I32, 2, (const int64_t[]){n_seq, m}, &pt));
    }
    const vq_cache_layer *L = &c->layers[layer];
    const int64_t D = c->D, Hkv = c->Hkv, kvd = Hkv * D, xfn = L->xf_tables ? 3 * kvd : 0;
    /* scratch: sequence layers, the tables each sequence's tokens are
     * transformed with, sink counts, ids of the page path, fitted tables,
     * the sink rows (f16 [half][Hkv][ns][D] per sequence), then (CPU) the
     * staged keys and values */
    const size_t head = ((2 * sizeof(void *) + 2 * sizeof(int64_t)) * (size_t)n_seq + 63) & ~(size_t)63;
    const size_t tabs = sizeof(float) * (size_t)(xfn * n_seq);
    const size_t sinks = ((size_t)2 * (size_t)(kvd * c->S) * (size_t)n_seq * 2 + 63) & ~(size_t)63;
    unsigned char *hs = recipe_scratch(c, head + tabs + sinks);
    if (hs == NULL) return VQ_ERR_OUT_OF_MEMORY;
    vq_cache_seq_layer **sls = (vq_cache_seq_layer **)(void *)hs;
    const float **tab = (const float **)(void *)(sls + n_seq);
    int64_t *ns = (int64_t *)(void *)(tab + n_seq), *ids = ns + n_seq;
    VQ_FORWARD_IF_ERROR(find_all(c, layer, n_seq, seq_ids, sls));
    int n_in = 0, first = -1;
    for (int i = 0; i < n_seq; i++) {
        const vq_cache_seq_layer *sl = sls[i];
        VQ_RETURN_IF(ctx, sl->n_sink + sl->n > ((int64_t)1 << 40) - m, VQ_ERR_INVALID_ARGUMENT,
                     "sequence %d is too long", i);
        ns[i] = c->S - sl->n_sink < m ? c->S - sl->n_sink : m;
        if (ns[i] == m) continue;
        VQ_RETURN_IF(ctx, first >= 0 && ns[i] != ns[first], VQ_ERR_UNSUPPORTED,
                     "argument 'seq_ids': sequences %d and %d would put %lld and %lld of their %lld tokens in the "
                     "pages (the others are sink tokens); append them in separate calls",
                     first, i, (long long)(m - ns[first]), (long long)(m - ns[i]), (long long)m);
        if (first < 0) first = i;
        ids[n_in++] = seq_ids[i];
    }
    float *fit = (float *)(void *)(hs + head);
    uint16_t *sink_rows = (uint16_t *)(void *)(hs + head + tabs);
    for (int i = 0; i < n_seq; i++) {
        const vq_cache_seq_layer *sl = sls[i];
        tab[i] = sl->xf == NULL ? NULL : sl->xf_set ? sl->xf : fit + i * xfn;
        if (sl->xf == NULL || sl->xf_set) continue;
        VQ_RETURN_IF(ctx, L->xf.smooth && !L->xf_given[VQ_XF_KEY_SCALE], VQ_ERR_INVALID_ARGUMENT,
                     "argument 'seq_ids[%d]': sequence %lld has no key scales for layer %d yet: smooth fits them "
                     "from queries (call vq_cache_fit_transforms with its first chunk before appending it, or "
                     "give cfg->transforms[%d].key_scale)",
                     i, (long long)seq_ids[i], layer, layer);
        memcpy(fit + i * xfn, sl->xf, sizeof(float) * (size_t)xfn);
        vq_cache_tensor h[2];
        int64_t hi;
        VQ_FORWARD_IF_ERROR(host_chunk(c, kv, false, i, m, h, &hi));
        fit_one(c, L, &h[0], &h[1], NULL, hi, m, fit + i * xfn);
    }
    /* the sink rows, transformed (committed below) */
    for (int i = 0; i < n_seq; i++) {
        if (ns[i] == 0) continue;
        vq_cache_tensor h[2];
        int64_t hi;
        VQ_FORWARD_IF_ERROR(host_chunk(c, kv, false, i, ns[i], h, &hi));
        float row[256];
        uint16_t *dst = sink_rows + (int64_t)i * 2 * kvd * c->S;
        for (int half = 0; half < 2; half++)
            for (int h2 = 0; h2 < Hkv; h2++)
                for (int64_t t = 0; t < ns[i]; t++) {
                    transform_row(c, &h[half], hi, h2, t, tab[i], kvd, half == 0, (int)D, row);
                    for (int64_t e = 0; e < D; e++) dst[((half * Hkv + h2) * ns[i] + t) * D + e] = vq_f32_to_f16(row[e]);
                }
    }
    if (n_in > 0 && c->cuda) {
#ifdef VQ_WITH_CUDA
        VQ_FORWARD_IF_ERROR(vq_cache_recipe_append_cuda(c, layer, n_seq, sls, ns, tab, kv, m, n_in, ids));
#endif
    } else if (n_in > 0) {
        const int64_t mi = m - ns[first];
        const size_t block = sizeof(float) * (size_t)(n_in * Hkv * mi * D);
        hs = recipe_scratch(c, head + tabs + sinks + 2 * block);
        if (hs == NULL) return VQ_ERR_OUT_OF_MEMORY;
        sls = (vq_cache_seq_layer **)(void *)hs;
        tab = (const float **)(void *)(sls + n_seq);
        ns = (int64_t *)(void *)(tab + n_seq), ids = ns + n_seq;
        fit = (float *)(void *)(hs + head);
        sink_rows = (uint16_t *)(void *)(hs + head + tabs);
        for (int i = 0; i < n_seq; i++) /* the fitted tables moved with the scratch */
            if (sls[i]->xf != NULL && !sls[i]->xf_set) tab[i] = fit + i * xfn;
        float *stage[2] = {(float *)(void *)(hs + head + tabs + sinks),
                           (float *)(void *)(hs + head + tabs + sinks + block)};
        for (int i = 0, b = 0; i < n_seq; i++) {
            if (ns[i] == m) continue;
            for (int half = 0; half < 2; half++)
                for (int h = 0; h < Hkv; h++)
                    for (int64_t t = 0; t < mi; t++)
                        transform_row(c, &kv[half], i, h, ns[i] + t, tab[i], kvd, half == 0, (int)D,
                                      stage[half] + ((b * Hkv + h) * mi + t) * D);
            b++;
        }
        int64_t sh[4] = {n_in, Hkv, mi, D};
        DLTensor ks, vs;
        vq_cache_view(c, &ks, sh, 4, VQ_DT_F32, stage[0]);
        vq_cache_view(c, &vs, sh, 4, VQ_DT_F32, stage[1]);
        VQ_FORWARD_IF_ERROR(vq_cache_append_tokens(c, layer, n_in, ids, &ks, &vs, NULL));
    }
    /* commit: the sink rows and the fitted tables (a CUDA cache uploads its
     * device copies when it next reads them) */
    for (int i = 0; i < n_seq; i++) {
        vq_cache_seq_layer *sl = sls[i];
        const uint16_t *src = sink_rows + (int64_t)i * 2 * kvd * c->S;
        for (int half = 0; half < 2 && ns[i] > 0; half++)
            for (int h = 0; h < Hkv; h++)
                memcpy(sl->sink + ((half * Hkv + h) * c->S + sl->n_sink) * D, src + (half * Hkv + h) * ns[i] * D,
                       sizeof(uint16_t) * (size_t)(ns[i] * D));
        sl->n_sink += ns[i];
        sl->dev_stale |= ns[i] > 0;
        if (sl->xf != NULL && !sl->xf_set) {
            memcpy(sl->xf, fit + i * xfn, sizeof(float) * (size_t)xfn);
            sl->xf_set = true;
            sl->dev_stale = true;
        }
    }
    return VQ_OK;
}

/* ---- attend ---- */

/* Row (b, h, t) of q divided by the key scales of kv head h / G (tab NULL:
 * as is) into dst [D] f32. */
static void query_row(const vq_cache *c, const vq_attn_view *qv, vq_dtype dt, int64_t b, int h, int64_t t,
                      const float *scales, int G, int D, float *dst)
{
    load_row(c, vq_attn_at(qv, b, h, t), dt, D, dst);
    if (scales == NULL) return;
    const float *s = scales + (int64_t)(h / G) * D;
    for (int e = 0; e < D; e++) dst[e] /= s[e];
}

typedef struct attend_io {
    vq_attn_view qv, ov, lse;
    vq_dtype qdt, odt;
    double scale;
    bool causal;
    int64_t Sq;
} attend_io;

/* Output rows of sequence b (the b-th of the call; sl its layer): the page
 * path's rows [ns, Sq) in po/pl ([Hq][Sq - ns][D] and [Hq][Sq - ns] f32, po
 * NULL when it ran for none) merged with the sinks, the value mean added,
 * the lse moved back to the untransformed scores. */
static void merge_rows(const vq_cache *c, const vq_cache_layer *L, const vq_cache_seq_layer *sl, const attend_io *io,
                       int64_t b, int64_t ns, const float *po, const float *pl, double *sc, float *qrow, float *kv32)
{
    const int D = c->D, Hq = c->Hq, G = c->Hq / c->Hkv;
    const int64_t kvd = (int64_t)c->Hkv * D, n = sl->n_sink + sl->n, Sq = io->Sq, Si = Sq - ns;
    const float *tab = sl->xf != NULL && sl->xf_set ? sl->xf : NULL;
    const float *scales = tab && L->xf.smooth ? tab + 2 * kvd : NULL;
    const uint16_t *K = sl->sink, *V = sl->sink == NULL ? NULL : sl->sink + kvd * c->S;
    const int64_t W = L->sliding;
    for (int64_t t = 0; t < Sq; t++) {
        const int64_t pos = n - Sq + t;
        /* the row's tokens end at pos + 1 (causal) or n; a sliding-window
         * layer masks the sinks as any other token: the row sees the sinks
         * [lo, hi) only, those among its newest W tokens */
        const int64_t end = io->causal ? pos + 1 : n;
        const int64_t hi = end < 0 ? 0 : end < sl->n_sink ? end : sl->n_sink;
        const int64_t lo = W > 0 && end - W > 0 ? (end - W < hi ? end - W : hi) : 0;
        const int64_t nvis = hi - lo;
        const bool paged = po != NULL && t >= ns;
        for (int h = 0; h < Hq; h++) {
            void *orow = (void *)(uintptr_t)vq_attn_at(&io->ov, b, h, t);
            float *lrow = io->lse.base ? (float *)(uintptr_t)vq_attn_at(&io->lse, b, h, t) : NULL;
            if (nvis == 0 && !paged) { /* a row that sees no token */
                for (int e = 0; e < D; e++) vq_store_f(orow, io->odt, e, 0.0f);
                if (lrow) *lrow = -INFINITY;
                continue;
            }
            /* the kv head's visible sinks as f32 [2][nvis][D], once for its G query heads */
            float *kf = kv32, *vf = kv32 + (int64_t)c->S * D;
            if (nvis > 0 && h % G == 0)
                for (int64_t j = lo; j < hi; j++) {
                    load_row(c, K + ((int64_t)(h / G) * c->S + j) * D, VQ_DT_F16, D, kf + (j - lo) * D);
                    load_row(c, V + ((int64_t)(h / G) * c->S + j) * D, VQ_DT_F16, D, vf + (j - lo) * D);
                }
            query_row(c, &io->qv, io->qdt, b, h, t, scales, G, D, qrow);
            float o[256];
            double lse;
            const float *prow = paged ? po + ((int64_t)h * Si + (t - ns)) * D : NULL;
            const double plse = paged ? pl[(int64_t)h * Si + (t - ns)] : -INFINITY;
            if (nvis == 0) {
                memcpy(o, prow, sizeof(float) * (size_t)D);
                lse = plse;
            } else {
                /* out = (e^lse o_pages + sum_j e^s_j v_j) / (e^lse + sum_j e^s_j) */
                double mx = -INFINITY;
                for (int64_t j = lo; j < hi; j++) {
                    const float *kj = kf + (j - lo) * D;
                    double d = 0;
                    for (int e = 0; e < D; e++) d += (double)qrow[e] * kj[e];
                    sc[j] = d * io->scale;
                    if (sc[j] > mx) mx = sc[j];
                }
                if (plse > mx) mx = plse;
                const double wc = paged ? exp(plse - mx) : 0;
                double sum = wc, acc[256];
                for (int e = 0; e < D; e++) acc[e] = paged ? wc * prow[e] : 0.0;
                for (int64_t j = lo; j < hi; j++) {
                    const double w = exp(sc[j] - mx);
                    const float *vj = vf + (j - lo) * D;
                    sum += w;
                    for (int e = 0; e < D; e++) acc[e] += w * vj[e];
                }
                for (int e = 0; e < D; e++) o[e] = (float)(acc[e] / sum);
                lse = mx + log(sum);
            }
            if (tab && L->xf.center_values) {
                const float *mv = tab + kvd + (int64_t)(h / G) * D;
                for (int e = 0; e < D; e++) o[e] += mv[e];
            }
            for (int e = 0; e < D; e++) vq_store_f(orow, io->odt, e, o[e]);
            if (lrow == NULL) continue;
            if (tab && L->xf.center_keys) { /* q.(k - mk) = q.k - q.mk for every key of the row */
                const float *mk = tab + (int64_t)(h / G) * D;
                const void *q = vq_attn_at(&io->qv, b, h, t);
                double d = 0;
                for (int e = 0; e < D; e++) d += (double)vq_load_f(q, io->qdt, e) * mk[e];
                lse += d * io->scale;
            }
            *lrow = (float)lse;
        }
    }
}

vq_status vq_cache_recipe_pages(vq_cache *c, int layer, int n_g, const int64_t *ids, float *gq, float *go, float *gl,
                                int64_t Si, const vq_cache_attend_opts *opts)
{
    int64_t sh[4] = {n_g, c->Hq, Si, c->D}, lsh[3] = {n_g, c->Hq, Si};
    DLTensor tq, to, tl;
    vq_cache_view(c, &tq, sh, 4, VQ_DT_F32, gq);
    vq_cache_view(c, &to, sh, 4, VQ_DT_F32, go);
    vq_cache_view(c, &tl, lsh, 3, VQ_DT_F32, gl);
    vq_cache_attend_opts o = opts ? *opts : (vq_cache_attend_opts){0};
    o.causal = opts && opts->causal && Si > 1;
    o.lse_out = &tl;
    return vq_cache_attend_tokens(c, layer, n_g, ids, &tq, &to, &o);
}

vq_status vq_cache_recipe_rows(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, int64_t Sq, bool causal,
                               vq_cache_seq_layer **sls, int64_t *ns, int64_t *done)
{
    for (int i = 0; i < n_seq; i++) {
        vq_cache_seq *s = vq_cache_find_seq(c, seq_ids[i]);
        VQ_RETURN_IF(c->ctx, s == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'seq_ids[%d]': no sequence with id %lld",
                     i, (long long)seq_ids[i]);
        vq_cache_seq_layer *sl = &s->layers[layer];
        sls[i] = sl;
        done[i] = 0;
        /* the rows before the first one past the sinks: sl->n_sink - (tokens - Sq) */
        const int64_t lead = Sq - sl->n;
        ns[i] = sl->n == 0 ? Sq : !causal || lead < 0 ? 0 : lead > Sq ? Sq : lead;
    }
    return VQ_OK;
}

vq_status vq_cache_recipe_attend(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *q,
                                 DLTensor *out, const vq_cache_attend_opts *opts)
{
#ifdef VQ_WITH_CUDA
    if (c->cuda) return vq_cache_recipe_attend_cuda(c, layer, n_seq, seq_ids, q, out, opts);
#endif
    attend_io io;
    VQ_FORWARD_IF_ERROR(vq_cache_attend_check_io(c, n_seq, q, out, opts, &io.Sq, &io.lse));
    io.qv = vq_attn_view_of(q);
    io.ov = vq_attn_view_of(out);
    io.qdt = vq_dtype_of(q);
    io.odt = vq_dtype_of(out);
    io.scale = opts && opts->scale > 0 ? (double)opts->scale : 1.0 / sqrt((double)c->D);
    io.causal = opts && opts->causal;
    const vq_cache_layer *L = &c->layers[layer];
    const int64_t Sq = io.Sq, Hq = c->Hq, D = c->D, kvd = (int64_t)c->Hkv * D;
    const int G = c->Hq / c->Hkv;
    /* scratch: sequence layers, leading sink-only rows, done flags, ids of
     * a group, sink scores, a query row, then q, out, lse of a group */
    const size_t head = ((sizeof(void *) + 3 * sizeof(int64_t)) * (size_t)n_seq + sizeof(double) * (size_t)c->S +
                         sizeof(float) * (size_t)D * (size_t)(1 + 2 * c->S) + 63) & ~(size_t)63;
    const size_t rows = (size_t)(n_seq * Hq * Sq), block = sizeof(float) * rows * (size_t)D;
    unsigned char *hs = recipe_scratch(c, head + 2 * block + sizeof(float) * rows);
    if (hs == NULL) return VQ_ERR_OUT_OF_MEMORY;
    vq_cache_seq_layer **sls = (vq_cache_seq_layer **)(void *)hs;
    int64_t *ns = (int64_t *)(void *)(sls + n_seq), *done = ns + n_seq, *ids = done + n_seq;
    double *sc = (double *)(void *)(ids + n_seq);
    float *qrow = (float *)(void *)(sc + c->S), *kv32 = qrow + D; /* kv32: merge_rows' [2][S][D] */
    float *gq = (float *)(void *)(hs + head), *go = (float *)(void *)(hs + head + block);
    float *gl = (float *)(void *)(hs + head + 2 * block);
    VQ_FORWARD_IF_ERROR(vq_cache_recipe_rows(c, layer, n_seq, seq_ids, Sq, io.causal, sls, ns, done));
    /* the page path per group of sequences with the same leading rows, each
     * merged right after its call (its rows live in the group's staging) */
    for (int i = 0; i < n_seq; i++) {
        if (done[i]) continue;
        if (ns[i] == Sq) {
            merge_rows(c, L, sls[i], &io, i, Sq, NULL, NULL, sc, qrow, kv32);
            done[i] = 1;
            continue;
        }
        const int64_t Si = Sq - ns[i];
        int n_g = 0;
        for (int j = i; j < n_seq; j++) {
            if (done[j] || ns[j] != ns[i]) continue;
            const float *tab = sls[j]->xf != NULL && sls[j]->xf_set ? sls[j]->xf : NULL;
            const float *scales = tab && L->xf.smooth ? tab + 2 * kvd : NULL;
            for (int h = 0; h < Hq; h++)
                for (int64_t t = 0; t < Si; t++)
                    query_row(c, &io.qv, io.qdt, j, h, ns[j] + t, scales, G, (int)D, gq + ((n_g * Hq + h) * Si + t) * D);
            ids[n_g++] = seq_ids[j];
        }
        VQ_FORWARD_IF_ERROR(vq_cache_recipe_pages(c, layer, n_g, ids, gq, go, gl, Si, opts));
        for (int j = i, g = 0; j < n_seq; j++) {
            if (done[j] || ns[j] != ns[i]) continue;
            merge_rows(c, L, sls[j], &io, j, ns[j], go + (int64_t)g * Hq * Si * D, gl + (int64_t)g * Hq * Si, sc,
                       qrow, kv32);
            g++;
        }
        for (int j = n_seq - 1; j >= i; j--)
            if (!done[j] && ns[j] == ns[i]) done[j] = 1;
    }
    return VQ_OK;
}

/* ---- the tables ---- */

vq_status vq_cache_get_transforms(const vq_cache *c, int64_t seq_id, int layer, vq_cache_transforms *out,
                                  DLTensor *key_mean, DLTensor *value_mean, DLTensor *key_scale)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    vq_ctx *ctx = c->ctx;
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, layer < 0 || layer >= c->L, VQ_ERR_INVALID_ARGUMENT, "argument 'layer': %d outside [0, %d)",
                 layer, c->L);
    const vq_cache_layer *L = &c->layers[layer];
    DLTensor *dst[3] = {key_mean, value_mean, key_scale};
    static const char *const names[3] = {"key_mean", "value_mean", "key_scale"};
    const vq_cache_seq_layer *sl = NULL;
    for (int i = 0; i < 3; i++) {
        if (dst[i] == NULL) continue;
        VQ_FORWARD_IF_ERROR(check_host(ctx, dst[i], names[i]));
        VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, dst[i], names[i], 2, (const int64_t[]){c->Hkv, c->D}));
        if (sl != NULL) continue;
        const vq_cache_seq *q = vq_cache_find_seq(c, seq_id);
        VQ_RETURN_IF(ctx, q == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'seq_id': no sequence with id %lld",
                     (long long)seq_id);
        sl = &q->layers[layer];
        VQ_RETURN_IF(ctx, sl->xf != NULL && !sl->xf_set, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'seq_id': sequence %lld has no tables for layer %d yet (its first append fits them)",
                     (long long)seq_id, layer);
    }
    const size_t n = (size_t)c->Hkv * (size_t)c->D;
    for (int i = 0; i < 3; i++) {
        if (dst[i] == NULL) continue;
        float *d = vq_data(dst[i]);
        if (sl->xf != NULL) memcpy(d, sl->xf + (size_t)i * n, n * sizeof(float));
        else
            for (size_t j = 0; j < n; j++) d[j] = i == VQ_XF_KEY_SCALE ? 1.0f : 0.0f;
    }
    if (out != NULL) *out = L->xf;
    return VQ_OK;
}
