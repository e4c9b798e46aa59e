/* kv_sdpa_kivi.cu — vq_fused_sdpa instances for KIVI affine keys (f16 or
 * f32 scales). */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_kivi)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return vqkv::kv_dispatch<vqkv::KIVIKeys::P, VQ_KV_VSET>(p, stream, occupancy);
}
