/* attn_pv8_vnnivbmi.c — AVX-512 VNNI + VBMI integer p.V for 2-bit KIVI
 * values at D = 128, g = 32 (attn_kernels.h, kivi_pv8), installed only
 * where the CPU has both (this file alone is built with -mavx512vnni and
 * -mavx512vbmi; CMakeLists.txt: *_vnnivbmi.c).
 *
 * Per row and block, the weights w_j = p_j * vs[j][g] of each channel group
 * are rounded to int8 against step = max_j |w_j| / 127 (the definition and
 * its error bound: attn_kernels.h and veloxquant.h at vq_value_accum), so
 * sum_j w_j code_jc becomes step * sum_j wq_j code_jc, exact in int32, and
 * one vpdpbusd multiplies 4 tokens x 16 channels of codes by their 4
 * weights. The zero term is kept in f32: sum_j p_j vz[j][g], added once per
 * block.
 *
 * Shared by all rows of a block: vs and vz transposed per 4 tokens (lane
 * 4 g + t of register m = token 4 m + t, group g), their finite flags, and
 * the codes of 4 tokens interleaved (one vpermt2b per half: lane l = 2 b + i
 * gets code byte b of group 2 h + i of the 4 tokens, one byte each), with
 * one mask per code position: its bits left in place (4^k times the code,
 * still an unsigned byte), the accumulators of position k shifted right by
 * 2k once per block (exact: every term is a multiple of 4^k). Per row: w = p (a 128-bit broadcast
 * load per 4 tokens) * vs, the group maxima and zero sums reduced within
 * 128-bit lanes (no cross-lane shuffles), the int8 weights narrowed with
 * vpackssdw + vpacksswb and put in [4 tokens][group][token] order by one
 * vpermd per 16 tokens, so that the weights of both groups of a half and 4
 * tokens are one qword: one broadcast load and 8 vpdpbusd per 4 tokens.
 * Lane l of accumulator (h, k) holds channel 32 (2 h + (l & 1)) + 4 (l >> 1)
 * + k, and o is accumulated in that order (vq_attn_pv8_pos): the
 * permutation is undone once per row by the format's finish(), not per
 * block. */
#include <immintrin.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_pv8_vnnivbmi.h"

static void kivi_pv8_avx512(int R, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                              const float *p, int64_t ldp, float *o, int64_t ldo)
{
    if (n == 32) pv8_all(true, R, 32, codes, ldc, vs, vz, p, ldp, o, ldo);
    else pv8_all(false, R, n, codes, ldc, vs, vz, p, ldp, o, ldo);
}

void vq_attn_kernels_init_avx512_pv8(vq_attn_kernels *k)
{
    build_tables();
    k->kivi_pv8 = kivi_pv8_avx512;
    k->pv8_fast = true;
}
