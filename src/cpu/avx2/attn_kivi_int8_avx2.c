/* attn_kivi_int8_avx2.c — the AVX2 fused KIVI block kernel (attn_kernels.h,
 * kivi_int8_block): per 32-token block of a run, the query rows rounded against
 * the block's key group, the integer scores, the non-finite rule, the
 * online-softmax step, the rescale of o and the integer p.V, for up to four
 * rows of a kv head, in one call per run of blocks.
 *
 * It runs the bodies of the separate AVX2 kernels (attn_q8_avx2.h,
 * attn_softmax_avx2.h, attn_pv8_avx2.h) on the same operands in the same
 * order, so xq, steps, scores, p, alpha, m, d and o are bit for bit those of
 * the sequence kivi_q8, kivi_qk8, poison, softmax, rescale, kivi_pv8.
 * What it saves: the f16 scale rows converted in registers where they are
 * used (no cvt_f16 calls, no f32 copies), one call per run of blocks in place of
 * ten per block (the skeleton's glue, the formats' address arithmetic, the
 * table calls), and the value codes interleaved before the scores (their
 * loads overlap the key work). */
#include <immintrin.h>
#include <stdbool.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_avx2_inline.h"
#include "cpu/avx2/attn_pv8_avx2.h"
#include "cpu/avx2/attn_q8_avx2.h"
#include "cpu/avx2/attn_softmax_avx2.h"

/* One block for RB rows, the scales f16 (F16) or f32 read where they are used. */
VQ_INLINE void kivi_int8_rows_as(int RB, bool F16, const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, float *o,
                             int64_t ldo, float *m, float *d, bool *bad)
{
    enum { N = VQ_ATTN_KIVI_INT8_N };
    _Alignas(32) float s[4][N], alpha[4];
    _Alignas(32) int8_t xq[4 * 128];
    float dz[8];
    pv8_avx2_block vb;
    prefetch_ranges(b->pf, b->pf_bytes, 0, 3);
    pv8_prep_block(N, b->vcodes, 32, b->vs, b->vz, F16, RB, &vb);
    q8_rows4_avx2(RB, 128, 2, q, ldq, b->kscale, b->kzero, F16, xq, dz);
    qk8_rows(2, RB, N, 128, b->kcodes, 32, xq, dz, s[0], N);
    poison_rows_avx2(RB, N, s[0], N, bad);
    softmax_rows_avx2(RB, N, s[0], N, m, d, alpha);
    prefetch_ranges(b->pf, b->pf_bytes, 3, 6);
    rescale_rows_avx2(RB, 128, o, ldo, alpha);
    pv8_rows(RB, true, N, &vb, s[0], N, o, ldo);
}

VQ_INLINE void kivi_int8_rows(int RB, const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, float *o, int64_t ldo,
                          float *m, float *d, bool *bad)
{
    if (b->f16) kivi_int8_rows_as(RB, true, b, q, ldq, o, ldo, m, d, bad);
    else kivi_int8_rows_as(RB, false, b, q, ldq, o, ldo, m, d, bad);
}

VQ_ATTN_DEFINE_KIVI_INT8_BLOCK(kivi_int8_block_avx2, kivi_int8_rows)

void vq_attn_kernels_init_avx2_kivi_int8(vq_attn_kernels *k) { k->kivi_int8_block = kivi_int8_block_avx2; }
