/* kv_sdpa_f16.cu — vq_fused_sdpa instances for plain keys (f32, f16, bf16). */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_f16)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return vqkv::kv_dispatch<vqkv::F16Keys::P, VQ_KV_VSET>(p, stream, occupancy);
}
