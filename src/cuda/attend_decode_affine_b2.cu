/* attend_decode_affine_b2.cu — the 2-bit instances of the affine decode kernel. */
#include "cuda/attend_decode_affine.cuh"

VQ_CU_AFFINE_LAUNCHER(2)
