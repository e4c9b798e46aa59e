/* attn_q8_vbmi.c — AVX-512 query quantisation for the integer key scores
 * (attn_kernels.h, kivi_q8), installed only where the CPU has AVX512_VBMI
 * (this file alone is built with -mavx512vbmi).
 *
 * Up to four rows at a time, D a constant of the instantiation. Pass one
 * takes x = q * scale, max |x| (vrangeps, one uop per register pair) and
 * q . zero per row; the four maxima and the four zero sums are reduced
 * together (13 shuffles and ops for four rows instead of 8 per row) and
 * 127 / amax, the steps and the finite flags come from one vector of the
 * four rows. Pass two recomputes x (one product is cheaper than a spill),
 * rounds x * (127 / amax) to int32 (nearest even: the same f32 products as
 * the other ISAs), narrows with vpackssdw + vpacksswb (|x| <= 127: nothing
 * saturates; 6 uops per 128 channels against 16 for vpmovsdb) and moves
 * every byte from the packs' lane order to its plane position
 * (vq_attn_q8_pos) with two-source byte permutes (vpermt2b), the index
 * vectors built once per (bits, D) at table construction.
 *
 * Non-finite inputs, without a class test per row: vrangeps ignores quiet
 * NaNs, so the flag is "scale finite (once per group) and q . zero finite and
 * amax finite". That equals "every x and q . zero finite" (the scalar rule):
 * a non-finite q makes q . zero non-finite; with q and scale finite, x is
 * finite or an overflow to +-inf, which amax shows. */
#include <immintrin.h>
#include <math.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_avx512_inline.h"
#include "cpu/avx512/attn_q8_vbmi.h"

static void kivi_q8_vbmi(int R, int64_t D, int bits, const float *q, int64_t ldq, const float *scale,
                           const float *zero, int8_t *xq, float *dz)
{
    const plane_perm *pp = &perms[bits == 4][D / 64 - 1];
    switch (D) { /* vq_attn_q8_supported: D in {64, 128, 192, 256} */
    case 64: q8_all(R, 4, pp, q, ldq, scale, zero, xq, dz); break;
    case 128: q8_all(R, 8, pp, q, ldq, scale, zero, xq, dz); break;
    case 192: q8_all(R, 12, pp, q, ldq, scale, zero, xq, dz); break;
    default: q8_all(R, 16, pp, q, ldq, scale, zero, xq, dz); break;
    }
}

void vq_attn_kernels_init_avx512_vbmi(vq_attn_kernels *k)
{
    build_perms();
    k->kivi_q8 = kivi_q8_vbmi;
}
