/* cache_methods.c — the registry of cache methods: one line per method
 * (cache_method.h). The cache reaches a method's layout, tables, encoder
 * and attention format only through these tables. */
#include "cache/cache_method.h"

static const vq_cache_method *const KEY_METHODS[] = {
    &vq_cache_keys_f16, &vq_cache_keys_kivi, &vq_cache_keys_kivi_mix, &vq_cache_keys_turbo,
    &vq_cache_keys_turbo_rvq, &vq_cache_keys_rabitq, &vq_cache_keys_qjl, &vq_cache_keys_vecinfer,
    &vq_cache_keys_commvq,
};

static const vq_cache_method *const VALUE_METHODS[] = {
    &vq_cache_values_f16, &vq_cache_values_kivi, &vq_cache_values_codebook, &vq_cache_values_turbo,
};

static const vq_cache_method *find(const vq_cache_method *const *table, size_t n, int id)
{
    for (size_t i = 0; i < n; i++)
        if (table[i]->id == id) return table[i];
    return NULL;
}

const vq_cache_method *vq_cache_key_method(vq_key_method m)
{
    return find(KEY_METHODS, sizeof KEY_METHODS / sizeof *KEY_METHODS, (int)m);
}

const vq_cache_method *vq_cache_value_method(vq_value_method m)
{
    return find(VALUE_METHODS, sizeof VALUE_METHODS / sizeof *VALUE_METHODS, (int)m);
}
