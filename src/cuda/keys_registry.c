/* keys_registry.c — the registry of the CUDA key formats: one line per
 * format, naming the descriptor its keys_<name>.cu defines (keys_registry.h);
 * the formats' descriptors answer the CUDA glue and the cache's device
 * encoders (cache/cache_cuda.h). */
#include "cuda/keys_registry.h"

#include "cache/cache_cuda.h"

#define VQ_CU_KEY_FORMATS(X) \
    X(f16)                   \
    X(turbo)                 \
    X(turbo_rvq)             \
    X(kivi)                  \
    X(kivi_mix)              \
    X(rabitq)                \
    X(rabitq_hamming)        \
    X(qjl)                   \
    X(vecinfer)              \
    X(commvq)

#define VQ_CU_DECLARE(name) extern const vq_cu_key_format vq_cu_keys_##name;
#define VQ_CU_ENTRY(name) &vq_cu_keys_##name,
VQ_CU_KEY_FORMATS(VQ_CU_DECLARE)
static const vq_cu_key_format *const formats[] = {VQ_CU_KEY_FORMATS(VQ_CU_ENTRY)};

const vq_cu_key_format *vq_cu_key_format_of(int f)
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (formats[i]->format == f) return formats[i];
    return NULL;
}

vq_cache_device_encoder vq_cache_cuda_key_encoder(int m)
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (formats[i]->cache_encode != NULL && formats[i]->cache_method == m) return formats[i]->cache_encode;
    return NULL;
}
