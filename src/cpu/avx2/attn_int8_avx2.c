/* attn_int8_avx2.c — AVX2 integer key scores for 2/4-bit affine keys (see
 * attn_kernels.h, kivi_q8 / kivi_qk8): the query quantised to int8
 * planes, each 32-byte chunk of a code row split into its K = 8/bits shifts
 * with one shift and one mask, multiplied against the matching run of a
 * plane by vpmaddubsw (u8 code x s8 query, pairs summed to i16), the i16
 * sums of a token's planes and chunks added as i16 (vpaddw) and widened
 * once by vpmaddwd. i16 cannot overflow: a pair is at most 2 * 15 * 127 =
 * 3810 and a lane sums K * (D * bits / 256) <= 8 pairs (30480 < 32767 at 4
 * bits, D 256). At 2 bits and D <= 128 a lane is at most 4 * 2 * 3 * 127 =
 * 3048, so 8 lanes of a token still fit in i16: the horizontal sums then go
 * by i16 shuffles and adds (hsum4_epi16), one vpmaddwd per four tokens
 * instead of one per token (the multiply pipe is the scarce one on 128-bit
 * cores such as Zen 1).
 * Decoded chunks are shared by up to 4 rows; tokens go 4 (1-2 rows) or 2
 * (3-4 rows) at a time so that enough independent accumulators hide latency. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_avx2_inline.h"
#include "cpu/avx2/attn_q8_avx2.h" /* the bodies */

/* bits as a constant in each instance: store_planes' byte masks fold. */
static void kivi_q8_avx2(int R, int64_t D, int bits, const float *q, int64_t ldq, const float *scale,
                           const float *zero, int8_t *xq, float *dz)
{
    if (bits == 2) q8_rows_avx2(R, D, 2, q, ldq, scale, zero, xq, dz);
    else q8_rows_avx2(R, D, 4, q, ldq, scale, zero, xq, dz);
}

/* One group of rb <= 4 rows: the instance for its code width and row count. */
static void qk8_group(int bits, int rb, int n, int64_t D, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                      const float *dz, float *s, int64_t lds)
{
    switch (bits * 8 + rb) {
    case 17: qk8_rows(2, 1, n, D, codes, ldc, xq, dz, s, lds); break;
    case 18: qk8_rows(2, 2, n, D, codes, ldc, xq, dz, s, lds); break;
    case 19: qk8_rows(2, 3, n, D, codes, ldc, xq, dz, s, lds); break;
    case 20: qk8_rows(2, 4, n, D, codes, ldc, xq, dz, s, lds); break;
    case 33: qk8_rows(4, 1, n, D, codes, ldc, xq, dz, s, lds); break;
    case 34: qk8_rows(4, 2, n, D, codes, ldc, xq, dz, s, lds); break;
    case 35: qk8_rows(4, 3, n, D, codes, ldc, xq, dz, s, lds); break;
    default: qk8_rows(4, 4, n, D, codes, ldc, xq, dz, s, lds); break;
    }
}

/* Rows in groups of 4; three rows (GQA 3:1 at decode) as 2 + 1, whose
 * tiles of 4 tokens store their scores as vectors (3 rows take pairs of
 * tokens and a scalar store per score: slower, though each chunk is decoded
 * once); the same integer dots and fmas, so the same scores. */
static void kivi_qk8_avx2(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                            const float *dz, float *s, int64_t lds)
{
    for (int r0 = 0; r0 < R; r0 += 4) {
        const int rb = R - r0 < 4 ? R - r0 : 4;
        if (rb == 3) {
            qk8_group(bits, 2, n, D, codes, ldc, xq + r0 * D, dz + 2 * r0, s + r0 * lds, lds);
            qk8_group(bits, 1, n, D, codes, ldc, xq + (r0 + 2) * D, dz + 2 * (r0 + 2), s + (r0 + 2) * lds, lds);
            continue;
        }
        qk8_group(bits, rb, n, D, codes, ldc, xq + r0 * D, dz + 2 * r0, s + r0 * lds, lds);
    }
}

void vq_attn_kernels_init_avx2_int8(vq_attn_kernels *k)
{
    k->kivi_q8 = kivi_q8_avx2;
    k->kivi_qk8 = kivi_qk8_avx2;
}
