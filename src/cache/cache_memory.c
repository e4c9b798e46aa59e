/* cache_memory.c — vq_cache_memory: bytes per part, counted from the pools
 * and the sequences (a page shared by forks counts once, filled as far as
 * its fullest holder). */
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"

vq_status vq_cache_memory(const vq_cache *c, vq_cache_memory_report *out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    VQ_RETURN_IF(c->ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    vq_cache_memory_report r = {0};
    double key_bytes = 0, value_bytes = 0;
    int64_t pool_bytes = 0, res_alloc = 0, table_alloc = 0;
    for (int l = 0; l < c->L; l++) {
        const vq_cache_layer *L = &c->layers[l];
        pool_bytes += L->n_pages * L->page_bytes + L->n_chunks * (int64_t)sizeof(vq_cache_binding);
        pool_bytes += L->n_pages * 8; /* refcount + free list */
        for (int t = 0; t < VQ_CT_COUNT; t++) {
            const vq_cache_table *tb = &L->tables[t];
            if (tb->host == NULL) continue;
            int64_t n = 1;
            for (int j = 0; j < tb->ndim; j++) n *= tb->shape[j];
            r.table_bytes += 4 * n;
            table_alloc += 4 * n;
        }
        r.table_bytes += (int64_t)vq_cache_xf_bytes(c, l);
        table_alloc += (int64_t)vq_cache_xf_bytes(c, l);
        /* fill of every page: the most tokens any holder keeps in it */
        int32_t *fill = calloc((size_t)(L->n_pages ? L->n_pages : 1), sizeof *fill);
        VQ_RETURN_IF(c->ctx, fill == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate the report's scratch");
        for (int i = 0; i < c->max_seqs; i++) {
            const vq_cache_seq *q = &c->seqs[i];
            if (q->id < 0) continue;
            const vq_cache_seq_layer *sl = &q->layers[l];
            r.tokens += sl->n_sink + sl->n - vq_cache_first_token(c, sl); /* a sliding window's evicted tokens are gone */
            /* sink tokens: f16 keys and values, outside the pages */
            const int64_t sink = sl->n_sink * c->Hkv * c->D * 2;
            r.residual_bytes += 2 * sink;
            key_bytes += (double)sink;
            value_bytes += (double)sink;
            res_alloc += (int64_t)(sl->sink ? vq_cache_sink_bytes(c) : 0);
            r.table_bytes += (int64_t)vq_cache_xf_bytes(c, l);
            table_alloc += (int64_t)vq_cache_xf_bytes(c, l);
            /* the window at its stored size (f16, or 8-bit codes + f32 scales) */
            const int64_t win = sl->n - sl->n_enc;
            for (int w = 0; w < L->n_wstreams; w++) {
                const int64_t b = win * c->Hkv * L->wstreams[w].row_bytes;
                r.residual_bytes += b;
                if (L->wstreams[w].is_key) key_bytes += (double)b;
                else value_bytes += (double)b;
            }
            res_alloc += (int64_t)vq_cache_window_bytes(c, L);
            pool_bytes += sl->cap_pages * 4;
            for (int64_t p = 0; p < sl->n_pages; p++) {
                const int64_t t0 = (sl->p0 + p) * c->P, f = sl->n_enc - t0 < c->P ? sl->n_enc - t0 : c->P;
                if (f > fill[sl->pages[p]]) fill[sl->pages[p]] = (int32_t)f;
            }
        }
        for (int64_t p = 0; p < L->n_pages; p++) {
            if (fill[p] == 0) continue;
            for (int s = 0; s < L->n_streams; s++) {
                const vq_cache_stream *st = &L->streams[s];
                const int64_t b = st->page_bytes * fill[p] / c->P;
                if (st->part == VQ_CACHE_PART_CODE) r.code_bytes += b;
                else r.param_bytes += b;
                if (st->is_key) key_bytes += (double)b;
                else value_bytes += (double)b;
            }
        }
        free(fill);
    }
    const int64_t used = r.code_bytes + r.param_bytes + r.residual_bytes;
    /* the append staging and host scratch are kept between calls: slack too */
    r.slack_bytes = pool_bytes + res_alloc + table_alloc + (int64_t)(c->stage.size + c->host[0].size + c->host[1].size + c->recipe.size) - used - r.table_bytes;
    r.total_bytes = used + r.table_bytes + r.slack_bytes;
    r.sequences = c->n_live;
    if (r.tokens > 0) {
        const double elems = (double)r.tokens * c->Hkv * c->D;
        r.bits_per_element = (double)used * 8.0 / (2.0 * elems);
        r.key_bits_per_element = key_bytes * 8.0 / elems;
        r.value_bits_per_element = value_bytes * 8.0 / elems;
    }
    *out = r;
    return VQ_OK;
}
