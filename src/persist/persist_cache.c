/* persist_cache.c — cache files (docs/FILE_FORMAT.md, "Cache files"): a
 * whole vq_cache or one sequence, saved from and loaded onto either backend
 * (API: section 7 of veloxquant.h).
 *
 * Versions: 1 (every cache before the 8-bit window), 2 (CONF gains the
 * window storage, vq_cache_window, and a reserved word). A cache with an f16
 * window is written as version 1, byte for byte as before, so older builds
 * still read it; a VQ_WINDOW_TURBO8 cache is written as version 2, which
 * older builds refuse ("format version 2 is newer than this library reads");
 * 3 (LCFG's two reserved words hold keys.wide_channels and
 * values.scale_f16, CONF's the bits of a VQ_WINDOW_TURBO window) is written
 * only where a layer sets one of them or the window is VQ_WINDOW_TURBO;
 * 4 (CONF gains sink_tokens, LCFG the layer's transforms and their given
 * tables, SQLY the sink tokens and the sequence's transform tables) only
 * where the cache has sink tokens or transforms.
 * 5 (version 4's fields, and LCFG ends with the layer's sliding window,
 * SQLY's counters with the pages the window evicted) only where a layer has
 * a sliding window.
 *
 * Sections: CONF (the cache's sizes), one LCFG per layer (the resolved layer
 * config, every table, the page layout), then one SQLY per (sequence, layer)
 * with its counters, the bytes of its filled pages and its residual window.
 * A load parses and checks the whole file first (plan), then creates or
 * fills the cache (commit). The LCFG of a layer is compared byte for byte
 * with the one the created cache serialises to: so the tables regenerated
 * from seeds, the tables copied from the file and the page layout are all
 * proved to be what the file was written with, and a sequence file loads
 * into an existing cache only if that cache's layers are the file's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "formats/format_kivi_mix.h"
#include "persist/container.h"

static const char CACHE_MAGIC[8] = {'V', 'Q', 'C', 'A', 'C', 'H', 'E', '\0'};
enum { CACHE_VERSION = 5, CONF_BYTES = 8 * 4 + 3 * 8, CONF2_BYTES = CONF_BYTES + 8, CONF4_BYTES = CONF2_BYTES + 8,
       SQLY_HEAD = 8 + 8 + 8 + 8 };
#define TAG_CONF VQ_TAG('C', 'O', 'N', 'F')
#define TAG_LCFG VQ_TAG('L', 'C', 'F', 'G')
#define TAG_SQLY VQ_TAG('S', 'Q', 'L', 'Y')
#define CACHE_MAX_FILE_BYTES ((uint64_t)1 << 40)
/* what a load may allocate (pools, windows) beyond 4x the file's own size */
#define CACHE_MAX_WINDOW_SLACK ((uint64_t)256 << 20)

/* ---- device <-> host ---- */

/* bytes of cache memory (device memory on a CUDA cache) to host dst. */
static vq_status to_host(const vq_cache *c, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return VQ_OK;
    /* appends and attends are queued on the device's stream: download waits for them */
    if (c->ctx->ops) return c->ctx->ops->download(c->ctx, dst, src, bytes);
    memcpy(dst, src, bytes);
    return VQ_OK;
}

/* ---- writing ---- */

static uint32_t u32_of(int v) { return (uint32_t)v; }

static uint32_t file_version(const vq_cache *c);

/* The LCFG payload of layer l. */
static void put_layer(vq_writer *w, const vq_cache *c, int l)
{
    const vq_cache_layer *L = &c->layers[l];
    const vq_key_config *k = &L->cfg.keys;
    const vq_value_config *v = &L->cfg.values;
    const uint32_t ku[9] = {u32_of(k->method), u32_of(k->bits), u32_of(k->bits2), u32_of(k->group_size),
                            k->norm_correct ? 1u : 0u, u32_of(k->rabitq_score), u32_of(k->rabitq_mag),
                            u32_of(k->qjl_sketch), u32_of(k->rope)};
    for (int i = 0; i < 9; i++) vq_put_u32(w, ku[i]);
    vq_put_u32(w, u32_of(k->wide_channels)); /* version 3; 0 before */
    vq_put_u64(w, k->seed);
    vq_put_u32(w, u32_of(v->method));
    vq_put_u32(w, u32_of(v->bits));
    vq_put_u32(w, u32_of(v->group_size));
    vq_put_u32(w, v->scale_f16 ? 1u : 0u); /* version 3; 0 before */
    vq_put_u64(w, v->seed);
    uint32_t n_tables = 0;
    for (int t = 0; t < VQ_CT_COUNT; t++) n_tables += L->tables[t].host != NULL;
    vq_put_u32(w, n_tables);
    vq_put_u32(w, u32_of(L->n_streams));
    for (int t = 0; t < VQ_CT_COUNT; t++) {
        const vq_cache_table *tb = &L->tables[t];
        if (!tb->host) continue;
        vq_put_u32(w, (uint32_t)t);
        vq_put_u32(w, u32_of(tb->ndim));
        int64_t n = 1;
        for (int i = 0; i < 4; i++) {
            const int64_t d = i < tb->ndim ? tb->shape[i] : 0;
            vq_put_i64(w, d);
            if (i < tb->ndim) n *= d;
        }
        vq_put_f32s(w, tb->host, (size_t)n);
    }
    for (int s = 0; s < L->n_streams; s++) {
        const vq_cache_stream *st = &L->streams[s];
        vq_put_i64(w, st->page_bytes);
        vq_put_i64(w, st->rows);
        vq_put_i64(w, st->last);
        vq_put_u32(w, (uint32_t)st->dtype);
        vq_put_u32(w, u32_of(st->ndim));
    }
    const uint32_t version = file_version(c);
    if (version >= 4) {
        /* version 4: the transforms' switches (bits 0-2) and which tables are
         * given (bits 8-10), then the given tables, [Hkv * D] f32 each */
        const size_t n = (size_t)c->Hkv * (size_t)c->D;
        uint32_t flags = (L->xf.center_keys ? 1u : 0u) | (L->xf.center_values ? 2u : 0u) | (L->xf.smooth ? 4u : 0u);
        for (int i = 0; i < 3; i++) flags |= L->xf_given[i] ? 256u << i : 0u;
        vq_put_u32(w, flags);
        for (int i = 0; i < 3; i++)
            if (L->xf_given[i]) vq_put_f32s(w, L->xf_tables + (size_t)i * n, n);
    }
    if (version >= 5) {
        vq_put_u32(w, (uint32_t)L->sliding);
        vq_put_u32(w, 0);
    }
}

/* Stream s of a page as the file holds it, [Hkv][rows][last] (a host pool
 * keeps each head's rows with the other pages of that head: cache_internal.h). */
static vq_status page_to_host(const vq_cache *c, const vq_cache_layer *L, int32_t page, int s, uint8_t *dst)
{
    const vq_cache_stream *st = &L->streams[s];
    const unsigned char *src = vq_cache_page_stream(L, page, s);
    const int64_t heads = st->per_head ? c->Hkv : 1, hb = st->page_bytes / heads;
    const int64_t pitch = vq_cache_head_pitch(L, page, s);
    if (pitch == hb) return to_host(c, dst, src, (size_t)st->page_bytes);
    for (int64_t h = 0; h < heads; h++) VQ_FORWARD_IF_ERROR(to_host(c, dst + h * hb, src + h * pitch, (size_t)hb));
    return VQ_OK;
}

/* The inverse of page_to_host: the file's [Hkv][rows][last] into the pool. */
static vq_status page_from_host(vq_cache *c, const vq_cache_layer *L, int32_t page, int s, const uint8_t *src)
{
    const vq_cache_stream *st = &L->streams[s];
    unsigned char *dst = vq_cache_page_stream(L, page, s);
    const int64_t heads = st->per_head ? c->Hkv : 1, hb = st->page_bytes / heads;
    const int64_t pitch = vq_cache_head_pitch(L, page, s);
    if (pitch == hb) return vq_cache_mem_upload(c, dst, src, (size_t)st->page_bytes);
    for (int64_t h = 0; h < heads; h++)
        VQ_FORWARD_IF_ERROR(vq_cache_mem_upload(c, dst + h * pitch, src + h * hb, (size_t)hb));
    return VQ_OK;
}

/* Writes sequence q's SQLY sections (all layers). */
static vq_status put_seq(vq_writer *w, const vq_cache *c, const vq_cache_seq *q)
{
    for (int l = 0; l < c->L; l++) {
        const vq_cache_layer *L = &c->layers[l];
        const vq_cache_seq_layer *sl = &q->layers[l];
        vq_section_begin(w, TAG_SQLY);
        vq_put_i64(w, q->id);
        vq_put_u32(w, (uint32_t)l);
        vq_put_u32(w, (uint32_t)sl->n_sink); /* version 4; 0 before */
        vq_put_i64(w, sl->n);
        vq_put_i64(w, sl->n_enc);
        if (file_version(c) >= 5) vq_put_i64(w, sl->p0);
        for (int64_t j = 0; j < sl->n_pages; j++)
            for (int s = 0; s < L->n_streams; s++) {
                const size_t n = (size_t)L->streams[s].page_bytes;
                uint8_t *dst = vq_put_space(w, n);
                if (dst) VQ_FORWARD_IF_ERROR(page_to_host(c, L, sl->pages[j], s, dst));
            }
        /* window rows [0, n - n_enc) of each window stream (f16: keys then
         * values; TurboQuant: the window streams in their order), head by head */
        const size_t rows = (size_t)(sl->n - sl->n_enc);
        for (int ws = 0; ws < L->n_wstreams; ws++) {
            const size_t row = (size_t)L->wstreams[ws].row_bytes;
            for (int h = 0; h < c->Hkv; h++) {
                uint8_t *dst = vq_put_space(w, rows * row);
                if (dst && rows)
                    VQ_FORWARD_IF_ERROR(to_host(c, dst,
                                                (const uint8_t *)sl->res + L->wstreams[ws].off +
                                                    (size_t)h * (size_t)L->res_cap * row,
                                                rows * row));
            }
        }
        /* version 4: the sink tokens, keys f16 [Hkv][n_sink][D] then values;
         * with transforms a u32 "tables set" and the tables, f32 [3][Hkv * D] */
        for (int half = 0; half < 2 && sl->n_sink > 0; half++)
            for (int h = 0; h < c->Hkv; h++) {
                const uint16_t *src = sl->sink + ((size_t)half * (size_t)c->Hkv + (size_t)h) * (size_t)c->S * (size_t)c->D;
                vq_put_bytes(w, src, (size_t)(sl->n_sink * c->D) * 2);
            }
        if (sl->xf != NULL) {
            vq_put_u32(w, sl->xf_set ? 1u : 0u);
            if (sl->xf_set) vq_put_f32s(w, sl->xf, 3 * (size_t)c->Hkv * (size_t)c->D);
        }
        vq_section_end(w);
    }
    return VQ_OK;
}

/* The oldest version that holds the cache: 5 where a layer has a sliding
 * window; 4 with sink tokens or transforms; 3 where a layer has KIVI_MIX
 * wide_channels or f16 TurboQuant value scales, or with a VQ_WINDOW_TURBO
 * window, else 2 with an 8-bit window, else 1. */
static uint32_t file_version(const vq_cache *c)
{
    for (int l = 0; l < c->L; l++)
        if (c->layers[l].sliding > 0) return 5;
    if (c->S > 0) return 4;
    for (int l = 0; l < c->L; l++)
        if (c->layers[l].xf_tables != NULL) return 4;
    if (c->window == VQ_WINDOW_TURBO) return 3;
    for (int l = 0; l < c->L; l++)
        if (c->layers[l].cfg.keys.wide_channels != 0 || c->layers[l].cfg.values.scale_f16) return 3;
    return c->window == VQ_WINDOW_F16 ? 1 : 2;
}

/* Serialises the cache (seq == NULL: every live sequence) into w. */
static vq_status write_cache(vq_writer *w, const vq_cache *c, const vq_cache_seq *only)
{
    const int n_seqs = only ? 1 : c->n_live;
    vq_section_begin(w, TAG_CONF);
    const uint32_t u[8] = {u32_of(c->L), u32_of(c->Hkv), u32_of(c->Hq), u32_of(c->D), (uint32_t)c->P,
                           u32_of(c->max_seqs), u32_of(c->R), u32_of(n_seqs)};
    for (int i = 0; i < 8; i++) vq_put_u32(w, u[i]);
    vq_put_i64(w, c->capacity_pages);
    vq_put_i64(w, c->grow_pages);
    vq_put_i64(w, c->next_id);
    if (file_version(c) >= 2) {
        vq_put_u32(w, (uint32_t)c->window);
        vq_put_u32(w, (uint32_t)c->window_bits); /* version 3; 0 before */
    }
    if (file_version(c) >= 4) {
        vq_put_u32(w, (uint32_t)c->S);
        vq_put_u32(w, 0);
    }
    vq_section_end(w);
    for (int l = 0; l < c->L; l++) {
        vq_section_begin(w, TAG_LCFG);
        put_layer(w, c, l);
        vq_section_end(w);
    }
    for (int i = 0; i < c->max_seqs; i++) {
        const vq_cache_seq *q = &c->seqs[i];
        if (q->id < 0 || (only && q != only)) continue;
        VQ_FORWARD_IF_ERROR(put_seq(w, c, q));
    }
    return VQ_OK;
}

/* Bytes of the file, and the file into buf when buf is not NULL. */
static vq_status serialise(const vq_cache *c, const vq_cache_seq *only, void *buf, size_t cap, size_t *size)
{
    vq_writer w;
    vq_writer_init(&w, buf, cap);
    VQ_FORWARD_IF_ERROR(write_cache(&w, c, only));
    *size = vq_writer_finish(&w, CACHE_MAGIC, file_version(c));
    return VQ_OK;
}

static vq_status pick_seq(const vq_cache *c, int64_t seq_id, const vq_cache_seq **only)
{
    *only = NULL;
    if (seq_id == -1) return VQ_OK;
    *only = vq_cache_find_seq(c, seq_id);
    VQ_RETURN_IF(c->ctx, *only == NULL, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'seq_id': %lld is not a live sequence (or -1 for the whole cache)", (long long)seq_id);
    return VQ_OK;
}

static vq_status serialise_cache(const void *c, const void *only, void *buf, size_t cap, size_t *size)
{
    return serialise(c, only, buf, cap, size);
}

vq_status vq_cache_save_buffer(const vq_cache *c, int64_t seq_id, void *buf, size_t cap, size_t *size_out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    VQ_RETURN_IF(c->ctx, size_out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'size_out' is NULL");
    const vq_cache_seq *only;
    VQ_FORWARD_IF_ERROR(pick_seq(c, seq_id, &only));
    return vq_save_buffer(c->ctx, serialise_cache, c, only, "the cache", buf, cap, size_out);
}

vq_status vq_cache_save(const vq_cache *c, int64_t seq_id, const char *path)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    VQ_RETURN_IF(c->ctx, path == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'path' is NULL");
    const vq_cache_seq *only;
    VQ_FORWARD_IF_ERROR(pick_seq(c, seq_id, &only));
    return vq_save_file(c->ctx, serialise_cache, c, only, path);
}

/* ---- reading: the plan ---- */

/* One parsed layer: its config with table tensors over `data`, and where
 * its LCFG payload is (to compare with the created cache's). */
typedef struct plan_layer {
    vq_cache_layer_config cfg;
    DLTensor tensors[VQ_CT_COUNT];
    int64_t shapes[VQ_CT_COUNT][4];
    float *data[VQ_CT_COUNT];
    const uint8_t *lcfg;
    size_t lcfg_bytes;
    int64_t page_bytes;  /* sum of the streams' */
    vq_cache_transforms xf;      /* version 4; given tables over xf_data */
    DLTensor xf_tensors[3];
    int64_t xf_shape[2];
    float *xf_data[3];
    int sliding;         /* sliding window (version 5; 0 before) */
} plan_layer;

typedef struct plan_seq_layer {
    int64_t n, n_enc, p0, n_pages;  /* p0: pages the sliding window evicted (version 4) */
    const uint8_t *pages;   /* n_pages * page_bytes */
    const uint8_t *window;  /* [2][Hkv][n - n_enc][D] f16 */
    int64_t n_sink;
    const uint8_t *sink;    /* [2][Hkv][n_sink][D] f16 */
    const uint8_t *xf;      /* [3][Hkv * D] f32, or NULL (no transforms or not set) */
} plan_seq_layer;

typedef struct plan {
    vq_cache_config cfg;
    int64_t next_id;
    int n_seqs;
    plan_layer *layers;       /* [L] */
    vq_cache_layer_config *layer_cfgs;  /* [L] for vq_cache_create */
    vq_cache_transforms *xf;  /* [L] for vq_cache_create (version 4) */
    int *sliding;             /* [L] for vq_cache_create */
    int64_t *ids;             /* [n_seqs] */
    plan_seq_layer *sl;       /* [n_seqs * L] */
} plan;

static void plan_free(plan *p)
{
    for (int l = 0; p->layers && l < p->cfg.n_layers; l++)
        for (int t = 0; t < VQ_CT_COUNT + 3; t++) free(t < VQ_CT_COUNT ? p->layers[l].data[t] : p->layers[l].xf_data[t - VQ_CT_COUNT]);
    free(p->layers);
    free(p->xf);
    free(p->layer_cfgs);
    free(p->sliding);
    free(p->ids);
    free(p->sl);
}

#define CORRUPT(ctx, cond, ...) VQ_RETURN_IF(ctx, cond, VQ_ERR_CORRUPT_DATA, __VA_ARGS__)

static vq_status read_conf(vq_ctx *ctx, vq_container *f, plan *p)
{
    vq_reader r;
    VQ_FORWARD_IF_ERROR(vq_container_section(ctx, f, TAG_CONF, &r));
    const size_t want = f->version >= 4 ? CONF4_BYTES : f->version >= 2 ? CONF2_BYTES : CONF_BYTES;
    CORRUPT(ctx, r.n != want, "cache section 'CONF' has %zu bytes, version %u has %zu", r.n, (unsigned)f->version,
            want);
    uint32_t u[8], window = VQ_WINDOW_F16, reserved = 0;
    int64_t cap, grow;
    for (int i = 0; i < 8; i++) vq_get_u32(&r, &u[i]);
    vq_get_i64(&r, &cap);
    vq_get_i64(&r, &grow);
    vq_get_i64(&r, &p->next_id);
    if (f->version >= 2) {
        vq_get_u32(&r, &window);
        vq_get_u32(&r, &reserved);
    }
    uint32_t sinks = 0, reserved4 = 0;
    if (f->version >= 4) {
        vq_get_u32(&r, &sinks);
        vq_get_u32(&r, &reserved4);
    }
    CORRUPT(ctx, sinks > VQ_CACHE_MAX_SINK_TOKENS || reserved4 != 0,
            "cache CONF: sink_tokens %u (0..%d) or its reserved word %u out of range", (unsigned)sinks,
            VQ_CACHE_MAX_SINK_TOKENS, (unsigned)reserved4);
    const bool turbo = window == VQ_WINDOW_TURBO && f->version >= 3;
    CORRUPT(ctx, window > (f->version >= 3 ? VQ_WINDOW_TURBO : VQ_WINDOW_TURBO8) ||
                     (turbo ? reserved < 1 || reserved > 8 : reserved != 0),
            "cache CONF: window storage %u (0 f16, 1 TurboQuant 8-bit, 2 TurboQuant of 1..8 bits) or its bits %u "
            "out of range",
            (unsigned)window, (unsigned)reserved);
    /* the ranges vq_cache_create accepts, so that the counts below are small */
    CORRUPT(ctx, u[0] < 1 || u[0] > 65536 || u[1] < 1 || u[1] > 4096 || u[2] < 1 || u[2] > 65536 ||
                     u[2] % u[1] != 0 || u[3] < 8 || u[3] > 256 || u[4] < 32 || u[4] > 65536 ||
                     u[5] < 1 || u[5] > (1u << 20) || u[6] > 65536 || u[7] > u[5],
                 "cache CONF out of range: L %u, Hkv %u, Hq %u, D %u, P %u, max_sequences %u, R %u, sequences %u",
                 (unsigned)u[0], (unsigned)u[1], (unsigned)u[2], (unsigned)u[3], (unsigned)u[4], (unsigned)u[5],
                 (unsigned)u[6], (unsigned)u[7]);
    CORRUPT(ctx, cap < 1 || cap > INT32_MAX || grow < 0 || grow > INT32_MAX || p->next_id < 0,
            "cache CONF: capacity_pages %lld, grow_pages %lld, next id %lld out of range", (long long)cap,
            (long long)grow, (long long)p->next_id);
    /* every layer and every (sequence, layer) has a section: their headers alone bound L and the count */
    const uint64_t min_bytes = (uint64_t)u[0] * (VQ_FILE_SECTION_HEADER_BYTES + 64) +
                               (uint64_t)u[0] * u[7] * (VQ_FILE_SECTION_HEADER_BYTES + SQLY_HEAD);
    CORRUPT(ctx, min_bytes > vq_reader_left(&f->all),
            "cache of %u layers and %u sequences needs at least %llu more bytes, the data has %zu", (unsigned)u[0],
            (unsigned)u[7], (unsigned long long)min_bytes, vq_reader_left(&f->all));
    p->cfg = (vq_cache_config){.n_layers = (int)u[0], .n_kv_heads = (int)u[1], .n_q_heads = (int)u[2],
                               .head_dim = (int)u[3], .page_size = (int)u[4], .capacity_pages = cap,
                               .grow_pages = grow, .max_sequences = (int)u[5], .residual_tokens = (int)u[6],
                               .window = (vq_cache_window)window, .window_bits = (int)reserved,
                               .sink_tokens = (int)sinks};
    p->n_seqs = (int)u[7];
    return VQ_OK;
}

/* LCFG of layer l into p->layers[l]: the config's fields and its tables
 * (shapes checked against the section's size before anything is
 * allocated). The config's own rules are vq_cache_create's. */
static vq_status read_layer(vq_ctx *ctx, vq_container *f, plan *p, int l)
{
    plan_layer *pl = &p->layers[l];
    vq_reader r;
    VQ_FORWARD_IF_ERROR(vq_container_section(ctx, f, TAG_LCFG, &r));
    pl->lcfg = r.p;
    pl->lcfg_bytes = r.n;
    uint32_t ku[10], vu[4], n_tables, n_streams;
    uint64_t kseed, vseed;
    bool ok = true;
    for (int i = 0; i < 10; i++) ok = ok && vq_get_u32(&r, &ku[i]);
    ok = ok && vq_get_u64(&r, &kseed);
    for (int i = 0; i < 4; i++) ok = ok && vq_get_u32(&r, &vu[i]);
    ok = ok && vq_get_u64(&r, &vseed) && vq_get_u32(&r, &n_tables) && vq_get_u32(&r, &n_streams);
    CORRUPT(ctx, !ok, "cache layer %d: section 'LCFG' of %zu bytes is too short", l, r.n);
    for (int i = 0; i < 9; i++)
        CORRUPT(ctx, ku[i] > 65536, "cache layer %d: key config field %d is %u, out of range", l, i, (unsigned)ku[i]);
    CORRUPT(ctx, (f->version < 3 && (ku[9] != 0 || vu[3] != 0)) || ku[9] > 256 || vu[3] > 1 || ku[4] > 1 ||
                     vu[0] > 16 || vu[1] > 16 || vu[2] > 65536,
            "cache layer %d: value config or reserved fields out of range", l);
    CORRUPT(ctx, n_tables > VQ_CT_COUNT || n_streams > VQ_CACHE_MAX_STREAMS,
            "cache layer %d: %u tables and %u streams, at most %d and %d", l, (unsigned)n_tables,
            (unsigned)n_streams, VQ_CT_COUNT, VQ_CACHE_MAX_STREAMS);
    vq_key_config *k = &pl->cfg.keys;
    vq_value_config *v = &pl->cfg.values;
    *k = (vq_key_config){.method = (vq_key_method)ku[0], .bits = (int)ku[1], .bits2 = (int)ku[2],
                         .group_size = (int)ku[3], .norm_correct = ku[4] != 0,
                         .rabitq_score = (vq_rabitq_score)ku[5], .rabitq_mag = (vq_rabitq_mag)ku[6],
                         .qjl_sketch = (int)ku[7], .seed = kseed, .rope = (vq_rope_layout)ku[8],
                         .wide_channels = (int)ku[9]};
    *v = (vq_value_config){.method = (vq_value_method)vu[0], .bits = (int)vu[1], .group_size = (int)vu[2],
                           .seed = vseed, .scale_f16 = vu[3] != 0};
    int last = -1;
    for (uint32_t i = 0; i < n_tables; i++) {
        uint32_t id, ndim;
        int64_t shape[4];
        ok = vq_get_u32(&r, &id) && vq_get_u32(&r, &ndim);
        for (int d = 0; d < 4 && ok; d++) ok = vq_get_i64(&r, &shape[d]);
        CORRUPT(ctx, !ok, "cache layer %d: table %u header runs past its section", l, (unsigned)i);
        CORRUPT(ctx, (int)id <= last || id >= VQ_CT_COUNT || ndim < 1 || ndim > 4,
                "cache layer %d: table %u has id %u (after %d) and rank %u", l, (unsigned)i, (unsigned)id, last,
                (unsigned)ndim);
        last = (int)id;
        uint64_t n = 1;
        for (uint32_t d = 0; d < 4; d++) {
            CORRUPT(ctx, d < ndim ? (shape[d] < 1 || shape[d] > (1 << 30)) : shape[d] != 0,
                    "cache layer %d: table %u dim %u is %lld", l, (unsigned)id, (unsigned)d, (long long)shape[d]);
            if (d < ndim) {
                n *= (uint64_t)shape[d];
                CORRUPT(ctx, n > vq_reader_left(&r) / 4, "cache layer %d: table %u of shape rank %u needs more "
                        "than the %zu bytes left in its section", l, (unsigned)id, (unsigned)ndim, vq_reader_left(&r));
            }
        }
        pl->data[id] = malloc((size_t)n * sizeof(float));
        VQ_RETURN_IF(ctx, pl->data[id] == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate a table of %llu floats",
                     (unsigned long long)n);
        vq_get_f32s(&r, pl->data[id], (size_t)n);
        memcpy(pl->shapes[id], shape, sizeof shape);
        pl->tensors[id] = (DLTensor){.data = pl->data[id], .device = {kDLCPU, 0}, .ndim = (int)ndim,
                                     .dtype = {kDLFloat, 32, 1}, .shape = pl->shapes[id]};
    }
    /* the tables a layer config carries; the others are regenerated from seeds */
    if (pl->data[VQ_CT_CODEBOOK]) k->codebook = &pl->tensors[VQ_CT_CODEBOOK];
    if (pl->data[VQ_CT_SMOOTH]) k->smooth = &pl->tensors[VQ_CT_SMOOTH];
    if (pl->data[VQ_CT_COS]) k->cos_freqs = &pl->tensors[VQ_CT_COS];
    if (pl->data[VQ_CT_SIN]) k->sin_freqs = &pl->tensors[VQ_CT_SIN];
    if (pl->data[VQ_CT_VCENTS]) v->centroids = &pl->tensors[VQ_CT_VCENTS];
    pl->page_bytes = 0;
    for (uint32_t s = 0; s < n_streams; s++) {
        int64_t pb, rows, lastd;
        uint32_t dt, nd;
        ok = vq_get_i64(&r, &pb) && vq_get_i64(&r, &rows) && vq_get_i64(&r, &lastd) && vq_get_u32(&r, &dt) &&
             vq_get_u32(&r, &nd);
        CORRUPT(ctx, !ok, "cache layer %d: stream %u runs past its section", l, (unsigned)s);
        CORRUPT(ctx, pb < 1 || pb > ((int64_t)1 << 32), "cache layer %d: stream %u has %lld bytes per page", l,
                (unsigned)s, (long long)pb);
        pl->page_bytes += pb;
    }
    if (f->version >= 4) {
        uint32_t flags;
        CORRUPT(ctx, !vq_get_u32(&r, &flags), "cache layer %d: section 'LCFG' ends before its transforms", l);
        CORRUPT(ctx, (flags & ~0x707u) != 0 || ((flags >> 8) & ~flags & 7u) != 0,
                "cache layer %d: transform flags 0x%x out of range (a given table of a transform that is off)", l,
                (unsigned)flags);
        const int64_t n = (int64_t)p->cfg.n_kv_heads * p->cfg.head_dim;
        pl->xf = (vq_cache_transforms){(flags & 1u) != 0, (flags & 2u) != 0, (flags & 4u) != 0, NULL, NULL, NULL};
        pl->xf_shape[0] = p->cfg.n_kv_heads, pl->xf_shape[1] = p->cfg.head_dim;
        const DLTensor **dst[3] = {&pl->xf.key_mean, &pl->xf.value_mean, &pl->xf.key_scale};
        for (int i = 0; i < 3; i++) {
            if (!(flags & (256u << i))) continue;
            CORRUPT(ctx, (uint64_t)n > vq_reader_left(&r) / 4, "cache layer %d: given transform table %d runs past "
                    "its section", l, i);
            pl->xf_data[i] = malloc((size_t)n * sizeof(float));
            VQ_RETURN_IF(ctx, pl->xf_data[i] == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate a transform table");
            vq_get_f32s(&r, pl->xf_data[i], (size_t)n);
            pl->xf_tensors[i] = (DLTensor){.data = pl->xf_data[i], .device = {kDLCPU, 0}, .ndim = 2,
                                           .dtype = {kDLFloat, 32, 1}, .shape = pl->xf_shape};
            *dst[i] = &pl->xf_tensors[i];
        }
    }
    if (f->version >= 5) {
        uint32_t w, reserved;
        ok = vq_get_u32(&r, &w) && vq_get_u32(&r, &reserved);
        CORRUPT(ctx, !ok, "cache layer %d: section 'LCFG' ends before its sliding window", l);
        CORRUPT(ctx, w > (1u << 30) || reserved != 0,
                "cache layer %d: sliding window %u (0..2^30) or the reserved word after it %u out of range", l,
                (unsigned)w, (unsigned)reserved);
        pl->sliding = (int)w;
    }
    return vq_section_done(ctx, f, &r, "LCFG");
}

static vq_status read_seq_layer(vq_ctx *ctx, vq_container *f, plan *p, int i, int l)
{
    const plan_layer *pl = &p->layers[l];
    plan_seq_layer *q = &p->sl[(size_t)i * (size_t)p->cfg.n_layers + (size_t)l];
    vq_reader r;
    VQ_FORWARD_IF_ERROR(vq_container_section(ctx, f, TAG_SQLY, &r));
    int64_t id;
    uint32_t layer, reserved;
    const bool ok = vq_get_i64(&r, &id) && vq_get_u32(&r, &layer) && vq_get_u32(&r, &reserved) &&
                    vq_get_i64(&r, &q->n) && vq_get_i64(&r, &q->n_enc) &&
                    (f->version < 5 || vq_get_i64(&r, &q->p0));
    CORRUPT(ctx, !ok, "cache sequence %d layer %d: section 'SQLY' of %zu bytes is too short", i, l, r.n);
    CORRUPT(ctx, layer != (uint32_t)l, "cache sequence %d: section for layer %d says layer %u", i, l, (unsigned)layer);
    /* the word after the layer: 0 before version 4, then the sink tokens held */
    CORRUPT(ctx, reserved > (uint32_t)p->cfg.sink_tokens || (q->n > 0 && reserved != (uint32_t)p->cfg.sink_tokens),
            "cache sequence %d layer %d: %u sink tokens with %lld tokens after them (the cache keeps %d)", i, l,
            (unsigned)reserved, (long long)q->n, p->cfg.sink_tokens);
    q->n_sink = reserved;
    if (l == 0) p->ids[i] = id;
    CORRUPT(ctx, id != p->ids[i] || id < 0 || id >= p->next_id,
            "cache sequence %d layer %d: id %lld (layer 0 says %lld, next id %lld)", i, l, (long long)id,
            (long long)p->ids[i], (long long)p->next_id);
    for (int j = 0; j < i && l == 0; j++)
        CORRUPT(ctx, p->ids[j] == id, "cache sequences %d and %d have the same id %lld", j, i, (long long)id);
    const int64_t P = p->cfg.page_size;
    CORRUPT(ctx, q->n_enc < 0 || q->n < q->n_enc || q->n > ((int64_t)1 << 40),
            "cache sequence %lld layer %d: n %lld, n_enc %lld", (long long)id, l, (long long)q->n,
            (long long)q->n_enc);
    /* evicted: whole encoded pages, none the next token's window needs */
    const int64_t W = pl->sliding;
    CORRUPT(ctx, q->p0 < 0 || q->p0 > q->n_enc / P || (q->p0 > 0 && (W == 0 || q->p0 * P > q->n + 1 - W)),
            "cache sequence %lld layer %d: %lld evicted pages of %lld tokens with n %lld, n_enc %lld and a sliding "
            "window of %lld",
            (long long)id, l, (long long)q->p0, (long long)P, (long long)q->n, (long long)q->n_enc, (long long)W);
    q->n_pages = (q->n_enc + P - 1) / P - q->p0;
    const uint64_t left = vq_reader_left(&r);
    CORRUPT(ctx, (uint64_t)q->n_pages > left / (uint64_t)pl->page_bytes,
            "cache sequence %lld layer %d: %lld pages of %lld bytes, the section has %llu bytes left", (long long)id,
            l, (long long)q->n_pages, (long long)pl->page_bytes, (unsigned long long)left);
    const uint64_t page_total = (uint64_t)q->n_pages * (uint64_t)pl->page_bytes;
    const uint64_t token = (uint64_t)vq_cache_window_token_bytes(p->cfg.window, p->cfg.window_bits, p->cfg.head_dim);
    const uint64_t window = (uint64_t)p->cfg.n_kv_heads * (uint64_t)(q->n - q->n_enc) * token;
    const uint64_t kvd = (uint64_t)p->cfg.n_kv_heads * (uint64_t)p->cfg.head_dim;
    const uint64_t sink = 2 * kvd * (uint64_t)q->n_sink * 2;
    const bool xf = pl->xf.center_keys || pl->xf.center_values || pl->xf.smooth;
    /* with transforms: a u32 "tables set", 1 whenever the sequence holds a token */
    uint64_t tables = 0;
    if (xf) {
        CORRUPT(ctx, left < page_total + window + sink + 4, "cache sequence %lld layer %d: the section ends before "
                "its transform tables", (long long)id, l);
        tables = left - page_total - window - sink == 4 ? 4 : 4 + 3 * kvd * 4;
    }
    CORRUPT(ctx, page_total + window + sink + tables != left,
            "cache sequence %lld layer %d: %lld pages, %lld window tokens and %lld sink tokens take %llu bytes, the "
            "section has %llu",
            (long long)id, l, (long long)q->n_pages, (long long)(q->n - q->n_enc), (long long)q->n_sink,
            (unsigned long long)(page_total + window + sink + tables), (unsigned long long)left);
    vq_get_bytes(&r, (size_t)page_total, &q->pages);
    vq_get_bytes(&r, (size_t)window, &q->window);
    vq_get_bytes(&r, (size_t)sink, &q->sink);
    q->xf = NULL;
    if (xf) {
        uint32_t set;
        vq_get_u32(&r, &set);
        CORRUPT(ctx, set != (tables > 4 ? 1u : 0u) || (set == 0 && q->n_sink + q->n > 0),
                "cache sequence %lld layer %d: transform tables set %u with %lld tokens", (long long)id, l,
                (unsigned)set, (long long)(q->n_sink + q->n));
        if (set) {
            vq_get_bytes(&r, (size_t)(3 * kvd * 4), &q->xf);
            for (uint64_t j = 0; j < 3 * kvd; j++) {
                float x;
                memcpy(&x, q->xf + 4 * j, 4);
                CORRUPT(ctx, j < 2 * kvd ? !isfinite(x) : !(x >= 0x1p-24f && x <= 0x1p24f),
                        "cache sequence %lld layer %d: transform table %d element %llu is %g", (long long)id, l,
                        (int)(j / kvd), (unsigned long long)(j % kvd), (double)x);
            }
        }
    }
    return vq_section_done(ctx, f, &r, "SQLY");
}

static vq_status read_plan(vq_ctx *ctx, const void *buf, size_t size, plan *p)
{
    memset(p, 0, sizeof *p);
    vq_container f;
    VQ_FORWARD_IF_ERROR(vq_container_open(ctx, buf, size, CACHE_MAGIC, CACHE_VERSION, "cache", &f));
    VQ_FORWARD_IF_ERROR(read_conf(ctx, &f, p));
    const int L = p->cfg.n_layers;
    p->layers = calloc((size_t)L, sizeof *p->layers);
    p->layer_cfgs = calloc((size_t)L, sizeof *p->layer_cfgs);
    p->sliding = calloc((size_t)L, sizeof *p->sliding);
    p->ids = calloc((size_t)p->n_seqs + 1, sizeof *p->ids);
    p->sl = calloc((size_t)p->n_seqs * (size_t)L + 1, sizeof *p->sl);
    VQ_RETURN_IF(ctx, !p->layers || !p->layer_cfgs || !p->sliding || !p->ids || !p->sl, VQ_ERR_OUT_OF_MEMORY,
                 "cannot allocate the plan of a cache of %d layers", L);
    p->xf = calloc((size_t)L, sizeof *p->xf);
    VQ_RETURN_IF(ctx, p->xf == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate the plan of a cache of %d layers", L);
    for (int l = 0; l < L; l++) {
        VQ_FORWARD_IF_ERROR(read_layer(ctx, &f, p, l));
        p->layer_cfgs[l] = p->layers[l].cfg;
        p->xf[l] = p->layers[l].xf;
        p->sliding[l] = p->layers[l].sliding;
    }
    p->cfg.transforms = p->xf;
    for (int i = 0; i < p->n_seqs; i++)
        for (int l = 0; l < L; l++) VQ_FORWARD_IF_ERROR(read_seq_layer(ctx, &f, p, i, l));
    return vq_container_close(ctx, &f);
}

/* ---- reading: commit ---- */

/* KIVI_MIX width masks order the channels of every filled key group: each
 * must mark exactly W channels (the attention trusts it). The file holds a
 * page's stream as [Hkv][rows][last]. */
static vq_status check_width_masks(const vq_cache *c, const vq_cache_layer *L, int s, const plan_seq_layer *q, int i,
                                   int l)
{
    const vq_cache_stream *st = &L->streams[s];
    const int64_t want = vq_kivi_mix_wide_channels(L->cfg.keys.wide_channels, c->D);
    for (int64_t g = q->p0 * c->P / L->g; g < q->n_enc / L->g; g++) {
        const int64_t page = g * L->g / c->P - q->p0, row = g % st->rows;
        for (int64_t h = 0; h < c->Hkv; h++) {
            const uint8_t *m = q->pages + page * L->page_bytes + st->page_off + (h * st->rows + row) * st->last;
            int64_t wide = 0;
            for (int64_t b = 0; b < st->last; b++)
                for (unsigned x = m[b]; x; x &= x - 1u) wide++;
            CORRUPT(c->ctx, wide != want, "cache sequence %d layer %d key group %lld head %lld: its width mask marks "
                    "%lld wide channels, the layer has %lld", i, l, (long long)g, (long long)h, (long long)wide,
                    (long long)want);
        }
    }
    return VQ_OK;
}

/* The plan's layers against the cache's: same sizes, same serialised layer
 * (config, tables, layout), and every sequence within the layer's rules. */
static vq_status check_against(vq_cache *c, const plan *p)
{
    vq_ctx *ctx = c->ctx;
    CORRUPT(ctx, c->L != p->cfg.n_layers || c->Hkv != p->cfg.n_kv_heads || c->Hq != p->cfg.n_q_heads ||
                     c->D != p->cfg.head_dim || c->P != p->cfg.page_size || c->R != p->cfg.residual_tokens ||
                     c->window != p->cfg.window || c->window_bits != p->cfg.window_bits || c->S != p->cfg.sink_tokens,
            "the file's cache [L %d, Hkv %d, Hq %d, D %d, P %d, R %d, window %d/%d bits, %d sinks] is not this "
            "cache's [%d, %d, %d, %d, %lld, %d, %d/%d, %d]",
            p->cfg.n_layers, p->cfg.n_kv_heads, p->cfg.n_q_heads, p->cfg.head_dim, p->cfg.page_size,
            p->cfg.residual_tokens, (int)p->cfg.window, p->cfg.window_bits, p->cfg.sink_tokens, c->L, c->Hkv, c->Hq,
            c->D, (long long)c->P, c->R, (int)c->window, c->window_bits, c->S);
    for (int l = 0; l < c->L; l++) {
        vq_writer w;
        vq_writer_init(&w, NULL, 0);
        put_layer(&w, c, l);
        const size_t n = w.pos - VQ_FILE_HEADER_BYTES;
        uint8_t *mine = malloc(n + VQ_FILE_HEADER_BYTES);
        VQ_RETURN_IF(ctx, mine == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes", n);
        vq_writer_init(&w, mine, n + VQ_FILE_HEADER_BYTES);
        put_layer(&w, c, l);
        const bool same = n == p->layers[l].lcfg_bytes &&
                          memcmp(mine + VQ_FILE_HEADER_BYTES, p->layers[l].lcfg, n) == 0;
        free(mine);
        CORRUPT(ctx, !same, "cache layer %d: the file's config, tables or page layout differ from %s", l,
                "what this cache has (or what the config regenerates)");
        const vq_cache_layer *L = &c->layers[l];
        int pos_stream = -1, mask_stream = -1;
        for (int s = 0; s < L->n_streams; s++) {
            if (strcmp(L->streams[s].name, "k_pos") == 0) pos_stream = s;
            if (strcmp(L->streams[s].name, "k_mask") == 0) mask_stream = s;
        }
        for (int i = 0; i < p->n_seqs; i++) {
            const plan_seq_layer *q = &p->sl[(size_t)i * (size_t)c->L + (size_t)l];
            CORRUPT(ctx, q->n_enc % L->g != 0 || q->n - q->n_enc > L->res_cap,
                    "cache sequence %d layer %d: n_enc %lld is not a multiple of the key group %lld, or the window "
                    "of %lld tokens exceeds its capacity %lld",
                    i, l, (long long)q->n_enc, (long long)L->g, (long long)(q->n - q->n_enc), (long long)L->res_cap);
            if (mask_stream >= 0) VQ_FORWARD_IF_ERROR(check_width_masks(c, L, mask_stream, q, i, l));
            if (pos_stream < 0) continue;
            /* CommVQ positions index the RoPE tables: each filled one must be in [0, Pmax) */
            const int64_t pmax = L->tables[VQ_CT_COS].shape[0];
            for (int64_t t = q->p0 * c->P; t < q->n_enc; t++) {
                const uint8_t *at = q->pages + (t / c->P - q->p0) * L->page_bytes + L->streams[pos_stream].page_off +
                                    (t % c->P) * 4;
                int32_t pos;
                memcpy(&pos, at, 4);
                CORRUPT(ctx, pos < 0 || pos >= pmax, "cache sequence %d layer %d token %lld: position %d outside "
                        "[0, %lld)", i, l, (long long)t, (int)pos, (long long)pmax);
            }
        }
    }
    return VQ_OK;
}

/* Writes sequence i of the plan into slot q (fresh: no pages, empty window). */
static vq_status fill_seq(vq_cache *c, const plan *p, int i, vq_cache_seq *q)
{
    for (int l = 0; l < c->L; l++) {
        vq_cache_layer *L = &c->layers[l];
        const plan_seq_layer *ps = &p->sl[(size_t)i * (size_t)c->L + (size_t)l];
        vq_cache_seq_layer *sl = &q->layers[l];
        if (ps->n_pages > sl->cap_pages) {
            int32_t *pages = realloc(sl->pages, sizeof *pages * (size_t)ps->n_pages);
            VQ_RETURN_IF(c->ctx, pages == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate a page table");
            sl->pages = pages;
            sl->cap_pages = ps->n_pages;
        }
        VQ_FORWARD_IF_ERROR(vq_cache_pool_reserve(c, l, ps->n_pages));
        for (int64_t j = 0; j < ps->n_pages; j++) {
            const int32_t page = vq_cache_pool_take(L);
            sl->pages[sl->n_pages++] = page;
            const uint8_t *src = ps->pages + j * L->page_bytes;
            for (int s = 0; s < L->n_streams; s++) {
                const size_t n = (size_t)L->streams[s].page_bytes;
                VQ_FORWARD_IF_ERROR(page_from_host(c, L, page, s, src));
                src += n;
            }
        }
        const size_t rows = (size_t)(ps->n - ps->n_enc);
        const uint8_t *src = ps->window;
        for (int ws = 0; ws < L->n_wstreams && rows; ws++) {
            const size_t row = (size_t)L->wstreams[ws].row_bytes;
            for (int h = 0; h < c->Hkv; h++, src += rows * row)
                VQ_FORWARD_IF_ERROR(vq_cache_mem_upload(
                    c, (uint8_t *)sl->res + L->wstreams[ws].off + (size_t)h * (size_t)L->res_cap * row, src,
                    rows * row));
        }
        sl->n = ps->n;
        sl->n_enc = ps->n_enc;
        for (int half = 0; half < 2 && ps->n_sink > 0; half++)
            for (int h = 0; h < c->Hkv; h++)
                memcpy(sl->sink + ((size_t)half * (size_t)c->Hkv + (size_t)h) * (size_t)c->S * (size_t)c->D,
                       ps->sink + ((size_t)half * (size_t)c->Hkv + (size_t)h) * (size_t)ps->n_sink * (size_t)c->D * 2,
                       (size_t)ps->n_sink * (size_t)c->D * 2);
        sl->n_sink = ps->n_sink;
        if (ps->xf != NULL && sl->xf != NULL) {
            memcpy(sl->xf, ps->xf, vq_cache_xf_bytes(c, l));
            sl->xf_set = true;
        }
        sl->p0 = ps->p0;
    }
    return VQ_OK;
}

/* What creating the plan's cache and its sequences will allocate (pools of
 * the loaded capacity, residual windows), from a dry layout of every layer
 * (vq_cache_layout_layer validates and sizes without memory), against the
 * data's size: a small hostile file must not make a large allocation. */
static vq_status check_footprint(vq_ctx *ctx, const plan *p, size_t size)
{
    vq_cache dry = {.ctx = ctx, .cuda = vq_ctx_is_cuda(ctx), .L = p->cfg.n_layers, .Hkv = p->cfg.n_kv_heads,
                    .Hq = p->cfg.n_q_heads, .D = p->cfg.head_dim, .P = p->cfg.page_size,
                    .capacity_pages = p->cfg.capacity_pages, .max_seqs = p->cfg.max_sequences,
                    .R = p->cfg.residual_tokens, .window = p->cfg.window};
    uint64_t bytes = 0;
    for (int l = 0; l < p->cfg.n_layers; l++) {
        vq_cache_layer L;
        memset(&L, 0, sizeof L);
        char name[32];
        snprintf(name, sizeof name, "layer %d", l);
        const vq_status st = vq_cache_layout_layer(&dry, &p->layer_cfgs[l], name, &L);
        if (st != VQ_OK) {
            char why[sizeof ctx->last_error];
            snprintf(why, sizeof why, "%s", vq_ctx_last_error(ctx));
            return vq_fail(ctx, st == VQ_ERR_UNSUPPORTED ? st : VQ_ERR_CORRUPT_DATA, "the file's cache config: %s",
                           why);
        }
        const uint64_t window = (uint64_t)vq_cache_window_bytes(&dry, &L);
        const uint64_t sinks = 4 * (uint64_t)p->cfg.n_kv_heads * (uint64_t)p->cfg.sink_tokens * (uint64_t)p->cfg.head_dim;
        bytes += (uint64_t)L.page_bytes * (uint64_t)p->cfg.capacity_pages + (window + sinks) * (uint64_t)p->n_seqs;
        CORRUPT(ctx, bytes > CACHE_MAX_WINDOW_SLACK + 4ull * size,
                "the file's cache would allocate more than %llu bytes of pages and windows for %zu bytes of data",
                (unsigned long long)bytes, size);
    }
    return VQ_OK;
}

/* Loaded caches allocate only the pages their sequences fill (a hostile
 * capacity in the file must not size an allocation); they grow as the saved
 * one did, and a fixed-capacity one may grow back to its saved capacity. */
static void loaded_capacity(plan *p)
{
    int64_t need = 1;
    for (int l = 0; l < p->cfg.n_layers; l++) {
        int64_t pages = 0;
        for (int i = 0; i < p->n_seqs; i++) pages += p->sl[(size_t)i * (size_t)p->cfg.n_layers + (size_t)l].n_pages;
        if (pages > need) need = pages;
    }
    const int64_t saved = p->cfg.capacity_pages;
    p->cfg.capacity_pages = need;
    if (p->cfg.grow_pages == 0 && saved > need) p->cfg.grow_pages = saved - need;
}

vq_status vq_cache_load_buffer(vq_ctx *ctx, const void *buf, size_t size, vq_cache **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    VQ_RETURN_IF(ctx, buf == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'buf' is NULL");
    plan p;
    vq_status st = read_plan(ctx, buf, size, &p);
    vq_cache *c = NULL;
    if (st == VQ_OK) {
        loaded_capacity(&p);
        p.cfg.layers = p.layer_cfgs;
        p.cfg.sliding_windows = p.sliding;
        st = check_footprint(ctx, &p, size);
    }
    if (st == VQ_OK) {
        st = vq_cache_create(ctx, &p.cfg, &c);
        ctx->fn = __func__;
        if (st == VQ_ERR_INVALID_ARGUMENT || st == VQ_ERR_UNSUPPORTED) {
            /* a config the library refuses: corrupt, unless this build or backend lacks it */
            char why[sizeof ctx->last_error];
            snprintf(why, sizeof why, "%s", vq_ctx_last_error(ctx));
            st = vq_fail(ctx, st == VQ_ERR_UNSUPPORTED ? st : VQ_ERR_CORRUPT_DATA, "the file's cache config: %s",
                         why);
        }
    }
    if (st == VQ_OK) st = check_against(c, &p);
    for (int i = 0; st == VQ_OK && i < p.n_seqs; i++) {
        int64_t id;
        st = vq_cache_seq_add(c, &id);
        ctx->fn = __func__;
        vq_cache_seq *q = st == VQ_OK ? vq_cache_find_seq(c, id) : NULL;
        if (q) {
            q->id = p.ids[i];
            st = fill_seq(c, &p, i, q);
        }
    }
    if (st == VQ_OK) c->next_id = p.next_id;
    plan_free(&p);
    if (st != VQ_OK) {
        vq_cache_free(c);
        return st;
    }
    *out = c;
    return VQ_OK;
}

vq_status vq_cache_seq_load_buffer(vq_cache *c, const void *buf, size_t size, int64_t *seq_id_out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    vq_ctx *ctx = c->ctx;
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, buf == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'buf' is NULL");
    VQ_RETURN_IF(ctx, seq_id_out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'seq_id_out' is NULL");
    plan p;
    vq_status st = read_plan(ctx, buf, size, &p);
    if (st == VQ_OK && p.n_seqs != 1)
        st = vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT,
                     "the data holds %d sequences; a sequence file (vq_cache_save with a seq_id) holds one",
                     p.n_seqs);
    if (st == VQ_OK) st = check_against(c, &p);
    int64_t id = -1;
    if (st == VQ_OK) {
        st = vq_cache_seq_add(c, &id);
        ctx->fn = __func__;
    }
    if (st == VQ_OK) {
        st = fill_seq(c, &p, 0, vq_cache_find_seq(c, id));
        if (st != VQ_OK) {
            /* keep the failure's message, drop the half-filled sequence */
            char why[sizeof ctx->last_error];
            snprintf(why, sizeof why, "%s", vq_ctx_last_error(ctx));
            (void)vq_cache_seq_remove(c, id);
            ctx->fn = __func__;
            snprintf(ctx->last_error, sizeof ctx->last_error, "%s", why);
        }
    }
    plan_free(&p);
    if (st == VQ_OK) *seq_id_out = id;
    return st;
}

static vq_status read_file(vq_ctx *ctx, const char *path, uint8_t **buf, size_t *size)
{
    VQ_RETURN_IF(ctx, path == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'path' is NULL");
    return vq_file_read_all(ctx, path, CACHE_MAX_FILE_BYTES, buf, size);
}

vq_status vq_cache_load(vq_ctx *ctx, const char *path, vq_cache **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    uint8_t *buf;
    size_t size;
    VQ_FORWARD_IF_ERROR(read_file(ctx, path, &buf, &size));
    const vq_status st = vq_cache_load_buffer(ctx, buf, size, out);
    free(buf);
    return st;
}

vq_status vq_cache_seq_load(vq_cache *c, const char *path, int64_t *seq_id_out)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    VQ_ENTER(c->ctx);
    uint8_t *buf;
    size_t size;
    VQ_FORWARD_IF_ERROR(read_file(c->ctx, path, &buf, &size));
    const vq_status st = vq_cache_seq_load_buffer(c, buf, size, seq_id_out);
    free(buf);
    return st;
}
