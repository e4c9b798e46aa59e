/* method_codebook.c — codebook values: 4-bit nibbles of v / s against up to
 * 16 ascending centroids (fitted, or the Lloyd-Max N(0,1) table), with
 * s = ||v||_2 / sqrt(D) per token in f32. */
#include "cache/cache_method.h"

static vq_status layout(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_value_config *v = &L->cfg.values;
    if (v->bits == 0) v->bits = 4;
    VQ_RETURN_IF(c->ctx, v->bits != 4, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.values.bits': CODEBOOK values are 4-bit, got %d", name, v->bits);
    if (v->centroids) {
        VQ_FORWARD_IF_ERROR(vq_cache_check_table(c->ctx, v->centroids, name, "values.centroids", 1, 1));
        const float *x = (const float *)vq_data(v->centroids);
        const int64_t n = v->centroids->shape[0];
        VQ_RETURN_IF(c->ctx, n > 16, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s.values.centroids': at most 16 centroids, got %lld", name, (long long)n);
        for (int64_t i = 1; i < n; i++)
            VQ_RETURN_IF(c->ctx, x[i] < x[i - 1], VQ_ERR_INVALID_ARGUMENT,
                         "argument '%s.values.centroids': not ascending at %lld", name, (long long)i);
    }
    vq_cache_add_stream(c, L, "v_idx", VQ_DT_U8, c->P, c->D / 2, 4, false, VQ_CACHE_PART_CODE);
    vq_cache_add_stream(c, L, "v_scale", VQ_DT_F32, c->P, 1, 3, false, VQ_CACHE_PART_PARAM);
    return VQ_OK;
}

static vq_status tables(vq_cache *c, vq_cache_layer *L, const vq_cache_layer_config *user, int l)
{
    if (user->values.centroids)
        return vq_cache_copy_table(c, L, VQ_CT_VCENTS, "v_centroids", user->values.centroids);
    VQ_FORWARD_IF_ERROR(vq_cache_new_table(c, L, VQ_CT_VCENTS, "v_centroids", 1, (const int64_t[]){16}));
    (void)vq_lloyd_max_codebook(4, L->tables[VQ_CT_VCENTS].host, NULL);
    return VQ_OK;
}

/* f32 normalised values (4 bytes an element) and their u8 codes */
static size_t scratch(const vq_cache *c, const vq_cache_layer *L, int64_t T)
{
    return 5 * (size_t)((int64_t)c->Hkv * T * c->D);
}

static vq_status encode(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                        unsigned char *scr, int64_t T)
{
    const int64_t n = c->Hkv * T * c->D;
    int64_t sh[4] = {1, c->Hkv, T, c->D}, tsh[4];
    DLTensor idx, xn, tab;
    vq_cache_view(c, &xn, sh, 4, VQ_DT_F32, scr);
    vq_cache_view(c, &idx, sh, 4, VQ_DT_U8, scr + 4 * (size_t)n);
    VQ_FORWARD_IF_ERROR(vq_cache_rms_rows(c, x->data, c->Hkv * T, outs[1]->data, xn.data));
    vq_cache_table_view(c, L, VQ_CT_VCENTS, &tab, tsh);
    VQ_FORWARD_IF_ERROR(vq_codebook_quantize(c->ctx, &xn, &tab, &idx));
    return vq_rabitq_pack_values(c->ctx, &idx, outs[0]);
}

static void describe(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                     vq_encoded_values *ev)
{
    ev->format = VQ_VALUES_CODEBOOK;
    ev->codebook.idx = &sv[0], ev->codebook.scale = &sv[1], ev->codebook.cents = &tb[VQ_CT_VCENTS];
}

const vq_cache_method vq_cache_values_codebook = {
    .name = "CODEBOOK", .id = VQ_VALUE_CODEBOOK, .window = true,
    .layout = layout, .tables = tables, .scratch = scratch, .encode = encode, .describe = describe,
};
