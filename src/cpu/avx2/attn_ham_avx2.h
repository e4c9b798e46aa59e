/* attn_ham_avx2.h — the inline body of the AVX2 RaBitQ Hamming scores
 * (attn_ham_avx2.c, hamming_score: how it works), shared with the fused
 * RaBitQ block kernel (attn_rabitq_avx2.c). Internal; include only from
 * src/cpu/avx2 files (built with AVX2). */
#ifndef VQ_ATTN_HAM_AVX2_H
#define VQ_ATTN_HAM_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu/avx2/attn_avx2_inline.h"

/* RB query rows' 16 sign bytes as two 64-bit words each: q[2r], q[2r + 1]. */
VQ_INLINE void ham_q_avx2(int RB, const uint8_t *qb, int64_t ldq, uint64_t *q)
{
    for (int r = 0; r < RB; r++) {
        memcpy(&q[2 * r], qb + r * ldq, 8);
        memcpy(&q[2 * r + 1], qb + r * ldq + 8, 8);
    }
}

/* The Hamming distance of one key row k (16 bytes) to query words q[0 .. 1],
 * by scalar popcnt: on Zen 1 the integer pipes do 4 per cycle beside the
 * vector work, where the nibble-table vpshufb, vpsadbw and vpermd cost
 * vector pipes. */
VQ_INLINE uint32_t ham_dist1_avx2(const uint8_t *k, const uint64_t *q)
{
    uint64_t k0, k1;
    memcpy(&k0, k, 8);
    memcpy(&k1, k + 8, 8);
    return (uint32_t)(__builtin_popcountll(k0 ^ q[0]) + __builtin_popcountll(k1 ^ q[1]));
}

/* The distances of n tokens (key rows kb, 16 bytes each, contiguous) to RB
 * <= 4 query rows at D = 128: row r's in byte r of h[t] (ham <= 128 fits).
 * Callers take a block's distances at once before loading any as a
 * vector, so that the loads find the stores retired (eight stores do not
 * forward into one load). */
VQ_INLINE void ham_dist_avx2(int RB, int n, const uint8_t *kb, const uint64_t *q, uint32_t *h)
{
    for (int t = 0; t < n; t++) {
        uint32_t v = 0;
        for (int r = 0; r < RB; r++) v |= ham_dist1_avx2(kb + 16 * t, q + 2 * r) << (8 * r);
        h[t] = v;
    }
}

/* A block's distances taken one at a time while other work runs (the fused
 * RaBitQ kernel: the next block's, one per pair of the p.V,
 * attn_cb8_avx2.h): key rows kb (32 tokens), query words q, RB rows, into
 * h as ham_dist_avx2 lays them out (bytes of unused rows left alone). */
typedef struct ham_next_avx2 {
    const uint8_t *kb;
    const uint64_t *q;
    uint32_t *h;
} ham_next_avx2;

/* Distance i mod 32 RB of nx: token i / RB, row i % RB (a count that
 * wraps takes some twice, which stores the same byte). */
VQ_INLINE void ham_next_step_avx2(int RB, const ham_next_avx2 *nx, int i)
{
    i %= 32 * RB;
    const int t = i / RB, r = i % RB;
    ((uint8_t *)nx->h)[4 * t + r] = (uint8_t)ham_dist1_avx2(nx->kb + 16 * t, nx->q + 2 * r);
}

/* Scores of 8 tokens from their distance dwords H (ham_dist_avx2) against
 * RB query rows: x[r] = (float)(128 - 2 ham) * qs[r] * mg + cn, the
 * format's formula and order (no FMA); one vpshufb takes row r's bytes to
 * dwords (the other rows' bytes may be anything). */
VQ_INLINE void ham_score8_avx2(int RB, __m256i H, const float *qs, __m256 mg, __m256 cn, __m256 *x)
{
    for (int r = 0; r < RB; r++) {
        const char z = (char)0x80, a = (char)r, b = (char)(r + 4), c = (char)(r + 8), e = (char)(r + 12);
        const __m256i byte_r = _mm256_setr_epi8(a, z, z, z, b, z, z, z, c, z, z, z, e, z, z, z, a, z, z, z, b, z, z, z,
                                                c, z, z, z, e, z, z, z);
        const __m256i h = _mm256_shuffle_epi8(H, byte_r);
        const __m256 d = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_set1_epi32(128), _mm256_add_epi32(h, h)));
        x[r] = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(qs[r])), mg), cn);
    }
}

#endif /* VQ_ATTN_HAM_AVX2_H */
