/* attn_pv8_avx2.h — the inline body of the AVX2 kivi_pv8
 * (attn_pv8_avx2.c: how it works), shared with the fused KIVI block kernel
 * (attn_kivi_int8_avx2.c). Internal; include only from a file built with the
 * AVX2 flags (src/cpu/avx2). */
#ifndef VQ_ATTN_PV8_AVX2_H
#define VQ_ATTN_PV8_AVX2_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_avx2_inline.h"

#if defined(__clang__)
#define VQ_PV8_UNROLL _Pragma("unroll")
#else
#define VQ_PV8_UNROLL _Pragma("GCC unroll 16")
#endif

/* i16 lanes of an accumulator: the sum over 8 token quads of one vpmaddubsw
 * pair each (2 tokens), the code of plane 1 and 3 left 4 times its value
 * (bits in place): |pair| <= 2 * 12 * 127 = 3048, 8 pairs 24384. */
_Static_assert(8 * 2 * 12 * 127 <= 32767, "i16 sums of kivi_pv8 (AVX2) hold 8 pairs of |12 * 127|");

/* One block (n <= 32 tokens) for all rows: the codes of each token quad
 * interleaved (dword = one code byte of 4 tokens), the value scales and
 * zeros zero-padded to 32 tokens. */
typedef struct pv8_avx2_block {
    /* [quad][x][32 bytes]: x = 0: row bytes 0-3 (lane 0) and 16-19 (lane 1),
     * x = 1: 4-7 / 20-23, x = 2: 8-11 / 24-27, x = 3: 12-15 / 28-31, each
     * byte as 4 tokens: lane 0 holds group 0 (x < 2) or 1, lane 1 group 2 or 3 */
    _Alignas(32) uint8_t q[8][4][32];
    const void *vs, *vz; /* [32][4], f16 or f32 (padded f32 copies where n < 32) */
    bool f16;
    _Alignas(32) float vsp[128], vzp[128];
} pv8_avx2_block;

/* Code rows 4 qd .. 4 qd + 3 interleaved; rows at or past n read as zeros
 * (nothing past them is read). */
VQ_INLINE void pv8_quad(const uint8_t *codes, int64_t ldc, int qd, int n, uint8_t (*dst)[32])
{
    __m256i a[4];
    for (int t = 0; t < 4; t++)
        a[t] = 4 * qd + t < n ? _mm256_loadu_si256((const __m256i *)(codes + (4 * qd + t) * ldc)) : _mm256_setzero_si256();
    const __m256i l01 = _mm256_unpacklo_epi8(a[0], a[1]), l23 = _mm256_unpacklo_epi8(a[2], a[3]);
    const __m256i h01 = _mm256_unpackhi_epi8(a[0], a[1]), h23 = _mm256_unpackhi_epi8(a[2], a[3]);
    _mm256_store_si256((__m256i *)dst[0], _mm256_unpacklo_epi16(l01, l23));
    _mm256_store_si256((__m256i *)dst[1], _mm256_unpackhi_epi16(l01, l23));
    _mm256_store_si256((__m256i *)dst[2], _mm256_unpacklo_epi16(h01, h23));
    _mm256_store_si256((__m256i *)dst[3], _mm256_unpackhi_epi16(h01, h23));
}

/* vs / vz: f16 (the fused kernel, whole blocks only) or f32. f16 scales
 * stay f16 for up to 2 rows (converted where each row reads them) and are
 * converted once into f32 copies for more. */
VQ_INLINE void pv8_prep_block(int n, const uint8_t *codes, int64_t ldc, const void *vs, const void *vz, bool f16,
                              int rows, pv8_avx2_block *b)
{
    VQ_PV8_UNROLL
    for (int qd = 0; qd < 8; qd++) pv8_quad(codes, ldc, qd, n, b->q[qd]);
    b->f16 = f16 && rows <= 2;
    if (f16 && rows > 2) {
        for (int i = 0; i < 128; i += 8) {
            _mm256_store_ps(b->vsp + i, load8_ps(vs, true, i));
            _mm256_store_ps(b->vzp + i, load8_ps(vz, true, i));
        }
        b->vs = b->vsp;
        b->vz = b->vzp;
        return;
    }
    if (n == 32) {
        b->vs = vs;
        b->vz = vz;
        return;
    }
    memset(b->vsp, 0, sizeof b->vsp);
    memset(b->vzp, 0, sizeof b->vzp);
    memcpy(b->vsp, vs, sizeof(float) * 4 * (size_t)n);
    memcpy(b->vzp, vz, sizeof(float) * 4 * (size_t)n);
    b->vs = b->vsp;
    b->vz = b->vzp;
}

/* One row's weights: W [quad][2][32 bytes] for vpmaddubsw against
 * q[quad][x] (W[.][x >> 1]: lane 0 the int8 weights of the quad's 4 tokens
 * for group x >> 1, broadcast to its 4 dwords, lane 1 for group 2 + (x >> 1)),
 * and per group step = amax / 127 (NaN where a weight is not finite) and the
 * zero sum, in lanes 0-3. The f32 operations are the scalar definition's:
 * w = p * vs, amax = max |w|, inv = vq_attn_q8_inv, wq = rint(w * inv)
 * clamped to [-127, 127], 0 where the group has a non-finite w. Tokens at or
 * past n weigh 0 (p is not read).
 *
 * Built from in-lane shuffles, 128-bit inserts and integer ops: the
 * lane-crossing permutes (vpermd, vperm2i128) and vcvtps2dq cost 3-4 and 2
 * cycles each on 128-bit cores (Zen 1). amax is the integer max of the
 * |w| bit patterns (ordered as the floats; a non-finite |w| is >= the bits
 * of +inf), and rint(w * inv) is mul_rint_bits' low byte (|w * inv| <= 127.5). */
VQ_INLINE void pv8_prep_row(bool full, int n, const pv8_avx2_block *b, const float *p, uint8_t (*W)[2][32],
                            __m128 *step, __m128 *zs)
{
    _Alignas(32) float pp[32];
    if (!full) {
        memset(pp, 0, sizeof pp);
        memcpy(pp, p, sizeof(float) * (size_t)n);
        p = pp;
    }
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    __m256 w[16], zsum = _mm256_setzero_ps();
    __m256i amax = _mm256_setzero_si256();
    VQ_PV8_UNROLL
    for (int u = 0; u < 16; u++) { /* tokens 2u, 2u + 1: lanes [token][group] as vs */
        const __m256 P = _mm256_set_m128(_mm_broadcast_ss(p + 2 * u + 1), _mm_broadcast_ss(p + 2 * u));
        w[u] = _mm256_mul_ps(P, load8_ps(b->vs, b->f16, 8 * u));
        amax = _mm256_max_epi32(amax, _mm256_and_si256(_mm256_castps_si256(w[u]), absmask));
        zsum = _mm256_fmadd_ps(P, load8_ps(b->vz, b->f16, 8 * u), zsum);
    }
    const __m128i ami = _mm_max_epi32(_mm256_castsi256_si128(amax), _mm256_extracti128_si256(amax, 1));
    const __m128 fin = _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32(F32_INF_BITS), ami)); /* all ones: finite */
    const __m128 am = _mm_castsi128_ps(ami);
    const __m128 inv4 = _mm_div_ps(_mm_set1_ps(127.0f), am);
    /* vq_attn_q8_inv: 0 where not finite or above FLT_MAX (amax 0 or tiny) */
    const __m128 invok = _mm_and_ps(_mm_and_ps(inv4, fin), _mm_cmp_ps(inv4, _mm_set1_ps(3.40282347e38f), _CMP_LE_OQ));
    *step = _mm_blendv_ps(_mm_set1_ps(NAN), _mm_div_ps(am, _mm_set1_ps(127.0f)), fin);
    *zs = _mm_add_ps(_mm256_castps256_ps128(zsum), _mm256_extractf128_ps(zsum, 1));
    const __m256 inv = _mm256_set_m128(invok, invok);
    const __m256i fmask = _mm256_castps_si256(_mm256_set_m128(fin, fin));
    /* the low byte of dword g (group g) of register i to byte 4 g + i */
    const __m256i slot[4] = {
        _mm256_setr_epi8(0, -1, -1, -1, 4, -1, -1, -1, 8, -1, -1, -1, 12, -1, -1, -1, 0, -1, -1, -1, 4, -1, -1, -1, 8,
                         -1, -1, -1, 12, -1, -1, -1),
        _mm256_setr_epi8(-1, 0, -1, -1, -1, 4, -1, -1, -1, 8, -1, -1, -1, 12, -1, -1, -1, 0, -1, -1, -1, 4, -1, -1, -1,
                         8, -1, -1, -1, 12, -1, -1),
        _mm256_setr_epi8(-1, -1, 0, -1, -1, -1, 4, -1, -1, -1, 8, -1, -1, -1, 12, -1, -1, -1, 0, -1, -1, -1, 4, -1, -1,
                         -1, 8, -1, -1, -1, 12, -1),
        _mm256_setr_epi8(-1, -1, -1, 0, -1, -1, -1, 4, -1, -1, -1, 8, -1, -1, -1, 12, -1, -1, -1, 0, -1, -1, -1, 4, -1,
                         -1, -1, 8, -1, -1, -1, 12)};
    /* bytes 4 k .. 4 k + 3 (tokens of a quad) to every dword of both lanes */
    const __m256i bcast[4] = {_mm256_set1_epi32(0x03020100), _mm256_set1_epi32(0x07060504),
                              _mm256_set1_epi32(0x0b0a0908), _mm256_set1_epi32(0x0f0e0d0c)};
    VQ_PV8_UNROLL
    for (int v = 0; v < 4; v++) { /* tokens 8v .. 8v + 7: quads 2v, 2v + 1 */
        __m256i e = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            const __m256i x = mul_rint_bits(w[4 * v + i], inv);
            e = _mm256_or_si256(e, _mm256_shuffle_epi8(_mm256_and_si256(x, fmask), slot[i]));
        }
        /* e: lane 0 the even tokens 8v + 2i, lane 1 the odd ones, slot 4 g + i;
         * interleaved: lo = group 0 then 1, hi = 2 then 3, tokens 8v .. 8v + 7 */
        const __m128i ev = _mm256_castsi256_si128(e), od = _mm256_extracti128_si256(e, 1);
        const __m256i g = _mm256_set_m128i(_mm_unpackhi_epi8(ev, od), _mm_unpacklo_epi8(ev, od));
        _mm256_store_si256((__m256i *)W[2 * v][0], _mm256_shuffle_epi8(g, bcast[0]));
        _mm256_store_si256((__m256i *)W[2 * v + 1][0], _mm256_shuffle_epi8(g, bcast[1]));
        _mm256_store_si256((__m256i *)W[2 * v][1], _mm256_shuffle_epi8(g, bcast[2]));
        _mm256_store_si256((__m256i *)W[2 * v + 1][1], _mm256_shuffle_epi8(g, bcast[3]));
    }
}

/* One quad of a pass: acc [NR][NK] += planes k0 .. k0 + NK - 1 of code set
 * x times the rows' weights. */
VQ_INLINE void pv8_quad_mac(int NR, int x, int k0, int NK, int qd, const pv8_avx2_block *b,
                            uint8_t (*const *W)[2][32], __m256i (*acc)[4])
{
    const __m256i m03 = _mm256_set1_epi8(0x03), m0c = _mm256_set1_epi8(0x0c);
    const __m256i c = _mm256_load_si256((const __m256i *)b->q[qd][x]);
    const __m256i s = k0 + NK > 2 ? _mm256_srli_epi16(c, 4) : c;
    __m256i e[4];
    for (int k = 0; k < NK; k++) { /* planes 0, 2: the code; 1, 3: 4 times it */
        const int kk = k0 + k;
        e[k] = _mm256_and_si256(kk >= 2 ? s : c, kk % 2 ? m0c : m03);
    }
    for (int r = 0; r < NR; r++) {
        const __m256i w = _mm256_load_si256((const __m256i *)W[r][qd][x >> 1]);
        /* every partial sum within the bound above */
        for (int k = 0; k < NK; k++) madd_u8s8_acc16(&acc[r][k], e[k], w);
    }
}

/* acc [NR][NK] += the pass's planes k0 .. k0 + NK - 1 of code set x times
 * the rows' weights, over the 8 quads; then the i32 sums (plane k's divided
 * by 4 where the bits stayed in place) into I [r][x][k]. The quad loop is
 * unrolled for up to 4 accumulators and rolled beyond (unrolled, GCC keeps
 * other passes' values live and spills the 8 accumulators of 3-4 rows). */
VQ_INLINE void pv8_pass(int NR, int x, int k0, int NK, const pv8_avx2_block *b, uint8_t (*const *W)[2][32],
                        int32_t (*I)[4][4][8])
{
    __m256i acc[4][4];
    for (int r = 0; r < NR; r++)
        for (int k = 0; k < NK; k++) acc[r][k] = _mm256_setzero_si256();
    if (NR * NK <= 4) {
        VQ_PV8_UNROLL
        for (int qd = 0; qd < 8; qd++) pv8_quad_mac(NR, x, k0, NK, qd, b, W, acc);
    } else {
#pragma GCC unroll 1
        for (int qd = 0; qd < 8; qd++) pv8_quad_mac(NR, x, k0, NK, qd, b, W, acc);
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < NR; r++)
        for (int k = 0; k < NK; k++) {
            const int kk = k0 + k;
            __m256i v = _mm256_madd_epi16(acc[r][k], ones);
            if (kk % 2) v = _mm256_srai_epi32(v, 2); /* exact: a multiple of 4 */
            _mm256_store_si256((__m256i *)I[r][x][kk], v);
        }
}

/* o [r] (vq_attn_pv8_pos order) += step * isum + zs from I [r]: channel
 * 32 g + 4 b + k sits in I[x][k] lane 4 (g / 2) + (b % 4) where x = 2 (g % 2)
 * + b / 4; pos 64 h + 16 k + 2 b + i for group 2 h + i. The halves move by
 * 128-bit inserts and extracts, not vperm2i128 (3 cycles on 128-bit cores). */
VQ_INLINE void pv8_out(const int32_t (*I)[4][8], __m128 step, __m128 zs, float *o)
{
    /* lanes of (h, pos 2b + i): group 2 h + i */
    const __m128 st01 = _mm_shuffle_ps(step, step, 0x44), st23 = _mm_shuffle_ps(step, step, 0xee);
    const __m128 zs01 = _mm_shuffle_ps(zs, zs, 0x44), zs23 = _mm_shuffle_ps(zs, zs, 0xee);
    const __m256 s0 = _mm256_set_m128(st01, st01), s1 = _mm256_set_m128(st23, st23);
    const __m256 z0 = _mm256_set_m128(zs01, zs01), z1 = _mm256_set_m128(zs23, zs23);
    for (int k = 0; k < 4; k++)
        for (int bh = 0; bh < 2; bh++) { /* b 0-3 (x 0, 2) or 4-7 (x 1, 3) */
            const __m256i A = _mm256_load_si256((const __m256i *)I[bh][k]), B = _mm256_load_si256((const __m256i *)I[2 + bh][k]);
            const __m256i lo = _mm256_unpacklo_epi32(A, B), hi = _mm256_unpackhi_epi32(A, B);
            const __m256 f0 = _mm256_cvtepi32_ps(_mm256_inserti128_si256(lo, _mm256_castsi256_si128(hi), 1));
            const __m256 f1 = _mm256_cvtepi32_ps(_mm256_inserti128_si256(hi, _mm256_extracti128_si256(lo, 1), 0));
            float *d0 = o + 16 * k + 8 * bh, *d1 = o + 64 + 16 * k + 8 * bh;
            _mm256_storeu_ps(d0, _mm256_add_ps(_mm256_loadu_ps(d0), _mm256_fmadd_ps(f0, s0, z0)));
            _mm256_storeu_ps(d1, _mm256_add_ps(_mm256_loadu_ps(d1), _mm256_fmadd_ps(f1, s1, z1)));
        }
}

/* RB <= 4 rows against one prepared block: passes of at most 8
 * accumulators (16 ymm registers), each over all 8 quads. */
VQ_INLINE void pv8_rows(int RB, bool full, int n, const pv8_avx2_block *b, const float *p, int64_t ldp, float *o,
                        int64_t ldo)
{
    _Alignas(32) uint8_t W[4][8][2][32];
    _Alignas(32) int32_t I[4][4][4][8];
    __m128 step[4], zs[4];
    for (int r = 0; r < RB; r++) pv8_prep_row(full, n, b, p + r * ldp, W[r], &step[r], &zs[r]);
    uint8_t (*const Wr[4])[2][32] = {W[0], W[1], W[2], W[3]};
    /* code set x and first plane as constants (each pass its own loop) */
#define VQ_PV8_PASSES(NR, NK)                                                 \
    do {                                                                       \
        for (int k0_ = 0; k0_ < 4; k0_ += NK) pv8_pass(NR, 0, k0_, NK, b, Wr, I); \
        for (int k0_ = 0; k0_ < 4; k0_ += NK) pv8_pass(NR, 1, k0_, NK, b, Wr, I); \
        for (int k0_ = 0; k0_ < 4; k0_ += NK) pv8_pass(NR, 2, k0_, NK, b, Wr, I); \
        for (int k0_ = 0; k0_ < 4; k0_ += NK) pv8_pass(NR, 3, k0_, NK, b, Wr, I); \
    } while (0)
    if (RB <= 2) VQ_PV8_PASSES(RB, 4);
    else VQ_PV8_PASSES(RB, 2);
#undef VQ_PV8_PASSES
    for (int r = 0; r < RB; r++) pv8_out((const int32_t(*)[4][8])I[r], step[r], zs[r], o + r * ldo);
}

VQ_INLINE void pv8_all(bool full, int R, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                       const float *p, int64_t ldp, float *o, int64_t ldo)
{
    pv8_avx2_block b;
    pv8_prep_block(n, codes, ldc, vs, vz, false, R, &b);
    for (int r0 = 0; r0 < R; r0 += 4) {
        const float *pr = p + r0 * ldp;
        float *orow = o + r0 * ldo;
        switch (R - r0 < 4 ? R - r0 : 4) {
        case 1: pv8_rows(1, full, n, &b, pr, ldp, orow, ldo); break;
        case 2: pv8_rows(2, full, n, &b, pr, ldp, orow, ldo); break;
        case 3: pv8_rows(3, full, n, &b, pr, ldp, orow, ldo); break;
        default: pv8_rows(4, full, n, &b, pr, ldp, orow, ldo); break;
        }
    }
}

#endif /* VQ_ATTN_PV8_AVX2_H */
