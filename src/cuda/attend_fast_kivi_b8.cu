/* attend_fast_kivi_b8.cu — the 8-bit instances of the fast KIVI decode kernel. */
#include "cuda/attend_fast_kivi.cuh"

VQ_CU_KIVI_FAST_LAUNCHER(8)
