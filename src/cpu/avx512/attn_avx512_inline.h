/* attn_avx512_inline.h — small AVX-512 helpers shared by the attention
 * kernels of src/cpu/avx512 (include after immintrin.h). Internal. */
#ifndef VQ_ATTN_AVX512_INLINE_H
#define VQ_ATTN_AVX512_INLINE_H

#include <immintrin.h>
#include <stdint.h>

#ifndef VQ_INLINE
#define VQ_INLINE static inline __attribute__((always_inline))
#endif

/* Before fixed-count loops of the integer kernels' bodies, which GCC -O3
 * otherwise keeps rolled, copying the loop-carried accumulators between
 * registers every iteration. VQ_UNROLL: affine_qk8's loops (-15 % in
 * isolation at four rows); the fused block kernel (attn_kivi8_vnnivbmi.c)
 * defines it empty before including, as unrolled there the whole block got
 * no faster (1200-1280 against 1190-1230 TSC ticks per block in cache).
 * VQ_UNROLL_ALWAYS: affine_pv8's loop over token quads, everywhere (-9 % in
 * isolation at four rows, -3 % in the fused kernel). */
#if defined(__clang__)
#define VQ_UNROLL_ALWAYS _Pragma("unroll")
#else
#define VQ_UNROLL_ALWAYS _Pragma("GCC unroll 16")
#endif
#if defined(VQ_UNROLL)
/* the including file chose */
#elif defined(__clang__)
#define VQ_UNROLL _Pragma("unroll")
#else
#define VQ_UNROLL _Pragma("GCC unroll 16")
#endif

/* max |.| of two registers, sign cleared (vrangeps: one uop; ignores quiet NaNs) */
VQ_INLINE __m512 absmax(__m512 a, __m512 b) { return _mm512_range_ps(a, b, 0x0B); }

/* Per-row reduction of four registers at once: lane 4 r + k of the result
 * (every k) = op over the 16 lanes of v[r]. Two 256-bit and one 128-bit
 * exchange, then two in-lane ones: 9 shuffles and 5 ops for four rows, where
 * four _mm512_reduce_*_ps take 16 and 16 (and a dependent chain each). */
#define VQ_REDUCE4(op, v)                                                                                   \
    ({                                                                                                       \
        const __m512 a_ = op(_mm512_shuffle_f32x4(v[0], v[1], 0x44), _mm512_shuffle_f32x4(v[0], v[1], 0xEE)); \
        const __m512 b_ = op(_mm512_shuffle_f32x4(v[2], v[3], 0x44), _mm512_shuffle_f32x4(v[2], v[3], 0xEE)); \
        __m512 c_ = op(_mm512_shuffle_f32x4(a_, b_, 0x88), _mm512_shuffle_f32x4(a_, b_, 0xDD));               \
        c_ = op(c_, _mm512_permute_ps(c_, 0xB1));                                                           \
        op(c_, _mm512_permute_ps(c_, 0x4E));                                                                \
    })

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

#endif /* VQ_ATTN_AVX512_INLINE_H */
