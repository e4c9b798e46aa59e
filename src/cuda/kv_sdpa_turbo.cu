/* kv_sdpa_turbo.cu — vq_fused_sdpa instances for TurboQuant keys, one stage
 * (VQ_KEYS_TURBO) or two (VQ_KEYS_TURBO_RVQ). */
#include "cuda/kv_keys.cuh"

extern "C" int VQ_KV_NAME(vq_cu_launch_sdpa_turbo)(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    using namespace vqkv;
    if (p->n_stages == 2) return kv_dispatch<TurboKeys<2>::P, VQ_KV_VSET>(p, stream, occupancy);
    return kv_dispatch<TurboKeys<1>::P, VQ_KV_VSET>(p, stream, occupancy);
}
