/* quant.h — ggml weight block layouts (facts of the GGUF format, not code)
 * and the per-ISA dot kernel tables, private to the model runtime. */
#ifndef VQM_QUANT_H
#define VQM_QUANT_H

#include <assert.h>
#include <stdint.h>

#include "vqm.h"

#define VQM_QK 32 /* elements per block of Q4_0, Q4_1, Q8_0 */

/* Q4_0: x = d * (q - 8), q in 0..15; qs[j] low nibble = element j, high = element j + 16. */
typedef struct { uint16_t d; uint8_t qs[VQM_QK / 2]; } vqm_block_q4_0;
/* Q4_1: x = d * q + m. */
typedef struct { uint16_t d, m; uint8_t qs[VQM_QK / 2]; } vqm_block_q4_1;
/* Q8_0: x = d * q, q int8. */
typedef struct { uint16_t d; int8_t qs[VQM_QK]; } vqm_block_q8_0;
static_assert(sizeof(vqm_block_q4_0) == 18, "Q4_0 block is 18 bytes");
static_assert(sizeof(vqm_block_q4_1) == 20, "Q4_1 block is 20 bytes");
static_assert(sizeof(vqm_block_q8_0) == 34, "Q8_0 block is 34 bytes");

void vqm_kernels_scalar(vqm_kernels *k);
#if defined(VQM_HAVE_AVX2)
void vqm_kernels_avx2(vqm_kernels *k);
#endif
#if defined(VQM_HAVE_AVX512)
void vqm_kernels_avx512(vqm_kernels *k);
#endif

#endif
