/* attn_cb8_vnnivbmi.c — AVX-512 VNNI + VBMI integer p.V for nibble-packed
 * codebook values at D = 128 (attn_kernels.h, codebook_pv8; RaBitQ's 4-bit
 * values), installed only where the CPU has both (built with -mavx512vnni
 * -mavx512vbmi: CMakeLists.txt, *_vnnivbmi.c).
 *
 * Per row and block the weights w_j (p_j times the token's value scale) are
 * rounded to int8 against step = max_j |w_j| / 127, the centroids were
 * rounded once per call (vq_attn_cb8_round), and sum_j w_j cent(j, c)
 * becomes step * cstep * sum_j wq_j cq(j, c), exact in int32 (the error
 * bound: veloxquant.h at vq_value_accum). vpdpbusd multiplies unsigned by
 * signed bytes, so the table holds cq + 128 and each accumulator starts at
 * -128 * sum_j wq_j.
 *
 * Decoding, shared by all rows, per half h (64 channels = 32 index bytes)
 * and 4 tokens: one vpermt2b per token pair gathers byte pairs (t0, t1) of
 * 32 index bytes, one vpunpck{l,h}wd of the two pairs' registers makes
 * dwords of 4 tokens' same index byte, two and/shift-and split the nibbles
 * (even / odd channels) and four vpshufb look the 16-entry table up. Each
 * row then adds 4 vpdpbusd per half and 4 tokens (2 per token, against 8
 * f32 FMAs). The byte order of the gather (tables.ilv) is chosen so that one
 * vpunpck{l,h}dq of the even and odd channels' accumulators gives 16
 * channels in order: o needs no permutation. */
#include <immintrin.h>

#include "attention/attn_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* ilv[h]: output byte 16 L + 2 k + t = index byte pi(L, k) of token t (t = 0
 * from the first table, 1 from the second, +64), pi(L, k) = 32 h + 8 (k / 2)
 * + 2 L + k % 2: after vpunpcklwd dword i of lane L is byte pi(L, i) of 4
 * tokens, after vpunpckhwd pi(L, 4 + i); even channels 2 pi and odd 2 pi + 1
 * then interleave to channels 64 h + 16 u + 4 L + (0..3) (u = 0..3). */
static uint8_t ilv[2][64];

static void build_tables(void)
{
    for (int h = 0; h < 2; h++)
        for (int L = 0; L < 4; L++)
            for (int k = 0; k < 8; k++)
                for (int t = 0; t < 2; t++)
                    ilv[h][16 * L + 2 * k + t] = (uint8_t)(64 * t + 32 * h + 8 * (k / 2) + 2 * L + k % 2);
}

/* Row weights -> int8 (32 bytes, tokens past n 0), the step and sum_j wq_j. */
VQ_INLINE void prep_row(int n, const float *w, int8_t *w8, float *step_out, int32_t *wsum)
{
    const __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1u);
    const __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1u);
    const __m512 a = _mm512_maskz_loadu_ps(m0, w), b = _mm512_maskz_loadu_ps(m1, w + 16);
    const __mmask16 bad = _mm512_fpclass_ps_mask(a, 0x99) | _mm512_fpclass_ps_mask(b, 0x99); /* NaN, +-inf */
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    const float inv = vq_attn_q8_inv(amax, !bad);
    *step_out = bad ? __builtin_nanf("") : amax / 127.0f;
    __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(inv)));
    __m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, _mm512_set1_ps(inv)));
    if (bad) qa = qb = _mm512_setzero_si512();
    _mm_storeu_si128((__m128i *)w8, _mm512_cvtsepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(w8 + 16), _mm512_cvtsepi32_epi8(qb));
    *wsum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
}

/* Index row t (64 bytes), or zeros at or past n (nothing past it is read). */
VQ_INLINE __m512i load_row(const uint8_t *idx, int64_t ldi, int t, int n)
{
    return t < n ? _mm512_loadu_si512(idx + t * ldi) : _mm512_setzero_si512();
}

/* Tokens 4q .. 4q+3 (rows A-D) of half h into the RB rows' accumulators:
 * one table lookup live at a time and the weights as broadcast loads, so
 * that at 4 rows the 16 accumulators stay in registers (gcc 12 still copies
 * each around its vpdpbusd; an asm that ties them measured no faster). */
VQ_INLINE void quad(int RB, __m512i A, __m512i B, __m512i C, __m512i D, __m512i perm, __m512i lut, __m512i low4,
                    const int32_t (*w32)[8], int q, __m512i (*acc)[4])
{
    const __m512i AB = _mm512_permutex2var_epi8(A, perm, B), CD = _mm512_permutex2var_epi8(C, perm, D);
    const __m512i X[2] = {_mm512_unpacklo_epi16(AB, CD), _mm512_unpackhi_epi16(AB, CD)};
    for (int u = 0; u < 4; u++) {
        const __m512i nib = u % 2 ? _mm512_srli_epi16(X[u / 2], 4) : X[u / 2];
        const __m512i U = _mm512_shuffle_epi8(lut, _mm512_and_si512(nib, low4));
        for (int r = 0; r < RB; r++) acc[r][u] = _mm512_dpbusd_epi32(acc[r][u], U, _mm512_set1_epi32(w32[r][q]));
    }
}

/* RB <= 4 rows against one block: indices decoded once per 4 tokens and half
 * for all rows. */
VQ_INLINE void cb8_rows(int RB, int n, const uint8_t *idx, int64_t ldi, __m512i lut, float cstep, const float *w,
                        int64_t ldw, float *o, int64_t ldo)
{
    _Alignas(64) int32_t w32[4][8]; /* row r's int8 weights of tokens 4q .. 4q+3 in dword q */
    float sv[4];
    int32_t wsum[4];
    for (int r = 0; r < RB; r++) {
        float step;
        prep_row(n, w + r * ldw, (int8_t *)w32[r], &step, &wsum[r]);
        sv[r] = step * cstep;
    }
    const __m512i low4 = _mm512_set1_epi8(15);
    const int full = n / 4;
    for (int h = 0; h < 2; h++) {
        const __m512i perm = _mm512_loadu_si512(ilv[h]);
        __m512i acc[4][4];
        for (int r = 0; r < RB; r++)
            for (int u = 0; u < 4; u++) acc[r][u] = _mm512_set1_epi32(-128 * wsum[r]);
        const uint8_t *row = idx;
        for (int q = 0; q < full; q++, row += 4 * ldi)
            quad(RB, _mm512_loadu_si512(row), _mm512_loadu_si512(row + ldi), _mm512_loadu_si512(row + 2 * ldi),
                 _mm512_loadu_si512(row + 3 * ldi), perm, lut, low4, (const int32_t(*)[8])w32, q, acc);
        if (n % 4) {
            const int t = 4 * full;
            quad(RB, load_row(idx, ldi, t, n), load_row(idx, ldi, t + 1, n), load_row(idx, ldi, t + 2, n),
                 load_row(idx, ldi, t + 3, n), perm, lut, low4, (const int32_t(*)[8])w32, full, acc);
        }
        for (int r = 0; r < RB; r++) {
            const __m512 s = _mm512_set1_ps(sv[r]);
            const __m512i P[4] = {_mm512_unpacklo_epi32(acc[r][0], acc[r][1]), _mm512_unpackhi_epi32(acc[r][0], acc[r][1]),
                                  _mm512_unpacklo_epi32(acc[r][2], acc[r][3]), _mm512_unpackhi_epi32(acc[r][2], acc[r][3])};
            for (int u = 0; u < 4; u++) {
                float *dst = o + r * ldo + 64 * h + 16 * u;
                _mm512_storeu_ps(dst, _mm512_fmadd_ps(_mm512_cvtepi32_ps(P[u]), s, _mm512_loadu_ps(dst)));
            }
        }
    }
}

static void codebook_pv8_avx512(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                                const float *w, int64_t ldw, float *o, int64_t ldo)
{
    uint8_t t[16];
    for (int i = 0; i < 16; i++) t[i] = (uint8_t)(cq[i] + 128);
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t));
    for (int r0 = 0; r0 < R; r0 += 4) {
        const float *wr = w + r0 * ldw;
        float *orow = o + r0 * ldo;
        switch (R - r0 < 4 ? R - r0 : 4) {
        case 1: cb8_rows(1, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo); break;
        case 2: cb8_rows(2, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo); break;
        case 3: cb8_rows(3, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo); break;
        default: cb8_rows(4, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo); break;
        }
    }
}

void vq_attn_kernels_init_avx512_cb8(vq_attn_kernels *k)
{
    build_tables();
    k->codebook_pv8 = codebook_pv8_avx512;
    k->cb8_fast = true;
}
