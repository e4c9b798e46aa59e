/* centroids_avx512.c — AVX-512 vector-quantization kernels (see codecs/centroids.h).
 * Same scheme as the AVX2 file with 16 lanes and two vectors in flight (32
 * centroids, the VQ_CENTROIDS_PAD block); lanes past C are masked to +inf, and the
 * tails of rows and RoPE pairs use masked loads and stores. */
#include <immintrin.h>
#include <math.h>

#include "codecs/centroids.h"

enum { LANES = 16, UNROLL = 2, BLOCK = LANES * UNROLL };
_Static_assert(VQ_CENTROIDS_PAD % BLOCK == 0, "a transposed row holds whole AVX-512 blocks");

/* Mask of the first `count` lanes (count may exceed 16). */
static __mmask16 first_lanes(int32_t count) { return count >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << count) - 1u); }

/* x [n], cbt [n, ld] -> argmin_c ||x - cbt[:, c]||^2 over c < C. */
static int32_t nearest_avx512(const float *x, const float *cbt, int32_t C, int64_t ld, int32_t n)
{
    const __m512 inf = _mm512_set1_ps(INFINITY);
    const __m512i limit = _mm512_set1_epi32(C), step = _mm512_set1_epi32(BLOCK);
    __m512 best[UNROLL];
    __m512i best_i[UNROLL], idx[UNROLL];
    for (int u = 0; u < UNROLL; u++) {
        best[u] = inf;
        best_i[u] = _mm512_setzero_si512();
        idx[u] = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                  _mm512_set1_epi32(u * LANES));
    }
    for (int32_t c0 = 0; c0 < C; c0 += BLOCK) {
        __m512 acc[UNROLL];
        for (int u = 0; u < UNROLL; u++) acc[u] = _mm512_setzero_ps();
        for (int32_t j = 0; j < n; j++) {
            const __m512 xj = _mm512_set1_ps(x[j]);
            const float *row = cbt + j * ld + c0;
            for (int u = 0; u < UNROLL; u++) {
                const __m512 d = _mm512_sub_ps(xj, _mm512_loadu_ps(row + u * LANES));
                acc[u] = _mm512_fmadd_ps(d, d, acc[u]);
            }
        }
        for (int u = 0; u < UNROLL; u++) {
            const __m512 a = _mm512_mask_blend_ps(_mm512_cmplt_epi32_mask(idx[u], limit), inf, acc[u]);
            const __mmask16 lt = _mm512_cmp_ps_mask(a, best[u], _CMP_LT_OQ);
            best[u] = _mm512_mask_blend_ps(lt, best[u], a);
            best_i[u] = _mm512_mask_blend_epi32(lt, best_i[u], idx[u]);
            idx[u] = _mm512_add_epi32(idx[u], step);
        }
    }
    /* branch-free pick: the smallest distance, then the lowest index holding
     * it (every lane +inf gives index 0, as the scalar kernel; all NaN too) */
    const float m = fminf(_mm512_reduce_min_ps(best[0]), _mm512_reduce_min_ps(best[1]));
    const __m512 mv = _mm512_set1_ps(m);
    const __mmask16 at0 = _mm512_cmp_ps_mask(best[0], mv, _CMP_EQ_OQ), at1 = _mm512_cmp_ps_mask(best[1], mv, _CMP_EQ_OQ);
    if ((at0 | at1) == 0) return 0;
    const int32_t c0 = _mm512_mask_reduce_min_epi32(at0, best_i[0]), c1 = _mm512_mask_reduce_min_epi32(at1, best_i[1]);
    return c0 < c1 ? c0 : c1;
}

/* x [n], cbt [n, ld] -> out[c] = x . cbt[:, c] for c < C. */
static void dots_avx512(const float *x, const float *cbt, int32_t C, int64_t ld, int32_t n, float *out)
{
    for (int32_t c0 = 0; c0 < C; c0 += BLOCK) {
        __m512 acc[UNROLL];
        for (int u = 0; u < UNROLL; u++) acc[u] = _mm512_setzero_ps();
        for (int32_t j = 0; j < n; j++) {
            const __m512 xj = _mm512_set1_ps(x[j]);
            const float *row = cbt + j * ld + c0;
            for (int u = 0; u < UNROLL; u++) acc[u] = _mm512_fmadd_ps(xj, _mm512_loadu_ps(row + u * LANES), acc[u]);
        }
        for (int u = 0; u < UNROLL; u++) {
            const int32_t left = C - c0 - u * LANES;
            if (left > 0) _mm512_mask_storeu_ps(out + c0 + u * LANES, first_lanes(left), acc[u]);
        }
    }
}

/* In place RoPE of k [D], pairs (i, i + D/2); masked tail. */
static void rope_half_avx512(int32_t D, const float *cs, const float *sn, float *k)
{
    const int32_t h = D / 2;
    for (int32_t i = 0; i < h; i += LANES) {
        const __mmask16 m = first_lanes(h - i);
        const __m512 a = _mm512_maskz_loadu_ps(m, k + i), b = _mm512_maskz_loadu_ps(m, k + i + h);
        const __m512 c = _mm512_maskz_loadu_ps(m, cs + i), s = _mm512_maskz_loadu_ps(m, sn + i);
        _mm512_mask_storeu_ps(k + i, m, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
        _mm512_mask_storeu_ps(k + i + h, m, _mm512_fmadd_ps(a, s, _mm512_mul_ps(b, c)));
    }
}

/* In place RoPE of k [D], pairs (2i, 2i + 1): eight pairs per vector, cos/sin
 * duplicated across each pair, out = k * cos + swap(k) * (-sin, +sin). */
static void rope_interleaved_avx512(int32_t D, const float *cs, const float *sn, float *k)
{
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512 sign = _mm512_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1);
    const int32_t h = D / 2;
    for (int32_t i = 0; i < h; i += LANES / 2) {
        const int32_t pairs = h - i < LANES / 2 ? h - i : LANES / 2;
        const __mmask8 mp = (__mmask8)((1u << pairs) - 1u);
        const __mmask16 mv = first_lanes(2 * pairs);
        const __m512 v = _mm512_maskz_loadu_ps(mv, k + 2 * i);
        const __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(mp, cs + i)));
        const __m512 s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(mp, sn + i)));
        const __m512 swapped = _mm512_permute_ps(v, 0xB1);
        _mm512_mask_storeu_ps(k + 2 * i, mv, _mm512_fmadd_ps(v, c, _mm512_mul_ps(swapped, _mm512_mul_ps(s, sign))));
    }
}

/* codes [R] -> out [D] = RoPE(scale * sum_r codebook[r, codes[r]]). */
static void commvq_decode_avx512(const vq_commvq_layout *L, const void *codes, const float *codebook, float scale,
                                 const float *cos_row, const float *sin_row, float *out)
{
    const int32_t D = L->D;
    for (int32_t j = 0; j < D; j += LANES) _mm512_mask_storeu_ps(out + j, first_lanes(D - j), _mm512_setzero_ps());
    for (int32_t r = 0; r < L->R; r++) {
        const float *cent = codebook + ((int64_t)r * L->C + vq_commvq_code(L, codes, r)) * D;
        for (int32_t j = 0; j < D; j += LANES) {
            const __mmask16 m = first_lanes(D - j);
            _mm512_mask_storeu_ps(out + j, m,
                                  _mm512_add_ps(_mm512_maskz_loadu_ps(m, out + j), _mm512_maskz_loadu_ps(m, cent + j)));
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int32_t j = 0; j < D; j += LANES) {
        const __mmask16 m = first_lanes(D - j);
        _mm512_mask_storeu_ps(out + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, out + j), sc));
    }
    if (L->rope == VQ_FMT_ROPE_INTERLEAVED) rope_interleaved_avx512(D, cos_row, sin_row, out);
    else rope_half_avx512(D, cos_row, sin_row, out);
}

void vq_centroids_kernels_init_avx512(vq_centroids_kernels *k)
{
    k->nearest = nearest_avx512;
    k->dots = dots_avx512;
    k->commvq_decode = commvq_decode_avx512;
}
