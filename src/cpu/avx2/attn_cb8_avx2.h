/* attn_cb8_avx2.h — the inline bodies of the AVX2 codebook p.V
 * (attn_cb8_avx2.c: how it works), shared with the fused RaBitQ block kernel
 * (attn_rabitq_avx2.c). Internal; include only from src/cpu/avx2 files
 * (built with AVX2). */
#ifndef VQ_ATTN_CB8_AVX2_H
#define VQ_ATTN_CB8_AVX2_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_avx2_inline.h"
#include "cpu/avx2/attn_ham_avx2.h" /* ham_next_avx2 */

/* The looked-up table: cq + 128 (in [1, 255]) as unsigned bytes, both lanes. */
VQ_INLINE __m256i cb8_lut_avx2(const int8_t *cq)
{
    const __m128i t = _mm_xor_si128(_mm_loadu_si128((const __m128i *)cq), _mm_set1_epi8(-128));
    return _mm256_broadcastsi128_si256(t);
}

/* One row's weights (n <= 32 of them, nothing past n read) -> wb[p], pair
 * p's int16 weights (wq_2p, wq_2p+1) as one dword (0 past n), 16 dwords that
 * the block broadcasts as it goes; *sv = step * cstep; *wsum = sum_j wq_j. The f32 operations of codebook_pv8_scalar:
 * amax, L, inv and step in scalar code, wq = rint(w * inv) by cvtps
 * (round to nearest even), clamped. */
VQ_INLINE void cb8_prep_row_avx2(int n, const float *w, float cstep, int32_t *wb, float *sv, int32_t *wsum)
{
    const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(__builtin_inff());
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 a[4];
    for (int i = 0; i < 4; i++) {
        const int left = n - 8 * i;
        if (left >= 8) a[i] = _mm256_loadu_ps(w + 8 * i);
        else if (left <= 0) a[i] = zero;
        else
            a[i] = _mm256_maskload_ps(w + 8 * i, _mm256_cmpgt_epi32(_mm256_set1_epi32(left),
                                                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    }
    __m256 mx = zero, fin = _mm256_castsi256_ps(_mm256_set1_epi32(-1)), neg = zero;
    for (int i = 0; i < 4; i++) {
        const __m256 x = _mm256_and_ps(a[i], absm);
        fin = _mm256_and_ps(fin, _mm256_cmp_ps(x, inf, _CMP_LT_OQ)); /* NaN and +-inf: false */
        neg = _mm256_or_ps(neg, _mm256_cmp_ps(a[i], zero, _CMP_LT_OQ));
        mx = _mm256_max_ps(mx, x);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h); /* when every weight is finite: max_j |w_j| */
    const bool finite = _mm256_movemask_ps(fin) == 0xff, nonneg = _mm256_movemask_ps(neg) == 0;
    const float L = nonneg ? 255.0f : 127.0f;
    const float inv = vq_attn_q8_inv_levels(L, amax, finite), step = finite ? amax / L : __builtin_nanf("");
    *sv = step * cstep;
    __m256i q[4];
    if (finite) {
        const __m256 f = _mm256_set1_ps(inv);
        const __m256i lo = _mm256_set1_epi32(nonneg ? 0 : -127), hi = _mm256_set1_epi32(nonneg ? 255 : 127);
        for (int i = 0; i < 4; i++)
            q[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(a[i], f)), lo), hi);
    } else {
        for (int i = 0; i < 4; i++) q[i] = _mm256_setzero_si256();
    }
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    *wsum = _mm_cvtsi128_si32(t);
    /* packs: qwords (w0-3, w8-11, w4-7, w12-15) -> in order: dword p = (w_2p, w_2p+1) */
    _mm256_storeu_si256((__m256i *)wb, _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xd8));
    _mm256_storeu_si256((__m256i *)wb + 1, _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xd8));
}

/* Row r's two multiply-adds of one pair, its weight dword broadcast from
 * memory (a load and one shuffle uop, off the vpmaddwd pipe: cheaper on Zen 1
 * than 16 broadcast ymm stored per row and block, then loaded as vpmaddwd
 * operands). asm: gcc 12 otherwise copies every loop-carried accumulator
 * between registers after each add, or spills them when unrolled. */
VQ_INLINE void cb8_madd2_avx2(__m256i XL, __m256i XH, const int32_t *w, __m256i *aL, __m256i *aH)
{
    __m256i t0, t1, t2;
    __asm__("vpbroadcastd %[w], %[t2]\n\t"
            "vpmaddwd %[t2], %[xl], %[t0]\n\t"
            "vpmaddwd %[t2], %[xh], %[t1]\n\t"
            "vpaddd %[t0], %[al], %[al]\n\t"
            "vpaddd %[t1], %[ah], %[ah]"
            : [al] "+x"(*aL), [ah] "+x"(*aH), [t0] "=&x"(t0), [t1] "=&x"(t1), [t2] "=&x"(t2)
            : [xl] "x"(XL), [xh] "x"(XH), [w] "m"(*w));
}

/* The slots (h, pl, dl) for dl in [dl0, dl0 + ND) of cb8_block_avx2 (ND 1
 * or 2: both D's of one unpack of the two rows, for RB <= 2 rows), 16
 * pairs into aL[k][r] / aH[k][r]; after pair p, step i0 + p of side (NULL:
 * none; known at compile time, so that the loop has no branch: one gcc 12
 * answers with register copies of every accumulator). */
VQ_INLINE void cb8_slot_avx2(int RB, int pl, int dl0, int ND, const uint8_t *row, int64_t ldi, __m256i lut, __m256i M,
                             __m256i F, const int32_t (*wb)[16], __m256i (*aL)[4], __m256i (*aH)[4],
                             const ham_next_avx2 *side, int i0)
{
    for (int p = 0; p < 16; p++, row += 2 * ldi) {
        const __m256i Ra = _mm256_loadu_si256((const __m256i *)row);
        const __m256i Rb = _mm256_loadu_si256((const __m256i *)(row + ldi));
        const __m256i P = pl ? _mm256_unpackhi_epi8(Ra, Rb) : _mm256_unpacklo_epi8(Ra, Rb);
        for (int k = 0; k < ND; k++) {
            const __m256i D = dl0 + k ? _mm256_unpackhi_epi8(P, F) : _mm256_unpacklo_epi8(P, F);
            const __m256i XL = _mm256_shuffle_epi8(lut, _mm256_and_si256(D, M));
            const __m256i XH = _mm256_shuffle_epi8(lut, _mm256_srai_epi16(D, 4));
            for (int r = 0; r < RB; r++) cb8_madd2_avx2(XL, XH, &wb[r][p], &aL[k][r], &aH[k][r]);
        }
        if (side) ham_next_step_avx2(RB, side, i0 + p);
    }
}

/* o's channels c .. c+3 (low lane) and c+32 .. c+35 (high lane) as one
 * vector, and back: 128-bit loads and stores, no lane-crossing permute. */
VQ_INLINE __m256 cb8_load2_avx2(const float *c) { return _mm256_loadu2_m128(c + 32, c); }
VQ_INLINE void cb8_store2_avx2(float *c, __m256 v) { _mm256_storeu2_m128(c + 32, c, v); }

/* The slot's 16 channels c0 .. c0+7, c0+32 .. c0+39 (c0 = 64 h + 16 pl + 8
 * dl): o += sv * acc. vpunpck{l,h}dq interleave the even and odd channels,
 * giving c0 .. c0+3 | c0+32 .. c0+35 and c0+4 .. c0+7 | c0+36 .. c0+39, which
 * meet o as such halves (vperm2i128 is 3 cycles on Zen 1). */
VQ_INLINE void cb8_store_avx2(int RB, int c0, const __m256i *aL, const __m256i *aH, const float *sv, float *o,
                              int64_t ldo)
{
    for (int r = 0; r < RB; r++) {
        const __m256i A = _mm256_unpacklo_epi32(aL[r], aH[r]), B = _mm256_unpackhi_epi32(aL[r], aH[r]);
        const __m256 s = _mm256_set1_ps(sv[r]);
        float *d = o + r * ldo + c0;
        cb8_store2_avx2(d, _mm256_fmadd_ps(_mm256_cvtepi32_ps(A), s, cb8_load2_avx2(d)));
        cb8_store2_avx2(d + 4, _mm256_fmadd_ps(_mm256_cvtepi32_ps(B), s, cb8_load2_avx2(d + 4)));
    }
}

/* RB <= 4 rows against one block of 32 tokens (rows idx + t * ldi, 64 bytes
 * each, all 32 read; weights of tokens past the row's n are 0), weights
 * prepared (wb, sv, wsum). Per slot (h, pl, dl) of 16 channels and pair of
 * tokens (a, b): vpunpck{l,h}bw of the two rows' 32 bytes of half h, then
 * of that with 0x80 bytes, gives dwords [a_i, 0x80, b_i, 0x80] of 4 + 4
 * index bytes i (in-lane); and 0x0f / arithmetic >> 4 of the words give
 * the low / high nibble with 0x80 above, so that one vpshufb each looks up
 * cq + 128 zero-extended to int16: [u_a, u_b] (even / odd channels), one
 * vpmaddwd per row with (wq_a, wq_b) into int32. The accumulators start at
 * -128 sum_j wq_j (u = cq + 128); vpunpck{l,h}dq put the slot's 16
 * channels in order (cb8_store_avx2). The 8 slots run as cb8_passes(RB)
 * passes (cb8_pass_avx2). */
VQ_INLINE int cb8_passes(int RB) { return RB <= 2 ? 4 : 8; }

/* Pass k of the block: its ND = 8 / passes slots from slot ND k (slot = 4 h
 * + 2 pl + dl), 4 ND accumulators per row; side's steps 16 k onwards, one
 * per pair (the fused RaBitQ kernel's next-block distances, on the integer
 * pipes that the vpmaddwd loop leaves idle: a block's 16 * passes pairs
 * are one per distance at RB = 2 and 4, more than enough at RB = 1, 3). */
VQ_INLINE void cb8_pass_avx2(int RB, int k, const uint8_t *idx, int64_t ldi, __m256i lut, const int32_t (*wb)[16],
                             const float *sv, const int32_t *wsum, float *o, int64_t ldo, const ham_next_avx2 *side)
{
    const __m256i M = _mm256_set1_epi16((short)0xff0f), F = _mm256_set1_epi8((char)0x80);
    const int ND = 8 / cb8_passes(RB), slot = ND * k, h = slot / 4, pl = slot / 2 % 2, dl0 = slot % 2;
    __m256i aL[2][4], aH[2][4];
    for (int i = 0; i < ND; i++)
        for (int r = 0; r < RB; r++) aL[i][r] = aH[i][r] = _mm256_set1_epi32(-128 * wsum[r]);
    cb8_slot_avx2(RB, pl, dl0, ND, idx + 32 * h, ldi, lut, M, F, wb, aL, aH, side, 16 * k);
    for (int i = 0; i < ND; i++) cb8_store_avx2(RB, 64 * h + 16 * pl + 8 * (dl0 + i), aL[i], aH[i], sv, o, ldo);
}

/* The block's passes over D = 128 channels (slots of halves h = 0, 1) or
 * D = 64 (rows of 32 bytes: the passes of half 0, the first half of them). */
VQ_INLINE void cb8_block_avx2(int D, int RB, const uint8_t *idx, int64_t ldi, __m256i lut, const int32_t (*wb)[16],
                              const float *sv, const int32_t *wsum, float *o, int64_t ldo)
{
    const int passes = D == 64 ? cb8_passes(RB) / 2 : cb8_passes(RB);
    for (int k = 0; k < passes; k++) cb8_pass_avx2(RB, k, idx, ldi, lut, wb, sv, wsum, o, ldo, NULL);
}

/* RB <= 4 rows of w [RB][ldw] (n <= 32 weights each) against one block of
 * D = 128 or 64 channels (rows of D / 2 bytes): weights prepared, then the
 * block (rows past n from a zero copy). */
VQ_INLINE void cb8_rows_avx2(int D, int RB, int n, const uint8_t *idx, int64_t ldi, __m256i lut, float cstep,
                             const float *w, int64_t ldw, float *o, int64_t ldo)
{
    int32_t wb[4][16];
    float sv[4];
    int32_t wsum[4];
    for (int r = 0; r < RB; r++) cb8_prep_row_avx2(n, w + r * ldw, cstep, wb[r], &sv[r], &wsum[r]);
    const int rb = D / 2; /* bytes per row */
    if (n == 32) { /* rows of D / 2 bytes (the layout the formats use): constant offsets */
        if (ldi == rb) cb8_block_avx2(D, RB, idx, rb, lut, (const int32_t(*)[16])wb, sv, wsum, o, ldo);
        else cb8_block_avx2(D, RB, idx, ldi, lut, (const int32_t(*)[16])wb, sv, wsum, o, ldo);
        return;
    }
    _Alignas(32) uint8_t pad[32 * 64];
    for (int t = 0; t < 32; t++)
        for (int c = 0; c < rb; c += 32)
            _mm256_store_si256((__m256i *)(pad + rb * t + c),
                               t < n ? _mm256_loadu_si256((const __m256i *)(idx + t * ldi + c)) : _mm256_setzero_si256());
    cb8_block_avx2(D, RB, pad, rb, lut, (const int32_t(*)[16])wb, sv, wsum, o, ldo);
}

#endif /* VQ_ATTN_CB8_AVX2_H */
