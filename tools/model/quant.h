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
/* Q5_0: x = d * (q - 16), q = low nibble as Q4_0 plus bit i of qh (little-endian) as bit 4 of element i. */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[VQM_QK / 2]; } vqm_block_q5_0;

/* The K-quants: super-blocks of 256 elements. */
#define VQM_QK_K 256
/* Q4_K: 8 sub-blocks of 32, x = d * sc_j * q - dmin * m_j with 6-bit sc_j,
 * m_j packed in scales[12] (ggml's get_scale_min_k4); qs: for each 64
 * elements, 32 bytes whose low nibbles are the first 32, high the next 32. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[VQM_QK_K / 2]; } vqm_block_q4_k;
/* Q6_K: 16 sub-blocks of 16, x = d * scales[i / 16] * (q - 32), q 6-bit: 4
 * low bits in ql, 2 high in qh (ggml's dequantize_row_q6_K has the order). */
typedef struct { uint8_t ql[VQM_QK_K / 2]; uint8_t qh[VQM_QK_K / 4]; int8_t scales[VQM_QK_K / 16]; uint16_t d; } vqm_block_q6_k;
static_assert(sizeof(vqm_block_q4_0) == 18, "Q4_0 block is 18 bytes");
static_assert(sizeof(vqm_block_q5_0) == 22, "Q5_0 block is 22 bytes");
static_assert(sizeof(vqm_block_q4_k) == 144, "Q4_K block is 144 bytes");
static_assert(sizeof(vqm_block_q6_k) == 210, "Q6_K block is 210 bytes");
static_assert(sizeof(vqm_block_q4_1) == 20, "Q4_1 block is 20 bytes");
static_assert(sizeof(vqm_block_q8_0) == 34, "Q8_0 block is 34 bytes");

/* The packed layout (vqm_matrix_pack): rows in tiles of VQM_TILE = 16 (the
 * last tile padded with zero rows), a tile's blocks of 32 columns in order,
 * and each tile-block (block b of the tile's 16 rows) is
 *   Q4_1: d[16] f16, m[16] f16, qs[16][16]  (qs[e][r] = row r's byte e)
 *   Q4_0: d[16] f16, qs[16][16]
 *   Q8_0: d[16] f16, qs[32][16] int8         (qs[e][r] = row r's element e)
 *   F32, F16, BF16: v[32][16]                 (v[e][r] = row r's element e)
 *   Q5_0: d[16] f16, qh[16] u32, qs[16][16]  (qh as in the file, per row)
 * i.e. the 16 rows' blocks with their scales gathered and their elements
 * transposed: one load is one position of 16 rows, so a vector lane holds
 * a row, the scales of 16 rows are one vector, and the kernels need no
 * per-row reduction or per-block broadcast. Same bytes per tile-block as
 * the 16 original blocks.
 * The K-quants pack a tile-super-block (256 columns of the 16 rows), its
 * codes re-ordered into sub-blocks j of 32 whose byte e holds element e in
 * the low nibble and e + 16 in the high one (as Q4_0), i.e. qs[j][e][r]:
 *   Q4_K: d[16], dmin[16] f16, sc[8][16], m[8][16] u8 (the 6-bit scales and
 *         mins unpacked), qs[8][16][16]                       2368 bytes
 *   Q6_K: d[16] f16, sc[16][16] i8, ql[8][16][16], qh[8][2][16] u32 (word 0
 *         of sub-block j: bits 2e..2e+1 = the high bits of element e, word 1
 *         those of element e + 16)                            3360 bytes
 * vqm_packed_block_bytes gives their bytes per 32 columns (1/8 of those). */
/* Offsets inside a packed K-quant tile-super-block. */
enum {
    VQM_Q4K_SC = 64, VQM_Q4K_M = 64 + 128, VQM_Q4K_QS = 64 + 256, VQM_Q4K_BYTES = 64 + 256 + 2048,
    VQM_Q6K_SC = 32, VQM_Q6K_QL = 32 + 256, VQM_Q6K_QH = 32 + 256 + 2048, VQM_Q6K_BYTES = 32 + 256 + 2048 + 1024
};

static inline size_t vqm_packed_block_bytes(uint32_t type)
{
    switch (type) {
    case VQM_W_Q4_1: return 16 * sizeof(vqm_block_q4_1);
    case VQM_W_Q4_0: return 16 * sizeof(vqm_block_q4_0);
    case VQM_W_Q8_0: return 16 * sizeof(vqm_block_q8_0);
    case VQM_W_Q5_0: return 16 * sizeof(vqm_block_q5_0);
    case VQM_W_Q4_K: return VQM_Q4K_BYTES / 8;
    case VQM_W_Q6_K: return VQM_Q6K_BYTES / 8;

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
