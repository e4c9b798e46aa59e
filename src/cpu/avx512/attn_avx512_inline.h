/* attn_avx512_inline.h — small AVX-512 helpers shared by the attention
 * kernels of src/cpu/avx512 (include after immintrin.h). Internal. */
#ifndef VQ_ATTN_AVX512_INLINE_H
#define VQ_ATTN_AVX512_INLINE_H

#include <immintrin.h>
#include <stdint.h>

#include "cpu/avx2/attn_avx2_inline.h" /* prefetch_ranges */

#ifndef VQ_INLINE
#define VQ_INLINE static inline __attribute__((always_inline))
#endif

/* Before fixed-count loops of the integer kernels' bodies, which GCC -O3
 * otherwise keeps rolled, copying the loop-carried accumulators between
 * registers every iteration. VQ_UNROLL: kivi_qk8's loops (-15 % in
 * isolation at four rows); the fused block kernel (attn_kivi_int8_vnnivbmi.c)
 * defines it empty before including, as unrolled there the whole block got
 * no faster (1200-1280 against 1190-1230 TSC ticks per block in cache).
 * VQ_UNROLL_ALWAYS: kivi_pv8's loop over token quads, everywhere (-9 % in
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

/* prefetch_ranges: attn_avx2_inline.h (included above), shared with the AVX2 fused kernels. */

#endif /* VQ_ATTN_AVX512_INLINE_H */
