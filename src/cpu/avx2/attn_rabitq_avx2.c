/* attn_rabitq_avx2.c — a run of blocks of the RaBitQ decode (1-bit keys,
 * Hamming scores; nibble-packed 4-bit codebook values, integer p.V) in one
 * function on AVX2 (attn_kernels.h, rabitq_block): per block the scores,
 * the non-finite rule, the online-softmax step, the rescale of o and the
 * integer p.V, for up to four rows of a kv head (GQA 4 at Hkv = 8, one row
 * at Hkv = 32).
 *
 * It runs the bodies of the separate AVX2 kernels (attn_ham_avx2.h,
 * attn_softmax_avx2.h, attn_cb8_avx2.h) on the same operands in the same
 * order, so its scores, p, m, d, alpha and o are bit for bit those of the
 * sequence hamming_score, poison, softmax, rescale, codebook_pv8. What it
 * saves (as the AVX-512 one, attn_rabitq_vnnivbmi.c): the query words
 * once per run, not per block, and the skeleton's and the formats'
 * per-block glue (address arithmetic, table calls, prologues) paid once per
 * run; and, on AVX2, block i + 1's Hamming distances (scalar popcnt) taken
 * one per pair of block i's p.V loop, where the integer pipes are idle
 * (on Zen 1 that loop waits on the one vpmaddwd pipe). */
#include <immintrin.h>
#include <stdbool.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_avx2_inline.h" /* prefetch_ranges */
#include "cpu/avx2/attn_cb8_avx2.h"
#include "cpu/avx2/attn_ham_avx2.h"
#include "cpu/avx2/attn_softmax_avx2.h"

/* One block for RB rows, its distances h taken: scores as hamming_score
 * (8 per step) into p, poison, softmax step, rescale, p.V, whose pairs take
 * the distances of next (the next block's, or any where there is none). */
VQ_INLINE void rabitq_rows_avx2(int RB, const vq_attn_rabitq_block *b, __m256i lut, const float *q, const uint32_t *h,
                                const ham_next_avx2 *next, float *o, int64_t ldo, float *m, float *d, bool *bad)
{
    _Alignas(32) float p[4][32];
    int32_t wb[4][16], wsum[4];
    float alpha[4], sv[4];
    for (int g = 0; g < 4; g++) {
        __m256 x[4];
        const __m256 mg = _mm256_loadu_ps(b->mag + 8 * g);
        const __m256 cn = b->cnst ? _mm256_loadu_ps(b->cnst + 8 * g) : _mm256_setzero_ps();
        ham_score8_avx2(RB, _mm256_load_si256((const __m256i *)h + g), q, mg, cn, x);
        for (int r = 0; r < RB; r++) _mm256_store_ps(p[r] + 8 * g, x[r]);
    }
    poison_rows_avx2(RB, 32, p[0], 32, bad);
    softmax_rows_avx2(RB, 32, p[0], 32, m, d, alpha);
    prefetch_ranges(b->pf, b->pf_bytes, 2, 3);
    rescale_rows_avx2(RB, 128, o, ldo, alpha);
    for (int r = 0; r < RB; r++) cb8_prep_row_avx2(32, p[r], b->cstep, wb[r], &sv[r], &wsum[r]);
#pragma GCC unroll 8 /* constant slots per pass: no branches in its loop */
    for (int k = 0; k < cb8_passes(RB); k++)
        cb8_pass_avx2(RB, k, b->vidx, 64, lut, (const int32_t(*)[16])wb, sv, wsum, o, ldo, next);
}

/* The run's blocks in turn: each block's pointers, its prefetches (none
 * from block pf_nb on), then the step. Block i + 1's distances are taken
 * during block i's p.V (the first block's before it), on the integer pipes
 * beside its vpmaddwd: the same integers, so the same scores. */
VQ_INLINE void rabitq_run_avx2(int RB, const vq_attn_rabitq_block *run, const uint8_t *qb, int64_t ldq, const float *qs,
                               int64_t ldqs, float *o, int64_t ldo, float *m, float *d, bool *bad)
{
    const __m256i lut = cb8_lut_avx2(run->cq);
    uint64_t qw[8];
    float q[4];
    ham_q_avx2(RB, qb, ldq, qw);
    for (int r = 0; r < RB; r++) q[r] = qs[r * ldqs];
    vq_attn_rabitq_block b = *run;
    if (b.pf_nb == 0) b.pf[0] = b.pf[1] = b.pf[2] = NULL;
    _Alignas(32) uint32_t h[2][32] = {{0}}; /* bytes of rows past RB stay 0 */
    prefetch_ranges(b.pf, b.pf_bytes, 0, 2);
    ham_dist_avx2(RB, 32, b.kbits, qw, h[0]);
    for (int64_t i = 0; i < run->nb; i++) {
        vq_attn_rabitq_block bn = b;
        ham_next_avx2 next = {b.kbits, qw, h[~i & 1]}; /* after the last block: unused */
        if (i + 1 < run->nb) {
            vq_attn_rabitq_block_next(&bn, i + 1);
            prefetch_ranges(bn.pf, bn.pf_bytes, 0, 2);
            next.kb = bn.kbits;
        }
        rabitq_rows_avx2(RB, &b, lut, q, h[i & 1], &next, o, ldo, m, d, bad);
        b = bn;
    }
}

static void rabitq_block_avx2(int R, const vq_attn_rabitq_block *b, const uint8_t *qb, int64_t ldq, const float *qs,
                              int64_t ldqs, float *o, int64_t ldo, float *m, float *d, bool *bad)
{
    if (R == 4) rabitq_run_avx2(4, b, qb, ldq, qs, ldqs, o, ldo, m, d, bad);
    else if (R == 1) rabitq_run_avx2(1, b, qb, ldq, qs, ldqs, o, ldo, m, d, bad);
    else if (R == 2) rabitq_run_avx2(2, b, qb, ldq, qs, ldqs, o, ldo, m, d, bad);
    else rabitq_run_avx2(3, b, qb, ldq, qs, ldqs, o, ldo, m, d, bad);
}

void vq_attn_kernels_init_avx2_rabitq(vq_attn_kernels *k) { k->rabitq_block = rabitq_block_avx2; }
