/* method_rabitq.c — RaBitQ keys: the signs of the rotated key (D/8 bytes)
 * and one f32 magnitude per token (formats/format_rabitq.h), scored by the
 * Hamming estimate or exactly (vq_key_config.rabitq_score). Every token is
 * encoded at once: the scores estimate q.k only up to a scale, so exact
 * window scores beside them would mix two softmax temperatures. */
#include "cache/cache_method.h"

static vq_status layout(vq_cache *c, vq_cache_layer *L, const char *name)
{
    const vq_key_config *k = &L->cfg.keys;
    VQ_RETURN_IF(c->ctx, !vq_is_pow2(c->D), VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->head_dim': RABITQ keys need a power of two, got %d", c->D);
    VQ_RETURN_IF(c->ctx, !vq_cache_in_range((int)k->rabitq_score, 0, 1), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.rabitq_score': unknown value %d", name, (int)k->rabitq_score);
    VQ_RETURN_IF(c->ctx, !vq_cache_in_range((int)k->rabitq_mag, 0, 1), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.rabitq_mag': unknown value %d", name, (int)k->rabitq_mag);
    vq_cache_add_stream(c, L, "k_bits", VQ_DT_U8, c->P, c->D / 8, 4, true, VQ_CACHE_PART_CODE);
    vq_cache_add_stream(c, L, "k_mag", VQ_DT_F32, c->P, 1, 3, true, VQ_CACHE_PART_PARAM);
    return VQ_OK;
}

static vq_status tables(vq_cache *c, vq_cache_layer *L, const vq_cache_layer_config *user, int l)
{
    VQ_FORWARD_IF_ERROR(vq_cache_new_table(c, L, VQ_CT_KDIAG, "k_diag", 1, (const int64_t[]){c->D}));
    (void)vq_random_signs(vq_cache_layer_seed(L->cfg.keys.seed, l), c->D, L->tables[VQ_CT_KDIAG].host);
    return VQ_OK;
}

static vq_status encode(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                        unsigned char *scratch, int64_t T)
{
    int64_t tsh[4];
    DLTensor tab;
    vq_cache_table_view(c, L, VQ_CT_KDIAG, &tab, tsh);
    const vq_rabitq_encode_opts o = {.mag = L->cfg.keys.rabitq_mag};
    return vq_rabitq_encode(c->ctx, x, &tab, outs[0], outs[1], &o);
}

/* described by its exact score; the cache binds the Hamming score itself
 * (cache_formats.c) */
static void describe(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                     vq_encoded_values *ev)
{
    ek->format = VQ_KEYS_RABITQ;
    ek->rabitq.bits = &sv[0], ek->rabitq.mag = &sv[1], ek->rabitq.diag = &tb[VQ_CT_KDIAG];
}

const vq_cache_method vq_cache_keys_rabitq = {
    .name = "RABITQ", .id = VQ_KEY_RABITQ, .window = false,
    .layout = layout, .tables = tables, .encode = encode, .describe = describe,
};
