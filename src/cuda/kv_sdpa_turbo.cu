/* kv_sdpa_turbo.cu — vq_fused_sdpa instances for TurboQuant keys, one stage
 * (VQ_KEYS_TURBO) or two (VQ_KEYS_TURBO_RVQ). */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_turbo)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return vqkv::kv_dispatch<vqkv::TurboKeys::P, VQ_KV_VSET>(p, stream, occupancy);
}
