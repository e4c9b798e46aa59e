/* attn_kivi_int8_avx512.h — the body of the fused KIVI 2-bit block kernel
 * (attn_kernels.h, kivi_int8_block) around its integer key scores, shared by the
 * VNNI kernel (attn_kivi_int8_vnnivbmi.c: what the fusion saves) and the AMX one
 * (attn_kivi_int8_amx.c), which differ only in the unit that sums the scores'
 * integer dots: a block is kivi_int8_value_scales, kivi_int8_round_query, the
 * kernel's integer scores, then kivi_int8_step. Internal; include only from a
 * file built with AVX-512 VNNI and VBMI. */
#ifndef VQ_ATTN_KIVI_INT8_AVX512_H
#define VQ_ATTN_KIVI_INT8_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_avx512_inline.h"
#include "cpu/avx512/attn_pv8_vnnivbmi.h"
#include "cpu/avx512/attn_q8_vbmi.h"
#include "cpu/avx512/attn_qk8_vnni.h"
#include "cpu/avx512/attn_softmax_avx512.h"

/* src [n] f16 or f32 -> dst [n] f32 (vcvtph2ps is exact: the values the
 * separate kernels get from cvt_f16); lanes past n are 0. */
VQ_INLINE void kivi_int8_to_f32(bool f16, const void *src, int n, float *dst)
{
    for (int i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, (const uint16_t *)src + i))
                             : _mm512_maskz_loadu_ps(k, (const float *)src + i);
        _mm512_store_ps(dst + i, v);
    }
}

/* The prefetches [i0, i1) of b (attn_avx512_inline.h). */
VQ_INLINE void kivi_int8_prefetch(const vq_attn_kivi_int8_block *b, int i0, int i1)
{
    prefetch_ranges(b->pf, b->pf_bytes, i0, i1);
}

/* Block b's query rows rounded against its key group (kivi_q8) into xq,
 * their steps into dz. */
VQ_INLINE void kivi_int8_round_query(int RB, const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, int8_t *xq,
                                 float *dz)
{
    _Alignas(64) float ks[128], kz[128];
    kivi_int8_prefetch(b, 0, 3);
    kivi_int8_to_f32(b->f16, b->kscale, 128, ks);
    kivi_int8_to_f32(b->f16, b->kzero, 128, kz);
    const plane_perm *pp = &perms[0][1]; /* bits 2, D 128 */
    const __m512i idx[2] = {_mm512_loadu_si512(pp->src[0]), _mm512_loadu_si512(pp->src[1])};
    __mmask16 sbad = 0;
    for (int v = 0; v < 8; v++) sbad |= _mm512_fpclass_ps_mask(_mm512_load_ps(ks + 16 * v), 0x99);
    q8_rows(RB, 8, idx, q, ldq, ks, kz, sbad == 0, xq, dz);
    /* the planes and steps go through memory, as between the separate
     * kernels: without this the compiler forwards them through shuffles
     * (port 5) instead of broadcast loads */
    __asm__ volatile("" : : "r"(xq), "r"(dz) : "memory");
}

/* Block b's value scales and zeros, transposed (independent of p). */
VQ_INLINE void kivi_int8_value_scales(const vq_attn_kivi_int8_block *b, pv8_block *vb)
{
    _Alignas(64) float vs[128], vz[128];
    const float *vsf = b->vs, *vzf = b->vz;
    if (b->f16) {
        kivi_int8_to_f32(true, b->vs, 4 * VQ_ATTN_KIVI_INT8_N, vs);
        kivi_int8_to_f32(true, b->vz, 4 * VQ_ATTN_KIVI_INT8_N, vz);
        vsf = vs;
        vzf = vz;
    }
    prep_block(VQ_ATTN_KIVI_INT8_N, vsf, vzf, vb);
}

/* The step of RB rows on block b's scores x0 / x1 (tokens 0-15 / 16-31):
 * the poison rule, the online softmax, o *= alpha (one product per element,
 * as rescale), then the integer p.V of the weights (kivi_pv8). */
VQ_INLINE void kivi_int8_step(int RB, const vq_attn_kivi_int8_block *b, const pv8_block *vb, __m512 *x0, __m512 *x1, float *o,
                          int64_t ldo, float *m, float *d, bool *bad)
{
    _Alignas(64) float p[4][32];
    _Alignas(16) float a4[4];
    poison_rows_regs(RB, x0, x1, bad);
    softmax_rows_regs(RB, x0, x1, m, d, a4);
    for (int r = 0; r < RB; r++) {
        _mm512_store_ps(p[r], x0[r]);
        _mm512_store_ps(p[r] + 16, x1[r]);
    }
    __asm__ volatile("" : : "r"(p) : "memory"); /* p by broadcast loads, not shuffles (as for xq) */
    kivi_int8_prefetch(b, 3, 6);
    rescale_rows128(RB, a4, o, ldo);
    pv8_rows(RB, true, VQ_ATTN_KIVI_INT8_N, b->vcodes, 32, vb, p[0], 32, o, ldo);
}

#endif /* VQ_ATTN_KIVI_INT8_AVX512_H */
