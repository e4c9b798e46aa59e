/* decode_mma_affine.cu — the tensor-core decode skeleton's KIVI instances:
 * 2- and 4-bit keys with values of the same width (D = 128, value groups of
 * 32 channels). */
#include "cuda/decode_mma_affine.cuh"

extern "C" int vq_cu_launch_mma_affine(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    using namespace vqmma;
    return p->a_bits == 2 ? mmat_go<AffineKeysT<2>, AffineValuesT<2>>(*p, stream, occupancy)
                          : mmat_go<AffineKeysT<4>, AffineValuesT<4>>(*p, stream, occupancy);
}
