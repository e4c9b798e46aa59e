/* method_f16.c — the uncompressed cache method, keys and values: f16 rows as
 * appended (the reference every other method is measured against). */
#include "cache/cache_method.h"

static vq_status layout_keys(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_cache_add_stream(c, L, "k", VQ_DT_F16, c->P, c->D, 4, true, VQ_CACHE_PART_CODE);
    return VQ_OK;
}

static vq_status layout_values(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_cache_add_stream(c, L, "v", VQ_DT_F16, c->P, c->D, 4, false, VQ_CACHE_PART_CODE);
    return VQ_OK;
}

static vq_status encode(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                        unsigned char *scratch, int64_t T)
{
    const size_t bytes = (size_t)(c->Hkv * T * c->D * 2);
    return vq_cache_mem_copy2d(c, outs[0]->data, bytes, x->data, bytes, bytes, 1);
}

static void describe_keys(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                          vq_encoded_values *ev)
{
    ek->format = VQ_KEYS_F16;
    ek->f16.keys = &sv[0];
}

static void describe_values(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                            vq_encoded_values *ev)
{
    *ev = vq_f16_values(&sv[0]);
}

const vq_cache_method vq_cache_keys_f16 = {
    .name = "F16", .id = VQ_KEY_F16, .window = true,
    .layout = layout_keys, .encode = encode, .describe = describe_keys,
};

const vq_cache_method vq_cache_values_f16 = {
    .name = "F16", .id = VQ_VALUE_F16, .window = true,
    .layout = layout_values, .encode = encode, .describe = describe_values,
};
