/* kv_sdpa_rabitq.cu — vq_fused_sdpa instances for RaBitQ 1-bit keys. */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_rabitq)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return vqkv::kv_dispatch<vqkv::RabitqKeys::P, VQ_KV_VSET>(p, stream, occupancy);
}
