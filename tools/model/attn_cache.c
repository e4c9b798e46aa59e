/* attn_cache.c — attention through the library's KV cache (vq_cache): the
 * session owns one cache with one sequence; each layer's step appends the
 * chunk's keys and values (RoPE applied, f32 [T, Hkv, D] viewed as
 * [1, Hkv, T, D] through strides: no copy) and attends the chunk's queries
 * over everything cached, causally. The sink tokens, the centering and
 * smoothing transforms and the sliding windows of a model's local layers
 * are the cache's (vq_cache_config.sink_tokens, transforms,
 * sliding_windows). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

static vq_status cache_fail(vqm_session *s, char *err, vq_status st, const char *what)
{
    return vqm_fail(err, st, "%s failed: %s: %s", what, vq_status_string(st), vq_ctx_last_error(s->ctx));
}

/* [1, H, T, D] view of rows [T, H * D] starting at data. */
static DLTensor view(float *data, int64_t shape[4], int64_t strides[4], int H, int64_t T, int D)
{
    shape[0] = 1; shape[1] = H; shape[2] = T; shape[3] = D;
    strides[0] = T * H * D; strides[1] = D; strides[2] = (int64_t)H * D; strides[3] = 1;
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device = (DLDevice){kDLCPU, 0};
    t.ndim = 4;
    t.dtype = (DLDataType){kDLFloat, 32, 1};
    t.shape = shape;
    t.strides = strides;
    return t;
}

static vq_status cache_step(vqm_session *s, int layer, int64_t T, char *err)
{
    const vqm_config *c = &s->m->cfg;
    const int D = c->head_dim;
    int64_t sh[4][4], st[4][4];
    const DLTensor k = view(s->kb, sh[0], st[0], c->n_kv_heads, T, D);
    const DLTensor v = view(s->vb, sh[1], st[1], c->n_kv_heads, T, D);
    const DLTensor q = view(s->q, sh[2], st[2], c->n_heads, T, D);
    DLTensor out = view(s->att, sh[3], st[3], c->n_heads, T, D);
    /* the key scales of smooth are fitted from the first chunk's queries
     * (a no-op once the sequence has them) */
    vq_status r = VQ_OK;
    if (s->cfg.smooth) r = vq_cache_fit_transforms(s->cache, layer, 1, &s->seq, &k, &v, &q);
    if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_fit_transforms");
    r = vq_cache_append(s->cache, layer, 1, &s->seq, &k, &v, NULL);
    if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_append");
    const vq_cache_attend_opts opts = {.scale = c->attn_scale, .causal = T > 1, .key_scores = s->cfg.key_scores,
                                       .value_accum = s->cfg.value_accum};
    r = vq_cache_attend(s->cache, layer, 1, &s->seq, &q, &out, &opts);
    if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_attend");
    return VQ_OK;
}

static vq_status cache_reset(vqm_session *s, char *err)
{
    vq_status r = vq_cache_seq_remove(s->cache, s->seq);
    if (r == VQ_OK) r = vq_cache_seq_add(s->cache, &s->seq);
    return r == VQ_OK ? VQ_OK : cache_fail(s, err, r, "vq_cache_seq_remove/add");
}

static void cache_free(vqm_session *s)
{
    vq_cache_free(s->cache);
    s->cache = NULL;
}

vq_status vqm_attn_cache_init(vqm_session *s, char *err)
{
    const vqm_config *c = &s->m->cfg;
    vq_cache_config cc;
    if (s->cfg.cache != NULL) cc = *s->cfg.cache;
    else memset(&cc, 0, sizeof cc);
    if (cc.n_layers != 0 && cc.n_layers != c->n_layers)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session: cache config has %d layers, the model %d", cc.n_layers,
                        c->n_layers);
    cc.n_layers = c->n_layers;
    cc.n_kv_heads = c->n_kv_heads;
    cc.n_q_heads = c->n_heads;
    cc.head_dim = c->head_dim;
    const int page = cc.page_size > 0 ? cc.page_size : 256;
    /* a pool that holds max_tokens tokens (plus the page a residual window may straddle) */
    cc.capacity_pages = (s->cfg.max_tokens + page - 1) / page + 1;
    cc.grow_pages = 0;
    cc.max_sequences = 1;
    /* the local layers attend the newest sliding_window tokens: the cache
     * masks the older ones and returns their pages (a profile carries its
     * own windows, checked against the model's below) */
    int *wins = NULL;
    if (c->sliding_window > 0) {
        wins = calloc((size_t)c->n_layers, sizeof *wins);
        if (wins == NULL) return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "session: out of memory for the windows");
        for (int l = 0; l < c->n_layers; l++) wins[l] = vqm_layer_window(s->m, l);
        if (cc.profile == NULL && cc.sliding_windows == NULL) cc.sliding_windows = wins;
        /* A local layer holds its window, the chunk being appended (held whole
         * until the next append), the residual window and the pages these
         * straddle; the pool starts at that and grows once, in the global
         * layers only, to max_tokens. */
        const int64_t held = (int64_t)c->sliding_window + s->cfg.max_batch + cc.residual_tokens + 256;
        const int64_t local_pages = (held + page - 1) / page + 2;
        if (local_pages < cc.capacity_pages) {
            cc.grow_pages = cc.capacity_pages - local_pages;
            cc.capacity_pages = local_pages;
        }
    }
    if (s->cfg.sink < 0 || s->cfg.sink > 64)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session: sink is %d, expected 0..64", s->cfg.sink);
    cc.sink_tokens = s->cfg.sink;
    /* center and smooth: the cache's exact transforms on every layer, fitted
     * on the sequence's first chunk; all off given as such beside a preset,
     * which would otherwise apply its own (vq_cache_config.preset) */
    vq_cache_transforms *xf = NULL;
    if (s->cfg.center || s->cfg.smooth || cc.preset != NULL) {
        xf = calloc((size_t)c->n_layers, sizeof *xf);
        if (xf == NULL) return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "session: out of memory for the transforms");
        for (int l = 0; l < c->n_layers; l++)
            xf[l] = (vq_cache_transforms){.center_keys = s->cfg.center,
                                          .center_values = s->cfg.center && !s->cfg.center_keys_only,
                                          .smooth = s->cfg.smooth};
        cc.transforms = xf;
    }
    vq_status r = vq_cache_create(s->ctx, &cc, &s->cache);
    free(xf);
    if (r != VQ_OK) {
        free(wins);
        return cache_fail(s, err, r, "vq_cache_create");
    }
    s->attn_free = cache_free;
    /* windows given by the caller or a profile must be the model's: a local
     * layer that attends more (or a global one that attends less) computes
     * another model */
    for (int l = 0; wins != NULL && l < c->n_layers; l++) {
        int w = 0;
        vq_cache_get_sliding_window(s->cache, l, &w);
        if (w != wins[l]) {
            const int want = wins[l];
            free(wins);
            return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT,
                            "session: layer %d: the cache's sliding window is %d tokens, the model's (a %s layer) %d",
                            l, w, want > 0 ? "local" : "global", want);
        }
    }
    free(wins);
    r = vq_cache_seq_add(s->cache, &s->seq);
    if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_seq_add");
    /* transforms a profile gave: a smoothed layer fits its key scales from
     * the first chunk's queries, as with cfg.smooth */
    for (int l = 0; cc.profile != NULL && l < c->n_layers; l++) {
        vq_cache_transforms t;
        if (vq_cache_get_transforms(s->cache, s->seq, l, &t, NULL, NULL, NULL) == VQ_OK && t.smooth)
            s->cfg.smooth = true;
    }
    s->attn_step = cache_step;
    s->attn_reset = cache_reset;
    return VQ_OK;
}

vq_status vqm_session_memory(const vqm_session *s, vq_cache_memory_report *out, char *err)
{
    if (s == NULL || out == NULL || s->cache == NULL)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session memory: needs a vq_cache session and out");
    const vq_status r = vq_cache_memory(s->cache, out);
    if (r != VQ_OK) return vqm_fail(err, r, "vq_cache_memory failed: %s", vq_ctx_last_error(s->ctx));
    return VQ_OK;
}

vq_status vqm_session_fill_random(vqm_session *s, int64_t n, uint64_t seed, char *err)
{
    if (s == NULL || s->cache == NULL || n < 0 || s->n_past + n > s->cfg.max_tokens)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "fill: needs a vq_cache session and n in 0..max_tokens - length");
    const vqm_config *c = &s->m->cfg;
    const int D = c->head_dim, kvd = c->n_kv_heads * D;
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    for (int64_t done = 0; done < n;) {
        const int64_t T = n - done < s->cfg.max_batch ? n - done : s->cfg.max_batch;
        for (int l = 0; l < c->n_layers; l++) {
            for (int64_t i = 0; i < T * kvd; i++) {
                s->kb[i] = (float)vq_rng_normal(&rng);
                s->vb[i] = (float)vq_rng_normal(&rng);
            }
            int64_t sh[3][4], st[3][4];
            const DLTensor k = view(s->kb, sh[0], st[0], c->n_kv_heads, T, D);
            const DLTensor v = view(s->vb, sh[1], st[1], c->n_kv_heads, T, D);
            vq_status r = VQ_OK;
            if (s->cfg.smooth) { /* key scales from flat queries: the values do not matter here */
                for (int64_t i = 0; i < T * c->n_heads * D; i++) s->q[i] = 1.0f;
                const DLTensor q = view(s->q, sh[2], st[2], c->n_heads, T, D);
                r = vq_cache_fit_transforms(s->cache, l, 1, &s->seq, &k, &v, &q);
                if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_fit_transforms");
            }
            r = vq_cache_append(s->cache, l, 1, &s->seq, &k, &v, NULL);
            if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_append");
        }
        done += T;
        s->n_past += T;
    }
    return VQ_OK;
}
