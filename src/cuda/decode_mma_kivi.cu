/* decode_mma_kivi.cu — the tensor-core decode skeleton's KIVI instances:
 * 2- and 4-bit keys with values of the same width (D = 128, value groups of
 * 32 channels). */
#include "cuda/decode_mma_kivi.cuh"

extern "C" int vq_cu_launch_mma_kivi(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    using namespace vqmma;
    return p->a_bits == 2 ? mmat_go<KiviKeysT<2>, KiviValuesT<2>>(*p, stream, occupancy)
                          : mmat_go<KiviKeysT<4>, KiviValuesT<4>>(*p, stream, occupancy);
}
