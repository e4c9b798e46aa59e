/* attn_avx2_inline.h — register-level decoders shared by the AVX2 attention
 * files (compiled only with AVX2 flags). */
#ifndef VQ_ATTN_AVX2_INLINE_H
#define VQ_ATTN_AVX2_INLINE_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#include "attention/attn_kernels.h" /* vq_attn_elt */

#ifndef VQ_INLINE
#define VQ_INLINE static inline __attribute__((always_inline))
#endif

/* Nibbles c .. c+7 of a packed row (low nibble first) as 8 int32 lanes. */
VQ_INLINE __m256i nibbles8(const uint8_t *row, int64_t c)
{
    uint32_t w;
    __builtin_memcpy(&w, row + c / 2, 4);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                            _mm256_set1_epi32(15));
}

/* Codes c .. c+7 of a row as 8 int32 lanes; bits 2, 4 or 8 (c % 8 == 0). */
VQ_INLINE __m256i codes8(const uint8_t *row, int bits, int64_t c)
{
    if (bits == 8) return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + c)));
    if (bits == 4) return nibbles8(row, c);
    uint16_t w;
    __builtin_memcpy(&w, row + c / 4, 2);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                            _mm256_set1_epi32(3));
}

/* Centroids of 8 indices (int32 lanes, < 16) from a 16-entry table in two registers. */
VQ_INLINE __m256 lut16(__m256i idx, __m256 lo, __m256 hi)
{
    const __m256 a = _mm256_permutevar8x32_ps(lo, idx), b = _mm256_permutevar8x32_ps(hi, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

/* A codebook of n_cents <= 16 centroids in two registers, padded with the
 * last centroid so that any index < 16 reads the clamped value. */
VQ_INLINE void lut16_table(const float *cents, int n_cents, __m256 *lo, __m256 *hi)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i in_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_cents), lane);
    const __m256i in_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_cents - 8), lane);
    const __m256 last = _mm256_set1_ps(cents[n_cents - 1]);
    *lo = _mm256_blendv_ps(last, _mm256_maskload_ps(cents, in_lo), _mm256_castsi256_ps(in_lo));
    *hi = _mm256_blendv_ps(last, _mm256_maskload_ps(cents + 8, in_hi), _mm256_castsi256_ps(in_hi));
}

/* Codebook indices c .. c+7 of token j as int32 lanes, clamped to top. */
VQ_INLINE __m256i cb_index8(const uint8_t *idx, bool packed, int64_t D, int64_t j, int64_t c, __m256i top)
{
    const __m256i i8 = packed ? nibbles8(idx + j * (D / 2), c)
                              : _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(idx + j * D + c)));
    return _mm256_min_epu32(i8, top);
}

/* acc += vpmaddubsw(u, s) with a wrapping vpaddw: u8 x s8 products, pairs
 * summed to i16 (saturating: callers bound a pair), added to the i16 lanes.
 * In asm because GCC reassociates a chain of intrinsic adds into all
 * products first (spilled to the stack), and the saturating vpaddsw, which it
 * leaves alone, competes with the multiplies for the one multiply pipe of
 * 128-bit cores (Zen 1: 2.5 against 2.0 cycles per vpmaddubsw). Exact where
 * every lane's true sum is within i16. */
VQ_INLINE void madd_u8s8_acc16(__m256i *acc, __m256i u, const __m256i s)
{
    __m256i t;
    __asm__("vpmaddubsw %[s], %[u], %[t]\n\t"
            "vpaddw %[t], %[acc], %[acc]"
            : [acc] "+x"(*acc), [t] "=&x"(t)
            : [u] "x"(u), [s] "xm"(s));
}

/* The sums of the 16 i16 lanes of a, b, c and d as i32 {a, b, c, d}: a
 * tree of shuffles and i16 adds (vpunpck* and vpaddw, the cheap ports), 8
 * lanes at a time, then one vpmaddwd. Exact where 8 lanes of each sum fit
 * in i16. */
VQ_INLINE __m128i hsum4_epi16(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ab = _mm256_add_epi16(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    const __m256i cd = _mm256_add_epi16(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    const __m256i abcd = _mm256_add_epi16(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
    const __m128i f = _mm_add_epi16(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
    return _mm_madd_epi16(f, _mm_set1_epi16(1));
}

/* rint(a * b) (nearest even, as vcvtps2dq) in the low bits of each lane,
 * for |a * b| <= 2^22: the rounded product plus 1.5 * 2^23, whose low byte
 * is rint(a * b) as int8 where it is in [-128, 127]; NaN and inf lanes give
 * other bits. Cheaper than vcvtps2dq on 128-bit cores (an add against 2
 * cycles). The empty asm keeps the compiler from contracting the multiply
 * and the add into one FMA, which would round once, not twice. */
VQ_INLINE __m256i mul_rint_bits(__m256 a, __m256 b)
{
    __m256 p = _mm256_mul_ps(a, b);
    __asm__("" : "+x"(p));
    return _mm256_castps_si256(_mm256_add_ps(p, _mm256_set1_ps(12582912.0f)));
}

/* |x| bit patterns below this are finite floats; +inf and NaN are at or
 * above it (the integer order of |x| bits is the float order). */
enum { F32_INF_BITS = 0x7f800000 };

/* Elements i .. i + 7 of an f32, f16 or bf16 array as f32 (exact). */
VQ_INLINE __m256 load8(const void *base, vq_attn_elt e, int64_t i)
{
    switch (e) {
    case VQ_ATTN_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
    case VQ_ATTN_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i))), 16));
    default: return _mm256_loadu_ps((const float *)base + i);
    }
}

/* Floats i .. i + 7 of an f16 or f32 array (the scale rows of the integer
 * kernels). */
VQ_INLINE __m256 load8_ps(const void *p, bool f16, int64_t i) { return load8(p, f16 ? VQ_ATTN_F16 : VQ_ATTN_F32, i); }

/* Sum of the 8 lanes. */
VQ_INLINE float hsum8(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* Prefetches ranges i0 .. i1-1 of pf / bytes (NULL: none) into L1, four
 * lines per loop step (the ranges are 256 bytes or multiples of it): the
 * loop's scalar increments and branches otherwise take issue slots from the
 * fused kernels' vector work. */
VQ_INLINE void prefetch_ranges(const void *const *pf, const int64_t *bytes, int i0, int i1)
{
    for (int i = i0; i < i1; i++) {
        const char *p = pf[i];
        if (p == NULL) continue;
        const int64_t n = bytes[i];
        int64_t off = 0;
        for (; off + 256 <= n; off += 256) {
            _mm_prefetch(p + off, _MM_HINT_T0);
            _mm_prefetch(p + off + 64, _MM_HINT_T0);
            _mm_prefetch(p + off + 128, _MM_HINT_T0);
            _mm_prefetch(p + off + 192, _MM_HINT_T0);
        }
        for (; off < n; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
    }
}

#endif
