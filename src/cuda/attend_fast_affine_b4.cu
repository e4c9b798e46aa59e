/* attend_fast_affine_b4.cu — the 4-bit instances of the fast KIVI decode kernel. */
#include "cuda/attend_fast_affine.cuh"

VQ_CU_AFFINE_FAST_LAUNCHER(4)
