/* method_kivi.c — KIVI keys (per channel over groups of group_size tokens)
 * and KIVI values (per token over groups of group_size channels): the
 * group-affine codes of vq_kivi_quantize_keys / _values with f16 scales and
 * zeros (formats/format_kivi.h). */
#include "cache/cache_method.h"

static vq_status layout_keys(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_key_config *k = &L->cfg.keys;
    const int64_t P = c->P, D = c->D;
    VQ_RETURN_IF(c->ctx, k->bits != 2 && k->bits != 4 && k->bits != 8, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.bits': KIVI takes 2, 4 or 8, got %d", name, k->bits);
    if (k->group_size == 0) k->group_size = 32;
    VQ_RETURN_IF(c->ctx, k->group_size < 1 || P % k->group_size != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.group_size': must divide page_size %lld, got %d", name, (long long)P,
                 k->group_size);
    L->g = k->group_size;
    vq_cache_add_stream(c, L, "k_codes", VQ_DT_U8, P, D * k->bits / 8, 4, true, VQ_CACHE_PART_CODE);
    vq_cache_add_stream(c, L, "k_scale", VQ_DT_F16, P / L->g, D, 4, true, VQ_CACHE_PART_PARAM);
    vq_cache_add_stream(c, L, "k_zero", VQ_DT_F16, P / L->g, D, 4, true, VQ_CACHE_PART_PARAM);
    return VQ_OK;
}

static vq_status layout_values(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_value_config *v = &L->cfg.values;
    const int D = c->D;
    VQ_RETURN_IF(c->ctx, v->bits != 2 && v->bits != 4, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.values.bits': KIVI values take 2 or 4, got %d", name, v->bits);
    if (v->group_size == 0) v->group_size = D < 32 ? D : 32;
    VQ_RETURN_IF(c->ctx, v->group_size < 1 || D % v->group_size != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.values.group_size': must divide head_dim %d, got %d", name, D, v->group_size);
    vq_cache_add_stream(c, L, "v_codes", VQ_DT_U8, c->P, (int64_t)D * v->bits / 8, 4, false, VQ_CACHE_PART_CODE);
    vq_cache_add_stream(c, L, "v_scale", VQ_DT_F16, c->P, D / v->group_size, 4, false, VQ_CACHE_PART_PARAM);
    vq_cache_add_stream(c, L, "v_zero", VQ_DT_F16, c->P, D / v->group_size, 4, false, VQ_CACHE_PART_PARAM);
    return VQ_OK;
}

static vq_status encode_keys(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                             unsigned char *scratch, int64_t T)
{
    const vq_key_config *kc = &L->cfg.keys;
    return vq_kivi_quantize_keys(c->ctx, x, kc->bits, kc->group_size, outs[0], outs[1], outs[2]);
}

static vq_status encode_values(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                               unsigned char *scratch, int64_t T)
{
    const vq_value_config *vc = &L->cfg.values;
    return vq_kivi_quantize_values(c->ctx, x, vc->bits, vc->group_size, outs[0], outs[1], outs[2]);
}

static void describe_keys(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                          vq_encoded_values *ev)
{
    ek->format = VQ_KEYS_KIVI;
    ek->kivi.codes = &sv[0], ek->kivi.scale = &sv[1], ek->kivi.zero = &sv[2];
    ek->kivi.bits = L->cfg.keys.bits, ek->kivi.group_size = L->cfg.keys.group_size;
}

static void describe_values(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                            vq_encoded_values *ev)
{
    ev->format = VQ_VALUES_KIVI;
    ev->kivi.codes = &sv[0], ev->kivi.scale = &sv[1], ev->kivi.zero = &sv[2];
    ev->kivi.bits = L->cfg.values.bits, ev->kivi.group_size = L->cfg.values.group_size;
}

const vq_cache_method vq_cache_keys_kivi = {
    .name = "KIVI", .id = VQ_KEY_KIVI, .window = true,
    .layout = layout_keys, .encode = encode_keys, .describe = describe_keys,
};

const vq_cache_method vq_cache_values_kivi = {
    .name = "KIVI", .id = VQ_VALUE_KIVI, .window = true,
    .layout = layout_values, .encode = encode_values, .describe = describe_values,
};
