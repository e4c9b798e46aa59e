/* values_registry.cu — the registry of the CUDA value formats: the
 * descriptors (values_registry.h) of the policies that kv_values.cuh lists. */
#include "cuda/kv_values.cuh"

#define VQ_CU_VALUE_ENTRY(Policy) {vqkv::Policy::format, vqkv::Policy::lead, vqkv::Policy::fill},
static const vq_cu_value_format formats[] = {
    VQ_CU_VALUE_ENTRY(F16Values) VQ_CU_ENCODED_VALUE_FORMATS(VQ_CU_VALUE_ENTRY)};

extern "C" const vq_cu_value_format *vq_cu_value_format_of(int f)
{
    for (const vq_cu_value_format &d : formats)
        if (d.format == f) return &d;
    return NULL;
}
