/* cache_pool.c — the per-layer page pool: chunks allocated once and never
 * moved (chunk 0: capacity_pages pages, later chunks grow_pages), a stack of
 * free pages and a reference count per page (forks share pages). */
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"

int vq_cache_chunk_index(const vq_cache_layer *L, int64_t page, int64_t *idx)
{
    int lo = 0, hi = L->n_chunks - 1;
    while (lo < hi) { /* the last chunk whose first_page <= page */
        const int mid = (lo + hi + 1) / 2;
        if (L->chunks[mid].first_page <= page) lo = mid;
        else hi = mid - 1;
    }
    *idx = page - L->chunks[lo].first_page;
    return lo;
}

/* Bytes of one head's rows of one page of stream st. */
static int64_t head_bytes(const vq_cache_stream *st)
{
    return st->rows * st->last * (int64_t)vq_dtype_size(st->dtype);
}

unsigned char *vq_cache_page_stream(const vq_cache_layer *L, int64_t page, int s)
{
    int64_t i;
    const vq_cache_chunk *ch = &L->chunks[vq_cache_chunk_index(L, page, &i)];
    const vq_cache_stream *st = &L->streams[s];
    const int64_t page_step = L->head_major && st->per_head ? head_bytes(st) : st->page_bytes;
    return ch->base + ch->n_pages * st->page_off + i * page_step;
}

int64_t vq_cache_head_pitch(const vq_cache_layer *L, int64_t page, int s)
{
    const vq_cache_stream *st = &L->streams[s];
    if (!L->head_major || !st->per_head) return head_bytes(st);
    int64_t i;
    return L->chunks[vq_cache_chunk_index(L, page, &i)].n_pages * head_bytes(st);
}

/* *p <- realloc(*p, n elements); unchanged on failure. */
static vq_status grow(vq_ctx *ctx, void **p, size_t elem, int64_t n)
{
    void *q = realloc(*p, elem * (size_t)n);
    VQ_RETURN_IF(ctx, q == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot grow a pool array to %lld entries", (long long)n);
    *p = q;
    return VQ_OK;
}

/* Adds a chunk of n pages (all free). */
static vq_status add_chunk(vq_cache *c, vq_cache_layer *L, int64_t n)
{
    vq_ctx *ctx = c->ctx;
    VQ_RETURN_IF(ctx, L->n_pages + n > INT32_MAX, VQ_ERR_OUT_OF_MEMORY, "a layer pool is limited to 2^31 pages");
    if (L->n_chunks == L->cap_chunks) {
        const int cap = L->cap_chunks ? 2 * L->cap_chunks : 4;
        VQ_FORWARD_IF_ERROR(grow(ctx, (void **)&L->chunks, sizeof *L->chunks, cap));
        VQ_FORWARD_IF_ERROR(grow(ctx, (void **)&L->bindings, sizeof *L->bindings, cap));
        L->cap_chunks = cap;
        /* the bindings point into themselves: moved ones must be rebound */
        for (int i = 0; i < L->n_chunks; i++) L->bindings[i].valid = false;
    }
    const int64_t total = L->n_pages + n;
    VQ_FORWARD_IF_ERROR(grow(ctx, (void **)&L->refcount, sizeof *L->refcount, total));
    VQ_FORWARD_IF_ERROR(grow(ctx, (void **)&L->free_list, sizeof *L->free_list, total));
    int32_t *rc = L->refcount, *fl = L->free_list;
    VQ_RETURN_IF(ctx, L->page_bytes > (int64_t)(SIZE_MAX / 2) / n, VQ_ERR_OUT_OF_MEMORY, "chunk size overflows");
    unsigned char *base = vq_cache_mem_alloc_pool(c, (size_t)(L->page_bytes * n));
    if (base == NULL)
        return vq_fail(ctx, VQ_ERR_OUT_OF_MEMORY, "cannot allocate a chunk of %lld pages (%lld bytes)",
                       (long long)n, (long long)(L->page_bytes * n));
    /* CommVQ positions are validated over the whole chunk when it is bound for
     * attention: pages not yet written must hold valid ones (0). A device
     * pool is zeroed whole (one memset per chunk): the unwritten rows of a
     * partly filled page are copied by forks and saved by persistence, and
     * must not be uninitialised memory there. */
    for (int s = 0; s < L->n_streams; s++)
        if (L->streams[s].dtype == VQ_DT_I32 || c->cuda) {
            const vq_status st = vq_cache_mem_zero(c, base + n * L->streams[s].page_off, (size_t)(n * L->streams[s].page_bytes));
            if (st != VQ_OK) {
                vq_cache_mem_free(c, base);
                return st;
            }
        }
    L->chunks[L->n_chunks] = (vq_cache_chunk){base, L->n_pages, n};
    L->bindings[L->n_chunks].valid = false;
    L->n_chunks++;
    /* free pages are taken from the top: push in reverse so page order follows the pool */
    for (int64_t p = total - 1; p >= L->n_pages; p--) {
        rc[p] = 0;
        fl[L->n_free++] = (int32_t)p;
    }
    L->n_pages = total;
    return VQ_OK;
}

vq_status vq_cache_pool_reserve(vq_cache *c, int l, int64_t n)
{
    vq_cache_layer *L = &c->layers[l];
    if (L->n_chunks == 0) VQ_FORWARD_IF_ERROR(add_chunk(c, L, c->capacity_pages));
    while (L->n_free < n) {
        VQ_RETURN_IF(c->ctx, c->grow_pages == 0, VQ_ERR_OUT_OF_MEMORY,
                     "layer %d: the pool of %lld pages is full (%lld free, %lld needed; grow_pages is 0)", l,
                     (long long)L->n_pages, (long long)L->n_free, (long long)n);
        VQ_FORWARD_IF_ERROR(add_chunk(c, L, c->grow_pages));
    }
    return VQ_OK;
}

int32_t vq_cache_pool_take(vq_cache_layer *L)
{
    const int32_t p = L->free_list[--L->n_free];
    L->refcount[p] = 1;
    return p;
}

void vq_cache_pool_release(vq_cache_layer *L, int32_t page)
{
    if (--L->refcount[page] == 0) L->free_list[L->n_free++] = page;
}

vq_status vq_cache_pool_copy_page(vq_cache *c, int l, int32_t dst, int32_t src)
{
    const vq_cache_layer *L = &c->layers[l];
    for (int s = 0; s < L->n_streams; s++) {
        const vq_cache_stream *st = &L->streams[s];
        const size_t n = (size_t)head_bytes(st);
        VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, vq_cache_page_stream(L, dst, s),
                                                (size_t)vq_cache_head_pitch(L, dst, s), vq_cache_page_stream(L, src, s),
                                                (size_t)vq_cache_head_pitch(L, src, s), n,
                                                st->per_head ? (size_t)c->Hkv : 1));
    }
    return VQ_OK;
}
