/* attend_decode_affine_b4.cu — the 4-bit instances of the affine decode kernel. */
#include "cuda/attend_decode_affine.cuh"

VQ_CU_AFFINE_LAUNCHER(4)
