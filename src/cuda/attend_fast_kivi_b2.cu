/* attend_fast_kivi_b2.cu — the 2-bit instances of the fast KIVI decode kernel. */
#include "cuda/attend_fast_kivi.cuh"

VQ_CU_KIVI_FAST_LAUNCHER(2)
