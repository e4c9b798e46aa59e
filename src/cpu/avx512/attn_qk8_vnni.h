/* attn_qk8_vnni.h — the inline body of kivi_qk8 (attn_int8_vnni.c: how it works), shared with the fused KIVI block kernel
 * (attn_kivi_int8_vnnivbmi.c). Internal; include only from a file built with its
 * flags (the file names say which). */
#ifndef VQ_ATTN_QK8_VNNI_H
#define VQ_ATTN_QK8_VNNI_H

#include <immintrin.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_avx512_inline.h"


/* 32 bytes at p as the chunk of a row, or (half) 16 bytes zero-extended. */
VQ_INLINE __m256i load_chunk(const uint8_t *p, bool half)
{
    return half ? _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)p)) : _mm256_loadu_si256((const __m256i *)p);
}

/* Rows 2i and 2i+1 of the chunk (32 bytes at `off` of each code row; half:
 * 16, the upper 16 zeros) in one register; rows at or past n read as zeros
 * (masked, nothing past them is read). */
VQ_INLINE __m512i load_pair(const uint8_t *codes, int64_t ldc, int64_t off, int i, int n, bool half)
{
    const int t0 = 2 * i, t1 = 2 * i + 1;
    if (t1 < n && ldc == 32 && !half) return _mm512_loadu_si512(codes + t0 * ldc + off);
    const __m256i lo = t0 < n ? load_chunk(codes + t0 * ldc + off, half) : _mm256_setzero_si256();
    const __m256i hi = t1 < n ? load_chunk(codes + t1 * ldc + off, half) : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* One butterfly stage: swaps register-index bit A with lane bit B over the
 * pairs (i, i | 1 << A). */
VQ_INLINE void swap_stage(__m512i *x, int A, const __m512i idx0, const __m512i idx1)
{
    VQ_UNROLL
    for (int i = 0; i < 8; i++) {
        if (i & (1 << A)) continue;
        const __m512i a = x[i], b = x[i | (1 << A)];
        x[i] = _mm512_permutex2var_epi32(a, idx0, b);
        x[i | (1 << A)] = _mm512_permutex2var_epi32(a, idx1, b);
    }
}

/* The vpermt2d indices of the three stages (lo: register i, hi: register
 * i | 1 << A), stage st swapping lane bit st: lo[l] = l & bb ? 16 + (l ^ bb) : l,
 * hi[l] = l & bb ? 16 + l : l | bb with bb = 1 << st; and the natural token
 * order of the transposed lanes, order[t] = (t >> 1) + 8 (t & 1). */
typedef struct stage_idx {
    int32_t lo[3][16], hi[3][16], order[16];
} stage_idx;

static const stage_idx stages = {
    .lo = {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
           {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
           {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}},
    .hi = {{1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
           {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
           {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}},
    .order = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15},
};

/* The 32 bytes at `off` of code rows 0-15 (n valid; zeros past them; half:
 * 16 bytes, dwords 4-7 zero), transposed: lane l of x[w] holds the dword w
 * of token order[l]'s chunk. */
VQ_INLINE void qk8_transpose16(int n, const uint8_t *codes, int64_t ldc, int64_t off, __m512i *x, bool half)
{
    VQ_UNROLL
    for (int i = 0; i < 8; i++) x[i] = load_pair(codes, ldc, off, i, n, half);
    VQ_UNROLL
    for (int st = 0; st < 3; st++)
        swap_stage(x, st, _mm512_loadu_si512(stages.lo[st]), _mm512_loadu_si512(stages.hi[st]));
}

/* A row's integer dots t (lanes in the transposed order) -> its scores in
 * token order: step * t + q . zero, dz = {step, q . zero}. */
VQ_INLINE __m512 qk8_finish(__m512i t, const float *dz)
{
    t = _mm512_permutexvar_epi32(_mm512_loadu_si512(stages.order), t);
    return _mm512_fmadd_ps(_mm512_set1_ps(dz[0]), _mm512_cvtepi32_ps(t), _mm512_set1_ps(dz[1]));
}

/* The RB rows' NA accumulators of integer dots (lanes in the transposed
 * order) summed -> their scores in token order v[r] (qk8_finish). */
VQ_INLINE void qk8_sum_finish(int RB, int NA, __m512i (*acc)[4], const float *dz, __m512 *v)
{
    VQ_UNROLL
    for (int r = 0; r < RB; r++) {
        __m512i t = acc[r][0];
        VQ_UNROLL
        for (int a = 1; a < NA; a++) t = _mm512_add_epi32(t, acc[r][a]);
        v[r] = qk8_finish(t, dz + 2 * r);
    }
}

/* 16 tokens (n of them valid) x RB rows; NA accumulators per row: the
 * scores of row r in token order in v[r] (lanes at or past n: the scores of
 * zero codes). */
VQ_INLINE void qk8_regs16(int bits, int RB, int n, int64_t D, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                          const float *dz, __m512 *v)
{
    const int K = 8 / bits, NA = RB <= 2 ? 4 : 2; /* >= 8 independent vpdpbusd chains (latency 5) */
    const int64_t P = D / K, NC = D * bits / 256;
    const __m512i mask = _mm512_set1_epi8(bits == 2 ? 3 : 15);
    __m512i acc[4][4];
    VQ_UNROLL
    for (int r = 0; r < RB; r++)
        VQ_UNROLL
        for (int a = 0; a < NA; a++) acc[r][a] = _mm512_setzero_si512();
    const bool tail = D * bits % 256 != 0; /* a last 16-byte half chunk: dwords 0-3 */
    for (int64_t k = 0; k < NC + tail; k++) {
        __m512i x[8];
        const bool half = k == NC;
        qk8_transpose16(n, codes, ldc, 32 * k, x, half);
        VQ_UNROLL
        for (int w = 0; w < 8; w++)
            VQ_UNROLL
            for (int m = 0; m < K; m++) {
                if (half && w >= 4) continue; /* the half chunk's dwords 4-7: zeros */
                const __m512i e = _mm512_and_si512(m ? _mm512_srli_epi32(x[w], m * bits) : x[w], mask);
                const int a = (w * K + m) % NA;
                VQ_UNROLL
                for (int r = 0; r < RB; r++) {
                    int32_t qw;
                    memcpy(&qw, xq + r * D + m * P + 32 * k + 4 * w, 4);
                    acc[r][a] = _mm512_dpbusd_epi32(acc[r][a], e, _mm512_set1_epi32(qw));
                }
            }
    }
    qk8_sum_finish(RB, NA, acc, dz, v);
}

/* The same stored to s [RB][lds], n per row. */
VQ_INLINE void qk8_block16(int bits, int RB, int n, int64_t D, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                           const float *dz, float *s, int64_t lds)
{
    __m512 v[4];
    qk8_regs16(bits, RB, n, D, codes, ldc, xq, dz, v);
    const __mmask16 valid = (__mmask16)((1u << n) - 1u);
    VQ_UNROLL
    for (int r = 0; r < RB; r++) {
        if (n == 16) _mm512_storeu_ps(s + r * lds, v[r]); /* a masked store would not forward to the softmax's loads */
        else _mm512_mask_storeu_ps(s + r * lds, valid, v[r]);
    }
}

#endif /* VQ_ATTN_QK8_VNNI_H */
