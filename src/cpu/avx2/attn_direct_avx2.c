/* attn_direct_avx2.c — AVX2 direct decode paths for few query rows: affine
 * codes and codebook nibbles are expanded in registers and consumed at once
 * by up to 4 rows (scores: q.code dot products; values: p-weighted sums), so
 * a decode call touches each compressed byte once and writes no tile.
 * Accumulators are tiled (rows x tokens or rows x column strips) so that
 * several independent FMA chains hide the FMA latency even for one row. */
#include <immintrin.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_avx2_inline.h"

/* Codes c .. c+15 of a row as floats (c + 16 <= D). 2-bit codes come from
 * one 32-bit broadcast shifted two ways. */
VQ_INLINE void codes16(const uint8_t *row, int bits, int64_t c, __m256 *x0, __m256 *x1)
{
    if (bits == 2) {
        uint32_t w;
        __builtin_memcpy(&w, row + c / 4, 4);
        const __m256i v = _mm256_set1_epi32((int)w), three = _mm256_set1_epi32(3);
        *x0 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), three));
        *x1 = _mm256_cvtepi32_ps(
            _mm256_and_si256(_mm256_srlv_epi32(v, _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30)), three));
        return;
    }
    *x0 = _mm256_cvtepi32_ps(codes8(row, bits, c));
    *x1 = _mm256_cvtepi32_ps(codes8(row, bits, c + 8));
}

/* Sums of four vectors' lanes: {sum a, sum b, sum c, sum d}. */
VQ_INLINE __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d), abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* s[r][t] = qs[r] . code(t) + qz[r] for RB rows x TB tokens (RB 1-2 with TB
 * 4, RB 3-4 with TB 2, tails TB 1); qs rows are 256 floats apart. */
VQ_INLINE void kivi_qk_tile(int bits, int RB, int TB, int64_t D, const uint8_t *codes, int64_t ldc,
                              const float *qs, const float *qz, float *s, int64_t lds)
{
    __m256 acc[4][4];
    for (int r = 0; r < RB; r++)
        for (int t = 0; t < TB; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= D; c += 16) {
        __m256 x[4][2];
        for (int t = 0; t < TB; t++) codes16(codes + t * ldc, bits, c, &x[t][0], &x[t][1]);
        for (int r = 0; r < RB; r++) {
            const __m256 q0 = _mm256_loadu_ps(qs + r * 256 + c), q1 = _mm256_loadu_ps(qs + r * 256 + c + 8);
            for (int t = 0; t < TB; t++) acc[r][t] = _mm256_fmadd_ps(q1, x[t][1], _mm256_fmadd_ps(q0, x[t][0], acc[r][t]));
        }
    }
    if (c < D) {
        for (int t = 0; t < TB; t++) {
            const __m256 x = _mm256_cvtepi32_ps(codes8(codes + t * ldc, bits, c));
            for (int r = 0; r < RB; r++) acc[r][t] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + r * 256 + c), x, acc[r][t]);
        }
    }
    if (TB == 4) {
        for (int r = 0; r < RB; r++)
            _mm_storeu_ps(s + r * lds, _mm_add_ps(hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]),
                                                  _mm_set1_ps(qz[r])));
    } else if (TB == 2) {
        for (int r = 0; r < RB; r += 2) {
            const int r1 = r + 1 < RB ? r + 1 : r; /* an odd last row is summed twice, stored once */
            const __m128 h = _mm_add_ps(hsum4(acc[r][0], acc[r][1], acc[r1][0], acc[r1][1]),
                                        _mm_setr_ps(qz[r], qz[r], qz[r1], qz[r1]));
            _mm_storel_pi((__m64 *)(s + r * lds), h);
            if (r1 != r) _mm_storeh_pi((__m64 *)(s + r1 * lds), h);
        }
    } else {
        for (int r = 0; r < RB; r++) s[r * lds] = hsum8(acc[r][0]) + qz[r];
    }
}

/* All n tokens for RB rows. */
VQ_INLINE void kivi_qk_rows(int bits, int RB, int n, int64_t D, const uint8_t *codes, int64_t ldc,
                              const float *qs, const float *qz, float *s, int64_t lds)
{
    const int TB = RB <= 2 ? 4 : 2;
    int j = 0;
    for (; j + TB <= n; j += TB) kivi_qk_tile(bits, RB, TB, D, codes + j * ldc, ldc, qs, qz, s + j, lds);
    for (; j < n; j++) kivi_qk_tile(bits, RB, 1, D, codes + j * ldc, ldc, qs, qz, s + j, lds);
}

/* Folds the group's scale into the queries, qs = q * scale and
 * qz = q . zero, so that q . k_hat = qs . code + qz: one FMA per code. Rows
 * go in groups of up to 4. */
static void kivi_qk_avx2(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc,
                           const float *scale, const float *zero, const float *q, int64_t ldq, float *s,
                           int64_t lds)
{
    _Alignas(32) float qs[4 * 256];
    float qz[4];
    for (int r0 = 0; r0 < R; r0 += 4) {
        const int rb = R - r0 < 4 ? R - r0 : 4;
        for (int r = 0; r < rb; r++) {
            const float *qr = q + (r0 + r) * ldq;
            __m256 z = _mm256_setzero_ps();
            for (int64_t c = 0; c < D; c += 8) {
                const __m256 qv = _mm256_loadu_ps(qr + c);
                _mm256_store_ps(qs + r * 256 + c, _mm256_mul_ps(qv, _mm256_loadu_ps(scale + c)));
                z = _mm256_fmadd_ps(qv, _mm256_loadu_ps(zero + c), z);
            }
            qz[r] = hsum8(z);
        }
        float *sr = s + r0 * lds;
#define VQ_CASE(B, RB) \
    case B * 8 + RB: kivi_qk_rows(B, RB, n, D, codes, ldc, qs, qz, sr, lds); break;
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
    const uint8_t *p;          /* codes / indices of token 0 */
    int64_t ld;                /* bytes per token */
    const float *vs, *vz;      /* affine: [n][GV] scale and zero */
    int64_t GV, g;
    __m256 lo, hi;             /* codebook: 16-entry table, padded with the last centroid */
    __m256i plane[4];          /* the same table as 4 byte planes, for vpshufb (both lanes) */
    const float *cents;
    __m256i top;               /* n_cents - 1 */
} dec_src;

VQ_INLINE bool is_kivi(dec_kind k) { return k == DEC_AFFINE2 || k == DEC_AFFINE4 || k == DEC_AFFINE8; }

/* Values c .. c+7 of token j before any affine scale: the code, or the centroid. */
VQ_INLINE __m256 decode8(dec_kind k, const dec_src *d, int j, int64_t c)
{
    const uint8_t *row = d->p + j * d->ld;
    switch (k) {
    case DEC_AFFINE2: return _mm256_cvtepi32_ps(codes8(row, 2, c));
    case DEC_AFFINE4: return _mm256_cvtepi32_ps(codes8(row, 4, c));
    case DEC_AFFINE8: return _mm256_cvtepi32_ps(codes8(row, 8, c));
    case DEC_NIBBLE_LUT: return lut16(nibbles8(row, c), d->lo, d->hi);
    case DEC_BYTE_LUT:
        return lut16(_mm256_min_epu32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + c))), d->top),
                     d->lo, d->hi);
    default:
        return _mm256_i32gather_ps(
            d->cents,
            _mm256_min_epu32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + c))), d->top), 4);
    }
}

/* o[r][c0 .. c0+8CB) += sum_j p[r][j] * v_hat(j, chunk) for RB rows. Affine
 * strips lie in one channel group, so v_hat = code * vs + vz takes one
 * broadcast pair per token and one FMA per chunk, shared by the rows. */
VQ_INLINE void pv_strip(dec_kind k, int RB, int CB, const dec_src *d, int n, const float *p, int64_t ldp, float *o,
                        int64_t ldo, int64_t c0)
{
    __m256 acc[4][4];
    for (int r = 0; r < RB; r++)
        for (int cb = 0; cb < CB; cb++) acc[r][cb] = _mm256_loadu_ps(o + r * ldo + c0 + 8 * cb);
    for (int j = 0; j < n; j++) {
        __m256 x[4];
        if (k == DEC_AFFINE2 && CB % 2 == 0) {
            for (int cb = 0; cb < CB; cb += 2) codes16(d->p + j * d->ld, 2, c0 + 8 * cb, &x[cb], &x[cb + 1]);
        } else {
            for (int cb = 0; cb < CB; cb++) x[cb] = decode8(k, d, j, c0 + 8 * cb);
        }
        if (is_kivi(k)) {
            const int64_t gi = j * d->GV + c0 / d->g;
            const __m256 sc = _mm256_broadcast_ss(d->vs + gi), ze = _mm256_broadcast_ss(d->vz + gi);
            for (int cb = 0; cb < CB; cb++) x[cb] = _mm256_fmadd_ps(x[cb], sc, ze);
        }
        for (int r = 0; r < RB; r++) {
            const __m256 wv = _mm256_broadcast_ss(p + r * ldp + j);
            for (int cb = 0; cb < CB; cb++) acc[r][cb] = _mm256_fmadd_ps(wv, x[cb], acc[r][cb]);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int cb = 0; cb < CB; cb++) _mm256_storeu_ps(o + r * ldo + c0 + 8 * cb, acc[r][cb]);
}

/* Codebook strip of 32 columns for RB <= 2 rows, decoded by byte planes:
 * 32 indices in one register, 4 vpshufb give the 4 bytes of each centroid,
 * two rounds of unpacks assemble the floats. The unpacks leave columns in
 * the order [0-3|16-19] [4-7|20-23] [8-11|24-27] [12-15|28-31]; the
 * accumulators use that order and are permuted back once per strip. */
VQ_INLINE void cb_strip32(bool packed, int RB, const dec_src *d, int n, const float *p, int64_t ldp, float *o,
                          int64_t ldo, int64_t c0)
{
    __m256 acc[2][4];
    for (int r = 0; r < RB; r++) {
        const float *orow = o + r * ldo + c0;
        const __m256 a = _mm256_loadu_ps(orow), b = _mm256_loadu_ps(orow + 8), c = _mm256_loadu_ps(orow + 16),
                     e = _mm256_loadu_ps(orow + 24);
        acc[r][0] = _mm256_permute2f128_ps(a, c, 0x20);
        acc[r][1] = _mm256_permute2f128_ps(a, c, 0x31);
        acc[r][2] = _mm256_permute2f128_ps(b, e, 0x20);
        acc[r][3] = _mm256_permute2f128_ps(b, e, 0x31);
    }
    const __m128i lo4 = _mm_set1_epi8(15);
    for (int j = 0; j < n; j++) {
        const uint8_t *row = d->p + j * d->ld;
        __m256i idx;
        if (packed) {
            const __m128i x = _mm_loadu_si128((const __m128i *)(row + c0 / 2));
            const __m128i l = _mm_and_si128(x, lo4), h = _mm_and_si128(_mm_srli_epi16(x, 4), lo4);
            idx = _mm256_set_m128i(_mm_unpackhi_epi8(l, h), _mm_unpacklo_epi8(l, h));
        } else {
            idx = _mm256_min_epu8(_mm256_loadu_si256((const __m256i *)(row + c0)), _mm256_set1_epi8(15));
        }
        const __m256i b0 = _mm256_shuffle_epi8(d->plane[0], idx), b1 = _mm256_shuffle_epi8(d->plane[1], idx);
        const __m256i b2 = _mm256_shuffle_epi8(d->plane[2], idx), b3 = _mm256_shuffle_epi8(d->plane[3], idx);
        const __m256i l01 = _mm256_unpacklo_epi8(b0, b1), h01 = _mm256_unpackhi_epi8(b0, b1);
        const __m256i l23 = _mm256_unpacklo_epi8(b2, b3), h23 = _mm256_unpackhi_epi8(b2, b3);
        const __m256 x[4] = {_mm256_castsi256_ps(_mm256_unpacklo_epi16(l01, l23)),
                             _mm256_castsi256_ps(_mm256_unpackhi_epi16(l01, l23)),
                             _mm256_castsi256_ps(_mm256_unpacklo_epi16(h01, h23)),
                             _mm256_castsi256_ps(_mm256_unpackhi_epi16(h01, h23))};
        for (int r = 0; r < RB; r++) {
            const __m256 wv = _mm256_broadcast_ss(p + r * ldp + j);
            for (int cb = 0; cb < 4; cb++) acc[r][cb] = _mm256_fmadd_ps(wv, x[cb], acc[r][cb]);
        }
    }
    for (int r = 0; r < RB; r++) {
        float *orow = o + r * ldo + c0;
        _mm256_storeu_ps(orow, _mm256_permute2f128_ps(acc[r][0], acc[r][1], 0x20));
        _mm256_storeu_ps(orow + 8, _mm256_permute2f128_ps(acc[r][2], acc[r][3], 0x20));
        _mm256_storeu_ps(orow + 16, _mm256_permute2f128_ps(acc[r][0], acc[r][1], 0x31));
        _mm256_storeu_ps(orow + 24, _mm256_permute2f128_ps(acc[r][2], acc[r][3], 0x31));
    }
}

/* All D columns for RB rows: strips of 8*CB (CB = 4 for 1-2 rows, 2 for 3-4)
 * when no affine group boundary falls inside one, then 8-wide strips;
 * 16-entry codebooks for 1-2 rows take the byte-plane strips. */
VQ_INLINE void pv_rows(dec_kind k, int RB, const dec_src *d, int n, int64_t D, const float *p, int64_t ldp,
                       float *o, int64_t ldo)
{
    const int CB = RB <= 2 ? 4 : 2;
    int64_t c = 0;
    if ((k == DEC_NIBBLE_LUT || k == DEC_BYTE_LUT) && RB <= 2)
        for (; c + 32 <= D; c += 32) cb_strip32(k == DEC_NIBBLE_LUT, RB, d, n, p, ldp, o, ldo, c);
    if (!is_kivi(k) || d->g % (8 * CB) == 0)
        for (; c + 8 * CB <= D; c += 8 * CB) pv_strip(k, RB, CB, d, n, p, ldp, o, ldo, c);
    for (; c < D; c += 8) pv_strip(k, RB, 1, d, n, p, ldp, o, ldo, c);
}

VQ_INLINE void pv_any(dec_kind k, int R, const dec_src *d, int n, int64_t D, const float *p, int64_t ldp, float *o,
                      int64_t ldo)
{
    for (int r = 0; r < R; r += 4) {
        const int rb = R - r < 4 ? R - r : 4;
        const float *pr = p + r * ldp;
        float *orow = o + r * ldo;
        switch (rb) {
        case 1: pv_rows(k, 1, d, n, D, pr, ldp, orow, ldo); break;
        case 2: pv_rows(k, 2, d, n, D, pr, ldp, orow, ldo); break;
        case 3: pv_rows(k, 3, d, n, D, pr, ldp, orow, ldo); break;
        default: pv_rows(k, 4, d, n, D, pr, ldp, orow, ldo); break;
        }
    }
}

static void kivi_pv_avx2(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *vs,
                           const float *vz, int64_t GV, int64_t g, const float *p, int64_t ldp, float *o,
                           int64_t ldo)
{
    const dec_src d = {.p = codes, .ld = ldc, .vs = vs, .vz = vz, .GV = GV, .g = g};
    switch (bits) {
    case 2: pv_any(DEC_AFFINE2, R, &d, n, D, p, ldp, o, ldo); break;
    case 4: pv_any(DEC_AFFINE4, R, &d, n, D, p, ldp, o, ldo); break;
    default: pv_any(DEC_AFFINE8, R, &d, n, D, p, ldp, o, ldo); break;
    }
}

static void codebook_pv_avx2(int R, int n, int64_t D, bool packed, const uint8_t *idx, const float *cents,
                             int n_cents, const float *w, int64_t ldw, float *o, int64_t ldo)
{
    dec_src d = {.p = idx, .ld = packed ? D / 2 : D, .cents = cents, .top = _mm256_set1_epi32(n_cents - 1)};
    if (n_cents <= 16) { /* padded table: nibbles need no clamp, bytes clamp to 15 */
        lut16_table(cents, n_cents, &d.lo, &d.hi);
        d.top = _mm256_set1_epi32(15);
        _Alignas(32) float t[8 * 2];
        _mm256_store_ps(t, d.lo);
        _mm256_store_ps(t + 8, d.hi);
        uint8_t pl[4][16];
        for (int i = 0; i < 16; i++) {
            uint32_t u;
            __builtin_memcpy(&u, t + i, 4);
            for (int b = 0; b < 4; b++) pl[b][i] = (uint8_t)(u >> (8 * b));
        }
        for (int b = 0; b < 4; b++) d.plane[b] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pl[b]));
    }
    if (packed) pv_any(DEC_NIBBLE_LUT, R, &d, n, D, w, ldw, o, ldo);
    else if (n_cents <= 16) pv_any(DEC_BYTE_LUT, R, &d, n, D, w, ldw, o, ldo);
    else pv_any(DEC_BYTE_GATHER, R, &d, n, D, w, ldw, o, ldo);
}

static void cvt_f16_avx2(int64_t n, const uint16_t *src, float *dst)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(src[i]);
}

void vq_attn_kernels_init_avx2_direct(vq_attn_kernels *k)
{
    k->kivi_qk = kivi_qk_avx2;
    k->kivi_pv = kivi_pv_avx2;
    k->codebook_pv = codebook_pv_avx2;
    k->cvt_f16 = cvt_f16_avx2;
}
