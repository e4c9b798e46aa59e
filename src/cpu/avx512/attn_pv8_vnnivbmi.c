/* attn_pv8_vnnivbmi.c — AVX-512 VNNI + VBMI integer p.V for 2-bit KIVI
 * values at D = 128, g = 32 (attn_kernels.h, affine_pv8), installed only
 * where the CPU has both (this file alone is built with -mavx512vnni and
 * -mavx512vbmi; CMakeLists.txt: *_vnnivbmi.c).
 *
 * Per row and block, the weights w_j = p_j * vs[j][g] of each channel group
 * are rounded to int8 against step = max_j |w_j| / 127 (the definition and
 * its error bound: attn_kernels.h and veloxquant.h at vq_value_accum), so
 * sum_j w_j code_jc becomes step * sum_j wq_j code_jc, exact in int32, and
 * one vpdpbusd multiplies 4 tokens x 16 channels of codes by their 4
 * weights. The codes of 4 tokens are interleaved (one vpermt2b: dword b =
 * byte b of each token, i.e. 4 channels x 4 tokens), and the shift-and-mask
 * that extracts channel 4b + k of the 4 tokens is shared by all rows; each
 * row then adds 8 vpdpbusd per 4 tokens (2 per token, against 8 f32 FMAs)
 * with its weights picked by one vpermd. The zero term is kept in f32:
 * sum_j p_j vz[j][g], added once per block. Lane b of accumulator (h, k)
 * holds channel 64 h + 4 b + k, and o is accumulated in that order
 * (attn_kernels.h, affine_pv8_order): the permutation is undone once per row
 * by the format's finish(), not per block. */
#include <immintrin.h>

#include "attention/attn_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

typedef struct pv8_tables {
    int32_t rep[4][16];  /* lane 4 t + g <- p of token 4 (m % 4) + t (m = register of 4 tokens) */
    uint8_t tr[16];      /* bytes [t][g] -> [g][t] within a 16-byte quad */
    uint8_t ilv[2][64];  /* vpermt2b: out byte 4 b + i = byte 16 h + b of token i (rows at 32 i) */
    int32_t half_groups[2][16]; /* lane b of half h -> group 2h + (b >= 8) */
} pv8_tables;

static pv8_tables T;

static void build_tables(void)
{
    for (int m = 0; m < 4; m++)
        for (int l = 0; l < 16; l++) T.rep[m][l] = 4 * m + l / 4;
    for (int t = 0; t < 4; t++)
        for (int g = 0; g < 4; g++) T.tr[4 * g + t] = (uint8_t)(4 * t + g);
    for (int h = 0; h < 2; h++)
        for (int b = 0; b < 16; b++)
            for (int i = 0; i < 4; i++) T.ilv[h][4 * b + i] = (uint8_t)(32 * i + 16 * h + b);
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 16; l++) T.half_groups[h][l] = 2 * h + (l >= 8);
}

/* One row: int8 weights w8t [32 tokens -> 8 quads][4 groups][4 tokens] (quad q
 * at byte 16 q, group g's 4 weights at dword 4 q + g), and per group (lane g
 * of every 128-bit chunk) the step and the zero sum. */
VQ_INLINE void prep_row(int n, const float *vs, const float *vz, const float *p, uint8_t *w8t, __m512 *step_out,
                        __m512 *zs_out)
{
    const __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1u);
    const __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1u);
    const __m512 P[2] = {_mm512_maskz_loadu_ps(m0, p), _mm512_maskz_loadu_ps(m1, p + 16)};
    __m512 w[8], amax = _mm512_setzero_ps(), zs = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (int m = 0; m < 8; m++) {
        const int left = n - 4 * m; /* tokens of this register */
        const __mmask16 k = left >= 4 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << (4 * left)) - 1u);
        const __m512 pr = _mm512_permutexvar_ps(_mm512_loadu_si512(T.rep[m % 4]), P[m / 4]);
        w[m] = _mm512_mul_ps(pr, _mm512_maskz_loadu_ps(k, vs + 16 * m));
        amax = _mm512_max_ps(amax, _mm512_abs_ps(w[m]));
        bad |= _mm512_fpclass_ps_mask(w[m], 0x99); /* NaN, +-inf */
        zs = _mm512_fmadd_ps(pr, _mm512_maskz_loadu_ps(k, vz + 16 * m), zs);
    }
    /* per group over the four 128-bit chunks (tokens) */
    amax = _mm512_max_ps(amax, _mm512_shuffle_f32x4(amax, amax, _MM_SHUFFLE(1, 0, 3, 2)));
    amax = _mm512_max_ps(amax, _mm512_shuffle_f32x4(amax, amax, _MM_SHUFFLE(2, 3, 0, 1)));
    zs = _mm512_add_ps(zs, _mm512_shuffle_f32x4(zs, zs, _MM_SHUFFLE(1, 0, 3, 2)));
    zs = _mm512_add_ps(zs, _mm512_shuffle_f32x4(zs, zs, _MM_SHUFFLE(2, 3, 0, 1)));
    unsigned gb = (unsigned)bad;
    gb = (gb | gb >> 4 | gb >> 8 | gb >> 12) & 15u;
    const __mmask16 badl = (__mmask16)(gb * 0x1111u); /* the lanes of bad groups */
    const __mmask16 pos = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ) & (__mmask16)~badl;
    __m512 inv = _mm512_maskz_div_ps(pos, _mm512_set1_ps(127.0f), amax);
    inv = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(inv, _mm512_set1_ps(3.40282347e38f), _CMP_LE_OQ), inv); /* vq_attn_q8_inv */
    *step_out = _mm512_mask_blend_ps(badl, _mm512_div_ps(amax, _mm512_set1_ps(127.0f)), _mm512_set1_ps(__builtin_nanf("")));
    *zs_out = zs;
    for (int m = 0; m < 8; m++)
        _mm_storeu_si128((__m128i *)(w8t + 16 * m), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(w[m], inv))));
    const __m512i tr = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)T.tr));
    for (int a = 0; a < 2; a++)
        _mm512_store_si512(w8t + 64 * a, _mm512_shuffle_epi8(_mm512_load_si512(w8t + 64 * a), tr));
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
VQ_INLINE void pv8_rows(int RB, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                        const float *p, int64_t ldp, float *o, int64_t ldo)
{
    _Alignas(64) uint8_t w8t[4][128];
    __m512 step[4], zs[4];
    for (int r = 0; r < RB; r++) prep_row(n, vs, vz, p + r * ldp, w8t[r], &step[r], &zs[r]);
    const __m512i mask3 = _mm512_set1_epi8(3);
    const int nq = (n + 3) / 4;
    for (int h = 0; h < 2; h++) {
        const __m512i ilv = _mm512_loadu_si512(T.ilv[h]);
        __m512i acc[4][4];
        for (int r = 0; r < RB; r++)
            for (int k = 0; k < 4; k++) acc[r][k] = _mm512_setzero_si512();
        for (int q = 0; q < nq; q++) {
            __m512i A, B;
            load_quad(codes, ldc, q, n, &A, &B);
            const __m512i C = _mm512_permutex2var_epi8(A, ilv, B);
            const __m512i E[4] = {_mm512_and_si512(C, mask3), _mm512_and_si512(_mm512_srli_epi32(C, 2), mask3),
                                  _mm512_and_si512(_mm512_srli_epi32(C, 4), mask3),
                                  _mm512_and_si512(_mm512_srli_epi32(C, 6), mask3)};
            for (int r = 0; r < RB; r++) {
                /* groups 2h (lanes 0-7) and 2h + 1 (lanes 8-15) of quad q: two broadcast loads, one blend */
                int32_t lo, hi;
                __builtin_memcpy(&lo, w8t[r] + 16 * q + 8 * h, 4);
                __builtin_memcpy(&hi, w8t[r] + 16 * q + 8 * h + 4, 4);
                const __m512i W = _mm512_mask_set1_epi32(_mm512_set1_epi32(lo), 0xff00, hi);
                for (int k = 0; k < 4; k++) acc[r][k] = _mm512_dpbusd_epi32(acc[r][k], E[k], W);
            }
        }
        /* o in the kernel's order (affine_pv8_order): lane b of (h, k) at 64 h + 16 k + b */
        const __m512i hg = _mm512_loadu_si512(T.half_groups[h]);
        for (int r = 0; r < RB; r++) {
            const __m512 sv = _mm512_permutexvar_ps(hg, step[r]), zv = _mm512_permutexvar_ps(hg, zs[r]);
            for (int k = 0; k < 4; k++) {
                float *dst = o + r * ldo + 64 * h + 16 * k;
                const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][k]), sv, zv);
                _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), f));
            }
        }
    }
}

static void affine_pv8_avx512(int R, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                              const float *p, int64_t ldp, float *o, int64_t ldo)
{
    for (int r0 = 0; r0 < R; r0 += 4) {
        const float *pr = p + r0 * ldp;
        float *orow = o + r0 * ldo;
        switch (R - r0 < 4 ? R - r0 : 4) {
        case 1: pv8_rows(1, n, codes, ldc, vs, vz, pr, ldp, orow, ldo); break;
        case 2: pv8_rows(2, n, codes, ldc, vs, vz, pr, ldp, orow, ldo); break;
        case 3: pv8_rows(3, n, codes, ldc, vs, vz, pr, ldp, orow, ldo); break;
        default: pv8_rows(4, n, codes, ldc, vs, vz, pr, ldp, orow, ldo); break;
        }
    }
}

void vq_attn_kernels_init_avx512_pv8(vq_attn_kernels *k)
{
    build_tables();
    k->affine_pv8 = affine_pv8_avx512;
    k->pv8_fast = true;
}
