/* cache_layout.c — a layer's methods become its streams (what a page holds)
 * and its tables (what every token of the layer shares). Validation of the
 * per-layer config lives here too, next to what it protects. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "formats/format_kivi_mix.h"

#define DEFAULT_SEED 0x7665636163686531ull /* "vecache1" */

static void add_stream(vq_cache *c, vq_cache_layer *L, const char *name, vq_dtype dt, int64_t rows, int64_t last,
                       int ndim, bool is_key, vq_cache_part part)
{
    vq_cache_stream *s = &L->streams[L->n_streams++];
    const int64_t heads = ndim > 2 ? c->Hkv : 1;
    *s = (vq_cache_stream){name, dt, rows, last, ndim, ndim > 2, is_key, part,
                           heads * rows * last * (int64_t)vq_dtype_size(dt), L->page_bytes};
    L->page_bytes += s->page_bytes;
}

/* Codes of `bits` per element over D elements: u8 one per byte at 8 bits,
 * else u32 words (vq_bit_pack). */
static void add_turbo_codes(vq_cache *c, vq_cache_layer *L, const char *name, int bits, bool is_key)
{
    if (bits == 8) add_stream(c, L, name, VQ_DT_U8, c->P, c->D, 4, is_key, VQ_CACHE_PART_CODE);
    else add_stream(c, L, name, VQ_DT_U32, c->P, vq_ceil_div((int64_t)c->D * bits, 32), 4, is_key,
                    VQ_CACHE_PART_CODE);
}

static bool in_range(int v, int lo, int hi) { return v >= lo && v <= hi; }

/* Checks a host table: f32 (or i32), compact, rank in [lo, hi]. */
static vq_status check_table(vq_ctx *ctx, const DLTensor *t, const char *layer, const char *field, int lo, int hi)
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

static vq_status layout_keys(vq_cache *c, vq_key_config *k, const char *name, vq_cache_layer *L)
{
    vq_ctx *ctx = c->ctx;
    const int D = c->D;
    const int64_t P = c->P;
    const bool pow2 = vq_is_pow2(D);
    L->g = 1;
    if (k->method != VQ_KEY_KIVI_MIX) k->wide_channels = 0; /* ignored: one LCFG per format */
    switch (k->method) {
    case VQ_KEY_F16: add_stream(c, L, "k", VQ_DT_F16, P, D, 4, true, VQ_CACHE_PART_CODE); return VQ_OK;
    case VQ_KEY_KIVI:
        VQ_RETURN_IF(ctx, k->bits != 2 && k->bits != 4 && k->bits != 8, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.bits': KIVI takes 2, 4 or 8, got %d", name, k->bits);
        if (k->group_size == 0) k->group_size = 32;
        VQ_RETURN_IF(ctx, k->group_size < 1 || P % k->group_size != 0, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.group_size': must divide page_size %lld, got %d", name, (long long)P,
                     k->group_size);
        L->g = k->group_size;
        add_stream(c, L, "k_codes", VQ_DT_U8, P, (int64_t)D * k->bits / 8, 4, true, VQ_CACHE_PART_CODE);
        add_stream(c, L, "k_scale", VQ_DT_F16, P / L->g, D, 4, true, VQ_CACHE_PART_PARAM);
        add_stream(c, L, "k_zero", VQ_DT_F16, P / L->g, D, 4, true, VQ_CACHE_PART_PARAM);
        return VQ_OK;
    case VQ_KEY_KIVI_MIX:
        VQ_RETURN_IF(ctx, !in_range(k->bits, 1, 7) || !in_range(k->bits2, k->bits + 1, 8), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.bits/bits2': KIVI_MIX takes 1 <= bits < bits2 <= 8, got %d and %d", name,
                     k->bits, k->bits2);
        if (k->group_size == 0) k->group_size = 32;
        VQ_RETURN_IF(ctx, k->group_size < 1 || P % k->group_size != 0, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.group_size': must divide page_size %lld, got %d", name, (long long)P,
                     k->group_size);
        VQ_RETURN_IF(ctx, !in_range(k->wide_channels, 0, D - 1), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.wide_channels': KIVI_MIX takes 1..%d (0 = %d), got %d", name, D - 1, D / 2,
                     k->wide_channels);
        if (k->wide_channels == D / 2) k->wide_channels = 0; /* one spelling of the default (LCFG) */
        L->g = k->group_size;
        add_stream(c, L, "k_codes", VQ_DT_U8, P,
                   vq_kivi_mix_row_bytes(D, vq_cache_kivi_mix_wide(k, D), k->bits, k->bits2), 4, true,
                   VQ_CACHE_PART_CODE);
        add_stream(c, L, "k_scale", VQ_DT_F16, P / L->g, D, 4, true, VQ_CACHE_PART_PARAM);
        add_stream(c, L, "k_zero", VQ_DT_F16, P / L->g, D, 4, true, VQ_CACHE_PART_PARAM);
        add_stream(c, L, "k_mask", VQ_DT_U8, P / L->g, vq_kivi_mix_mask_bytes(D), 4, true, VQ_CACHE_PART_PARAM);
        return VQ_OK;
    case VQ_KEY_TURBO:
    case VQ_KEY_TURBO_RVQ: {
        const bool rvq = k->method == VQ_KEY_TURBO_RVQ;
        VQ_RETURN_IF(ctx, !pow2, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->head_dim': %s keys need a power of two, got %d", rvq ? "TURBO_RVQ" : "TURBO",
                     D);
        VQ_RETURN_IF(ctx, !in_range(k->bits, 1, 8), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.bits': expected 1..8, got %d", name, k->bits);
        VQ_RETURN_IF(ctx, rvq && !in_range(k->bits2, 1, 8), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.bits2': expected 1..8, got %d", name, k->bits2);
        add_turbo_codes(c, L, rvq ? "k_idx1" : "k_idx", k->bits, true);
        add_stream(c, L, rvq ? "k_scale1" : "k_scale", VQ_DT_F32, P, 1, 3, true, VQ_CACHE_PART_PARAM);
        if (rvq) {
            add_turbo_codes(c, L, "k_idx2", k->bits2, true);
            add_stream(c, L, "k_scale2", VQ_DT_F32, P, 1, 3, true, VQ_CACHE_PART_PARAM);
        }
        return VQ_OK;
    }
    case VQ_KEY_RABITQ:
        VQ_RETURN_IF(ctx, !pow2, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->head_dim': RABITQ keys need a power of two, got %d", D);
        VQ_RETURN_IF(ctx, !in_range((int)k->rabitq_score, 0, 1), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.rabitq_score': unknown value %d", name, (int)k->rabitq_score);
        VQ_RETURN_IF(ctx, !in_range((int)k->rabitq_mag, 0, 1), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.rabitq_mag': unknown value %d", name, (int)k->rabitq_mag);
        add_stream(c, L, "k_bits", VQ_DT_U8, P, D / 8, 4, true, VQ_CACHE_PART_CODE);
        add_stream(c, L, "k_mag", VQ_DT_F32, P, 1, 3, true, VQ_CACHE_PART_PARAM);
        return VQ_OK;
    case VQ_KEY_QJL:
        if (k->qjl_sketch == 0) k->qjl_sketch = 2 * D;
        VQ_RETURN_IF(ctx, !in_range(k->qjl_sketch, 1, 1024), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.qjl_sketch': expected 1..1024, got %d", name, k->qjl_sketch);
        add_stream(c, L, "k_bits", VQ_DT_U32, P, vq_ceil_div(k->qjl_sketch, 32), 4, true, VQ_CACHE_PART_CODE);
        add_stream(c, L, "k_norm", VQ_DT_F32, P, 1, 3, true, VQ_CACHE_PART_PARAM);
        return VQ_OK;
    case VQ_KEY_VECINFER: {
        VQ_FORWARD_IF_ERROR(check_table(ctx, k->codebook, name, "keys.codebook", 3, 4));
        const DLTensor *cb = k->codebook;
        const int64_t M = vq_dim(cb, -3), C = vq_dim(cb, -2), sub = vq_dim(cb, -1);
        VQ_RETURN_IF(ctx, M * sub != D || (cb->ndim == 4 && cb->shape[0] != c->Hkv), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.codebook': expected [M, C, D/M] or [Hkv, M, C, D/M] with D = %d, Hkv = %d",
                     name, D, c->Hkv);
        VQ_RETURN_IF(ctx, C > 65536, VQ_ERR_INVALID_ARGUMENT, "argument '%s.keys.codebook': C = %lld > 65536", name,
                     (long long)C);
        if (k->smooth) {
            VQ_FORWARD_IF_ERROR(check_table(ctx, k->smooth, name, "keys.smooth", 1, 2));
            const DLTensor *sm = k->smooth;
            VQ_RETURN_IF(ctx, vq_dim(sm, -1) != D || (sm->ndim == 2 && sm->shape[0] != c->Hkv),
                         VQ_ERR_INVALID_ARGUMENT, "argument '%s.keys.smooth': expected [D] or [Hkv, D]", name);
            const float *x = (const float *)vq_data(sm);
            for (int64_t i = 0; i < vq_numel(sm); i++)
                VQ_RETURN_IF(ctx, !(x[i] > 0.0f), VQ_ERR_INVALID_ARGUMENT,
                             "argument '%s.keys.smooth': element %lld is not > 0", name, (long long)i);
        }
        add_stream(c, L, "k_idx", C <= 256 ? VQ_DT_U8 : VQ_DT_U16, P, M, 4, true, VQ_CACHE_PART_CODE);
        return VQ_OK;
    }
    case VQ_KEY_COMMVQ: {
        VQ_FORWARD_IF_ERROR(check_table(ctx, k->codebook, name, "keys.codebook", 3, 3));
        const DLTensor *cb = k->codebook;
        VQ_RETURN_IF(ctx, cb->shape[2] != D || cb->shape[1] > 65536, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.codebook': expected [R, C <= 65536, D = %d]", name, D);
        VQ_FORWARD_IF_ERROR(check_table(ctx, k->cos_freqs, name, "keys.cos_freqs", 2, 2));
        VQ_FORWARD_IF_ERROR(check_table(ctx, k->sin_freqs, name, "keys.sin_freqs", 2, 2));
        VQ_RETURN_IF(ctx, k->cos_freqs->shape[1] != D / 2 || k->sin_freqs->shape[1] != D / 2 ||
                              k->sin_freqs->shape[0] != k->cos_freqs->shape[0],
                     VQ_ERR_INVALID_ARGUMENT, "argument '%s.keys.cos_freqs/sin_freqs': expected both [Pmax, D/2 = %d]",
                     name, D / 2);
        VQ_RETURN_IF(ctx, !in_range((int)k->rope, 0, 1), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.keys.rope': unknown layout %d", name, (int)k->rope);
        add_stream(c, L, "k_idx", cb->shape[1] <= 256 ? VQ_DT_U8 : VQ_DT_U16, P, cb->shape[0], 4, true,
                   VQ_CACHE_PART_CODE);
        add_stream(c, L, "k_pos", VQ_DT_I32, P, 1, 2, true, VQ_CACHE_PART_PARAM);
        return VQ_OK;
    }
    }
    return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument '%s.keys.method': unknown method %d", name,
                   (int)k->method);
}

static vq_status layout_values(vq_cache *c, vq_value_config *v, const char *name, vq_cache_layer *L)
{
    vq_ctx *ctx = c->ctx;
    const int D = c->D;
    const int64_t P = c->P;
    if (v->method != VQ_VALUE_TURBO) v->scale_f16 = false; /* ignored: one LCFG per format */
    switch (v->method) {
    case VQ_VALUE_F16: add_stream(c, L, "v", VQ_DT_F16, P, D, 4, false, VQ_CACHE_PART_CODE); return VQ_OK;
    case VQ_VALUE_KIVI:
        VQ_RETURN_IF(ctx, v->bits != 2 && v->bits != 4, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.values.bits': KIVI values take 2 or 4, got %d", name, v->bits);
        if (v->group_size == 0) v->group_size = D < 32 ? D : 32;
        VQ_RETURN_IF(ctx, v->group_size < 1 || D % v->group_size != 0, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.values.group_size': must divide head_dim %d, got %d", name, D, v->group_size);
        add_stream(c, L, "v_codes", VQ_DT_U8, P, (int64_t)D * v->bits / 8, 4, false, VQ_CACHE_PART_CODE);
        add_stream(c, L, "v_scale", VQ_DT_F16, P, D / v->group_size, 4, false, VQ_CACHE_PART_PARAM);
        add_stream(c, L, "v_zero", VQ_DT_F16, P, D / v->group_size, 4, false, VQ_CACHE_PART_PARAM);
        return VQ_OK;
    case VQ_VALUE_CODEBOOK:
        if (v->bits == 0) v->bits = 4;
        VQ_RETURN_IF(ctx, v->bits != 4, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.values.bits': CODEBOOK values are 4-bit, got %d", name, v->bits);
        if (v->centroids) {
            VQ_FORWARD_IF_ERROR(check_table(ctx, v->centroids, name, "values.centroids", 1, 1));
            const float *x = (const float *)vq_data(v->centroids);
            const int64_t n = v->centroids->shape[0];
            VQ_RETURN_IF(ctx, n > 16, VQ_ERR_INVALID_ARGUMENT,
                         "argument '%s.values.centroids': at most 16 centroids, got %lld", name, (long long)n);
            for (int64_t i = 1; i < n; i++)
                VQ_RETURN_IF(ctx, x[i] < x[i - 1], VQ_ERR_INVALID_ARGUMENT,
                             "argument '%s.values.centroids': not ascending at %lld", name, (long long)i);
        }
        add_stream(c, L, "v_idx", VQ_DT_U8, P, D / 2, 4, false, VQ_CACHE_PART_CODE);
        add_stream(c, L, "v_scale", VQ_DT_F32, P, 1, 3, false, VQ_CACHE_PART_PARAM);
        return VQ_OK;
    case VQ_VALUE_TURBO:
        VQ_RETURN_IF(ctx, !vq_is_pow2(D), VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cfg->head_dim': TURBO values need a power of two, got %d", D);
        VQ_RETURN_IF(ctx, !in_range(v->bits, 1, 8), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.values.bits': expected 1..8, got %d", name, v->bits);
        add_turbo_codes(c, L, "v_idx", v->bits, false);
        add_stream(c, L, "v_scale", v->scale_f16 ? VQ_DT_F16 : VQ_DT_F32, P, 1, 3, false, VQ_CACHE_PART_PARAM);
        return VQ_OK;
    }
    return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument '%s.values.method': unknown method %d", name,
                   (int)v->method);
}

vq_status vq_cache_layout_layer(vq_cache *c, const vq_cache_layer_config *lc, const char *name, vq_cache_layer *L)
{
    L->cfg = *lc;
    L->n_streams = 0;
    L->page_bytes = 0;
    L->head_major = !c->cuda; /* cache_internal.h: device pools stay page-major for cache_cuda.c */
    VQ_FORWARD_IF_ERROR(layout_keys(c, &L->cfg.keys, name, L));
    VQ_FORWARD_IF_ERROR(layout_values(c, &L->cfg.values, name, L));
    /* No window for two key methods (see the header): CommVQ keys arrive
     * before RoPE, so a window of them could not be attended as plain keys;
     * RaBitQ scores are a scaled estimate of q.k (about 2/pi of it with the
     * L1 magnitude or the Hamming score), so exact f16 window scores next to
     * them would mix two softmax temperatures. Both encode every token at once. */
    const bool no_window = L->cfg.keys.method == VQ_KEY_COMMVQ || L->cfg.keys.method == VQ_KEY_RABITQ;
    L->res_cap = no_window || (c->R == 0 && L->g == 1) ? 0 : c->R + L->g - 1;
    vq_cache_window_layout(c, L);
    return VQ_OK;
}

/* ---- tables ---- */

static vq_status new_table(vq_cache *c, vq_cache_layer *L, int id, const char *name, int ndim, const int64_t *shape)
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

static vq_status copy_table(vq_cache *c, vq_cache_layer *L, int id, const char *name, const DLTensor *src)
{
    VQ_FORWARD_IF_ERROR(new_table(c, L, id, name, src->ndim, src->shape));
    memcpy(L->tables[id].host, vq_data(src), sizeof(float) * (size_t)vq_numel(src));
    return VQ_OK;
}

static uint64_t layer_seed(uint64_t seed, int l) { return (seed ? seed : DEFAULT_SEED) + (uint64_t)l; }

vq_status vq_cache_build_tables(vq_cache *c, const vq_cache_layer_config *user, const char *name, int l,
                                vq_cache_layer *L)
{
    const vq_key_config *k = &L->cfg.keys;
    const vq_value_config *v = &L->cfg.values;
    const int64_t D = c->D;
    switch (k->method) {
    case VQ_KEY_TURBO:
    case VQ_KEY_TURBO_RVQ:
    case VQ_KEY_RABITQ:
        VQ_FORWARD_IF_ERROR(new_table(c, L, VQ_CT_KDIAG, "k_diag", 1, (const int64_t[]){D}));
        (void)vq_random_signs(layer_seed(k->seed, l), D, L->tables[VQ_CT_KDIAG].host);
        break;
    case VQ_KEY_QJL:
        VQ_FORWARD_IF_ERROR(new_table(c, L, VQ_CT_QJL_PROJ, "qjl_projection", 2, (const int64_t[]){k->qjl_sketch, D}));
        (void)vq_qjl_projection(layer_seed(k->seed, l), k->qjl_sketch, D, L->tables[VQ_CT_QJL_PROJ].host);
        break;
    case VQ_KEY_VECINFER:
        VQ_FORWARD_IF_ERROR(copy_table(c, L, VQ_CT_CODEBOOK, "vecinfer_codebook", user->keys.codebook));
        if (user->keys.smooth) {
            VQ_FORWARD_IF_ERROR(copy_table(c, L, VQ_CT_SMOOTH, "vecinfer_smooth", user->keys.smooth));
        } else {
            VQ_FORWARD_IF_ERROR(new_table(c, L, VQ_CT_SMOOTH, "vecinfer_smooth", 1, (const int64_t[]){D}));
            for (int64_t i = 0; i < D; i++) L->tables[VQ_CT_SMOOTH].host[i] = 1.0f;
        }
        break;
    case VQ_KEY_COMMVQ:
        VQ_FORWARD_IF_ERROR(copy_table(c, L, VQ_CT_CODEBOOK, "commvq_codebook", user->keys.codebook));
        VQ_FORWARD_IF_ERROR(copy_table(c, L, VQ_CT_COS, "commvq_cos", user->keys.cos_freqs));
        VQ_FORWARD_IF_ERROR(copy_table(c, L, VQ_CT_SIN, "commvq_sin", user->keys.sin_freqs));
        break;
    default: break;
    }
    /* a TurboQuant window codes keys and values as TurboQuant does: it needs
     * both sign tables, drawn from the seeds the layer's TurboQuant methods use */
    if (vq_cache_coded_window(c) && L->res_cap > 0 && L->tables[VQ_CT_KDIAG].host == NULL) {
        VQ_FORWARD_IF_ERROR(new_table(c, L, VQ_CT_KDIAG, "k_diag", 1, (const int64_t[]){D}));
        (void)vq_random_signs(layer_seed(k->seed, l), D, L->tables[VQ_CT_KDIAG].host);
    }
    if (v->method == VQ_VALUE_TURBO || (vq_cache_coded_window(c) && L->res_cap > 0)) {
        VQ_FORWARD_IF_ERROR(new_table(c, L, VQ_CT_VDIAG, "v_diag", 1, (const int64_t[]){D}));
        (void)vq_random_signs(layer_seed(v->seed, l) ^ 0x76ull, D, L->tables[VQ_CT_VDIAG].host);
    }
    if (v->method == VQ_VALUE_CODEBOOK) {
        if (user->values.centroids) {
            VQ_FORWARD_IF_ERROR(copy_table(c, L, VQ_CT_VCENTS, "v_centroids", user->values.centroids));
        } else {
            VQ_FORWARD_IF_ERROR(new_table(c, L, VQ_CT_VCENTS, "v_centroids", 1, (const int64_t[]){16}));
            (void)vq_lloyd_max_codebook(4, L->tables[VQ_CT_VCENTS].host, NULL);
        }
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
