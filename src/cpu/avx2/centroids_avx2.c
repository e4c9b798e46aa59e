/* centroids_avx2.c — AVX2+FMA vector-quantization kernels (see codecs/centroids.h).
 * A lane holds one centroid of the transposed codebook; four vectors (32
 * centroids, the VQ_CENTROIDS_PAD block) are in flight so the FMA latency hides
 * behind independent accumulators. Lanes past C are forced to +inf before
 * the compare, so the zero padding never wins. */
#include <immintrin.h>
#include <math.h>

#include "codecs/centroids.h"

enum { LANES = 8, UNROLL = 4, BLOCK = LANES * UNROLL };
_Static_assert(VQ_CENTROIDS_PAD % BLOCK == 0, "a transposed row holds whole AVX2 blocks");

/* One slot: a strictly smaller distance replaces the best, so each lane keeps
 * its lowest index among ties. The slot records the block's first centroid
 * (one broadcast shared by all slots); lane offsets are added at the end. */
static inline void keep(__m256 d, __m256i block, __m256 *best, __m256i *best_block)
{
    const __m256 lt = _mm256_cmp_ps(d, *best, _CMP_LT_OQ);
    *best = _mm256_blendv_ps(*best, d, lt);
    *best_block = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(*best_block), _mm256_castsi256_ps(block), lt));
}

/* Folds (d, idx) into (best, best_i): smaller distance, then lower index. */
static inline void merge(__m256 d, __m256i idx, __m256 *best, __m256i *best_i)
{
    const __m256 lower = _mm256_castsi256_ps(_mm256_cmpgt_epi32(*best_i, idx));
    const __m256 take = _mm256_or_ps(_mm256_cmp_ps(d, *best, _CMP_LT_OQ),
                                     _mm256_and_ps(_mm256_cmp_ps(d, *best, _CMP_EQ_OQ), lower));
    *best = _mm256_blendv_ps(*best, d, take);
    *best_i = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*best_i), _mm256_castsi256_ps(idx), take));
}

/* x [n], cbt [n, ld] -> argmin_c ||x - cbt[:, c]||^2 over c < C. Lanes past C
 * (only in the last block) are forced to +inf before they are kept; the final
 * reduction is branch-free: slots merge, then lanes by halving. */
static int32_t nearest_avx2(const float *x, const float *cbt, int32_t C, int64_t ld, int32_t n)
{
    const __m256 inf = _mm256_set1_ps(INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 b0 = inf, b1 = inf, b2 = inf, b3 = inf;
    __m256i k0 = _mm256_setzero_si256(), k1 = k0, k2 = k0, k3 = k0;
    for (int32_t c0 = 0; c0 < C; c0 += BLOCK) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float *col = cbt + c0;
        for (int32_t j = 0; j < n; j++, col += ld) {
            const __m256 xj = _mm256_broadcast_ss(x + j);
            const __m256 d0 = _mm256_sub_ps(xj, _mm256_loadu_ps(col));
            const __m256 d1 = _mm256_sub_ps(xj, _mm256_loadu_ps(col + 8));
            const __m256 d2 = _mm256_sub_ps(xj, _mm256_loadu_ps(col + 16));
            const __m256 d3 = _mm256_sub_ps(xj, _mm256_loadu_ps(col + 24));
            a0 = _mm256_fmadd_ps(d0, d0, a0);
            a1 = _mm256_fmadd_ps(d1, d1, a1);
            a2 = _mm256_fmadd_ps(d2, d2, a2);
            a3 = _mm256_fmadd_ps(d3, d3, a3);
        }
        if (c0 + BLOCK > C) {
            const __m256i left = _mm256_set1_epi32(C - c0);  /* lanes < left are real centroids */
            a0 = _mm256_blendv_ps(inf, a0, _mm256_castsi256_ps(_mm256_cmpgt_epi32(left, lane)));
            a1 = _mm256_blendv_ps(inf, a1, _mm256_castsi256_ps(_mm256_cmpgt_epi32(left, _mm256_add_epi32(lane, _mm256_set1_epi32(8)))));
            a2 = _mm256_blendv_ps(inf, a2, _mm256_castsi256_ps(_mm256_cmpgt_epi32(left, _mm256_add_epi32(lane, _mm256_set1_epi32(16)))));
            a3 = _mm256_blendv_ps(inf, a3, _mm256_castsi256_ps(_mm256_cmpgt_epi32(left, _mm256_add_epi32(lane, _mm256_set1_epi32(24)))));
        }
        const __m256i block = _mm256_set1_epi32(c0);
        keep(a0, block, &b0, &k0);
        keep(a1, block, &b1, &k1);
        keep(a2, block, &b2, &k2);
        keep(a3, block, &b3, &k3);
    }
    k0 = _mm256_add_epi32(k0, lane);
    merge(b1, _mm256_add_epi32(k1, _mm256_add_epi32(lane, _mm256_set1_epi32(8))), &b0, &k0);
    merge(b2, _mm256_add_epi32(k2, _mm256_add_epi32(lane, _mm256_set1_epi32(16))), &b0, &k0);
    merge(b3, _mm256_add_epi32(k3, _mm256_add_epi32(lane, _mm256_set1_epi32(24))), &b0, &k0);
    /* lanes: swap halves, then pairs, then neighbours */
    merge(_mm256_permute2f128_ps(b0, b0, 1), _mm256_permute2x128_si256(k0, k0, 1), &b0, &k0);
    merge(_mm256_permute_ps(b0, _MM_SHUFFLE(1, 0, 3, 2)), _mm256_shuffle_epi32(k0, _MM_SHUFFLE(1, 0, 3, 2)), &b0, &k0);
    merge(_mm256_permute_ps(b0, _MM_SHUFFLE(2, 3, 0, 1)), _mm256_shuffle_epi32(k0, _MM_SHUFFLE(2, 3, 0, 1)), &b0, &k0);
    return _mm256_cvtsi256_si32(k0);
}

/* x [n], cbt [n, ld] -> out[c] = x . cbt[:, c] for c < C; accumulators in
 * named registers, the last partial block stored through a buffer. */
static void dots_avx2(const float *x, const float *cbt, int32_t C, int64_t ld, int32_t n, float *out)
{
    for (int32_t c0 = 0; c0 < C; c0 += BLOCK) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float *col = cbt + c0;
        for (int32_t j = 0; j < n; j++, col += ld) {
            const __m256 xj = _mm256_broadcast_ss(x + j);
            a0 = _mm256_fmadd_ps(xj, _mm256_loadu_ps(col), a0);
            a1 = _mm256_fmadd_ps(xj, _mm256_loadu_ps(col + 8), a1);
            a2 = _mm256_fmadd_ps(xj, _mm256_loadu_ps(col + 16), a2);
            a3 = _mm256_fmadd_ps(xj, _mm256_loadu_ps(col + 24), a3);
        }
        float tail[BLOCK];
        float *dst = C - c0 >= BLOCK ? out + c0 : tail;
        _mm256_storeu_ps(dst, a0);
        _mm256_storeu_ps(dst + 8, a1);
        _mm256_storeu_ps(dst + 16, a2);
        _mm256_storeu_ps(dst + 24, a3);
        if (dst == tail)
            for (int32_t l = 0; l < C - c0; l++) out[c0 + l] = tail[l];
    }
}

/* Pairs [i0, D/2) of the scalar RoPE, for the tails of the vector loops. */
static void rope_tail(int32_t rope, int32_t D, int32_t i0, const float *cs, const float *sn, float *k)
{
    for (int32_t i = i0; i < D / 2; i++) {
        int32_t ia, ib;
        vq_rope_pair(rope, D, i, &ia, &ib);
        const float a = k[ia], b = k[ib];
        k[ia] = a * cs[i] - b * sn[i];
        k[ib] = a * sn[i] + b * cs[i];
    }
}

/* In place RoPE of k [D], pairs (i, i + D/2). */
static void rope_half_avx2(int32_t D, const float *cs, const float *sn, float *k)
{
    const int32_t h = D / 2;
    int32_t i = 0;
    for (; i + LANES <= h; i += LANES) {
        const __m256 a = _mm256_loadu_ps(k + i), b = _mm256_loadu_ps(k + i + h);
        const __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
        _mm256_storeu_ps(k + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
        _mm256_storeu_ps(k + i + h, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
    }
    rope_tail(VQ_FMT_ROPE_HALF, D, i, cs, sn, k);
}

/* In place RoPE of k [D], pairs (2i, 2i + 1): four pairs per vector; each
 * cos/sin is duplicated across its pair and the pair swapped, so
 * out = k * cos + swap(k) * (-sin, +sin). */
static void rope_interleaved_avx2(int32_t D, const float *cs, const float *sn, float *k)
{
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256 sign = _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1);
    int32_t i = 0;
    for (; i + LANES / 2 <= D / 2; i += LANES / 2) {
        const __m256 v = _mm256_loadu_ps(k + 2 * i);
        const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cs + i)), dup);
        const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sn + i)), dup);
        const __m256 swapped = _mm256_permute_ps(v, 0xB1);
        _mm256_storeu_ps(k + 2 * i, _mm256_fmadd_ps(v, c, _mm256_mul_ps(swapped, _mm256_mul_ps(s, sign))));
    }
    rope_tail(VQ_FMT_ROPE_INTERLEAVED, D, i, cs, sn, k);
}

/* codes [R] -> out [D] = RoPE(scale * sum_r codebook[r, codes[r]]). */
static void commvq_decode_avx2(const vq_commvq_layout *L, const void *codes, const float *codebook, float scale,
                               const float *cos_row, const float *sin_row, float *out)
{
    const int32_t D = L->D;
    for (int32_t j = 0; j < D; j++) out[j] = 0.0f;
    for (int32_t r = 0; r < L->R; r++) {
        const float *cent = codebook + ((int64_t)r * L->C + vq_commvq_code(L, codes, r)) * D;
        int32_t j = 0;
        for (; j + LANES <= D; j += LANES)
            _mm256_storeu_ps(out + j, _mm256_add_ps(_mm256_loadu_ps(out + j), _mm256_loadu_ps(cent + j)));
        for (; j < D; j++) out[j] += cent[j];
    }
    const __m256 sc = _mm256_set1_ps(scale);
    int32_t j = 0;
    for (; j + LANES <= D; j += LANES) _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_loadu_ps(out + j), sc));
    for (; j < D; j++) out[j] *= scale;
    if (L->rope == VQ_FMT_ROPE_INTERLEAVED) rope_interleaved_avx2(D, cos_row, sin_row, out);
    else rope_half_avx2(D, cos_row, sin_row, out);
}

void vq_centroids_kernels_init_avx2(vq_centroids_kernels *k)
{
    k->nearest = nearest_avx2;
    k->dots = dots_avx2;
    k->commvq_decode = commvq_decode_avx2;
}
