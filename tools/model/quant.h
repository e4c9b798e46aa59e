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

/* The packed layout (vqm_matrix_pack): rows in tiles of VQM_TILE = 16 (the
 * last tile padded with zero rows), a tile's blocks of 32 columns in order,
 * and each tile-block (block b of the tile's 16 rows) is
 *   Q4_1: d[16] f16, m[16] f16, qs[16][16]  (qs[e][r] = row r's byte e)
 *   Q4_0: d[16] f16, qs[16][16]
 *   Q8_0: d[16] f16, qs[32][16] int8         (qs[e][r] = row r's element e)
 *   F32, F16, BF16: v[32][16]                 (v[e][r] = row r's element e)
 * i.e. the 16 rows' blocks with their scales gathered and their elements
 * transposed: one load is one position of 16 rows, so a vector lane holds
 * a row, the scales of 16 rows are one vector, and the kernels need no
 * per-row reduction or per-block broadcast. Same bytes per tile-block as
 * the 16 original blocks. */
static inline size_t vqm_packed_block_bytes(uint32_t type)
{
    switch (type) {
    case VQM_W_Q4_1: return 16 * sizeof(vqm_block_q4_1);
    case VQM_W_Q4_0: return 16 * sizeof(vqm_block_q4_0);
    case VQM_W_Q8_0: return 16 * sizeof(vqm_block_q8_0);
    case VQM_W_F32: return 16 * 32 * 4;
    case VQM_W_F16:
    case VQM_W_BF16: return 16 * 32 * 2;
    default: return 0;
    }
}

/* Tile-blocks ahead that the SIMD tile kernels prefetch (8 measured best
 * of 2, 4, 8, 16 on the 2-core Xeon VM: 2.5-4.3 KB ahead). */
#define VQM_PF_BLOCKS 8

void vqm_kernels_scalar(vqm_kernels *k);
#if defined(VQM_HAVE_AVX2)
void vqm_kernels_avx2(vqm_kernels *k);
#endif
#if defined(VQM_HAVE_AVX512)
void vqm_kernels_avx512(vqm_kernels *k);
#endif

#endif
