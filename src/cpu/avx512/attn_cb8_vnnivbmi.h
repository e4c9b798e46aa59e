/* attn_cb8_vnnivbmi.h — the inline bodies of the AVX-512 VNNI + VBMI
 * codebook p.V (attn_cb8_vnnivbmi.c: how it works), shared with the fused
 * RaBitQ block kernel (attn_rabitq_vnnivbmi.c). Internal; include only from
 * a *_vnnivbmi.c file (built with both), once per file: the byte table ilv
 * is the file's own, filled by build_cb8_tables() in its kernels' init. */
#ifndef VQ_ATTN_CB8_VNNIVBMI_H
#define VQ_ATTN_CB8_VNNIVBMI_H

#include <immintrin.h>
#include <stdbool.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_avx512_inline.h"

/* ilv[h]: output byte 16 L + 2 k + t = index byte pi(L, k) of token t (t = 0
 * from the first table, 1 from the second, +64), pi(L, k) = 32 h + 8 (k / 2)
 * + 2 L + k % 2: after vpunpcklwd dword i of lane L is byte pi(L, i) of 4
 * tokens, after vpunpckhwd pi(L, 4 + i); even channels 2 pi and odd 2 pi + 1
 * then interleave to channels 64 h + 16 u + 4 L + (0..3) (u = 0..3). */
static uint8_t ilv[2][64];

static void build_cb8_tables(void)
{
    for (int h = 0; h < 2; h++)
        for (int L = 0; L < 4; L++)
            for (int k = 0; k < 8; k++)
                for (int t = 0; t < 2; t++)
                    ilv[h][16 * L + 2 * k + t] = (uint8_t)(64 * t + 32 * h + 8 * (k / 2) + 2 * L + k % 2);
}

/* The weights of RB <= 4 rows -> w8[r] (32 bytes each, tokens past n 0):
 * uint8 (L = 255) for rows without a negative weight, int8 (L = 127) for the
 * others; sv[r] = step * cstep, wsum[r] = sum_j wq_j of the int8 rows (their
 * accumulators start at -128 times it). The four rows' maxima are reduced
 * together and their factors come from one division (the same f32 values
 * as the scalar kernel's per-row ones). Returns the mask of uint8 rows. */
VQ_INLINE unsigned prep_rows(int RB, int n, const float *w, int64_t ldw, float cstep, int32_t (*w8)[8], float *sv,
                             int32_t *wsum)
{
    const __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1u);
    const __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1u);
    const __m512 zero = _mm512_setzero_ps();
    __m512 a[4], b[4], v[4];
    unsigned bad = 0, neg = 0;
    for (int r = 0; r < 4; r++) {
        if (r >= RB) {
            a[r] = b[r] = v[r] = zero;
            continue;
        }
        a[r] = _mm512_maskz_loadu_ps(m0, w + r * ldw);
        b[r] = _mm512_maskz_loadu_ps(m1, w + r * ldw + 16);
        /* NaN, +-inf; and w < 0 (-0 is not) */
        bad |= (unsigned)((_mm512_fpclass_ps_mask(a[r], 0x99) | _mm512_fpclass_ps_mask(b[r], 0x99)) != 0) << r;
        neg |= (unsigned)((_mm512_cmp_ps_mask(a[r], zero, _CMP_LT_OQ) | _mm512_cmp_ps_mask(b[r], zero, _CMP_LT_OQ)) != 0)
               << r;
        v[r] = _mm512_max_ps(_mm512_abs_ps(a[r]), _mm512_abs_ps(b[r]));
    }
    const unsigned uns = ~neg & ((1u << RB) - 1u);
    /* row r's flags over its four lanes 4r .. 4r+3 */
    const __mmask16 ulanes = (__mmask16)_pdep_u32(uns, 0x1111) * 15, blanes = (__mmask16)_pdep_u32(bad, 0x1111) * 15;
    const __m512 amax = VQ_REDUCE4(_mm512_max_ps, v);
    const __m512 L = _mm512_mask_blend_ps(ulanes, _mm512_set1_ps(127.0f), _mm512_set1_ps(255.0f));
    __m512 inv = _mm512_div_ps(L, amax); /* vq_attn_q8_inv_levels: 0 where not finite or overflowing */
    inv = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(inv, _mm512_set1_ps(3.40282347e38f), _CMP_LE_OQ) & ~blanes, inv);
    const __m512 step = _mm512_mask_blend_ps(blanes, _mm512_div_ps(amax, L), _mm512_set1_ps(__builtin_nanf("")));
    _Alignas(64) float svv[16];
    _mm512_store_ps(svv, _mm512_mul_ps(step, _mm512_set1_ps(cstep)));
    for (int r = 0; r < RB; r++) {
        sv[r] = svv[4 * r];
        const __m512 f = _mm512_permutexvar_ps(_mm512_set1_epi32(4 * r), inv);
        __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a[r], f)), qb = _mm512_cvtps_epi32(_mm512_mul_ps(b[r], f));
        if (bad >> r & 1) /* f = 0, but inf * 0 = NaN converts to INT_MIN: the row's weights are 0 (its step NaN) */
            qa = qb = _mm512_setzero_si512();
        if (uns >> r & 1) { /* in [0, 255] */
            _mm_storeu_si128((__m128i *)w8[r], _mm512_cvtusepi32_epi8(qa));
            _mm_storeu_si128((__m128i *)w8[r] + 1, _mm512_cvtusepi32_epi8(qb));
            wsum[r] = 0;
        } else {
            _mm_storeu_si128((__m128i *)w8[r], _mm512_cvtsepi32_epi8(qa));
            _mm_storeu_si128((__m128i *)w8[r] + 1, _mm512_cvtsepi32_epi8(qb));
            wsum[r] = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
        }
    }
    return uns;
}

/* The bytes of an index row: 64 (D = 128), or 32 (D = 64: a masked load,
 * nothing past the row is read, the rest zero). */
VQ_INLINE __m512i row_bytes(int D, const uint8_t *p)
{
    return D == 64 ? _mm512_maskz_loadu_epi8(0xffffffffull, p) : _mm512_loadu_si512(p);
}

/* Index row t, or zeros at or past n (nothing past it is read). */
VQ_INLINE __m512i load_row(int D, const uint8_t *idx, int64_t ldi, int t, int n)
{
    return t < n ? row_bytes(D, idx + t * ldi) : _mm512_setzero_si512();
}

/* Tokens 4q .. 4q+3 (rows A-D) of half h into the RB rows' accumulators,
 * one table lookup live at a time. lut holds cq as signed bytes: uint8 rows
 * (bit r of uns) add wq (unsigned) x cq, int8 rows (cq + 128) x wq (signed). */
VQ_INLINE void quad(int RB, unsigned uns, __m512i A, __m512i B, __m512i C, __m512i D, __m512i perm, __m512i lut,
                    __m512i low4, const int32_t (*w8)[8], int q, __m512i (*acc)[4])
{
    const __m512i AB = _mm512_permutex2var_epi8(A, perm, B), CD = _mm512_permutex2var_epi8(C, perm, D);
    const __m512i X[2] = {_mm512_unpacklo_epi16(AB, CD), _mm512_unpackhi_epi16(AB, CD)};
    const bool all_u = uns == (1u << RB) - 1u;
    for (int u = 0; u < 4; u++) {
        const __m512i nib = u % 2 ? _mm512_srli_epi16(X[u / 2], 4) : X[u / 2];
        const __m512i U = _mm512_shuffle_epi8(lut, _mm512_and_si512(nib, low4));
        if (all_u) {
            for (int r = 0; r < RB; r++) acc[r][u] = _mm512_dpbusd_epi32(acc[r][u], _mm512_set1_epi32(w8[r][q]), U);
        } else {
            const __m512i Ub = _mm512_xor_si512(U, _mm512_set1_epi8(-128));
            for (int r = 0; r < RB; r++)
                acc[r][u] = uns >> r & 1 ? _mm512_dpbusd_epi32(acc[r][u], _mm512_set1_epi32(w8[r][q]), U)
                                         : _mm512_dpbusd_epi32(acc[r][u], Ub, _mm512_set1_epi32(w8[r][q]));
        }
    }
}

/* Four uint8 rows (the decode path: no negative weight) on one quad: the
 * same as quad(4, 15, ...) in asm, so that the 16 accumulators, the tables
 * and the decode's temporaries stay in registers (gcc 12 spills five
 * accumulators to the stack around every quad otherwise). Two statements
 * (an asm takes at most 30 operands): the decode with rows 0-1, then rows
 * 2-3 on the four looked-up registers. */
VQ_INLINE void quad4u(const uint8_t *row, int64_t ldi, __m512i perm, __m512i lut, __m512i low4, const int32_t *wq,
                      __m512i (*acc)[4])
{
    __m512i U0, U1, U2, U3;
    __asm__("vmovdqu64 (%[row]), %%zmm26\n\t"
            "vpermt2b (%[row],%[ldi]), %[perm], %%zmm26\n\t"
            "vmovdqu64 (%[row],%[ldi],2), %%zmm27\n\t"
            "vpermt2b (%[row],%[ldi3]), %[perm], %%zmm27\n\t"
            "vpbroadcastd (%[wq]), %%zmm30\n\t"
            "vpbroadcastd 32(%[wq]), %%zmm31\n\t"
            "vpunpcklwd %%zmm27, %%zmm26, %%zmm28\n\t"
            "vpunpckhwd %%zmm27, %%zmm26, %%zmm29\n\t"
            "vpandd %[low4], %%zmm28, %[U0]\n\t"
            "vpsrlw $4, %%zmm28, %[U1]\n\t"
            "vpandd %[low4], %%zmm29, %[U2]\n\t"
            "vpsrlw $4, %%zmm29, %[U3]\n\t"
            "vpandd %[low4], %[U1], %[U1]\n\t"
            "vpandd %[low4], %[U3], %[U3]\n\t"
            "vpshufb %[U0], %[lut], %[U0]\n\t"
            "vpshufb %[U1], %[lut], %[U1]\n\t"
            "vpshufb %[U2], %[lut], %[U2]\n\t"
            "vpshufb %[U3], %[lut], %[U3]\n\t"
            "vpdpbusd %[U0], %%zmm30, %[a00]\n\t"
            "vpdpbusd %[U0], %%zmm31, %[a10]\n\t"
            "vpdpbusd %[U1], %%zmm30, %[a01]\n\t"
            "vpdpbusd %[U1], %%zmm31, %[a11]\n\t"
            "vpdpbusd %[U2], %%zmm30, %[a02]\n\t"
            "vpdpbusd %[U2], %%zmm31, %[a12]\n\t"
            "vpdpbusd %[U3], %%zmm30, %[a03]\n\t"
            "vpdpbusd %[U3], %%zmm31, %[a13]\n\t"
            : [a00] "+v"(acc[0][0]), [a01] "+v"(acc[0][1]), [a02] "+v"(acc[0][2]), [a03] "+v"(acc[0][3]),
              [a10] "+v"(acc[1][0]), [a11] "+v"(acc[1][1]), [a12] "+v"(acc[1][2]), [a13] "+v"(acc[1][3]),
              [U0] "=&v"(U0), [U1] "=&v"(U1), [U2] "=&v"(U2), [U3] "=&v"(U3)
            : [row] "r"(row), [ldi] "r"(ldi), [ldi3] "r"(3 * ldi), [wq] "r"(wq), [perm] "v"(perm), [lut] "v"(lut),
              [low4] "v"(low4)
            : "zmm26", "zmm27", "zmm28", "zmm29", "zmm30", "zmm31", "memory");
    __asm__("vpbroadcastd 64(%[wq]), %%zmm30\n\t"
            "vpbroadcastd 96(%[wq]), %%zmm31\n\t"
            "vpdpbusd %[U0], %%zmm30, %[a20]\n\t"
            "vpdpbusd %[U0], %%zmm31, %[a30]\n\t"
            "vpdpbusd %[U1], %%zmm30, %[a21]\n\t"
            "vpdpbusd %[U1], %%zmm31, %[a31]\n\t"
            "vpdpbusd %[U2], %%zmm30, %[a22]\n\t"
            "vpdpbusd %[U2], %%zmm31, %[a32]\n\t"
            "vpdpbusd %[U3], %%zmm30, %[a23]\n\t"
            "vpdpbusd %[U3], %%zmm31, %[a33]\n\t"
            : [a20] "+v"(acc[2][0]), [a21] "+v"(acc[2][1]), [a22] "+v"(acc[2][2]), [a23] "+v"(acc[2][3]),
              [a30] "+v"(acc[3][0]), [a31] "+v"(acc[3][1]), [a32] "+v"(acc[3][2]), [a33] "+v"(acc[3][3])
            : [wq] "r"(wq), [U0] "v"(U0), [U1] "v"(U1), [U2] "v"(U2), [U3] "v"(U3)
            : "zmm30", "zmm31", "memory");
}

/* RB <= 4 rows against one block of D = 128 channels (rows of 64 index
 * bytes, both halves) or D = 64 (rows of 32 bytes, half 0 only): indices
 * decoded once per 4 tokens and half for all rows. */
VQ_INLINE void cb8_rows_d(int D, int RB, int n, const uint8_t *idx, int64_t ldi, __m512i lut, float cstep,
                          const float *w, int64_t ldw, float *o, int64_t ldo)
{
    _Alignas(64) int32_t w8[4][8]; /* row r's weight bytes of tokens 4q .. 4q+3 in dword q */
    float sv[4];
    int32_t wsum[4];
    const unsigned uns = prep_rows(RB, n, w, ldw, cstep, w8, sv, wsum);
    const __m512i low4 = _mm512_set1_epi8(15);
    const int full = n / 4;
    for (int h = 0; h < D / 64; h++) {
        const __m512i perm = _mm512_loadu_si512(ilv[h]);
        __m512i acc[4][4];
        for (int r = 0; r < RB; r++)
            for (int u = 0; u < 4; u++) acc[r][u] = _mm512_set1_epi32(-128 * wsum[r]);
        const uint8_t *row = idx;
        int q = 0;
        if (D == 128 && RB == 4 && uns == 15) /* its asm reads whole 64-byte rows */
            for (; q < full; q++, row += 4 * ldi) quad4u(row, ldi, perm, lut, low4, &w8[0][q], acc);
        for (; q < full; q++, row += 4 * ldi)
            quad(RB, uns, row_bytes(D, row), row_bytes(D, row + ldi), row_bytes(D, row + 2 * ldi),
                 row_bytes(D, row + 3 * ldi), perm, lut, low4, (const int32_t(*)[8])w8, q, acc);
        if (n % 4) {
            const int t = 4 * full;
            quad(RB, uns, load_row(D, idx, ldi, t, n), load_row(D, idx, ldi, t + 1, n), load_row(D, idx, ldi, t + 2, n),
                 load_row(D, idx, ldi, t + 3, n), perm, lut, low4, (const int32_t(*)[8])w8, full, acc);
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

/* cb8_rows_d at D = 128 (the fused RaBitQ block's values). */
VQ_INLINE void cb8_rows(int RB, int n, const uint8_t *idx, int64_t ldi, __m512i lut, float cstep, const float *w,
                        int64_t ldw, float *o, int64_t ldo)
{
    cb8_rows_d(128, RB, n, idx, ldi, lut, cstep, w, ldw, o, ldo);
}

#endif /* VQ_ATTN_CB8_VNNIVBMI_H */
