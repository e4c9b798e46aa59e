/* kv_sdpa_vecinfer.cu — vq_fused_sdpa instances for VecInfer product-VQ keys. */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_vecinfer)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return vqkv::kv_dispatch<vqkv::PqKeys::P, VQ_KV_VSET>(p, stream, occupancy);
}
