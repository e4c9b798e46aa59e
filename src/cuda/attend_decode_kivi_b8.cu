/* attend_decode_kivi_b8.cu — the 8-bit instances of the affine decode kernel. */
#include "cuda/attend_decode_kivi.cuh"

VQ_CU_KIVI_LAUNCHER(8)
