/* attend_decode_affine_b8.cu — the 8-bit instances of the affine decode kernel. */
#include "cuda/attend_decode_affine.cuh"

VQ_CU_AFFINE_LAUNCHER(8)
