/* kv_sdpa_plain.cu — vq_fused_sdpa instances for plain keys (f32, f16, bf16). */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_plain)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    using namespace vqkv;
    if (p->k_elt == VQ_CU_F16) return kv_dispatch<PlainKeys<VQ_CU_F16>::P, VQ_KV_VSET>(p, stream, occupancy);
    if (p->k_elt == VQ_CU_BF16) return kv_dispatch<PlainKeys<VQ_CU_BF16>::P, VQ_KV_VSET>(p, stream, occupancy);
    return kv_dispatch<PlainKeys<VQ_CU_F32>::P, VQ_KV_VSET>(p, stream, occupancy);
}
