/* attn_cb8_avx2.c — AVX2 integer p.V for nibble-packed codebook values at
 * D = 128 and 64 (attn_kernels.h, codebook_pv8 and codebook_pv8_64;
 * RaBitQ's 4-bit values, TurboQuant values).
 *
 * The weights and their rounding are codebook_pv8_scalar's (uint8 weights,
 * L = 255, for rows without a negative weight, else int8, L = 127). AVX2 has
 * no vpdpbusd, and vpmaddubsw's int16 pair sums saturate (255 * 127 * 2 >
 * 32767), so the products go through vpmaddwd: pairs of tokens (j, j+1)
 * interleaved in each dword as int16 [u_j(c), u_j+1(c)], u = cq + 128
 * zero-extended (the accumulators start at -128 sum_j wq_j), times the
 * dword (wq_j, wq_j+1), into int32: exact (|sum| < 2^31). The decode
 * (two unpacks, one and / one shift and one vpshufb per 8 channels and
 * pair) is shared by the RB <= 4 rows of a kv head; each row then costs one
 * vpmaddwd and one vpaddd per 8 channels and pair (16 products), the
 * f32 path's FMA count, on two ports of four. The bodies: attn_cb8_avx2.h. */
#include <immintrin.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_cb8_avx2.h"

/* R rows in groups of at most 4 (the rows of a kv head share the decode). */
VQ_INLINE void cb8_all_rows_avx2(int D, int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                                 const float *w, int64_t ldw, float *o, int64_t ldo)
{
    const __m256i lut = cb8_lut_avx2(cq);
    int r0 = 0;
    for (; r0 + 4 <= R; r0 += 4) cb8_rows_avx2(D, 4, n, idx, ldi, lut, cstep, w + r0 * ldw, ldw, o + r0 * ldo, ldo);
    const float *wr = w + r0 * ldw;
    float *orow = o + r0 * ldo;
    if (R - r0 == 3) cb8_rows_avx2(D, 3, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo);
    else if (R - r0 == 2) cb8_rows_avx2(D, 2, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo);
    else if (R - r0 == 1) cb8_rows_avx2(D, 1, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo);
}

static void codebook_pv8_avx2(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                              const float *w, int64_t ldw, float *o, int64_t ldo)
{
    cb8_all_rows_avx2(128, R, n, idx, ldi, cq, cstep, w, ldw, o, ldo);
}

static void codebook_pv8_64_avx2(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                                 const float *w, int64_t ldw, float *o, int64_t ldo)
{
    cb8_all_rows_avx2(64, R, n, idx, ldi, cq, cstep, w, ldw, o, ldo);
}

void vq_attn_kernels_init_avx2_cb8(vq_attn_kernels *k)
{
    k->codebook_pv8 = codebook_pv8_avx2;
    k->codebook_pv8_64 = codebook_pv8_64_avx2;
    k->cb8_fast = true; /* faster than the f32 codebook_pv on AVX2: docs/PERFORMANCE.md */
}
