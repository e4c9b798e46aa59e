/* attn_dot_avx2.c — AVX2+FMA+F16C attention kernels: q.k^T tiles, p.V
 * accumulation and the online-softmax step (see attn_kernels.h).
 * Register tiles: qk keeps RB x TB (<= 4 x 3) dot accumulators, loading each
 * key vector once for RB rows; pv keeps RB x CB (4 x 2 or 2 x 4) output
 * vectors, loading each value vector once for RB rows. f16/bf16 convert in registers. */
#include <immintrin.h>
#include <math.h>

#include "attention/attn_kernels.h"

#include "cpu/avx2/attn_avx2_inline.h"
#include "cpu/avx2/attn_softmax_avx2.h" /* softmax, poison, rescale */

/* s[r][t] = q[r] . k[t] for an RB x TB tile */
VQ_INLINE void qk_tile(vq_attn_elt e, int RB, int TB, int64_t D, const float *q, int64_t ldq, const void *k,
                       int64_t ldk, float *s, int64_t lds)
{
    __m256 acc[4][3];
    for (int r = 0; r < RB; r++)
        for (int t = 0; t < TB; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t c = 0; c < D; c += 8) {
        __m256 kv[3];
        for (int t = 0; t < TB; t++) kv[t] = load8(k, e, t * ldk + c);
        for (int r = 0; r < RB; r++) {
            const __m256 qv = _mm256_loadu_ps(q + r * ldq + c);
            for (int t = 0; t < TB; t++) acc[r][t] = _mm256_fmadd_ps(qv, kv[t], acc[r][t]);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int t = 0; t < TB; t++) s[r * lds + t] = hsum8(acc[r][t]);
}

/* [R][D] . [n][D]^T -> s [R][n], tiles of 4 rows x 3 tokens and their tails */
VQ_INLINE void qk_any(vq_attn_elt e, int R, int n, int64_t D, const float *q, int64_t ldq, const void *k,
                      int64_t ldk, float *s, int64_t lds)
{
    const size_t esz = e == VQ_ATTN_F32 ? 4 : 2;
    for (int r = 0; r < R; r += 4) {
        const int rb = R - r < 4 ? R - r : 4;
        const float *qr = q + r * ldq;
        float *sr = s + r * lds;
        for (int j = 0; j < n; j += 3) {
            const int tb = n - j < 3 ? n - j : 3;
            const void *kj = (const char *)k + (size_t)j * (size_t)ldk * esz;
#define VQ_QK_CASE(RB, TB) \
    case RB * 4 + TB: qk_tile(e, RB, TB, D, qr, ldq, kj, ldk, sr + j, lds); break;
            switch (rb * 4 + tb) {
                VQ_QK_CASE(4, 3) VQ_QK_CASE(4, 2) VQ_QK_CASE(4, 1)
                VQ_QK_CASE(3, 3) VQ_QK_CASE(3, 2) VQ_QK_CASE(3, 1)
                VQ_QK_CASE(2, 3) VQ_QK_CASE(2, 2) VQ_QK_CASE(2, 1)
                VQ_QK_CASE(1, 3) VQ_QK_CASE(1, 2) VQ_QK_CASE(1, 1)
            default: break;
            }
#undef VQ_QK_CASE
        }
    }
}

/* o[r][c0 .. c0+8CB) += sum_j p[r][j] v[j][c0 ..] for an RB-row strip */
VQ_INLINE void pv_tile(vq_attn_elt e, int RB, int CB, int n, const float *p, int64_t ldp, const void *v,
                       int64_t ldv, float *o, int64_t ldo, int64_t c0)
{
    __m256 acc[4][4];
    for (int r = 0; r < RB; r++)
        for (int cb = 0; cb < CB; cb++) acc[r][cb] = _mm256_loadu_ps(o + r * ldo + c0 + 8 * cb);
    for (int j = 0; j < n; j++) {
        __m256 vv[4];
        for (int cb = 0; cb < CB; cb++) vv[cb] = load8(v, e, j * ldv + c0 + 8 * cb);
        for (int r = 0; r < RB; r++) {
            const __m256 pr = _mm256_broadcast_ss(p + r * ldp + j);
            for (int cb = 0; cb < CB; cb++) acc[r][cb] = _mm256_fmadd_ps(pr, vv[cb], acc[r][cb]);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int cb = 0; cb < CB; cb++) _mm256_storeu_ps(o + r * ldo + c0 + 8 * cb, acc[r][cb]);
}

/* All D columns for RB rows: strips of 8*CB columns (CB = 4 for 1-2 rows,
 * 2 for 3-4 rows: 8 accumulators either way, each value vector loaded and
 * converted once for all RB rows), then 8-wide tails. */
VQ_INLINE void pv_rows(vq_attn_elt e, int RB, int n, int64_t D, const float *p, int64_t ldp, const void *v,
                       int64_t ldv, float *o, int64_t ldo)
{
    const int CB = RB <= 2 ? 4 : 2;
    int64_t c = 0;
    for (; c + 8 * CB <= D; c += 8 * CB) pv_tile(e, RB, CB, n, p, ldp, v, ldv, o, ldo, c);
    for (; c < D; c += 8) pv_tile(e, RB, 1, n, p, ldp, v, ldv, o, ldo, c);
}

VQ_INLINE void pv_any(vq_attn_elt e, int R, int n, int64_t D, const float *p, int64_t ldp, const void *v,
                      int64_t ldv, float *o, int64_t ldo)
{
    for (int r = 0; r < R; r += 4) {
        const float *pr = p + r * ldp;
        float *orow = o + r * ldo;
        switch (R - r < 4 ? R - r : 4) {
        case 1: pv_rows(e, 1, n, D, pr, ldp, v, ldv, orow, ldo); break;
        case 2: pv_rows(e, 2, n, D, pr, ldp, v, ldv, orow, ldo); break;
        case 3: pv_rows(e, 3, n, D, pr, ldp, v, ldv, orow, ldo); break;
        default: pv_rows(e, 4, n, D, pr, ldp, v, ldv, orow, ldo); break;
        }
    }
}

VQ_ATTN_DEFINE_F16_KERNELS

static void softmax_avx2(int R, int n, float *s, int64_t lds, float *m, float *d, float *alpha)
{
    softmax_rows_avx2(R, n, s, lds, m, d, alpha);
}

static void poison_avx2(int R, int n, float *s, int64_t lds, bool *bad) { poison_rows_avx2(R, n, s, lds, bad); }

static void rescale_avx2(int R, int64_t D, float *o, int64_t ldo, const float *alpha)
{
    rescale_rows_avx2(R, D, o, ldo, alpha);
}

void vq_attn_kernels_init_avx2(vq_attn_kernels *k)
{
    k->poison = poison_avx2;
    k->rescale = rescale_avx2;
    VQ_ATTN_SET_F16_KERNELS(k);
    k->softmax = softmax_avx2;
}
