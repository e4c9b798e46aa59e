/* attn_direct_avx2.c — AVX2 direct decode paths for few query rows: affine
 * codes and codebook nibbles are expanded in registers and consumed at once
 * by up to 4 rows (scores: q.code dot products; values: p-weighted sums), so
 * a decode call touches each compressed byte once and writes no tile.
 * Accumulators are tiled (rows x tokens or rows x column strips) so that
 * several independent FMA chains hide the FMA latency even for one row. */
#include <immintrin.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_avx2_inline.h"

/* s[r][t] = qs[r] . code(t) for RB rows x TB tokens */
VQ_INLINE void affine_qk_tile(int bits, int RB, int TB, int64_t D, const uint8_t *codes, int64_t ldc,
                              const float *qs, int64_t ldq, float *s, int64_t lds)
{
    __m256 acc[4][4];
    for (int r = 0; r < RB; r++)
        for (int t = 0; t < TB; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t c = 0; c < D; c += 8) {
        __m256 x[4];
        for (int t = 0; t < TB; t++) x[t] = _mm256_cvtepi32_ps(codes8(codes + t * ldc, bits, c));
        for (int r = 0; r < RB; r++) {
            const __m256 q = _mm256_loadu_ps(qs + r * ldq + c);
            for (int t = 0; t < TB; t++) acc[r][t] = _mm256_fmadd_ps(q, x[t], acc[r][t]);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int t = 0; t < TB; t++) s[r * lds + t] = hsum8(acc[r][t]);
}

/* All n tokens for RB rows: TB = 4 tokens at a time for 1-2 rows, 2 for 3-4. */
VQ_INLINE void affine_qk_rows(int bits, int RB, int n, int64_t D, const uint8_t *codes, int64_t ldc,
                              const float *qs, int64_t ldq, float *s, int64_t lds)
{
    const int TB = RB <= 2 ? 4 : 2;
    int j = 0;
    for (; j + TB <= n; j += TB) affine_qk_tile(bits, RB, TB, D, codes + j * ldc, ldc, qs, ldq, s + j, lds);
    for (; j < n; j++) affine_qk_tile(bits, RB, 1, D, codes + j * ldc, ldc, qs, ldq, s + j, lds);
}

static void affine_qk_avx2(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *qs,
                           int64_t ldq, float *s, int64_t lds)
{
    for (int r = 0; r < R; r += 4) {
        const int rb = R - r < 4 ? R - r : 4;
        const float *q = qs + r * ldq;
        float *sr = s + r * lds;
#define VQ_CASE(B, RB) \
    case B * 8 + RB: affine_qk_rows(B, RB, n, D, codes, ldc, q, ldq, sr, lds); break;
        switch (bits * 8 + rb) {
            VQ_CASE(2, 1) VQ_CASE(2, 2) VQ_CASE(2, 3) VQ_CASE(2, 4)
            VQ_CASE(4, 1) VQ_CASE(4, 2) VQ_CASE(4, 3) VQ_CASE(4, 4)
            VQ_CASE(8, 1) VQ_CASE(8, 2) VQ_CASE(8, 3) VQ_CASE(8, 4)
        default: break;
        }
#undef VQ_CASE
    }
}

/* Value decoders for the p-weighted sums below. */
typedef enum { DEC_AFFINE2, DEC_AFFINE4, DEC_AFFINE8, DEC_NIBBLE_LUT, DEC_BYTE_LUT, DEC_BYTE_GATHER } dec_kind;

typedef struct dec_src {
    const uint8_t *p;   /* codes / indices of token 0 */
    int64_t ld;         /* bytes per token */
    __m256 lo, hi;      /* 16-entry centroid table */
    const float *cents;
    __m256i top;        /* n_cents - 1 */
} dec_src;

/* Values c .. c+7 of token j (affine: the raw code; codebook: the centroid). */
VQ_INLINE __m256 decode8(dec_kind k, const dec_src *d, int j, int64_t c)
{
    const uint8_t *row = d->p + j * d->ld;
    switch (k) {
    case DEC_AFFINE2: return _mm256_cvtepi32_ps(codes8(row, 2, c));
    case DEC_AFFINE4: return _mm256_cvtepi32_ps(codes8(row, 4, c));
    case DEC_AFFINE8: return _mm256_cvtepi32_ps(codes8(row, 8, c));
    case DEC_NIBBLE_LUT: return lut16(_mm256_min_epu32(nibbles8(row, c), d->top), d->lo, d->hi);
    case DEC_BYTE_LUT:
        return lut16(_mm256_min_epu32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + c))), d->top),
                     d->lo, d->hi);
    default:
        return _mm256_i32gather_ps(
            d->cents,
            _mm256_min_epu32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + c))), d->top), 4);
    }
}

/* o[r][c0 .. c0+8CB) += sum_j w(r, j) * decode(j, chunk) for RB rows; the
 * strip lies in one weight group: w(r, j) = w[r*ldw + j*wj + c0/g] (wj = GV
 * for affine channel groups; 1 with a huge g for per-token weights). */
VQ_INLINE void pv_strip(dec_kind k, int RB, int CB, const dec_src *d, int n, const float *w, int64_t ldw,
                        int64_t wj, int64_t g, float *o, int64_t ldo, int64_t c0)
{
    __m256 acc[4][4];
    for (int r = 0; r < RB; r++)
        for (int cb = 0; cb < CB; cb++) acc[r][cb] = _mm256_loadu_ps(o + r * ldo + c0 + 8 * cb);
    for (int j = 0; j < n; j++) {
        __m256 x[4];
        for (int cb = 0; cb < CB; cb++) x[cb] = decode8(k, d, j, c0 + 8 * cb);
        for (int r = 0; r < RB; r++) {
            const __m256 wv = _mm256_broadcast_ss(w + r * ldw + j * wj + c0 / g);
            for (int cb = 0; cb < CB; cb++) acc[r][cb] = _mm256_fmadd_ps(wv, x[cb], acc[r][cb]);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int cb = 0; cb < CB; cb++) _mm256_storeu_ps(o + r * ldo + c0 + 8 * cb, acc[r][cb]);
}

/* All D columns for RB rows: strips of 8*CB (CB = 4 for 1-2 rows, 2 for 3-4)
 * sharing one weight when g is a multiple of the strip, then 8-wide tails. */
VQ_INLINE void pv_rows(dec_kind k, int RB, const dec_src *d, int n, int64_t D, const float *w, int64_t ldw,
                       int64_t wj, int64_t g, float *o, int64_t ldo)
{
    const int CB = RB <= 2 ? 4 : 2;
    int64_t c = 0;
    if (g % (8 * CB) == 0)
        for (; c + 8 * CB <= D; c += 8 * CB) pv_strip(k, RB, CB, d, n, w, ldw, wj, g, o, ldo, c);
    for (; c < D; c += 8) pv_strip(k, RB, 1, d, n, w, ldw, wj, g, o, ldo, c);
}

VQ_INLINE void pv_any(dec_kind k, int R, const dec_src *d, int n, int64_t D, const float *w, int64_t ldw,
                      int64_t wj, int64_t g, float *o, int64_t ldo)
{
    for (int r = 0; r < R; r += 4) {
        const int rb = R - r < 4 ? R - r : 4;
        const float *wr = w + r * ldw;
        float *orow = o + r * ldo;
        switch (rb) {
        case 1: pv_rows(k, 1, d, n, D, wr, ldw, wj, g, orow, ldo); break;
        case 2: pv_rows(k, 2, d, n, D, wr, ldw, wj, g, orow, ldo); break;
        case 3: pv_rows(k, 3, d, n, D, wr, ldw, wj, g, orow, ldo); break;
        default: pv_rows(k, 4, d, n, D, wr, ldw, wj, g, orow, ldo); break;
        }
    }
}

static void affine_pv_avx2(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *w,
                           int64_t ldw, int64_t GV, int64_t g, float *o, int64_t ldo)
{
    const dec_src d = {.p = codes, .ld = ldc};
    switch (bits) {
    case 2: pv_any(DEC_AFFINE2, R, &d, n, D, w, ldw, GV, g, o, ldo); break;
    case 4: pv_any(DEC_AFFINE4, R, &d, n, D, w, ldw, GV, g, o, ldo); break;
    default: pv_any(DEC_AFFINE8, R, &d, n, D, w, ldw, GV, g, o, ldo); break;
    }
}

static void codebook_pv_avx2(int R, int n, int64_t D, bool packed, const uint8_t *idx, const float *cents,
                             int n_cents, const float *w, int64_t ldw, float *o, int64_t ldo)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    dec_src d = {.p = idx, .ld = packed ? D / 2 : D, .cents = cents, .top = _mm256_set1_epi32(n_cents - 1)};
    if (n_cents <= 16) {
        d.lo = _mm256_maskload_ps(cents, _mm256_cmpgt_epi32(_mm256_set1_epi32(n_cents), lane));
        d.hi = _mm256_maskload_ps(cents + 8, _mm256_cmpgt_epi32(_mm256_set1_epi32(n_cents - 8), lane));
    }
    /* one weight per token: g larger than any D makes every strip uniform */
    const int64_t g = (int64_t)1 << 30;
    if (packed) pv_any(DEC_NIBBLE_LUT, R, &d, n, D, w, ldw, 1, g, o, ldo);
    else if (n_cents <= 16) pv_any(DEC_BYTE_LUT, R, &d, n, D, w, ldw, 1, g, o, ldo);
    else pv_any(DEC_BYTE_GATHER, R, &d, n, D, w, ldw, 1, g, o, ldo);
}

static void cvt_f16_avx2(int64_t n, const uint16_t *src, float *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(src[i]);
}

void vq_attn_kernels_init_avx2_direct(vq_attn_kernels *k)
{
    k->affine_qk = affine_qk_avx2;
    k->affine_pv = affine_pv_avx2;
    k->codebook_pv = codebook_pv_avx2;
    k->cvt_f16 = cvt_f16_avx2;
}
