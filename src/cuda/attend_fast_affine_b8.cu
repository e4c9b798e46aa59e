/* attend_fast_affine_b8.cu — the 8-bit instances of the fast KIVI decode kernel. */
#include "cuda/attend_fast_affine.cuh"

VQ_CU_AFFINE_FAST_LAUNCHER(8)
