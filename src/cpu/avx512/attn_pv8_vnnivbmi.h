/* attn_pv8_vnnivbmi.h — the inline body of kivi_pv8 (attn_pv8_vnnivbmi.c: how it works), shared with the fused KIVI block kernel
 * (attn_kivi_int8_vnnivbmi.c). Internal; include only from a file built with its
 * flags (the file names say which). */
#ifndef VQ_ATTN_PV8_VNNIVBMI_H
#define VQ_ATTN_PV8_VNNIVBMI_H

#include <immintrin.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_avx512_inline.h"


typedef struct pv8_tables {
    int32_t tr[16];             /* lane 4 g + t <- lane 4 t + g (a 4 x 4 transpose) */
    int32_t quads[16];          /* dword 4 q + g <- dword 4 g + q (groups of a 4-token quad adjacent) */
    uint8_t ilv[2][64];         /* vpermt2b: out byte 4 l + u = code byte 8 (2 h + (l & 1)) + (l >> 1) of token u */
    int32_t half_groups[2][16]; /* lane l of half h <- lane 4 (2 h + (l & 1)) (+ r: row r's step, zero sum) */
} pv8_tables;

static pv8_tables T;

static void build_tables(void)
{
    for (int t = 0; t < 4; t++)
        for (int g = 0; g < 4; g++) {
            T.tr[4 * g + t] = 4 * t + g;
            T.quads[4 * t + g] = 4 * g + t;
        }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 16; l++) {
            for (int u = 0; u < 4; u++) T.ilv[h][4 * l + u] = (uint8_t)(32 * u + 8 * (2 * h + (l & 1)) + (l >> 1));
            T.half_groups[h][l] = 4 * (2 * h + (l & 1));
        }
}

/* Mask of the lanes of register m (tokens 4 m .. 4 m + 3, lane 4 t + g in
 * the cache's [token][group] order) that hold tokens < n. */
VQ_INLINE __mmask16 token_lanes(int m, int n)
{
    const int left = n - 4 * m;
    return left >= 4 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << (4 * left)) - 1u);
}

/* vs, vz of the block transposed (lane 4 g + t: token 4 m + t, group g; 0
 * past n) and the lanes of groups with a non-finite vs. */
typedef struct pv8_block {
    __m512 vs[8], vz[8];
    __mmask16 vs_bad;
} pv8_block;

VQ_INLINE void prep_block(int n, const float *vs, const float *vz, pv8_block *b)
{
    const __m512i tr = _mm512_loadu_si512(T.tr);
    __mmask16 bad = 0;
    for (int m = 0; m < 8; m++) {
        const __mmask16 k = token_lanes(m, n);
        const __m512 s = _mm512_maskz_loadu_ps(k, vs + 16 * m);
        bad |= _mm512_fpclass_ps_mask(s, 0x99); /* NaN, +-inf */
        b->vs[m] = _mm512_permutexvar_ps(tr, s);
        b->vz[m] = _mm512_permutexvar_ps(tr, _mm512_maskz_loadu_ps(k, vz + 16 * m));
    }
    unsigned gb = (unsigned)bad; /* bit 4 t + g -> group g */
    gb = (gb | gb >> 4 | gb >> 8 | gb >> 12) & 15u;
    b->vs_bad = (__mmask16)((gb & 1u ? 0x000fu : 0u) | (gb & 2u ? 0x00f0u : 0u) | (gb & 4u ? 0x0f00u : 0u) |
                            (gb & 8u ? 0xf000u : 0u));
}

/* Within each 128-bit lane: op over its four floats, in all four. */
#define VQ_LANE4(op, x) op(op(x, _mm512_permute_ps(x, 0x4E)), _mm512_permute_ps(op(x, _mm512_permute_ps(x, 0x4E)), 0xB1))

/* The same for four registers at once: lane 4 g + r of the result = op over
 * the four floats of 128-bit lane g of v[r] (6 shuffles and 3 ops, where
 * four VQ_LANE4 and the merge of their lanes take 8, 8 and 4). */
#define VQ_LANE4X4(op, v)                                                                          \
    ({                                                                                             \
        const __m512 u01_ = op(_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1]));  \
        const __m512 u23_ = op(_mm512_unpacklo_ps(v[2], v[3]), _mm512_unpackhi_ps(v[2], v[3]));  \
        op(_mm512_shuffle_ps(u01_, u23_, 0x44), _mm512_shuffle_ps(u01_, u23_, 0xEE));             \
    })


/* p . vs of one row for register m (lane 4 g + t: token 4 m + t, group g). */
VQ_INLINE __m512 row_p(bool full, int n, const float *p, int m)
{
    if (full) return _mm512_broadcast_f32x4(_mm_loadu_ps(p + 4 * m));
    /* nothing at or past n is read */
    const int left = n - 16 * (m / 4);
    const __mmask16 k = left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
    const __m512 P = _mm512_maskz_loadu_ps(k, p + 16 * (m / 4));
    return _mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set1_epi32(4 * (m % 4)), _mm512_set_epi32(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0)), P); /* no immediate: -O0 builds too */
}

/* RB <= 4 rows: int8 weights w8t[r] [8 quads][4 groups][4 tokens] (the
 * qword at 16 q + 8 h: groups 2 h, 2 h + 1 of quad q), and in lane 4 g + r
 * of *step / *zs the step and zero sum of row r, group g (the four rows'
 * divisions in one instruction). Non-finite weights: p and vs are checked as
 * such; with both finite, w is finite or an overflow that amax shows
 * (vrangeps ignores quiet NaNs, so they are never left to it). */
VQ_INLINE void prep_rows(int RB, bool full, int n, const pv8_block *b, const float *p, int64_t ldp,
                         uint8_t (*w8t)[128], __m512 *step, __m512 *zs)
{
    __m512 amax = _mm512_setzero_ps(), zsum = _mm512_setzero_ps();
    __m512 am4[4], zs4[4]; /* per row, reduced over tokens but not yet within the 128-bit lanes */
    __mmask16 bad = b->vs_bad;
    __m512 wk[4][8]; /* the weights, kept for the rounding pass (cheaper than recomputing) */
    for (int r = 0; r < 4; r++) {
        am4[r] = zs4[r] = _mm512_setzero_ps();
        if (r >= RB) continue;
        const float *pr = p + r * ldp;
        __m512 a[2], z[2];
        for (int m = 0; m < 8; m++) {
            const __m512 pb = row_p(full, n, pr, m), w = _mm512_mul_ps(pb, b->vs[m]);
            wk[r][m] = w;
            a[m & 1] = m < 2 ? w : absmax(a[m & 1], w);
            z[m & 1] = m < 2 ? _mm512_mul_ps(pb, b->vz[m]) : _mm512_fmadd_ps(pb, b->vz[m], z[m & 1]);
        }
        const __mmask16 lanes = (__mmask16)(0x1111u << r);
        am4[r] = absmax(a[0], a[1]);
        zs4[r] = _mm512_add_ps(z[0], z[1]);
        if (RB <= 2) { /* one or two rows: each alone is fewer shuffles */
            amax = _mm512_mask_mov_ps(amax, lanes, VQ_LANE4(absmax, am4[r]));
            zsum = _mm512_mask_mov_ps(zsum, lanes, VQ_LANE4(_mm512_add_ps, zs4[r]));
        }
        __mmask16 pbad;
        if (full)
            pbad = _mm512_fpclass_ps_mask(_mm512_loadu_ps(pr), 0x99) | _mm512_fpclass_ps_mask(_mm512_loadu_ps(pr + 16), 0x99);
        else
            pbad = _mm512_fpclass_ps_mask(row_p(false, n, pr, 0), 0x99) | _mm512_fpclass_ps_mask(row_p(false, n, pr, 4), 0x99);
        if (pbad) bad |= lanes;
    }
    if (RB > 2) {
        amax = VQ_LANE4X4(absmax, am4);
        zsum = VQ_LANE4X4(_mm512_add_ps, zs4);
    }
    bad |= _mm512_fpclass_ps_mask(amax, 0x99);
    const __mmask16 pos = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ) & (__mmask16)~bad;
    __m512 inv = _mm512_maskz_div_ps(pos, _mm512_set1_ps(127.0f), amax);
    inv = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(inv, _mm512_set1_ps(3.40282347e38f), _CMP_LE_OQ), inv); /* vq_attn_q8_inv */
    *step = _mm512_mask_blend_ps(bad, _mm512_div_ps(amax, _mm512_set1_ps(127.0f)), _mm512_set1_ps(__builtin_nanf("")));
    *zs = zsum;
    const __m512i quads = _mm512_loadu_si512(T.quads);
    for (int r = 0; r < RB; r++) {
        const __m512 iv = _mm512_permutevar_ps(inv, _mm512_set1_epi32(r)); /* lanes 4 g .. 4 g + 3: row r, group g */
        __m512i wq[8];
        for (int m = 0; m < 8; m++)
            wq[m] = _mm512_cvtps_epi32(_mm512_mul_ps(wk[r][m], iv));
        /* 128-bit lane g of x: group g, tokens 16 a .. 16 a + 15 in order */
        for (int a2 = 0; a2 < 2; a2++) {
            const __m512i x = _mm512_packs_epi16(_mm512_packs_epi32(wq[4 * a2], wq[4 * a2 + 1]),
                                                 _mm512_packs_epi32(wq[4 * a2 + 2], wq[4 * a2 + 3]));
            _mm512_store_si512(w8t[r] + 64 * a2, _mm512_permutexvar_epi32(quads, x));
        }
    }
}

/* Code rows 4q .. 4q+3 (32 bytes each): tokens 0, 1 in A, 2, 3 in B; rows
 * at or past n read as zeros (nothing past them is read). */
VQ_INLINE void load_quad(const uint8_t *codes, int64_t ldc, int q, int n, __m512i *A, __m512i *B)
{
    const int t = 4 * q;
    if (ldc == 32 && t + 4 <= n) {
        *A = _mm512_loadu_si512(codes + t * 32);
        *B = _mm512_loadu_si512(codes + t * 32 + 64);
        return;
    }
    __m256i r[4];
    for (int i = 0; i < 4; i++)
        r[i] = t + i < n ? _mm256_loadu_si256((const __m256i *)(codes + (t + i) * ldc)) : _mm256_setzero_si256();
    *A = _mm512_inserti64x4(_mm512_castsi256_si512(r[0]), r[1], 1);
    *B = _mm512_inserti64x4(_mm512_castsi256_si512(r[2]), r[3], 1);
}

/* RB <= 4 rows against one block: codes decoded once per 4 tokens for all rows. */
VQ_INLINE void pv8_rows(int RB, bool full, int n, const uint8_t *codes, int64_t ldc, const pv8_block *b,
                        const float *p, int64_t ldp, float *o, int64_t ldo)
{
    _Alignas(64) uint8_t w8t[4][128];
    __m512 step, zs;
    prep_rows(RB, full, n, b, p, ldp, w8t, &step, &zs);
    /* plane k as its bits in place, 4^k code (at most 192: vpdpbusd's
     * unsigned operand): one and each, no shift; the accumulators of plane
     * k hold 4^k times the dots, exact multiples, shifted back once per block */
    const __m512i planes[4] = {_mm512_set1_epi8(0x03), _mm512_set1_epi8(0x0c), _mm512_set1_epi8(0x30),
                               _mm512_set1_epi8((char)0xc0)};
    const int nq = (n + 3) / 4;
    for (int h = 0; h < 2; h++) {
        const __m512i ilv = _mm512_loadu_si512(T.ilv[h]);
        __m512i acc[4][4];
        for (int r = 0; r < RB; r++)
            for (int k = 0; k < 4; k++) acc[r][k] = _mm512_setzero_si512();
        VQ_UNROLL_ALWAYS
        for (int q = 0; q < nq; q++) {
            __m512i A, B;
            load_quad(codes, ldc, q, n, &A, &B);
            const __m512i C = _mm512_permutex2var_epi8(A, ilv, B);
            const __m512i E[4] = {_mm512_and_si512(C, planes[0]), _mm512_and_si512(C, planes[1]),
                                  _mm512_and_si512(C, planes[2]), _mm512_and_si512(C, planes[3])};
            for (int r = 0; r < RB; r++) {
                /* even lanes group 2h, odd lanes 2h + 1, 4 tokens each: one qword broadcast */
                long long wv;
                __builtin_memcpy(&wv, w8t[r] + 16 * q + 8 * h, 8);
                const __m512i W = _mm512_set1_epi64(wv);
                for (int k = 0; k < 4; k++) acc[r][k] = _mm512_dpbusd_epi32(acc[r][k], E[k], W);
            }
        }
        /* o in the kernel's order (vq_attn_pv8_pos): lane l of (h, k) at 64 h + 16 k + l */
        const __m512i hg = _mm512_loadu_si512(T.half_groups[h]);
        for (int r = 0; r < RB; r++) {
            const __m512i hr = _mm512_add_epi32(hg, _mm512_set1_epi32(r));
            const __m512 sv = _mm512_permutexvar_ps(hr, step), zv = _mm512_permutexvar_ps(hr, zs);
            for (int k = 0; k < 4; k++) {
                float *dst = o + r * ldo + 64 * h + 16 * k;
                const __m512i a = k ? _mm512_srai_epi32(acc[r][k], 2 * k) : acc[r][k];
                const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), sv, zv);
                _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), f));
            }
        }
    }
}

VQ_INLINE void pv8_all(bool full, int R, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                       const float *p, int64_t ldp, float *o, int64_t ldo)
{
    pv8_block b;
    prep_block(n, vs, vz, &b);
    for (int r0 = 0; r0 < R; r0 += 4) {
        const float *pr = p + r0 * ldp;
        float *orow = o + r0 * ldo;
        switch (R - r0 < 4 ? R - r0 : 4) {
        case 1: pv8_rows(1, full, n, codes, ldc, &b, pr, ldp, orow, ldo); break;
        case 2: pv8_rows(2, full, n, codes, ldc, &b, pr, ldp, orow, ldo); break;
        case 3: pv8_rows(3, full, n, codes, ldc, &b, pr, ldp, orow, ldo); break;
        default: pv8_rows(4, full, n, codes, ldc, &b, pr, ldp, orow, ldo); break;
        }
    }
}

#endif /* VQ_ATTN_PV8_VNNIVBMI_H */
