/* attn_rabitq_vnnivbmi.c — a run of blocks of the RaBitQ decode (1-bit keys,
 * Hamming scores; nibble-packed 4-bit codebook values, integer p.V) in one
 * function (attn_kernels.h, rabitq_block): per block the scores, the
 * non-finite rule, the online-softmax step, the rescale of o and the integer
 * p.V, for up to four rows of a kv head (GQA 4 at Hkv = 8, one row at Hkv =
 * 32). Installed where the CPU has AVX512_VNNI and AVX512_VBMI (this file is
 * built with both, and with the AVX-512 set's VPOPCNTDQ).
 *
 * It runs the bodies of the separate kernels (attn_ham_avx512.h,
 * attn_softmax_avx512.h, attn_cb8_vnnivbmi.h) on the same operands in the
 * same order, so its scores, p, m, d, alpha and o are bit for bit those of
 * the sequence hamming_score, poison, softmax, rescale, codebook_pv8. What it
 * saves, as the KIVI block kernel (attn_kivi_int8_vnnivbmi.c): the scores stay in
 * registers between the steps, and the skeleton's and the formats' per-block
 * glue (address arithmetic, table calls, prologues) is paid once per run. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_avx512_inline.h"
#include "cpu/avx512/attn_cb8_vnnivbmi.h"
#include "cpu/avx512/attn_ham_avx512.h"
#include "cpu/avx512/attn_softmax_avx512.h"

/* One block for RB rows: scores of tokens 0-15 / 16-31 in x0 / x1 (as
 * hamming_score at D = 128, W = 2), poison, softmax step, rescale, p.V. */
VQ_INLINE void rabitq_rows(int RB, const vq_attn_rabitq_block *b, __m512i lut, const uint8_t *qb, int64_t ldq,
                           const float *qs, int64_t ldqs, float *o, int64_t ldo, float *m, float *d, bool *bad)
{
    _Alignas(64) float p[4][32];
    _Alignas(16) float a4[4];
    __m512 x0[4], x1[4];
    prefetch_ranges(b->pf, b->pf_bytes, 0, 2);
    for (int h = 0; h < 2; h++) {
        __m512i k[8];
        __m512 mg, cn;
        ham16_load(2, 16, b->kbits + h * 16 * 16, b->mag + 16 * h, b->cnst ? b->cnst + 16 * h : NULL, k, &mg, &cn);
        for (int r = 0; r < RB; r++) (h ? x1 : x0)[r] = ham16_row(2, k, qb + r * ldq, qs[r * ldqs], mg, cn, 128.0f);
    }
    for (int r = 0; r < RB; r++) {
        bool hit = poison_regs(&x0[r], 0xffff);
        hit |= poison_regs(&x1[r], 0xffff);
        if (hit) bad[r] = true;
    }
    softmax_rows_regs(RB, x0, x1, m, d, a4);
    for (int r = 0; r < RB; r++) {
        _mm512_store_ps(p[r], x0[r]);
        _mm512_store_ps(p[r] + 16, x1[r]);
    }
    prefetch_ranges(b->pf, b->pf_bytes, 2, 3);
    rescale_rows128(RB, a4, o, ldo);
    __asm__ volatile("" : : "r"(p) : "memory"); /* p by loads, as from the skeleton's s */
    cb8_rows(RB, 32, b->vidx, 64, lut, b->cstep, p[0], 32, o, ldo);
}

/* The run's blocks in turn: each block's pointers, its prefetches (none
 * from block pf_nb on), then the step. */
VQ_INLINE void rabitq_run(int RB, const vq_attn_rabitq_block *run, const uint8_t *qb, int64_t ldq, const float *qs,
                          int64_t ldqs, float *o, int64_t ldo, float *m, float *d, bool *bad)
{
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)run->cq));
    vq_attn_rabitq_block b = *run;
    if (b.pf_nb == 0) b.pf[0] = b.pf[1] = b.pf[2] = NULL;
    for (int64_t i = 0; i < run->nb; i++, vq_attn_rabitq_block_next(&b, i))
        rabitq_rows(RB, &b, lut, qb, ldq, qs, ldqs, o, ldo, m, d, bad);
}

static void rabitq_block_avx512(int R, const vq_attn_rabitq_block *b, const uint8_t *qb, int64_t ldq,
                                const float *qs, int64_t ldqs, float *o, int64_t ldo, float *m, float *d, bool *bad)
{
    switch (R) {
    case 1: rabitq_run(1, b, qb, ldq, qs, ldqs, o, ldo, m, d, bad); break;
    case 2: rabitq_run(2, b, qb, ldq, qs, ldqs, o, ldo, m, d, bad); break;
    case 3: rabitq_run(3, b, qb, ldq, qs, ldqs, o, ldo, m, d, bad); break;
    default: rabitq_run(4, b, qb, ldq, qs, ldqs, o, ldo, m, d, bad); break;
    }
}

void vq_attn_kernels_init_avx512_rabitq(vq_attn_kernels *k)
{
    build_cb8_tables();
    k->rabitq_block = rabitq_block_avx512;
}
