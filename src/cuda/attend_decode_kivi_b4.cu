/* attend_decode_kivi_b4.cu — the 4-bit instances of the affine decode kernel. */
#include "cuda/attend_decode_kivi.cuh"

VQ_CU_KIVI_LAUNCHER(4)
