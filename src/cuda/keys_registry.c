/* keys_registry.c — the registry of the CUDA key formats: one line per
 * format, naming the descriptor its keys_<name>.cu defines (keys_registry.h). */
#include "cuda/keys_registry.h"

#define VQ_CU_KEY_FORMATS(X) \
    X(f16)                   \
    X(turbo)                 \
    X(turbo_rvq)             \
    X(kivi)                  \
    X(kivi_mix)              \
    X(rabitq)                \
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
