/* cache_layout.c — a layer's methods become its streams (what a page holds)
 * and its tables (what every token of the layer shares), each method through
 * its descriptor (cache_method.h); and the helpers the method files share
 * for that. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_method.h"

#define DEFAULT_SEED 0x7665636163686531ull /* "vecache1" */

void vq_cache_add_stream(vq_cache *c, vq_cache_layer *L, const char *name, vq_dtype dt, int64_t rows, int64_t last,
                         int ndim, bool is_key, vq_cache_part part)
{
    vq_cache_stream *s = &L->streams[L->n_streams++];
    const int64_t heads = ndim > 2 ? c->Hkv : 1;
    *s = (vq_cache_stream){name, dt, rows, last, ndim, ndim > 2, is_key, part,
                           heads * rows * last * (int64_t)vq_dtype_size(dt), L->page_bytes};
    L->page_bytes += s->page_bytes;
}

void vq_cache_add_turbo_codes(vq_cache *c, vq_cache_layer *L, const char *name, int bits, bool is_key)
{
    if (bits == 8) vq_cache_add_stream(c, L, name, VQ_DT_U8, c->P, c->D, 4, is_key, VQ_CACHE_PART_CODE);
    else vq_cache_add_stream(c, L, name, VQ_DT_U32, c->P, vq_ceil_div((int64_t)c->D * bits, 32), 4, is_key,
                             VQ_CACHE_PART_CODE);
}

vq_status vq_cache_check_table(vq_ctx *ctx, const DLTensor *t, const char *layer, const char *field, int lo,
                               int hi)
{
    VQ_RETURN_IF(ctx, t == NULL, VQ_ERR_INVALID_ARGUMENT, "argument '%s.%s' is NULL (the method needs it)", layer,
                 field);
    char dev[48];
    VQ_RETURN_IF(ctx, t->device.device_type != kDLCPU, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.%s': tables are host memory (cpu), got %s", layer, field,
                 vq_device_name((int)t->device.device_type, (int)t->device.device_id, dev, sizeof dev));
    VQ_RETURN_IF(ctx, t->ndim < lo || t->ndim > hi, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.%s': expected rank %d..%d, got %d", layer, field, lo, hi, t->ndim);
    VQ_RETURN_IF(ctx, t->shape == NULL || t->data == NULL, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.%s': NULL shape or data", layer, field);
    VQ_RETURN_IF(ctx, vq_dtype_of(t) != VQ_DT_F32, VQ_ERR_INVALID_ARGUMENT, "argument '%s.%s': expected f32",
                 layer, field);
    int64_t n = 1, stride = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        VQ_RETURN_IF(ctx, t->shape[i] < 1 || t->shape[i] > (int64_t)1 << 31, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.%s': dimension %d is %lld", layer, field, i, (long long)t->shape[i]);
        VQ_RETURN_IF(ctx, t->strides && t->shape[i] > 1 && t->strides[i] != stride, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.%s': tables must be compact", layer, field);
        stride *= t->shape[i];
        n *= t->shape[i];
        VQ_RETURN_IF(ctx, n > (int64_t)1 << 31, VQ_ERR_INVALID_ARGUMENT, "argument '%s.%s': too large", layer,
                     field);
    }
    const float *x = (const float *)vq_data(t);
    for (int64_t i = 0; i < n; i++)
        VQ_RETURN_IF(ctx, !isfinite(x[i]), VQ_ERR_INVALID_ARGUMENT, "argument '%s.%s': element %lld is not finite",
                     layer, field, (long long)i);
    return VQ_OK;
}

vq_status vq_cache_layout_layer(vq_cache *c, const vq_cache_layer_config *lc, const char *name, vq_cache_layer *L)
{
    L->cfg = *lc;
    L->n_streams = 0;
    L->page_bytes = 0;
    L->head_major = !c->cuda; /* cache_internal.h: device pools stay page-major for cuda_cache.c */
    L->g = 1;
    const vq_cache_method *km = vq_cache_key_method(L->cfg.keys.method);
    const vq_cache_method *vm = vq_cache_value_method(L->cfg.values.method);
    VQ_RETURN_IF(c->ctx, km == NULL, VQ_ERR_INVALID_ARGUMENT, "argument '%s.keys.method': unknown method %d", name,
                 (int)L->cfg.keys.method);
    VQ_RETURN_IF(c->ctx, vm == NULL, VQ_ERR_INVALID_ARGUMENT, "argument '%s.values.method': unknown method %d",
                 name, (int)L->cfg.values.method);
    /* fields a method does not read are zeroed: one LCFG per format */
    if (L->cfg.keys.method != VQ_KEY_KIVI_MIX) L->cfg.keys.wide_channels = 0;
    if (L->cfg.values.method != VQ_VALUE_TURBO) L->cfg.values.scale_f16 = false;
    VQ_FORWARD_IF_ERROR(km->layout(c, L, name));
    VQ_FORWARD_IF_ERROR(vm->layout(c, L, name));
    L->res_cap = !km->window || (c->R == 0 && L->g == 1) ? 0 : c->R + L->g - 1;
    vq_cache_window_layout(c, L);
    return VQ_OK;
}

/* ---- tables ---- */

vq_status vq_cache_new_table(vq_cache *c, vq_cache_layer *L, int id, const char *name, int ndim,
                             const int64_t *shape)
{
    vq_cache_table *t = &L->tables[id];
    int64_t n = 1;
    t->name = name;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) n *= (t->shape[i] = shape[i]);
    t->host = malloc(sizeof(float) * (size_t)n);
    VQ_RETURN_IF(c->ctx, t->host == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate table %s", name);
    t->dev = t->host;
    return VQ_OK;
}

vq_status vq_cache_copy_table(vq_cache *c, vq_cache_layer *L, int id, const char *name, const DLTensor *src)
{
    VQ_FORWARD_IF_ERROR(vq_cache_new_table(c, L, id, name, src->ndim, src->shape));
    memcpy(L->tables[id].host, vq_data(src), sizeof(float) * (size_t)vq_numel(src));
    return VQ_OK;
}

uint64_t vq_cache_layer_seed(uint64_t seed, int l) { return (seed ? seed : DEFAULT_SEED) + (uint64_t)l; }

vq_status vq_cache_build_tables(vq_cache *c, const vq_cache_layer_config *user, const char *name, int l,
                                vq_cache_layer *L)
{
    const vq_key_config *k = &L->cfg.keys;
    const vq_value_config *v = &L->cfg.values;
    const int64_t D = c->D;
    const vq_cache_method *km = vq_cache_key_method(k->method), *vm = vq_cache_value_method(v->method);
    if (km->tables) VQ_FORWARD_IF_ERROR(km->tables(c, L, user, l));
    if (vm->tables) VQ_FORWARD_IF_ERROR(vm->tables(c, L, user, l));
    /* a TurboQuant window codes keys and values as TurboQuant does: it needs
     * both sign tables, drawn from the seeds the layer's TurboQuant methods use */
    if (vq_cache_coded_window(c) && L->res_cap > 0 && L->tables[VQ_CT_KDIAG].host == NULL) {
        VQ_FORWARD_IF_ERROR(vq_cache_new_table(c, L, VQ_CT_KDIAG, "k_diag", 1, (const int64_t[]){D}));
        (void)vq_random_signs(vq_cache_layer_seed(k->seed, l), D, L->tables[VQ_CT_KDIAG].host);
    }
    if (v->method == VQ_VALUE_TURBO || (vq_cache_coded_window(c) && L->res_cap > 0)) {
        VQ_FORWARD_IF_ERROR(vq_cache_new_table(c, L, VQ_CT_VDIAG, "v_diag", 1, (const int64_t[]){D}));
        (void)vq_random_signs(vq_cache_layer_seed(v->seed, l) ^ 0x76ull, D, L->tables[VQ_CT_VDIAG].host);
    }
    (void)name;
    if (!c->cuda) return VQ_OK;
    for (int i = 0; i < VQ_CT_COUNT; i++) {
        vq_cache_table *t = &L->tables[i];
        if (t->host == NULL) continue;
        int64_t n = 1;
        for (int j = 0; j < t->ndim; j++) n *= t->shape[j];
        t->dev = vq_cache_mem_alloc(c, sizeof(float) * (size_t)n);
        if (t->dev == NULL) return VQ_ERR_OUT_OF_MEMORY;
        VQ_FORWARD_IF_ERROR(vq_cache_mem_upload(c, t->dev, t->host, sizeof(float) * (size_t)n));
    }
    return VQ_OK;
}

void vq_cache_free_tables(vq_cache *c, vq_cache_layer *L)
{
    for (int i = 0; i < VQ_CT_COUNT; i++) {
        vq_cache_table *t = &L->tables[i];
        if (t->dev && t->dev != t->host) vq_cache_mem_free(c, t->dev);
        free(t->host);
        t->host = NULL;
        t->dev = NULL;
    }
}
