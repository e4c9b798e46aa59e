/* cache_seq.c — sequences: add, remove, truncate, fork, length. A sequence
 * is a slot with a page table and a residual window per layer; forks share
 * pages (reference counts in the pool) and copy the windows (whatever their
 * storage: the bytes are copied). */
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"

vq_cache_seq *vq_cache_find_seq(const vq_cache *c, int64_t id)
{
    if (id < 0) return NULL;
    for (int i = 0; i < c->max_seqs; i++)
        if (c->seqs[i].id == id) return &c->seqs[i];
    return NULL;
}

vq_status vq_cache_check_batch(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids)
{
    vq_ctx *ctx = c->ctx;
    VQ_RETURN_IF(ctx, layer < 0 || layer >= c->L, VQ_ERR_INVALID_ARGUMENT, "argument 'layer': %d outside [0, %d)",
                 layer, c->L);
    VQ_RETURN_IF(ctx, n_seq < 1 || n_seq > c->max_seqs, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'n_seq': expected 1..%d, got %d", c->max_seqs, n_seq);
    VQ_RETURN_IF(ctx, seq_ids == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'seq_ids' is NULL");
    return VQ_OK;
}

vq_status vq_cache_seq_layer_of(vq_cache *c, int layer, const int64_t *ids, int i, vq_cache_seq_layer **out)
{
    vq_cache_seq *q = vq_cache_find_seq(c, ids[i]);
    VQ_RETURN_IF(c->ctx, q == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'seq_ids[%d]': no sequence with id %lld", i,
                 (long long)ids[i]);
    for (int j = 0; j < i; j++)
        VQ_RETURN_IF(c->ctx, ids[j] == ids[i], VQ_ERR_INVALID_ARGUMENT,
                     "argument 'seq_ids': id %lld appears twice (%d and %d)", (long long)ids[i], j, i);
    *out = &q->layers[layer];
    return VQ_OK;
}

int64_t vq_cache_target_enc(const vq_cache *c, const vq_cache_layer *L, int64_t n)
{
    if (L->res_cap == 0) return n;
    const int64_t e = (n - c->R) / L->g * L->g;
    return n - c->R < 0 ? 0 : e;
}

void vq_cache_evict(vq_cache *c, vq_cache_layer *L, vq_cache_seq_layer *sl, int64_t below)
{
    if (L->sliding <= 0 || below <= 0) return;
    const int64_t full = sl->n_enc / c->P, upto = below / c->P < full ? below / c->P : full, k = upto - sl->p0;
    if (k <= 0) return;
    for (int64_t i = 0; i < k; i++) vq_cache_pool_release(L, sl->pages[i]);
    memmove(sl->pages, sl->pages + k, sizeof *sl->pages * (size_t)(sl->n_pages - k));
    sl->n_pages -= k;
    sl->p0 = upto;
}

static size_t res_bytes(const vq_cache *c, const vq_cache_layer *L) { return vq_cache_window_bytes(c, L); }

static void free_seq(vq_cache *c, vq_cache_seq *q)
{
    for (int l = 0; q->layers && l < c->L; l++) {
        vq_cache_seq_layer *sl = &q->layers[l];
        for (int64_t i = 0; i < sl->n_pages; i++) vq_cache_pool_release(&c->layers[l], sl->pages[i]);
        vq_cache_mem_free(c, sl->res);
        free(sl->pages);
        vq_cache_recipe_seq_free(c, sl);
    }
    free(q->layers);
    q->layers = NULL;
    q->id = -1;
}

/* A free slot with its per-layer state allocated (page tables of `pages`
 * entries at least, windows), or NULL with the message set. */
static vq_status new_seq(vq_cache *c, const vq_cache_seq *like, vq_cache_seq **out)
{
    vq_ctx *ctx = c->ctx;
    vq_cache_seq *q = NULL;
    for (int i = 0; i < c->max_seqs && q == NULL; i++)
        if (c->seqs[i].id < 0) q = &c->seqs[i];
    VQ_RETURN_IF(ctx, q == NULL, VQ_ERR_INVALID_ARGUMENT, "the cache holds max_sequences = %d sequences already",
                 c->max_seqs);
    q->layers = calloc((size_t)c->L, sizeof *q->layers);
    bool ok = q->layers != NULL;
    for (int l = 0; ok && l < c->L; l++) {
        vq_cache_seq_layer *sl = &q->layers[l];
        const vq_cache_layer *L = &c->layers[l];
        sl->cap_pages = like ? like->layers[l].n_pages : 0;
        if (sl->cap_pages < 16) sl->cap_pages = 16;
        sl->pages = malloc(sizeof *sl->pages * (size_t)sl->cap_pages);
        ok = sl->pages != NULL;
        if (ok && L->res_cap > 0) ok = (sl->res = vq_cache_mem_alloc(c, res_bytes(c, L))) != NULL;
        /* zeroed like the pages: a fork copies the whole window, rows not yet
         * written included, and a copy must not read uninitialised memory */
        if (ok && L->res_cap > 0) ok = vq_cache_mem_zero(c, sl->res, res_bytes(c, L)) == VQ_OK;
        if (ok) ok = vq_cache_recipe_seq_alloc(c, l, sl);
    }
    if (!ok) {
        q->id = 0; /* free_seq resets it */
        free_seq(c, q);
        return vq_fail(ctx, VQ_ERR_OUT_OF_MEMORY, "cannot allocate a sequence");
    }
    *out = q;
    return VQ_OK;
}

vq_status vq_cache_seq_add(vq_cache *c, int64_t *seq_id_out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    VQ_RETURN_IF(c->ctx, seq_id_out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'seq_id_out' is NULL");
    vq_cache_seq *q;
    VQ_FORWARD_IF_ERROR(new_seq(c, NULL, &q));
    q->id = c->next_id++;
    c->n_live++;
    *seq_id_out = q->id;
    return VQ_OK;
}

static vq_status lookup(vq_cache *c, int64_t id, const char *name, vq_cache_seq **out)
{
    *out = vq_cache_find_seq(c, id);
    VQ_RETURN_IF(c->ctx, *out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument '%s': no sequence with id %lld", name,
                 (long long)id);
    return VQ_OK;
}

vq_status vq_cache_seq_remove(vq_cache *c, int64_t seq_id)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    vq_cache_seq *q;
    VQ_FORWARD_IF_ERROR(lookup(c, seq_id, "seq_id", &q));
    free_seq(c, q);
    c->n_live--;
    return VQ_OK;
}

vq_status vq_cache_seq_truncate(vq_cache *c, int64_t seq_id, int64_t n_tokens)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    vq_cache_seq *q;
    VQ_FORWARD_IF_ERROR(lookup(c, seq_id, "seq_id", &q));
    VQ_RETURN_IF(c->ctx, n_tokens < 0, VQ_ERR_INVALID_ARGUMENT, "argument 'n_tokens' must be >= 0, got %lld",
                 (long long)n_tokens);
    /* check every layer before changing any; n and n_enc count the tokens
     * after the sinks */
    for (int l = 0; l < c->L; l++) {
        const vq_cache_seq_layer *sl = &q->layers[l];
        const int64_t g = c->layers[l].g, W = c->layers[l].sliding;
        const int64_t keep = n_tokens > sl->n_sink ? n_tokens - sl->n_sink : 0;
        /* the next token's window must still be held */
        VQ_RETURN_IF(c->ctx, keep < sl->n && sl->p0 > 0 && vq_cache_first_token(c, sl) > keep + 1 - W,
                     VQ_ERR_UNSUPPORTED,
                     "layer %d: n_tokens = %lld needs tokens from %lld on (its sliding window of %lld), but the layer "
                     "evicted the tokens below %lld",
                     l, (long long)n_tokens, (long long)(n_tokens + 1 - W), (long long)W,
                     (long long)(vq_cache_first_token(c, sl) + sl->n_sink));
        VQ_RETURN_IF(c->ctx, keep < sl->n_enc && keep % g != 0, VQ_ERR_UNSUPPORTED,
                     "layer %d: n_tokens = %lld cuts an encoded KIVI key group of %lld tokens (its other tokens "
                     "are no longer held in f16; a residual window of at least the rollback depth avoids this)",
                     l, (long long)n_tokens, (long long)g);
    }
    for (int l = 0; l < c->L; l++) {
        vq_cache_seq_layer *sl = &q->layers[l];
        if (n_tokens >= sl->n_sink + sl->n) continue;
        const int64_t keep = n_tokens > sl->n_sink ? n_tokens - sl->n_sink : 0;
        if (n_tokens < sl->n_sink) sl->n_sink = n_tokens;
        /* fitted tables go with the tokens they were fitted on */
        if (n_tokens == 0) vq_cache_recipe_forget_tables(c, l, sl);
        if (keep < sl->n_enc) {
            sl->n_enc = keep;
            const int64_t kp = vq_ceil_div(keep, c->P) - sl->p0; /* >= 0: checked above */
            for (int64_t i = kp; i < sl->n_pages; i++) vq_cache_pool_release(&c->layers[l], sl->pages[i]);
            sl->n_pages = kp;
        }
        sl->n = keep;
    }
    return VQ_OK;
}

vq_status vq_cache_seq_fork(vq_cache *c, int64_t src_seq_id, int64_t *dst_seq_id_out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    VQ_RETURN_IF(c->ctx, dst_seq_id_out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'dst_seq_id_out' is NULL");
    vq_cache_seq *src;
    VQ_FORWARD_IF_ERROR(lookup(c, src_seq_id, "src_seq_id", &src));
    vq_cache_seq *q;
    VQ_FORWARD_IF_ERROR(new_seq(c, src, &q));
    for (int l = 0; l < c->L; l++) {
        const vq_cache_seq_layer *a = &src->layers[l];
        vq_cache_seq_layer *b = &q->layers[l];
        const vq_cache_layer *L = &c->layers[l];
        if (L->res_cap > 0 && a->n > a->n_enc) {
            const vq_status s = vq_cache_mem_copy2d(c, b->res, res_bytes(c, L), a->res, res_bytes(c, L),
                                                    res_bytes(c, L), 1);
            if (s != VQ_OK) {
                q->id = 0;
                free_seq(c, q);
                return s;
            }
        }
    }
    for (int l = 0; l < c->L; l++) {
        const vq_cache_seq_layer *a = &src->layers[l];
        vq_cache_seq_layer *b = &q->layers[l];
        memcpy(b->pages, a->pages, sizeof *a->pages * (size_t)a->n_pages);
        for (int64_t i = 0; i < a->n_pages; i++) c->layers[l].refcount[a->pages[i]]++;
        b->n = a->n;
        b->n_enc = a->n_enc;
        b->p0 = a->p0;
        b->n_pages = a->n_pages;
        b->n_sink = a->n_sink;
        if (a->sink != NULL) memcpy(b->sink, a->sink, vq_cache_sink_bytes(c));
        if (a->xf != NULL) memcpy(b->xf, a->xf, vq_cache_xf_bytes(c, l));
        b->xf_set = a->xf_set;
    }
    q->id = c->next_id++;
    c->n_live++;
    *dst_seq_id_out = q->id;
    return VQ_OK;
}

int64_t vq_cache_seq_length(const vq_cache *c, int64_t seq_id, int layer)
{
    if (c == NULL || layer < 0 || layer >= c->L) return -1;
    const vq_cache_seq *q = vq_cache_find_seq(c, seq_id);
    return q ? q->layers[layer].n_sink + q->layers[layer].n : -1;
}
