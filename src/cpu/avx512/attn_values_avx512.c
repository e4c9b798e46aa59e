/* attn_values_avx512.c — AVX-512 p.V for few rows (decode) straight from
 * compressed values: 16 lanes per register, each token's codes decoded once
 * per register and used by all rows of the kv head (up to 4 per pass; the
 * accumulators of 4 rows x 64 columns stay in registers for a whole block).
 *
 * Affine values (2/4-bit, groups of g % 16 == 0 channels): 16 codes come
 * from one broadcast word and a variable shift, and become floats through a
 * vpermps table (which reads the low 4 bits of each lane, so the shifted-in
 * neighbour bits need no mask). The per-token scale multiplies the decoded
 * register once for all rows; the zero term is folded:
 * sum_j p_j (code vs + vz) = sum_j (p_j vs) code + sum_j p_j vz, the second
 * sum kept per row and group (one FMA per token) and added once per block.
 * Codebook values (<= 16 centroids): 16 nibble-packed index bytes become 16
 * lanes; vpermps on the centroid table gives the even channels from the low
 * nibbles and, after one shift, the odd channels, so 32 channels cost four
 * shuffle-class uops; the even/odd accumulators are interleaved back once per
 * block. One-byte indices (clamped to 15) are widened to 16-bit lanes and
 * take the same path, so both layouts give bit-identical outputs. Other
 * layouts keep the AVX2 kernels. */
#include <immintrin.h>

#include "attention/attn_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

static void (*kivi_pv_fallback)(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc,
                                  const float *vs, const float *vz, int64_t GV, int64_t g, const float *p,
                                  int64_t ldp, float *o, int64_t ldo);
static void (*codebook_pv_fallback)(int R, int n, int64_t D, bool packed, const uint8_t *idx, const float *cents,
                                    int n_cents, const float *w, int64_t ldw, float *o, int64_t ldo);

/* Codes c .. c+15 of a row as floats (c % 16 == 0). */
VQ_INLINE __m512 codes16(const uint8_t *row, int bits, int64_t c, __m512 table)
{
    if (bits == 2) {
        uint32_t w;
        __builtin_memcpy(&w, row + c / 4, 4);
        const __m512i sh = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        return _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_set1_epi32((int)w), sh), table);
    }
    uint64_t w;
    __builtin_memcpy(&w, row + c / 2, 8);
    const __m512i sh = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i lohi = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                                  _mm512_castsi128_si512(_mm_cvtsi64_si128((long long)w)));
    return _mm512_permutexvar_ps(_mm512_srlv_epi32(lohi, sh), table);
}

/* o[r][c0 .. c0 + 16 CW) += sum_j p[r][j] (code vs + vz), RB rows. The zero
 * sums of the strip's groups (at most CW) sit in the lanes of one register
 * per row: lane k = group c0 / g + k. */
VQ_INLINE void kivi_strip(int bits, int RB, int CW, int n, const uint8_t *codes, int64_t ldc, const float *vs,
                            const float *vz, int64_t GV, int64_t g, const float *p, int64_t ldp, float *o,
                            int64_t ldo, int64_t c0, __m512 table)
{
    __m512 acc[4][4], zs[4];
    for (int r = 0; r < RB; r++) {
        zs[r] = _mm512_setzero_ps();
        for (int u = 0; u < CW; u++) acc[r][u] = _mm512_setzero_ps();
    }
    const int64_t g0 = c0 / g, ng = (c0 + 16 * CW - 1) / g - g0 + 1;
    const __mmask16 gm = (__mmask16)((1u << ng) - 1u);
    for (int j = 0; j < n; j++) {
        const uint8_t *row = codes + j * ldc;
        __m512 x[4];
        for (int u = 0; u < CW; u++) {
            const int64_t c = c0 + 16 * u;
            x[u] = _mm512_mul_ps(codes16(row, bits, c, table), _mm512_set1_ps(vs[j * GV + c / g]));
        }
        const __m512 z = _mm512_maskz_loadu_ps(gm, vz + j * GV + g0);
        for (int r = 0; r < RB; r++) {
            const __m512 pr = _mm512_set1_ps(p[r * ldp + j]);
            for (int u = 0; u < CW; u++) acc[r][u] = _mm512_fmadd_ps(pr, x[u], acc[r][u]);
            zs[r] = _mm512_fmadd_ps(pr, z, zs[r]);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int u = 0; u < CW; u++) {
            const int64_t c = c0 + 16 * u;
            const __m512 z = _mm512_permutexvar_ps(_mm512_set1_epi32((int)(c / g - g0)), zs[r]);
            float *dst = o + r * ldo + c;
            _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), _mm512_add_ps(acc[r][u], z)));
        }
}

/* All D columns of rb <= 4 rows: 64-column strips, then 16-column ones. */
static void kivi_group(int bits, int rb, int n, int64_t D, const uint8_t *codes, int64_t ldc, const float *vs,
                         const float *vz, int64_t GV, int64_t g, const float *p, int64_t ldp, float *o, int64_t ldo)
{
    const __m512 table = bits == 2 ? _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3)
                                   : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t c = 0; c < D;) {
        const int CW = c + 64 <= D ? 4 : 1;
#define VQ_AFF(B, RB, W) kivi_strip(B, RB, W, n, codes, ldc, vs, vz, GV, g, p, ldp, o, ldo, c, table)
        switch ((bits * 8 + rb) * 2 + (CW == 4)) {
        case 34: VQ_AFF(2, 1, 1); break;
        case 35: VQ_AFF(2, 1, 4); break;
        case 36: VQ_AFF(2, 2, 1); break;
        case 37: VQ_AFF(2, 2, 4); break;
        case 38: VQ_AFF(2, 3, 1); break;
        case 39: VQ_AFF(2, 3, 4); break;
        case 40: VQ_AFF(2, 4, 1); break;
        case 41: VQ_AFF(2, 4, 4); break;
        case 66: VQ_AFF(4, 1, 1); break;
        case 67: VQ_AFF(4, 1, 4); break;
        case 68: VQ_AFF(4, 2, 1); break;
        case 69: VQ_AFF(4, 2, 4); break;
        case 70: VQ_AFF(4, 3, 1); break;
        case 71: VQ_AFF(4, 3, 4); break;
        case 72: VQ_AFF(4, 4, 1); break;
        default: VQ_AFF(4, 4, 4); break;
        }
#undef VQ_AFF
        c += 16 * CW;
    }
}

static void kivi_pv_avx512(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *vs,
                             const float *vz, int64_t GV, int64_t g, const float *p, int64_t ldp, float *o,
                             int64_t ldo)
{
    if ((bits != 2 && bits != 4) || g % 16 != 0 || D % 16 != 0) {
        kivi_pv_fallback(R, n, D, bits, codes, ldc, vs, vz, GV, g, p, ldp, o, ldo);
        return;
    }
    for (int r0 = 0; r0 < R; r0 += 4)
        kivi_group(bits, R - r0 < 4 ? R - r0 : 4, n, D, codes, ldc, vs, vz, GV, g, p + r0 * ldp, ldp, o + r0 * ldo,
                     ldo);
}

/* Indices of channels c0 .. c0+31 of a row as 16 lanes whose low 4 bits are
 * the even channels' indices and bits 16..19 (packed: 4..7) the odd ones'. */
VQ_INLINE __m512i cb_lanes(const uint8_t *row, bool packed, int64_t c0)
{
    if (packed) return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + c0 / 2)));
    const __m256i b = _mm256_min_epu8(_mm256_loadu_si256((const __m256i *)(row + c0)), _mm256_set1_epi8(15));
    return _mm512_cvtepu8_epi16(b);
}

/* Codebook strip: channels c0 .. c0 + 32 CW of RB rows. Packed and one-byte
 * indices go through the same arithmetic (bit-identical outputs). */
VQ_INLINE void cb_strip(bool packed, int RB, int CW, int n, const uint8_t *idx, int64_t ld, const __m512 cents,
                        const float *w, int64_t ldw, float *o, int64_t ldo, int64_t c0)
{
    __m512 ev[4][2], od[4][2];
    for (int r = 0; r < RB; r++)
        for (int u = 0; u < CW; u++) ev[r][u] = od[r][u] = _mm512_setzero_ps();
    for (int j = 0; j < n; j++) {
        const uint8_t *row = idx + j * ld;
        for (int u = 0; u < CW; u++) {
            const __m512i b = cb_lanes(row, packed, c0 + 32 * u);
            const __m512 e = _mm512_permutexvar_ps(b, cents);
            const __m512 d = _mm512_permutexvar_ps(_mm512_srli_epi32(b, packed ? 4 : 16), cents);
            for (int r = 0; r < RB; r++) {
                const __m512 wr = _mm512_set1_ps(w[r * ldw + j]);
                ev[r][u] = _mm512_fmadd_ps(wr, e, ev[r][u]);
                od[r][u] = _mm512_fmadd_ps(wr, d, od[r][u]);
            }
        }
    }
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int r = 0; r < RB; r++)
        for (int u = 0; u < CW; u++) {
            float *dst = o + r * ldo + c0 + 32 * u;
            _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), _mm512_permutex2var_ps(ev[r][u], lo, od[r][u])));
            _mm512_storeu_ps(dst + 16,
                             _mm512_add_ps(_mm512_loadu_ps(dst + 16), _mm512_permutex2var_ps(ev[r][u], hi, od[r][u])));
        }
}

/* All D columns of rb <= 4 rows: 64-column strips, then 32-column ones. */
static void cb_group(bool packed, int rb, int n, int64_t D, const uint8_t *idx, const __m512 table, const float *w,
                     int64_t ldw, float *o, int64_t ldo)
{
    const int64_t ld = packed ? D / 2 : D;
    for (int64_t c = 0; c < D;) {
        const int CW = c + 64 <= D ? 2 : 1;
#define VQ_CB(P, RB, W) cb_strip(P, RB, W, n, idx, ld, table, w, ldw, o, ldo, c)
        switch ((rb * 2 + packed) * 2 + (CW == 2)) {
        case 4: VQ_CB(false, 1, 1); break;
        case 5: VQ_CB(false, 1, 2); break;
        case 6: VQ_CB(true, 1, 1); break;
        case 7: VQ_CB(true, 1, 2); break;
        case 8: VQ_CB(false, 2, 1); break;
        case 9: VQ_CB(false, 2, 2); break;
        case 10: VQ_CB(true, 2, 1); break;
        case 11: VQ_CB(true, 2, 2); break;
        case 12: VQ_CB(false, 3, 1); break;
        case 13: VQ_CB(false, 3, 2); break;
        case 14: VQ_CB(true, 3, 1); break;
        case 15: VQ_CB(true, 3, 2); break;
        case 16: VQ_CB(false, 4, 1); break;
        case 17: VQ_CB(false, 4, 2); break;
        case 18: VQ_CB(true, 4, 1); break;
        default: VQ_CB(true, 4, 2); break;
        }
#undef VQ_CB
        c += 32 * CW;
    }
}

static void codebook_pv_avx512(int R, int n, int64_t D, bool packed, const uint8_t *idx, const float *cents,
                               int n_cents, const float *w, int64_t ldw, float *o, int64_t ldo)
{
    if (n_cents > 16 || D % 32 != 0) {
        codebook_pv_fallback(R, n, D, packed, idx, cents, n_cents, w, ldw, o, ldo);
        return;
    }
    /* the table padded with the last centroid: a nibble >= n_cents reads it (the clamp) */
    float t[16];
    for (int i = 0; i < 16; i++) t[i] = cents[i < n_cents ? i : n_cents - 1];
    const __m512 table = _mm512_loadu_ps(t);
    for (int r0 = 0; r0 < R; r0 += 4)
        cb_group(packed, R - r0 < 4 ? R - r0 : 4, n, D, idx, table, w + r0 * ldw, ldw, o + r0 * ldo, ldo);
}

/* f16 -> f32, 16 lanes per step and a masked tail (the per-block scales and
 * zeros of KIVI caches). */
/* Whole runs of 16 with plain loads and stores: the kernels read dst right
 * away, and a load cannot take its data from a masked store in flight (it
 * waits for the store to reach L1). */
static void cvt_f16_avx512(int64_t n, const uint16_t *src, float *dst)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
    }
}

void vq_attn_kernels_init_avx512_values(vq_attn_kernels *k)
{
    k->cvt_f16 = cvt_f16_avx512;
    kivi_pv_fallback = k->kivi_pv;
    codebook_pv_fallback = k->codebook_pv;
    k->kivi_pv = kivi_pv_avx512;
    k->codebook_pv = codebook_pv_avx512;
}
