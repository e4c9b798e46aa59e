/* decode_mma_f16.cu — the tensor-core decode skeleton's instance for plain
 * f16 keys and values (vq_fused_sdpa's f16 control, D = 128). */
#include "cuda/decode_mma.cuh"

extern "C" int vq_cu_launch_mma_f16(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return vqmma::mmat_go<vqmma::F16KeysT, vqmma::F16ValuesT>(*p, stream, occupancy);
}
