/* attn_kivi8_vnnivbmi.c — one block of the KIVI 2-bit integer decode in one
 * function (attn_kernels.h, kivi8_block): the query rows rounded against the
 * block's key group, the integer scores, the non-finite rule, the
 * online-softmax step, the rescale of o and the integer p.V, for up to four
 * rows of a kv head (GQA 4 at Hkv = 8, one row at Hkv = 32). Installed where
 * the CPU has AVX512_VNNI and AVX512_VBMI (this file is built with both).
 *
 * It runs the bodies of the separate kernels (attn_q8_vbmi.h,
 * attn_qk8_vnni.h, attn_softmax_avx512.h, attn_pv8_vnnivbmi.h) on the same
 * operands in the same order, so its xq, steps, scores, p, alpha and integer
 * dots are bit for bit those of the sequence affine_q8, affine_qk8, poison,
 * softmax, rescale, affine_pv8; only d may differ in f32 rounding for fewer
 * than four rows (the sequence's one-row softmax sums in another order).
 * What it saves: the scores and weights stay in registers between the steps
 * (no store / masked-store / reload of s), the f16 scale rows are converted
 * in registers, and one call per block replaces ten (the skeleton's glue,
 * the format's address arithmetic, the table calls), which at four rows per
 * kv head were a fifth of the block's time (bench/results/cpu.md, issue 14,
 * fifth pass). */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "attention/attn_kernels.h"
#define VQ_UNROLL /* the bodies' loops as GCC chooses (attn_avx512_inline.h) */
#include "cpu/avx512/attn_avx512_inline.h"
#include "cpu/avx512/attn_pv8_vnnivbmi.h"
#include "cpu/avx512/attn_q8_vbmi.h"
#include "cpu/avx512/attn_qk8_vnni.h"
#include "cpu/avx512/attn_softmax_avx512.h"

/* src [n] f16 or f32 -> dst [n] f32 (vcvtph2ps is exact: the values the
 * separate kernels get from cvt_f16); lanes past n are 0. */
VQ_INLINE void to_f32(bool f16, const void *src, int n, float *dst)
{
    for (int i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, (const uint16_t *)src + i))
                             : _mm512_maskz_loadu_ps(k, (const float *)src + i);
        _mm512_store_ps(dst + i, v);
    }
}

/* The prefetches [i0, i1) of b (attn_avx512_inline.h). */
VQ_INLINE void prefetch(const vq_attn_kivi8_block *b, int i0, int i1) { prefetch_ranges(b->pf, b->pf_bytes, i0, i1); }

/* Block b's keys: the query rows rounded against its group (affine_q8),
 * the scores of tokens 0-15 / 16-31 (affine_qk8) in x0 / x1, then the
 * poison rule (a NaN or +inf score becomes -inf and marks its row); absent
 * tokens and rows -inf. */
VQ_INLINE void scores(int RB, const vq_attn_kivi8_block *b, const float *q, int64_t ldq, __m512 *x0, __m512 *x1,
                      bool *bad)
{
    const int n = VQ_ATTN_KIVI8_N;
    _Alignas(64) float ks[128], kz[128];
    _Alignas(64) int8_t xq[4 * 128];
    float dz[8];
    prefetch(b, 0, 3);
    to_f32(b->f16, b->kscale, 128, ks);
    to_f32(b->f16, b->kzero, 128, kz);
    const plane_perm *pp = &perms[0][1]; /* bits 2, D 128 */
    const __m512i idx[2] = {_mm512_loadu_si512(pp->src[0]), _mm512_loadu_si512(pp->src[1])};
    __mmask16 sbad = 0;
    for (int v = 0; v < 8; v++) sbad |= _mm512_fpclass_ps_mask(_mm512_load_ps(ks + 16 * v), 0x99);
    q8_rows(RB, 8, idx, q, ldq, ks, kz, sbad == 0, xq, dz);
    /* the planes and steps go through memory, as between the separate
     * kernels: without this the compiler forwards them through shuffles
     * (port 5) instead of broadcast loads */
    __asm__ volatile("" : : "r"(xq), "r"(dz) : "memory");
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    qk8_regs16(2, RB, n < 16 ? n : 16, 128, b->kcodes, 32, xq, dz, x0);
    if (n > 16) qk8_regs16(2, RB, n - 16, 128, b->kcodes + 16 * 32, 32, xq, dz, x1);
    const __mmask16 k0 = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
    const __mmask16 k1 = n >= 32 ? (__mmask16)0xffff : n <= 16 ? (__mmask16)0 : (__mmask16)((1u << (n - 16)) - 1u);
    for (int r = 0; r < 4; r++) {
        if (r >= RB) {
            x0[r] = x1[r] = ninf;
            continue;
        }
        bool hit = poison_regs(&x0[r], k0);
        if (n > 16) hit |= poison_regs(&x1[r], k1);
        else
            x1[r] = ninf;
        if (hit) bad[r] = true;
    }
}

/* Block b's value scales and zeros, transposed (independent of p). */
VQ_INLINE void value_scales(const vq_attn_kivi8_block *b, pv8_block *vb)
{
    const int n = VQ_ATTN_KIVI8_N;
    _Alignas(64) float vs[128], vz[128];
    const float *vsf = b->vs, *vzf = b->vz;
    if (b->f16) {
        to_f32(true, b->vs, 4 * n, vs);
        to_f32(true, b->vz, 4 * n, vz);
        vsf = vs;
        vzf = vz;
    }
    prep_block(n, vsf, vzf, vb);
}

/* o *= alpha (one product per element, as rescale), then the integer p.V
 * of p [RB][32] (affine_pv8). */
VQ_INLINE void values(int RB, const vq_attn_kivi8_block *b, const pv8_block *vb, const float (*p)[32],
                      const float *alpha, float *o, int64_t ldo)
{
    const int n = VQ_ATTN_KIVI8_N;
    prefetch(b, 3, 6);
    rescale_rows128(RB, alpha, o, ldo);
    if (n == 32) pv8_rows(RB, true, 32, b->vcodes, 32, vb, p[0], 32, o, ldo);
    else pv8_rows(RB, false, n, b->vcodes, 32, vb, p[0], 32, o, ldo);
}

VQ_INLINE void kivi8_rows(int RB, const vq_attn_kivi8_block *b, const float *q, int64_t ldq, float *o, int64_t ldo,
                          float *m, float *d, bool *bad)
{
    _Alignas(64) float p[4][32];
    _Alignas(16) float a4[4];
    __m512 x0[4], x1[4];
    pv8_block vb;
    value_scales(b, &vb);
    scores(RB, b, q, ldq, x0, x1, bad);
    softmax_rows_regs(RB, x0, x1, m, d, a4);
    for (int r = 0; r < RB; r++) {
        _mm512_store_ps(p[r], x0[r]);
        _mm512_store_ps(p[r] + 16, x1[r]);
    }
    __asm__ volatile("" : : "r"(p) : "memory"); /* p by broadcast loads, not shuffles (as in scores()) */
    values(RB, b, &vb, (const float(*)[32])p, a4, o, ldo);
}

VQ_ATTN_DEFINE_KIVI8_BLOCK(kivi8_block_avx512, kivi8_rows)

void vq_attn_kernels_init_avx512_kivi8(vq_attn_kernels *k)
{
    build_perms();
    build_tables();
    k->kivi8_block = kivi8_block_avx512;
}
