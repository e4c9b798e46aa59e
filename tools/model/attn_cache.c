/* attn_cache.c — attention through the library's KV cache (vq_cache): the
 * session owns one cache with one sequence; each layer's step appends the
 * chunk's keys and values (RoPE applied, f32 [T, Hkv, D] viewed as
 * [1, Hkv, T, D] through strides: no copy) and attends the chunk's queries
 * over everything cached, causally. */
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

/* The first chunk after a reset fixes the layer's means (center) and key
 * channel scales (smooth) from its T tokens. */
static void fit_transform(vqm_session *s, int layer, int64_t T)
{
    const vqm_config *c = &s->m->cfg;
    const int D = c->head_dim, kvd = c->n_kv_heads * D, G = c->n_heads / c->n_kv_heads;
    float *mk = s->mu_k + (size_t)layer * kvd, *mv = s->mu_v + (size_t)layer * kvd;
    float *sk = s->sk + (size_t)layer * kvd;
    /* the sequence's first token (the attention sink, whose keys and values
     * are far from the rest) stays out of the statistics */
    const int64_t t0 = s->n_past == 0 && T > 1 ? 1 : 0;
    for (int i = 0; i < kvd; i++) {
        double a = 0, b = 0;
        for (int64_t t = t0; t < T; t++) {
            a += s->kb[t * kvd + i];
            b += s->vb[t * kvd + i];
        }
        mk[i] = s->cfg.center ? (float)(a / (T - t0)) : 0.0f;
        mv[i] = s->cfg.center && !s->cfg.center_keys_only ? (float)(b / (T - t0)) : 0.0f;
        sk[i] = 1.0f;
    }
    if (!s->cfg.smooth) return;
    for (int h = 0; h < c->n_kv_heads; h++) {
        double logsum = 0;
        for (int e = 0; e < D; e++) {
            const int i = h * D + e;
            double kk = 0, qq = 0;
            for (int64_t t = t0; t < T; t++) {
                const double k = s->kb[t * kvd + i] - mk[i];
                kk += k * k;
                for (int g = 0; g < G; g++) {
                    const double q = s->q[(t * c->n_heads + h * G + g) * D + e];
                    qq += q * q;
                }
            }
            const double r = sqrt(sqrt(qq / ((T - t0) * G) + 1e-12) / sqrt(kk / (T - t0) + 1e-12));
            sk[i] = (float)r;
            logsum += log(r);
        }
        const double gm = exp(logsum / D);
        for (int e = 0; e < D; e++) {
            const double v = sk[h * D + e] / gm;
            sk[h * D + e] = (float)(v < 0.125 ? 0.125 : v > 8 ? 8 : v);
        }
    }
}

/* Stores the chunk as (k - mk) * sk and v - mv, queries as q / sk (see
 * vqm_session_config.center / smooth). */
static void transform_chunk(vqm_session *s, int layer, int64_t T)
{
    const vqm_config *c = &s->m->cfg;
    const int D = c->head_dim, kvd = c->n_kv_heads * D, G = c->n_heads / c->n_kv_heads;
    if (!s->mu_set[layer]) {
        fit_transform(s, layer, T);
        s->mu_set[layer] = true;
    }
    const float *mk = s->mu_k + (size_t)layer * kvd, *mv = s->mu_v + (size_t)layer * kvd;
    const float *sk = s->sk + (size_t)layer * kvd;
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < kvd; i++) {
            s->kb[t * kvd + i] = (s->kb[t * kvd + i] - mk[i]) * sk[i];
            s->vb[t * kvd + i] -= mv[i];
        }
    if (s->cfg.smooth)
        for (int64_t t = 0; t < T; t++)
            for (int h = 0; h < c->n_heads; h++)
                for (int e = 0; e < D; e++) s->q[(t * c->n_heads + h) * D + e] /= sk[(h / G) * D + e];
}

/* out += mv of each query head's kv head (0 without center). */
static void uncenter_output(vqm_session *s, int layer, int64_t T)
{
    const vqm_config *c = &s->m->cfg;
    const int D = c->head_dim, G = c->n_heads / c->n_kv_heads;
    const float *mv = s->mu_v + (size_t)layer * c->n_kv_heads * D;
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < c->n_heads; h++) {
            float *o = s->att + ((size_t)t * c->n_heads + (size_t)h) * D;
            const float *m = mv + (size_t)(h / G) * D;
            for (int e = 0; e < D; e++) o[e] += m[e];
        }
}

/* Attention of rows [0, T) over the sink tokens, merged with the cache's
 * result for rows >= ns (out_c, lse): out = (e^lse out_c + sum_j e^s_j v_j) /
 * (e^lse + sum_j e^s_j); rows < ns are sink positions and see sinks only. */
static void merge_sinks(vqm_session *s, int layer, int64_t T, int64_t ns)
{
    const vqm_config *c = &s->m->cfg;
    const int D = c->head_dim, kvd = c->n_kv_heads * D, G = c->n_heads / c->n_kv_heads, Hq = c->n_heads;
    const uint16_t *K = s->sink_k + (size_t)layer * s->cfg.sink * kvd, *V = s->sink_v + (size_t)layer * s->cfg.sink * kvd;
    const double scale = c->attn_scale;
    for (int64_t t = 0; t < T; t++) {
        const int64_t pos = s->n_past + t;
        const int nvis = (int)(pos + 1 < s->cfg.sink ? pos + 1 : s->cfg.sink);
        for (int h = 0; h < Hq; h++) {
            const float *q = s->q + ((size_t)t * Hq + (size_t)h) * D;
            float *o = s->att + ((size_t)t * Hq + (size_t)h) * D;
            double sc[64], mx = -INFINITY;
            for (int j = 0; j < nvis; j++) {
                const uint16_t *k = K + (size_t)j * kvd + (size_t)(h / G) * D;
                double d = 0;
                for (int e = 0; e < D; e++) d += (double)q[e] * vq_f16_to_f32(k[e]);
                sc[j] = d * scale;
                if (sc[j] > mx) mx = sc[j];
            }
            const double lse = t >= ns ? s->lse[(size_t)h * (size_t)(T - ns) + (size_t)(t - ns)] : -INFINITY;
            if (lse > mx) mx = lse;
            const double wc = t >= ns ? exp(lse - mx) : 0;
            double sum = wc, acc[256];
            for (int e = 0; e < D; e++) acc[e] = wc * o[e];
            for (int j = 0; j < nvis; j++) {
                const double w = exp(sc[j] - mx);
                const uint16_t *v = V + (size_t)j * kvd + (size_t)(h / G) * D;
                sum += w;
                for (int e = 0; e < D; e++) acc[e] += w * vq_f16_to_f32(v[e]);
            }
            for (int e = 0; e < D; e++) o[e] = (float)(acc[e] / sum);
        }
    }
}

static vq_status cache_step(vqm_session *s, int layer, int64_t T, char *err)
{
    if (s->local_f32 && s->m->layers[layer].local) return vqm_attn_f32_step(s, layer, T, err);
    const vqm_config *c = &s->m->cfg;
    const int D = c->head_dim, kvd = c->n_kv_heads * D, qd = c->n_heads * D;
    const bool transform = s->cfg.center || s->cfg.smooth;
    if (transform) transform_chunk(s, layer, T);
    /* the chunk's first ns rows are sink positions: kept here, not in the cache */
    const int64_t ns = s->n_past < s->cfg.sink ? (T < s->cfg.sink - s->n_past ? T : s->cfg.sink - s->n_past) : 0;
    if (ns > 0) {
        const size_t at = ((size_t)layer * s->cfg.sink + (size_t)s->n_past) * kvd;
        for (size_t i = 0; i < (size_t)ns * kvd; i++) {
            s->sink_k[at + i] = vq_f32_to_f16(s->kb[i]);
            s->sink_v[at + i] = vq_f32_to_f16(s->vb[i]);
        }
    }
    const int64_t Tc = T - ns;
    if (Tc > 0) {
        int64_t sh[5][4], st[4][4];
        const DLTensor k = view(s->kb + ns * kvd, sh[0], st[0], c->n_kv_heads, Tc, D);
        const DLTensor v = view(s->vb + ns * kvd, sh[1], st[1], c->n_kv_heads, Tc, D);
        const DLTensor q = view(s->q + ns * qd, sh[2], st[2], c->n_heads, Tc, D);
        DLTensor out = view(s->att + ns * qd, sh[3], st[3], c->n_heads, Tc, D);
        DLTensor lse;
        memset(&lse, 0, sizeof lse);
        sh[4][0] = 1; sh[4][1] = c->n_heads; sh[4][2] = Tc;
        lse.data = s->lse;
        lse.device = (DLDevice){kDLCPU, 0};
        lse.ndim = 3;
        lse.dtype = (DLDataType){kDLFloat, 32, 1};
        lse.shape = sh[4];
        vq_status r = vq_cache_append(s->cache, layer, 1, &s->seq, &k, &v, NULL);
        if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_append");
        const vq_cache_attend_opts opts = {.scale = c->attn_scale, .causal = Tc > 1, .lse_out = s->cfg.sink > 0 ? &lse : NULL,
                                           .key_scores = s->cfg.key_scores, .value_accum = s->cfg.value_accum};
        r = vq_cache_attend(s->cache, layer, 1, &s->seq, &q, &out, &opts);
        if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_attend");
    }
    if (s->cfg.sink > 0) merge_sinks(s, layer, T, ns);
    if (transform) uncenter_output(s, layer, T);
    return VQ_OK;
}

static vq_status cache_reset(vqm_session *s, char *err)
{
    if (s->mu_set != NULL) memset(s->mu_set, 0, (size_t)s->m->cfg.n_layers * sizeof *s->mu_set);
    vq_status r = vq_cache_seq_remove(s->cache, s->seq);
    if (r == VQ_OK) r = vq_cache_seq_add(s->cache, &s->seq);
    return r == VQ_OK ? VQ_OK : cache_fail(s, err, r, "vq_cache_seq_remove/add");
}

static void cache_free(vqm_session *s)
{
    vq_cache_free(s->cache);
    s->cache = NULL;
    free(s->mu_k);
    free(s->mu_v);
    free(s->sk);
    free(s->mu_set);
    free(s->sink_k);
    free(s->sink_v);
    free(s->lse);
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
    /* a fixed pool that holds max_tokens tokens (plus the page a residual window may straddle) */
    cc.capacity_pages = (s->cfg.max_tokens + page - 1) / page + 1;
    cc.grow_pages = 0;
    cc.max_sequences = 1;
    vq_status r = vq_cache_create(s->ctx, &cc, &s->cache);
    if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_create");
    s->attn_free = cache_free;
    if (s->cfg.center || s->cfg.smooth) {
        const size_t n = (size_t)c->n_layers * (size_t)c->n_kv_heads * (size_t)c->head_dim;
        s->mu_k = malloc(n * sizeof(float));
        s->mu_v = malloc(n * sizeof(float));
        s->sk = malloc(n * sizeof(float));
        s->mu_set = calloc((size_t)c->n_layers, sizeof *s->mu_set);
        if (s->mu_k == NULL || s->mu_v == NULL || s->sk == NULL || s->mu_set == NULL)
            return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "session: out of memory for the centering means");
    }
    r = vq_cache_seq_add(s->cache, &s->seq);
    if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_seq_add");
    /* A session longer than the sliding window: the local layers' keys and
     * values stay in the runtime's f32 store, which masks the tokens past
     * the window, and never enter the cache (which would attend them all). */
    if (c->sliding_window > 0 && s->cfg.max_tokens > c->sliding_window) {
        s->local_f32 = true;
        const vq_status st = vqm_attn_f32_alloc(s, true, err);
        if (st != VQ_OK) return st;
    }
    if (s->cfg.sink < 0 || s->cfg.sink > 64)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session: sink is %d, expected 0..64", s->cfg.sink);
    if (s->cfg.sink > 0) {
        const size_t n = (size_t)c->n_layers * (size_t)s->cfg.sink * (size_t)c->n_kv_heads * (size_t)c->head_dim;
        s->sink_k = malloc(n * sizeof(uint16_t));
        s->sink_v = malloc(n * sizeof(uint16_t));
        s->lse = malloc((size_t)s->cfg.max_batch * (size_t)c->n_heads * sizeof(float));
        if (s->sink_k == NULL || s->sink_v == NULL || s->lse == NULL)
            return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "session: out of memory for the sink tokens");
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
    const vqm_config *c = &s->m->cfg;
    const int64_t n_sink = s->n_past < s->cfg.sink ? s->n_past : s->cfg.sink;
    const int64_t elems = (int64_t)c->n_kv_heads * c->head_dim; /* per token, keys or values */
    /* the sink tokens of the cache's layers, and the local layers' f32 store
     * (counted as f32 sink-like extra: bytes and tokens outside the cache) */
    int n_local = 0;
    for (int l = 0; s->local_f32 && l < c->n_layers; l++) n_local += s->m->layers[l].local;
    const int64_t local_bytes = (int64_t)n_local * s->n_past * elems * 2 * (int64_t)sizeof(float);
    out->residual_bytes += local_bytes;
    out->total_bytes += local_bytes;
    out->tokens += (int64_t)n_local * s->n_past;
    const int64_t sink_bytes = (int64_t)(c->n_layers - n_local) * n_sink * elems * 2 * (int64_t)sizeof(uint16_t);
    out->residual_bytes += sink_bytes;
    out->total_bytes += sink_bytes;
    out->tokens += (int64_t)(c->n_layers - n_local) * n_sink;
    const double den = (double)out->tokens * (double)elems * 2;
    out->bits_per_element = den > 0 ? (double)(out->code_bytes + out->param_bytes + out->residual_bytes) * 8 / den : 0;
    /* keys and values: the sink and the local store add the same bytes to each */
    const double half = den / 2, sink_half = (double)(sink_bytes + local_bytes) / 2 * 8;
    const double cache_half =
        (double)(out->tokens - (int64_t)(c->n_layers - n_local) * n_sink - (int64_t)n_local * s->n_past) * (double)elems;
    out->key_bits_per_element = half > 0 ? (out->key_bits_per_element * cache_half + sink_half) / half : 0;
    out->value_bits_per_element = half > 0 ? (out->value_bits_per_element * cache_half + sink_half) / half : 0;
    return VQ_OK;
}

vq_status vqm_session_fill_random(vqm_session *s, int64_t n, uint64_t seed, char *err)
{
    if (s == NULL || s->cache == NULL || s->cfg.sink != 0 || n < 0 || s->n_past + n > s->cfg.max_tokens)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT,
                        "fill: needs a vq_cache session without sink tokens and n in 0..max_tokens - length");
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
            if (s->local_f32 && s->m->layers[l].local) {
                const size_t at = ((size_t)s->f32_slot[l] * (size_t)s->cfg.max_tokens + (size_t)s->n_past) * (size_t)kvd;
                memcpy(s->kc + at, s->kb, (size_t)(T * kvd) * sizeof(float));
                memcpy(s->vc + at, s->vb, (size_t)(T * kvd) * sizeof(float));
                continue;
            }
            int64_t sh[2][4], st[2][4];
            const DLTensor k = view(s->kb, sh[0], st[0], c->n_kv_heads, T, D);
            const DLTensor v = view(s->vb, sh[1], st[1], c->n_kv_heads, T, D);
            const vq_status r = vq_cache_append(s->cache, l, 1, &s->seq, &k, &v, NULL);
            if (r != VQ_OK) return cache_fail(s, err, r, "vq_cache_append");
        }
        done += T;
        s->n_past += T;
    }
    return VQ_OK;
}
