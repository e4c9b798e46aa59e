/* persist_profile.c — profile files (docs/FILE_FORMAT.md, "Profile files"):
 * a CONF section with the model shape, the residual window and the sink
 * tokens, then one LAYR section per layer with its methods' fields, its
 * sliding window and its transforms (switches and the tables it carries).
 * Version 1 files (no sinks, no transforms) still load, as profiles that
 * state no recipe. A load checks every field's range, then the whole plan
 * as vq_profile_create does; the format is canonical (a loaded version 2
 * profile saves back to the same bytes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "persist/container.h"

static const char PROFILE_MAGIC[8] = {'V', 'Q', 'P', 'R', 'O', 'F', 'L', '\0'};
enum { PROFILE_VERSION = 2, CONF_BYTES = 8 * 4, LAYR_V1_BYTES = 2 * 4 + 10 * 4 + 8 + 4 * 4 + 8,
       LAYR_BYTES = LAYR_V1_BYTES + 4 };
/* LAYR's transform word (version 2): the switches, then which tables follow */
enum { XF_CENTER_KEYS = 1, XF_CENTER_VALUES = 2, XF_SMOOTH = 4, XF_TABLE0 = 8, XF_ALL = 63 };
#define TAG_CONF VQ_TAG('C', 'O', 'N', 'F')
#define TAG_LAYR VQ_TAG('L', 'A', 'Y', 'R')
#define PROFILE_MAX_FILE_BYTES ((uint64_t)1 << 30)

static uint32_t u32_of(int v) { return (uint32_t)v; }

static size_t write_profile(const vq_profile *p, void *buf, size_t cap)
{
    const vq_profile_config *c = &p->cfg;
    vq_writer w;
    vq_writer_init(&w, buf, cap);
    vq_section_begin(&w, TAG_CONF);
    const uint32_t u[8] = {u32_of(c->n_layers), u32_of(c->n_kv_heads), u32_of(c->head_dim),
                           u32_of(c->residual_tokens), (uint32_t)c->window, u32_of(c->window_bits),
                           u32_of(c->sink_tokens), 0};
    for (int i = 0; i < 8; i++) vq_put_u32(&w, u[i]);
    vq_section_end(&w);
    for (int l = 0; l < c->n_layers; l++) {
        const vq_key_config *k = &p->layers[l].keys;
        const vq_value_config *v = &p->layers[l].values;
        vq_section_begin(&w, TAG_LAYR);
        vq_put_u32(&w, u32_of(l));
        vq_put_u32(&w, u32_of(p->sliding[l]));
        const uint32_t ku[10] = {(uint32_t)k->method, u32_of(k->bits), u32_of(k->bits2), u32_of(k->group_size),
                                 u32_of(k->wide_channels), k->norm_correct ? 1u : 0u, (uint32_t)k->rabitq_score,
                                 (uint32_t)k->rabitq_mag, u32_of(k->qjl_sketch), (uint32_t)k->rope};
        for (int i = 0; i < 10; i++) vq_put_u32(&w, ku[i]);
        vq_put_u64(&w, k->seed);
        const uint32_t vu[4] = {(uint32_t)v->method, u32_of(v->bits), u32_of(v->group_size), v->scale_f16 ? 1u : 0u};
        for (int i = 0; i < 4; i++) vq_put_u32(&w, vu[i]);
        vq_put_u64(&w, v->seed);
        const vq_cache_transforms *x = &p->xf[l];
        const DLTensor *tabs[3] = {x->key_mean, x->value_mean, x->key_scale};
        uint32_t word = (x->center_keys ? XF_CENTER_KEYS : 0u) | (x->center_values ? XF_CENTER_VALUES : 0u) |
                        (x->smooth ? XF_SMOOTH : 0u);
        for (int i = 0; i < 3; i++) word |= tabs[i] ? (uint32_t)XF_TABLE0 << i : 0u;
        vq_put_u32(&w, word);
        const size_t n = (size_t)c->n_kv_heads * (size_t)c->head_dim;
        for (int i = 0; i < 3; i++)
            if (tabs[i]) vq_put_f32s(&w, tabs[i]->data, n);
        vq_section_end(&w);
    }
    return vq_writer_finish(&w, PROFILE_MAGIC, PROFILE_VERSION);
}

static vq_status serialise_profile(const void *p, const void *arg, void *buf, size_t cap, size_t *size)
{
    (void)arg;
    *size = write_profile(p, buf, cap);
    return VQ_OK;
}

vq_status vq_profile_save_buffer(vq_ctx *ctx, const vq_profile *p, void *buf, size_t cap, size_t *size_out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, p == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'profile' is NULL");
    return vq_save_buffer(ctx, serialise_profile, p, NULL, "the profile", buf, cap, size_out);
}

vq_status vq_profile_save(vq_ctx *ctx, const vq_profile *p, const char *path)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, p == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'profile' is NULL");
    return vq_save_file(ctx, serialise_profile, p, NULL, path);
}

#define CORRUPT(ctx, cond, ...) VQ_RETURN_IF(ctx, cond, VQ_ERR_CORRUPT_DATA, __VA_ARGS__)

/* A field that must fit an int (every range below it is the cache's). */
static vq_status get_field(vq_ctx *ctx, vq_reader *r, int l, const char *what, uint32_t max, int *out)
{
    uint32_t v;
    CORRUPT(ctx, !vq_get_u32(r, &v), "profile layer %d: section 'LAYR' ends before %s", l, what);
    CORRUPT(ctx, v > max, "profile layer %d: %s is %u, at most %u", l, what, (unsigned)v, (unsigned)max);
    *out = (int)v;
    return VQ_OK;
}

/* What a load reads before vq_profile_create copies it: freed by
 * free_loaded whatever the status. */
typedef struct loaded {
    vq_cache_layer_config *layers; /* [L] */
    int *sliding;                  /* [L] */
    vq_cache_transforms *xf;       /* [L] */
    DLTensor *tabs;                /* [L][3] */
    float **data;                  /* [L * 3], each NULL or Hkv * D floats */
    int64_t shape[2];              /* [Hkv, D] of every table */
    int n_layers;
} loaded;

static void free_loaded(loaded *d)
{
    for (int i = 0; d->data && i < 3 * d->n_layers; i++) free(d->data[i]);
    free(d->layers), free(d->sliding), free(d->xf), free(d->tabs), free(d->data);
}

/* Version 2's transform word and tables of layer l into d. */
static vq_status read_transforms(vq_ctx *ctx, vq_reader *r, int l, loaded *d)
{
    uint32_t word = 0;
    CORRUPT(ctx, !vq_get_u32(r, &word), "profile layer %d: section 'LAYR' ends before its transforms", l);
    CORRUPT(ctx, word > XF_ALL, "profile layer %d: transform word is %u, at most %u", l, (unsigned)word,
            (unsigned)XF_ALL);
    vq_cache_transforms *x = &d->xf[l];
    *x = (vq_cache_transforms){.center_keys = (word & XF_CENTER_KEYS) != 0,
                               .center_values = (word & XF_CENTER_VALUES) != 0, .smooth = (word & XF_SMOOTH) != 0};
    const size_t n = (size_t)(d->shape[0] * d->shape[1]);
    const DLTensor **tab[3] = {&x->key_mean, &x->value_mean, &x->key_scale};
    static const char *const names[3] = {"key_mean", "value_mean", "key_scale"};
    for (int i = 0; i < 3; i++) {
        if (!(word & ((uint32_t)XF_TABLE0 << i))) continue;
        CORRUPT(ctx, vq_reader_left(r) < n * sizeof(float), "profile layer %d: section 'LAYR' ends inside its %s",
                l, names[i]);
        float *t = d->data[3 * l + i] = malloc(n * sizeof(float));
        VQ_RETURN_IF(ctx, t == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate a table of %zu floats", n);
        vq_get_f32s(r, t, n);
        DLTensor *dl = &d->tabs[3 * l + i];
        *dl = (DLTensor){.data = t, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                         .shape = d->shape};
        *tab[i] = dl;
    }
    return VQ_OK;
}

static vq_status read_layer(vq_ctx *ctx, vq_container *f, int l, loaded *d)
{
    vq_reader r;
    VQ_FORWARD_IF_ERROR(vq_container_section(ctx, f, TAG_LAYR, &r));
    const size_t fixed = f->version == 1 ? LAYR_V1_BYTES : LAYR_BYTES;
    CORRUPT(ctx, f->version == 1 ? r.n != fixed : r.n < fixed,
            "profile layer %d: section 'LAYR' has %zu bytes, expected %s%zu", l, r.n, f->version == 1 ? "" : "at least ",
            fixed);
    vq_cache_layer_config *lc = &d->layers[l];
    int idx = -1, f32[10] = {0}, vf[4] = {0};
    VQ_FORWARD_IF_ERROR(get_field(ctx, &r, l, "its index", 1u << 16, &idx));
    CORRUPT(ctx, idx != l, "profile section 'LAYR' %d says layer %d", l, idx);
    VQ_FORWARD_IF_ERROR(get_field(ctx, &r, l, "the sliding window", 1u << 30, &d->sliding[l]));
    static const char *const kn[10] = {"keys.method", "keys.bits", "keys.bits2", "keys.group_size",
                                       "keys.wide_channels", "keys.norm_correct", "keys.rabitq_score",
                                       "keys.rabitq_mag", "keys.qjl_sketch", "keys.rope"};
    static const uint32_t kmax[10] = {1u << 16, 1u << 16, 1u << 16, 1u << 16, 1u << 16, 1, 1u << 16, 1u << 16,
                                      1u << 16, 1u << 16};
    for (int i = 0; i < 10; i++) VQ_FORWARD_IF_ERROR(get_field(ctx, &r, l, kn[i], kmax[i], &f32[i]));
    uint64_t kseed = 0, vseed = 0;
    vq_get_u64(&r, &kseed);
    static const char *const vn[4] = {"values.method", "values.bits", "values.group_size", "values.scale_f16"};
    static const uint32_t vmax[4] = {1u << 16, 1u << 16, 1u << 16, 1};
    for (int i = 0; i < 4; i++) VQ_FORWARD_IF_ERROR(get_field(ctx, &r, l, vn[i], vmax[i], &vf[i]));
    vq_get_u64(&r, &vseed);
    lc->keys = (vq_key_config){.method = (vq_key_method)f32[0], .bits = f32[1], .bits2 = f32[2],
                               .group_size = f32[3], .wide_channels = f32[4], .norm_correct = f32[5] != 0,
                               .rabitq_score = (vq_rabitq_score)f32[6], .rabitq_mag = (vq_rabitq_mag)f32[7],
                               .qjl_sketch = f32[8], .seed = kseed, .rope = (vq_rope_layout)f32[9]};
    lc->values = (vq_value_config){.method = (vq_value_method)vf[0], .bits = vf[1], .group_size = vf[2],
                                   .seed = vseed, .scale_f16 = vf[3] != 0};
    if (f->version >= 2) VQ_FORWARD_IF_ERROR(read_transforms(ctx, &r, l, d));
    return vq_section_done(ctx, f, &r, "LAYR");
}

/* The plan of the file into cfg and d (allocated here, freed by the caller
 * whatever the status); *v1: a version 1 file (no recipe stated). */
static vq_status read_profile(vq_ctx *ctx, const void *buf, size_t size, vq_profile_config *cfg, loaded *d, bool *v1)
{
    vq_container f;
    VQ_FORWARD_IF_ERROR(vq_container_open(ctx, buf, size, PROFILE_MAGIC, PROFILE_VERSION, "profile", &f));
    *v1 = f.version == 1;
    vq_reader r;
    VQ_FORWARD_IF_ERROR(vq_container_section(ctx, &f, TAG_CONF, &r));
    CORRUPT(ctx, r.n != CONF_BYTES, "profile section 'CONF' has %zu bytes, expected %d", r.n, (int)CONF_BYTES);
    uint32_t u[8];
    for (int i = 0; i < 8; i++) vq_get_u32(&r, &u[i]);
    VQ_FORWARD_IF_ERROR(vq_section_done(ctx, &f, &r, "CONF"));
    /* version 1: u[6] reserved (0); version 2: the sink tokens */
    CORRUPT(ctx, u[0] < 1 || u[0] > 65536 || u[1] > 4096 || u[2] > 4096 || u[3] > 65536 || u[4] > 2 || u[5] > 8 ||
                     u[6] > (*v1 ? 0u : (uint32_t)VQ_CACHE_MAX_SINK_TOKENS) || u[7] != 0,
            "profile CONF out of range: n_layers %u, n_kv_heads %u, head_dim %u, residual_tokens %u, window %u/%u "
            "bits, sink_tokens %u (at most %u), reserved %u",
            (unsigned)u[0], (unsigned)u[1], (unsigned)u[2], (unsigned)u[3], (unsigned)u[4], (unsigned)u[5],
            (unsigned)u[6], *v1 ? 0u : (unsigned)VQ_CACHE_MAX_SINK_TOKENS, (unsigned)u[7]);
    /* every layer has a section: the bytes left bound the allocation */
    const uint64_t layr = *v1 ? LAYR_V1_BYTES : LAYR_BYTES;
    CORRUPT(ctx, (uint64_t)u[0] * (VQ_FILE_SECTION_HEADER_BYTES + layr) > vq_reader_left(&f.all),
            "profile of %u layers needs %llu more bytes, the data has %zu", (unsigned)u[0],
            (unsigned long long)u[0] * (VQ_FILE_SECTION_HEADER_BYTES + layr), vq_reader_left(&f.all));
    *cfg = (vq_profile_config){.n_layers = (int)u[0], .n_kv_heads = (int)u[1], .head_dim = (int)u[2],
                               .residual_tokens = (int)u[3], .window = (vq_cache_window)u[4],
                               .window_bits = (int)u[5], .sink_tokens = (int)u[6]};
    d->n_layers = (int)u[0];
    d->shape[0] = u[1], d->shape[1] = u[2];
    d->layers = calloc(u[0], sizeof *d->layers);
    d->sliding = calloc(u[0], sizeof *d->sliding);
    d->xf = calloc(u[0], sizeof *d->xf);
    d->tabs = calloc(3 * (size_t)u[0], sizeof *d->tabs);
    d->data = calloc(3 * (size_t)u[0], sizeof *d->data);
    VQ_RETURN_IF(ctx, !d->layers || !d->sliding || !d->xf || !d->tabs || !d->data, VQ_ERR_OUT_OF_MEMORY,
                 "cannot allocate a profile of %u layers", (unsigned)u[0]);
    for (int l = 0; l < cfg->n_layers; l++) VQ_FORWARD_IF_ERROR(read_layer(ctx, &f, l, d));
    VQ_FORWARD_IF_ERROR(vq_container_close(ctx, &f));
    cfg->layers = d->layers;
    cfg->sliding_windows = d->sliding;
    cfg->transforms = *v1 ? NULL : d->xf;
    return VQ_OK;
}

vq_status vq_profile_load_buffer(vq_ctx *ctx, const void *buf, size_t size, vq_profile **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    VQ_RETURN_IF(ctx, buf == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'buf' is NULL");
    vq_profile_config cfg;
    loaded d = {0};
    bool v1 = false;
    vq_status st = read_profile(ctx, buf, size, &cfg, &d, &v1);
    if (st == VQ_OK) {
        st = vq_profile_create(ctx, &cfg, out);
        ctx->fn = __func__;
        if (st == VQ_ERR_INVALID_ARGUMENT || st == VQ_ERR_UNSUPPORTED) {
            /* a plan the library refuses: corrupt, unless this build lacks it */
            char why[sizeof ctx->last_error];
            snprintf(why, sizeof why, "%s", vq_ctx_last_error(ctx));
            st = vq_fail(ctx, st == VQ_ERR_UNSUPPORTED ? st : VQ_ERR_CORRUPT_DATA, "the file's profile: %s", why);
        }
        if (st == VQ_OK) (*out)->states_recipe = !v1;
    }
    free_loaded(&d);
    return st;
}

vq_status vq_profile_load(vq_ctx *ctx, const char *path, vq_profile **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    VQ_RETURN_IF(ctx, path == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'path' is NULL");
    uint8_t *buf;
    size_t size;
    VQ_FORWARD_IF_ERROR(vq_file_read_all(ctx, path, PROFILE_MAX_FILE_BYTES, &buf, &size));
    const vq_status st = vq_profile_load_buffer(ctx, buf, size, out);
    free(buf);
    return st;
}
