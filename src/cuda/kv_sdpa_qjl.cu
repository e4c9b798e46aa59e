/* kv_sdpa_qjl.cu — vq_fused_sdpa instances for QJL sign sketches. */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_qjl)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return vqkv::kv_dispatch<vqkv::QjlKeys::P, VQ_KV_VSET>(p, stream, occupancy);
}
