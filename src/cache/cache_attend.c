/* cache_attend.c — vq_cache_attend: every sequence of the batch is one batch
 * row of one skeleton problem whose kv axis is a list of segments — its runs
 * of consecutive pages (batch row `first page` of the binding of the chunk
 * holding them, n tokens: host pools are head-major, cache_internal.h, so
 * such a run is one contiguous run of every head's rows, streamed as the raw
 * kernel streams a contiguous tensor) and its residual window — so one call
 * runs all pages of all sequences as splits of the split-KV skeleton and
 * merges them exactly.
 * Blocks start at the same tokens whether a run is one segment or one per
 * page (P is a multiple of VQ_ATTN_BN), so the result does not depend on how
 * the pages were allocated.
 *
 * Page bindings are made once per chunk and kept (valid while the softmax
 * scale and Sq stay the same), so a decode step validates nothing per page.
 * The window of each sequence is bound per call (a plain f16 view, or the
 * TurboQuant views of VQ_WINDOW_TURBO8 / VQ_WINDOW_TURBO; cheap). */
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "cache/cache_method.h"
#ifdef VQ_WITH_CUDA
#include "cache/cache_cuda.h"
#endif

/* A stream of a chunk of N pages as a tensor [N,Hkv,rows,last], [N,Hkv,rows]
 * or [N,rows]; the pool is head-major (cache_internal.h), so the page axis
 * steps by one head's rows and page i + 1's rows follow page i's: a segment
 * of n > P tokens from batch row (page) i covers pages i, i + 1, ... */
static void stream_view(const vq_cache *c, const vq_cache_layer *L, const vq_cache_chunk *ch, int s, DLTensor *t,
                        int64_t *shape, int64_t *strides)
{
    const vq_cache_stream *st = &L->streams[s];
    shape[0] = ch->n_pages;
    if (st->ndim == 2) {
        shape[1] = st->rows;
    } else {
        shape[1] = c->Hkv, shape[2] = st->rows, shape[3] = st->last;
    }
    vq_cache_view(c, t, shape, st->ndim, st->dtype, ch->base + ch->n_pages * st->page_off);
    if (!st->per_head) return; /* [N,rows] compact */
    const int64_t head = st->rows * st->last; /* elements of one head's rows of one page */
    strides[0] = head, strides[1] = ch->n_pages * head, strides[2] = st->last, strides[3] = 1;
    t->strides = strides;
}

void vq_cache_describe(const vq_cache *c, const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb,
                       vq_encoded_keys *ek_out, vq_encoded_values *ev_out)
{
    int nk = 0; /* key streams: the values' follow */
    while (nk < L->n_streams && L->streams[nk].is_key) nk++;
    vq_encoded_keys ek = {0};
    vq_encoded_values ev = {0};
    vq_cache_key_method(L->cfg.keys.method)->describe(L, sv, tb, &ek, NULL);
    vq_cache_value_method(L->cfg.values.method)->describe(L, sv + nk, tb, NULL, &ev);
    (void)c;
    *ek_out = ek;
    *ev_out = ev;
}

void vq_cache_table_tensors(const vq_cache *c, const vq_cache_layer *L, DLTensor *tb, int64_t (*shapes)[4])
{
    for (int t = 0; t < VQ_CT_COUNT; t++) {
        const vq_cache_table *tab = &L->tables[t];
        if (tab->host == NULL) continue;
        memcpy(shapes[t], tab->shape, sizeof(int64_t) * (size_t)tab->ndim);
        vq_cache_view(c, &tb[t], shapes[t], tab->ndim, VQ_DT_F32, tab->dev);
    }
}

/* Binds the keys and values of chunk k of layer L for (scale, Sq), KIVI's
 * arithmetic as ks and va ask. */
static vq_status bind_chunk(vq_cache *c, vq_cache_layer *L, int k, float scale, int64_t Sq, vq_key_scores ks,
                            vq_value_accum va)
{
    vq_ctx *ctx = c->ctx;
    const vq_cache_chunk *ch = &L->chunks[k];
    vq_cache_binding *bd = &L->bindings[k];
    DLTensor sv[VQ_CACHE_MAX_STREAMS], tb[VQ_CT_COUNT];
    int64_t ss[VQ_CACHE_MAX_STREAMS][4], sst[VQ_CACHE_MAX_STREAMS][4], ts[VQ_CT_COUNT][4];
    for (int s = 0; s < L->n_streams; s++) stream_view(c, L, ch, s, &sv[s], ss[s], sst[s]);
    vq_cache_table_tensors(c, L, tb, ts);
    const vq_attn_dims dims = {ch->n_pages, c->Hq, c->Hkv, Sq, c->P, c->D};
    const vq_key_config *kc = &L->cfg.keys;
    vq_encoded_keys ek;
    vq_encoded_values ev;
    vq_cache_describe(c, L, sv, tb, &ek, &ev);
    if (kc->method == VQ_KEY_KIVI_MIX) {
        VQ_FORWARD_IF_ERROR(vq_cache_bind_kivi_mix(ctx, &sv[0], &sv[1], &sv[2], &sv[3], kc, &dims, scale, &bd->keys));
    } else if (kc->method == VQ_KEY_RABITQ && kc->rabitq_score == VQ_RABITQ_SCORE_HAMMING) {
        VQ_FORWARD_IF_ERROR(vq_cache_bind_hamming(ctx, &sv[0], &sv[1], L->tables[VQ_CT_KDIAG].host, scale, &dims,
                                                  &bd->hamming, &bd->inner, &bd->keys));
    } else {
        /* QJL's norm stream holds ||k|| / sqrt(D) (cache_encode.c) */
        const float qjl_scale = kc->method == VQ_KEY_QJL ? scale * sqrtf((float)c->D) : scale;
        VQ_FORWARD_IF_ERROR(vq_attn_bind_keys(ctx, &ek, &dims, qjl_scale, &bd->keys));
    }
    VQ_FORWARD_IF_ERROR(vq_attn_bind_values(ctx, &ev, &dims, &bd->values));
    vq_attn_choose_arith(ctx, &bd->keys, &bd->values, ks, va);
    bd->valid = true;
    bd->scale = scale;
    bd->Sq = Sq;
    bd->ks = ks;
    bd->va = va;
    return VQ_OK;
}

/* The window of one sequence, bound per call. */
typedef struct window_binding {
    vq_attn_keys keys;
    vq_attn_values values;
    vq_cache_rotated_values rotated;
    vq_attn_values inner;               /* a TurboQuant window over other values: the wrapped binding */
    vq_cache_unrotated_values unrotated;
} window_binding;

/* A TurboQuant window: TurboQuant keys and values (8 bits one per byte, or
 * window_bits packed) with the layer's signs. The values share the pages'
 * rotated basis (and finish()) when the pages hold TurboQuant values;
 * otherwise they are rotated back per row. */
static vq_status bind_window_turbo(vq_cache *c, const vq_cache_layer *L, const vq_cache_seq_layer *sl, float scale,
                                   const vq_attn_dims *dims, window_binding *w)
{
    const int bits = c->window == VQ_WINDOW_TURBO ? c->window_bits : 8;
    int64_t ish[4] = {1, c->Hkv, L->res_cap, L->wstreams[0].last}, ssh[3] = {1, c->Hkv, L->res_cap}, dsh[1] = {c->D};
    DLTensor t[4], diag[2]; /* k_idx, k_scale, v_idx, v_scale */
    for (int s = 0; s < 4; s++) {
        const int ws = s % 2 ? vq_cache_window_scale_stream(c, s / 2) : vq_cache_window_idx_stream(c, s / 2);
        vq_cache_view(c, &t[s], s % 2 ? ssh : ish, s % 2 ? 3 : 4, L->wstreams[ws].dtype,
                      (unsigned char *)sl->res + L->wstreams[ws].off);
    }
    vq_cache_view(c, &diag[0], dsh, 1, VQ_DT_F32, L->tables[VQ_CT_KDIAG].dev);
    vq_cache_view(c, &diag[1], dsh, 1, VQ_DT_F32, L->tables[VQ_CT_VDIAG].dev);
    vq_encoded_keys ek = {.format = VQ_KEYS_TURBO};
    ek.turbo.idx = &t[0], ek.turbo.scale = &t[1], ek.turbo.diag = &diag[0], ek.turbo.bits = bits;
    VQ_FORWARD_IF_ERROR(vq_attn_bind_keys(c->ctx, &ek, dims, scale, &w->keys));
    vq_encoded_values ev = {.format = VQ_VALUES_TURBO};
    ev.turbo.idx = &t[2], ev.turbo.scale = &t[3], ev.turbo.diag = &diag[1], ev.turbo.bits = bits;
    if (L->cfg.values.method == VQ_VALUE_TURBO) return vq_attn_bind_values(c->ctx, &ev, dims, &w->values);
    VQ_FORWARD_IF_ERROR(vq_attn_bind_values(c->ctx, &ev, dims, &w->inner));
    vq_cache_bind_unrotated_values(c->ctx, &w->inner, L->tables[VQ_CT_VDIAG].host, c->D, &w->unrotated, &w->values);
    return VQ_OK;
}

static vq_status bind_window(vq_cache *c, const vq_cache_layer *L, const vq_cache_seq_layer *sl, float scale,
                             int64_t Sq, window_binding *w)
{
    if (vq_cache_coded_window(c)) {
        const vq_attn_dims dims = {1, c->Hq, c->Hkv, Sq, L->res_cap, c->D};
        return bind_window_turbo(c, L, sl, scale, &dims, w);
    }
    int64_t shape[4] = {1, c->Hkv, L->res_cap, c->D};
    DLTensor k, v;
    vq_cache_view(c, &k, shape, 4, VQ_DT_F16, sl->res);
    vq_cache_view(c, &v, shape, 4, VQ_DT_F16, (uint16_t *)sl->res + (int64_t)c->Hkv * L->res_cap * c->D);
    const vq_attn_dims dims = {1, c->Hq, c->Hkv, Sq, L->res_cap, c->D};
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16 = {&k}};
    VQ_FORWARD_IF_ERROR(vq_attn_bind_keys(c->ctx, &ek, &dims, scale, &w->keys));
    if (L->cfg.values.method == VQ_VALUE_TURBO) {
        vq_cache_bind_rotated_values(c->ctx, &v, L->tables[VQ_CT_VDIAG].host, &w->rotated, &w->values);
        return VQ_OK;
    }
    return vq_attn_bind_values_f16(c->ctx, &v, "window", &dims, &w->values);
}

/* True when the byte ranges spanned by two tensors intersect. */
static bool spans_meet(const DLTensor *a, const DLTensor *b)
{
    const DLTensor *t[2] = {a, b};
    uintptr_t lo[2], hi[2];
    for (int k = 0; k < 2; k++) {
        const int64_t esz = (int64_t)vq_dtype_size(vq_dtype_of(t[k]));
        int64_t span = esz;
        for (int i = 0; i < t[k]->ndim; i++) span += (t[k]->shape[i] - 1) * vq_stride(t[k], i) * esz;
        lo[k] = (uintptr_t)vq_data(t[k]);
        hi[k] = lo[k] + (uintptr_t)span;
    }
    return lo[0] < hi[1] && lo[1] < hi[0];
}

vq_status vq_cache_attend_check_io(vq_cache *c, int n_seq, const DLTensor *q, const DLTensor *out,
                                   const vq_cache_attend_opts *opts, int64_t *Sq, vq_attn_view *lse)
{
    vq_ctx *ctx = c->ctx;
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, q, "q", VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, q, "q", 4, (const int64_t[]){n_seq, c->Hq, -1, c->D}));
    *Sq = q->shape[2];
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, out, "out", VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, out, "out", 4, (const int64_t[]){n_seq, c->Hq, *Sq, c->D}));
    VQ_FORWARD_IF_ERROR(vq_check_no_overlap(ctx, out, "out"));
    VQ_RETURN_IF(ctx, spans_meet(q, out), VQ_ERR_INVALID_ARGUMENT, "argument 'out' overlaps argument 'q'");
    const vq_attn_dims dims = {n_seq, c->Hq, c->Hkv, *Sq, 1, c->D};
    VQ_FORWARD_IF_ERROR(vq_attn_check_lse(ctx, opts ? opts->lse_out : NULL, "opts->lse_out", &dims, lse));
    VQ_RETURN_IF(ctx, opts && (!isfinite(opts->scale) || opts->scale < 0), VQ_ERR_INVALID_ARGUMENT,
                 "argument 'opts->scale': expected a finite value >= 0 (0 = 1/sqrt(D)), got %g", (double)opts->scale);
    const vq_key_scores ks = opts ? opts->key_scores : VQ_KEY_SCORES_AUTO;
    VQ_RETURN_IF(ctx, ks != VQ_KEY_SCORES_AUTO && ks != VQ_KEY_SCORES_F32 && ks != VQ_KEY_SCORES_INT8,
                 VQ_ERR_INVALID_ARGUMENT, "argument 'opts->key_scores': expected VQ_KEY_SCORES_AUTO, _F32 or _INT8, got %d",
                 (int)ks);
    const vq_value_accum va = opts ? opts->value_accum : VQ_VALUE_ACCUM_AUTO;
    VQ_RETURN_IF(ctx, va != VQ_VALUE_ACCUM_AUTO && va != VQ_VALUE_ACCUM_F32 && va != VQ_VALUE_ACCUM_INT8,
                 VQ_ERR_INVALID_ARGUMENT,
                 "argument 'opts->value_accum': expected VQ_VALUE_ACCUM_AUTO, _F32 or _INT8, got %d", (int)va);
    return VQ_OK;
}

static vq_status attend_cpu(vq_cache *c, int layer, int n_seq, vq_cache_seq_layer *const *sls, const DLTensor *q,
                            DLTensor *out, const vq_attn_view *lse, float scale, bool causal, int64_t Sq,
                            const vq_cache_attend_opts *opts)
{
    vq_ctx *ctx = c->ctx;
    vq_cache_layer *L = &c->layers[layer];
    const vq_key_scores ks = opts ? opts->key_scores : VQ_KEY_SCORES_AUTO;
    const vq_value_accum va = opts ? opts->value_accum : VQ_VALUE_ACCUM_AUTO;
    for (int k = 0; k < L->n_chunks; k++) {
        const vq_cache_binding *bd = &L->bindings[k];
        if (!bd->valid || bd->scale != scale || bd->Sq != Sq || bd->ks != ks || bd->va != va)
            VQ_FORWARD_IF_ERROR(bind_chunk(c, L, k, scale, Sq, ks, va));
    }
    int64_t n_segs = 0;
    for (int i = 0; i < n_seq; i++) n_segs += sls[i]->n_pages + 1;
    const size_t wb = sizeof(window_binding) * (size_t)(L->res_cap > 0 ? n_seq : 0);
    const size_t sb = sizeof(vq_attn_segment) * (size_t)n_segs, ob = sizeof(int64_t) * (size_t)(2 * n_seq + 1);
    unsigned char *hs = vq_cache_host_scratch(c, 0, wb + sb + ob + 128);
    if (hs == NULL) return VQ_ERR_OUT_OF_MEMORY;
    window_binding *wins = (window_binding *)(void *)hs;
    vq_attn_segment *segs = (vq_attn_segment *)(void *)(hs + ((wb + 63) & ~(size_t)63));
    int64_t *seg_off = (int64_t *)(void *)((unsigned char *)segs + ((sb + 63) & ~(size_t)63));
    int64_t *skv = seg_off + n_seq + 1;
    /* a stream of one row per page (KIVI keys with group = page) has a size-1
     * row axis, which a tensor view steps by 0: such layers keep a segment per page */
    bool runs = true;
    for (int s = 0; s < L->n_streams; s++) runs &= !(L->streams[s].per_head && L->streams[s].rows == 1);
    int64_t ns = 0, max_skv = 0;
    for (int i = 0; i < n_seq; i++) {
        const vq_cache_seq_layer *sl = sls[i];
        seg_off[i] = ns;
        /* one segment per run of consecutive pages of one chunk (stream_view) */
        for (int64_t pi = 0, prev_ci = -1, next_idx = -1; pi < sl->n_pages; pi++) {
            int64_t idx;
            const int ci = vq_cache_chunk_index(L, sl->pages[pi], &idx);
            const int64_t left = sl->n_enc - (sl->p0 + pi) * c->P, n = left < c->P ? left : c->P;
            if (runs && ci == prev_ci && idx == next_idx) {
                segs[ns - 1].n += n;
            } else {
                segs[ns++] = (vq_attn_segment){&L->bindings[ci].keys, &L->bindings[ci].values, idx, n, 0};
                prev_ci = ci;
            }
            next_idx = idx + 1;
        }
        if (L->res_cap > 0) {
            VQ_FORWARD_IF_ERROR(bind_window(c, L, sl, scale, Sq, &wins[i]));
            if (sl->n > sl->n_enc) segs[ns++] = (vq_attn_segment){&wins[i].keys, &wins[i].values, 0, sl->n - sl->n_enc, 1};
        }
        /* the kv axis starts at the first token not evicted (the sliding
         * window's lower bound is relative to each row's end: the same there) */
        skv[i] = sl->n - vq_cache_first_token(c, sl);
        if (skv[i] > max_skv) max_skv = skv[i];
    }
    seg_off[n_seq] = ns;
    const vq_attn_dims dims = {n_seq, c->Hq, c->Hkv, Sq, max_skv, c->D};
    vq_attn_problem p;
    vq_attn_problem_init(&p, &dims, q, out, lse);
    p.causal = causal;
    p.window = L->sliding;
    p.window_keep = 0; /* tokens at the head of every row the window spares: none, the pages lead the axis */
    p.segs = segs;
    p.seg_off = seg_off;
    p.skv = skv;
    p.kinds[0] = (vq_attn_kind){&L->bindings[0].keys, &L->bindings[0].values};
    p.n_kinds = 1;
    if (L->res_cap > 0) {
        p.kinds[1] = (vq_attn_kind){&wins[0].keys, &wins[0].values};
        p.n_kinds = 2;
    }
    p.keys = p.kinds[0].keys;
    p.values = p.kinds[0].values;
    return vq_attn_run(ctx, &p);
}

vq_status vq_cache_attend(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *q,
                          DLTensor *out, const vq_cache_attend_opts *opts)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    vq_ctx *ctx = c->ctx;
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, layer < 0 || layer >= c->L, VQ_ERR_INVALID_ARGUMENT, "argument 'layer': %d outside [0, %d)",
                 layer, c->L);
    VQ_RETURN_IF(ctx, n_seq < 1 || n_seq > (1 << 20), VQ_ERR_INVALID_ARGUMENT,
                 "argument 'n_seq': expected 1..2^20, got %d", n_seq);
    VQ_RETURN_IF(ctx, seq_ids == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'seq_ids' is NULL");
    if (vq_cache_recipe_on(c, layer)) return vq_cache_recipe_attend(c, layer, n_seq, seq_ids, q, out, opts);
    return vq_cache_attend_tokens(c, layer, n_seq, seq_ids, q, out, opts);
}

vq_status vq_cache_attend_tokens(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *q,
                                 DLTensor *out, const vq_cache_attend_opts *opts)
{
    vq_ctx *ctx = c->ctx;
    int64_t Sq;
    vq_attn_view lse;
    VQ_FORWARD_IF_ERROR(vq_cache_attend_check_io(c, n_seq, q, out, opts, &Sq, &lse));
    /* the sequences' layer states, then their slots (the CUDA page tables are per slot) */
    vq_cache_seq_layer **sls = vq_cache_host_scratch(c, 1, (sizeof *sls + sizeof(int)) * (size_t)n_seq);
    if (sls == NULL) return VQ_ERR_OUT_OF_MEMORY;
    int *slots = (int *)(sls + n_seq);
    for (int i = 0; i < n_seq; i++) {
        vq_cache_seq *s = vq_cache_find_seq(c, seq_ids[i]);
        VQ_RETURN_IF(ctx, s == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'seq_ids[%d]': no sequence with id %lld", i,
                     (long long)seq_ids[i]);
        sls[i] = &s->layers[layer];
        slots[i] = (int)(s - c->seqs);
        /* a sliding-window layer: the oldest token any row needs must not be evicted */
        const int64_t W = c->layers[layer].sliding, first = vq_cache_first_token(c, sls[i]);
        const bool causal_rows = opts && opts->causal;
        const int64_t need = (causal_rows ? sls[i]->n - Sq + 1 : sls[i]->n) - W;
        const int64_t at = need + sls[i]->n_sink; /* in sequence positions: the pages count after the sinks */
        VQ_RETURN_IF(ctx, first > 0 && need < first, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'q': %s of sequence %lld need%s token %lld of layer %d, but its sliding window of %lld "
                     "evicted the tokens below %lld (attend after the append of the queries' tokens)",
                     causal_rows ? "the causal rows" : "the rows", (long long)seq_ids[i], Sq > 1 ? "" : "s",
                     (long long)(at < 0 ? 0 : at), layer, (long long)W, (long long)(first + sls[i]->n_sink));
    }
    const float scale = opts && opts->scale > 0 ? opts->scale : 1.0f / sqrtf((float)c->D);
    const bool causal = opts && opts->causal;
#ifdef VQ_WITH_CUDA
    if (c->cuda)
        return vq_cache_attend_cuda(c, layer, n_seq, sls, slots, q, out, opts ? opts->lse_out : NULL, scale, causal,
                                    Sq);
#endif
    return attend_cpu(c, layer, n_seq, sls, q, out, &lse, scale, causal, Sq, opts);
}
