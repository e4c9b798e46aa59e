/* kv_sdpa_commvq.cu — vq_fused_sdpa instances for CommVQ additive RoPE keys. */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_commvq)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return vqkv::kv_dispatch<vqkv::CommvqKeys::P, VQ_KV_VSET>(p, stream, occupancy);
}
