/* method_qjl.c — QJL keys: the signs of a random projection of the key
 * (qjl_sketch rows, u32 words) and the key's norm, stored as ||k|| / sqrt(D)
 * (attention multiplies its scale by sqrt(D)). */
#include "cache/cache_method.h"

static vq_status layout(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_key_config *k = &L->cfg.keys;
    if (k->qjl_sketch == 0) k->qjl_sketch = 2 * c->D;
    VQ_RETURN_IF(c->ctx, !vq_cache_in_range(k->qjl_sketch, 1, 1024), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.qjl_sketch': expected 1..1024, got %d", name, k->qjl_sketch);
    vq_cache_add_stream(c, L, "k_bits", VQ_DT_U32, c->P, vq_ceil_div(k->qjl_sketch, 32), 4, true,
                        VQ_CACHE_PART_CODE);
    vq_cache_add_stream(c, L, "k_norm", VQ_DT_F32, c->P, 1, 3, true, VQ_CACHE_PART_PARAM);
    return VQ_OK;
}

static vq_status tables(vq_cache *c, vq_cache_layer *L, const vq_cache_layer_config *user, int l)
{
    const vq_key_config *k = &L->cfg.keys;
    VQ_FORWARD_IF_ERROR(vq_cache_new_table(c, L, VQ_CT_QJL_PROJ, "qjl_projection", 2,
                                           (const int64_t[]){k->qjl_sketch, c->D}));
    (void)vq_qjl_projection(vq_cache_layer_seed(k->seed, l), k->qjl_sketch, c->D, L->tables[VQ_CT_QJL_PROJ].host);
    return VQ_OK;
}

static vq_status encode(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                        unsigned char *scratch, int64_t T)
{
    int64_t tsh[4];
    DLTensor tab;
    vq_cache_table_view(c, L, VQ_CT_QJL_PROJ, &tab, tsh);
    VQ_FORWARD_IF_ERROR(vq_cache_rms_rows(c, x->data, c->Hkv * T, outs[1]->data, NULL));
    return vq_qjl_encode(c->ctx, x, &tab, outs[0]);
}

static void describe(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                     vq_encoded_values *ev)
{
    ek->format = VQ_KEYS_QJL;
    ek->qjl.bits = &sv[0], ek->qjl.norm = &sv[1], ek->qjl.projection = &tb[VQ_CT_QJL_PROJ];
}

const vq_cache_method vq_cache_keys_qjl = {
    .name = "QJL", .id = VQ_KEY_QJL, .window = true,
    .layout = layout, .tables = tables, .encode = encode, .describe = describe,
};
