/* attn_kivi_int8_vnnivbmi.c — one block of the KIVI 2-bit integer decode in one
 * function (attn_kernels.h, kivi_int8_block): the query rows rounded against the
 * block's key group, the integer scores, the non-finite rule, the
 * online-softmax step, the rescale of o and the integer p.V, for up to four
 * rows of a kv head (GQA 4 at Hkv = 8, one row at Hkv = 32). Installed where
 * the CPU has AVX512_VNNI and AVX512_VBMI (this file is built with both).
 *
 * It runs the bodies of the separate kernels (attn_q8_vbmi.h,
 * attn_qk8_vnni.h, attn_softmax_avx512.h, attn_pv8_vnnivbmi.h) on the same
 * operands in the same order, so its xq, steps, scores, p, alpha and integer
 * dots are bit for bit those of the sequence kivi_q8, kivi_qk8, poison,
 * softmax, rescale, kivi_pv8; only d may differ in f32 rounding for fewer
 * than four rows (the sequence's one-row softmax sums in another order).
 * What it saves: the scores and weights stay in registers between the steps
 * (no store / masked-store / reload of s), the f16 scale rows are converted
 * in registers, and one call per block replaces ten (the skeleton's glue,
 * the format's address arithmetic, the table calls), which at four rows per
 * kv head were a fifth of the block's time (docs/PERFORMANCE.md, "The fused
 * block kernels"). */
#include "attention/attn_kernels.h"
#define VQ_UNROLL /* the bodies' loops as GCC chooses (attn_avx512_inline.h) */
#include "cpu/avx512/attn_kivi_int8_avx512.h"

/* One block of RB rows, its scores on the vector ports (kivi_qk8). */
VQ_INLINE void kivi_int8_rows(int RB, const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, float *o, int64_t ldo,
                          float *m, float *d, bool *bad)
{
    _Alignas(64) int8_t xq[4 * 128];
    float dz[8];
    __m512 x0[4], x1[4];
    pv8_block vb;
    kivi_int8_value_scales(b, &vb);
    kivi_int8_round_query(RB, b, q, ldq, xq, dz);
    qk8_regs16(2, RB, 16, 128, b->kcodes, 32, xq, dz, x0);
    qk8_regs16(2, RB, 16, 128, b->kcodes + 16 * 32, 32, xq, dz, x1);
    kivi_int8_step(RB, b, &vb, x0, x1, o, ldo, m, d, bad);
}

VQ_ATTN_DEFINE_KIVI_INT8_BLOCK(kivi_int8_block_avx512, kivi_int8_rows)

void vq_attn_kernels_init_avx512_kivi_int8(vq_attn_kernels *k)
{
    build_perms();
    build_tables();
    k->kivi_int8_block = kivi_int8_block_avx512;
}
