/* attend_decode_kivi_b2.cu — the 2-bit instances of the affine decode kernel. */
#include "cuda/attend_decode_kivi.cuh"

VQ_CU_KIVI_LAUNCHER(2)
