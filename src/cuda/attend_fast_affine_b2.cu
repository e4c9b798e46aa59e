/* attend_fast_affine_b2.cu — the 2-bit instances of the fast KIVI decode kernel. */
#include "cuda/attend_fast_affine.cuh"

VQ_CU_AFFINE_FAST_LAUNCHER(2)
