/* attn_q8_avx2.h — the inline bodies of the AVX2 integer key scores
 * (attn_int8_avx2.c: how they work; attn_kernels.h: kivi_q8, kivi_qk8),
 * shared with the fused KIVI block kernel (attn_kivi_int8_avx2.c), which so
 * computes the same planes, steps and scores. Internal; include only from
 * files built with the AVX2 flags. */
#ifndef VQ_ATTN_Q8_AVX2_H
#define VQ_ATTN_Q8_AVX2_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_avx2_inline.h"

/* Stores the int8 of channels c0 .. c0 + 31 of a row into their plane
 * positions (vq_attn_q8_pos): y[u] holds channels c0 + 8u .. c0 + 8u + 7,
 * each as the low byte of its dword. One vpshufb per register moves the
 * bytes to their plane slots within its lane (lane 0: the plane-order
 * indices of the even half, lane 1 of the odd one), and one interleave of
 * the two lanes puts them in order: no lane-crossing permute (3-4 cycles on
 * 128-bit cores). */
VQ_INLINE void store_planes(const __m256i *y, int bits, int64_t D, int64_t c0, int8_t *xq)
{
    __m256i e = _mm256_setzero_si256();
    for (int u = 0; u < 4; u++) {
        /* dword l of a lane: 2 bits, plane l, slot u (byte 4 l + u); 4 bits,
         * plane l % 2, slot 2 u + l / 2 (byte 8 (l % 2) + 2 u + l / 2) */
        int8_t idx[16];
        for (int i = 0; i < 16; i++) idx[i] = -1;
        for (int l = 0; l < 4; l++) idx[bits == 2 ? 4 * l + u : 8 * (l % 2) + 2 * u + l / 2] = (int8_t)(4 * l);
        const __m128i m = _mm_loadu_si128((const __m128i *)idx);
        e = _mm256_or_si256(e, _mm256_shuffle_epi8(y[u], _mm256_set_m128i(m, m)));
    }
    const __m128i lo = _mm256_castsi256_si128(e), hi = _mm256_extracti128_si256(e, 1);
    if (bits == 2) { /* planes 0, 1 | 2, 3: 8 bytes each */
        const int64_t P = D / 4, i0 = c0 / 4;
        const __m128i a = _mm_unpacklo_epi8(lo, hi), b = _mm_unpackhi_epi8(lo, hi);
        _mm_storel_epi64((__m128i *)(xq + i0), a); /* __m128i stores may alias int8 (a double store may not) */
        _mm_storel_epi64((__m128i *)(xq + P + i0), _mm_unpackhi_epi64(a, a));
        _mm_storel_epi64((__m128i *)(xq + 2 * P + i0), b);
        _mm_storel_epi64((__m128i *)(xq + 3 * P + i0), _mm_unpackhi_epi64(b, b));
        return;
    }
    const int64_t P = D / 2, i0 = c0 / 2; /* planes 0 | 1: 16 bytes each */
    _mm_storeu_si128((__m128i *)(xq + i0), _mm_unpacklo_epi16(lo, hi));
    _mm_storeu_si128((__m128i *)(xq + P + i0), _mm_unpackhi_epi16(lo, hi));
}

/* The f32 operations of kivi_q8_scalar (attn_kernels.h) for RN <= 4 rows,
 * interleaved channel by channel (independent chains: one row's max and
 * FMA chains alone are latency-bound): amax as the integer max of the |x|
 * bit patterns (ordered as the floats; a non-finite x gives bits >= those
 * of +inf), rint(x * inv) by mul_rint_bits (|x * inv| <= 127.5: the
 * int8 is the low byte, as lrintf and vcvtps2dq round); a non-finite row stores
 * zeros. scale and zero are f16 (the fused kernel reads the cache's rows as
 * they are) or f32. */
VQ_INLINE void q8_rows4_avx2(int RN, int64_t D, int bits, const float *q, int64_t ldq, const void *scale,
                             const void *zero, bool f16, int8_t *xq, float *dz)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    __m256i amax[4];
    __m256 qz[4];
    for (int i = 0; i < RN; i++) {
        amax[i] = _mm256_setzero_si256();
        qz[i] = _mm256_setzero_ps();
    }
    for (int64_t c = 0; c < D; c += 8) {
        const __m256 sc = load8_ps(scale, f16, c), ze = load8_ps(zero, f16, c);
        for (int i = 0; i < RN; i++) {
            const __m256 qv = _mm256_loadu_ps(q + i * ldq + c), x = _mm256_mul_ps(qv, sc);
            amax[i] = _mm256_max_epi32(amax[i], _mm256_and_si256(_mm256_castps_si256(x), absmask));
            qz[i] = _mm256_fmadd_ps(qv, ze, qz[i]);
        }
    }
    /* then row by row (GCC 12.2 at -O2 with -fsanitize=address,undefined
     * -fno-sanitize-recover=undefined, the sanitizer build, compiled a
     * version that kept the rows' inv in an array so that a row used the
     * next row's: tests/test_attention_kivi caught it) */
    for (int i = 0; i < RN; i++) {
        __m128i h = _mm_max_epi32(_mm256_castsi256_si128(amax[i]), _mm256_extracti128_si256(amax[i], 1));
        h = _mm_max_epi32(h, _mm_unpackhi_epi64(h, h));
        h = _mm_max_epi32(h, _mm_srli_epi64(h, 32));
        const float am = _mm_cvtss_f32(_mm_castsi128_ps(h)), z = hsum8(qz[i]);
        const bool finite = _mm_cvtsi128_si32(h) < F32_INF_BITS && isfinite(z);
        dz[2 * i] = finite ? am / 127.0f : NAN;
        dz[2 * i + 1] = z;
        if (!finite) {
            memset(xq + i * D, 0, (size_t)D);
            continue;
        }
        const __m256 inv = _mm256_set1_ps(vq_attn_q8_inv(am, true));
        for (int64_t c = 0; c < D; c += 32) {
            __m256i y[4];
            for (int u = 0; u < 4; u++) {
                const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(q + i * ldq + c + 8 * u), load8_ps(scale, f16, c + 8 * u));
                y[u] = mul_rint_bits(x, inv);
            }
            store_planes(y, bits, D, c, xq + i * D);
        }
    }
}

/* kivi_q8 for R rows: four at a time. */
VQ_INLINE void q8_rows_avx2(int R, int64_t D, int bits, const float *q, int64_t ldq, const float *scale,
                            const float *zero, int8_t *xq, float *dz)
{
    for (int r = 0; r < R; r += 4) {
        const float *qr = q + r * ldq;
        int8_t *xr = xq + r * D;
        float *dr = dz + 2 * r;
        switch (R - r < 4 ? R - r : 4) {
        case 1: q8_rows4_avx2(1, D, bits, qr, ldq, scale, zero, false, xr, dr); break;
        case 2: q8_rows4_avx2(2, D, bits, qr, ldq, scale, zero, false, xr, dr); break;
        case 3: q8_rows4_avx2(3, D, bits, qr, ldq, scale, zero, false, xr, dr); break;
        default: q8_rows4_avx2(4, D, bits, qr, ldq, scale, zero, false, xr, dr); break;
        }
    }
}

/* Horizontal sums of four i32 vectors: {sum a, sum b, sum c, sum d}. */
VQ_INLINE __m128i hsum4_epi32(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

/* The four dots of qk8_tile's accumulators as i32: i16 lanes by the
 * shuffle-and-add tree (tree: 8 lanes of each sum fit in i16), else i32
 * lanes (already widened) by vphaddd. */
VQ_INLINE __m128i qk8_dots4(bool tree, __m256i a, __m256i b, __m256i c, __m256i d)
{
    return tree ? hsum4_epi16(a, b, c, d) : hsum4_epi32(a, b, c, d);
}

/* RB rows x TB tokens: integer dots, then s = step * dot + qz. */
VQ_INLINE void qk8_tile(int bits, int RB, int TB, int64_t D, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                        const float *dz, float *s, int64_t lds)
{
    const int K = 8 / bits;
    const int64_t P = D / K, NC = D * bits / 256;
    const __m256i mask = _mm256_set1_epi8(bits == 2 ? 3 : 15);
    const bool half = D * bits % 256 != 0; /* a last 16-byte half chunk, zero-extended */
    __m256i acc[8];
    for (int i = 0; i < RB * TB; i++) acc[i] = _mm256_setzero_si256();
    for (int64_t k = 0; k < NC + half; k++) {
        __m256i raw[4];
        for (int t = 0; t < TB; t++)
            raw[t] = k < NC ? _mm256_loadu_si256((const __m256i *)(codes + t * ldc + 32 * k))
                            : _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(codes + t * ldc + 32 * k)));
        for (int m = 0; m < K; m++) {
            __m256i e[4];
            for (int t = 0; t < TB; t++) e[t] = _mm256_and_si256(_mm256_srli_epi16(raw[t], m * bits), mask);
            for (int r = 0; r < RB; r++) {
                const int8_t *qp = xq + r * D + m * P + 32 * k; /* a half chunk's plane has 16 bytes left */
                const __m256i qv = k < NC ? _mm256_loadu_si256((const __m256i *)qp)
                                          : _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)qp));
                /* within i16 (the bound in attn_int8_avx2.c) */
                for (int t = 0; t < TB; t++) madd_u8s8_acc16(&acc[r * TB + t], e[t], qv);
            }
        }
    }
    /* A lane sums (NC + half) K pairs of at most 2 (2^bits - 1) 127: where 8
     * lanes fit in i16 (2 bits, D <= 128), the cheap i16 tree adds them. */
    const bool tree = 8 * (NC + half) * K * 2 * ((1 << bits) - 1) * 127 <= 32767;
    const __m256i ones = _mm256_set1_epi16(1);
    if (!tree)
        for (int i = 0; i < RB * TB; i++) acc[i] = _mm256_madd_epi16(acc[i], ones);
    if (TB == 4 || (TB == 2 && RB % 2 == 0)) {
        /* groups of four: one row's 4 tokens (TB 4) or two rows' 2 (TB 2): the
         * dots, s = step * dot + qz as one vector each (fmadd: the scalar form's
         * contraction) */
        for (int i = 0; i < RB * TB; i += 4) {
            const __m128 d = _mm_cvtepi32_ps(qk8_dots4(tree, acc[i], acc[i + 1], acc[i + 2], acc[i + 3]));
            const int r = i / TB;
            if (TB == 4) {
                _mm_storeu_ps(s + r * lds, _mm_fmadd_ps(d, _mm_set1_ps(dz[2 * r]), _mm_set1_ps(dz[2 * r + 1])));
            } else {
                const __m128 st = _mm_setr_ps(dz[2 * r], dz[2 * r], dz[2 * r + 2], dz[2 * r + 2]);
                const __m128 qz = _mm_setr_ps(dz[2 * r + 1], dz[2 * r + 1], dz[2 * r + 3], dz[2 * r + 3]);
                const __m128 v = _mm_fmadd_ps(d, st, qz);
                _mm_storel_pi((__m64 *)(s + r * lds), v);
                _mm_storeh_pi((__m64 *)(s + (r + 1) * lds), v);
            }
        }
        return;
    }
    int32_t dot[8];
    for (int i = 0; i < RB * TB; i += 4) { /* RB * TB is 1, 2, 3 or 6 here: pad groups of four with zeros */
        const __m256i z = _mm256_setzero_si256();
        const __m128i h = qk8_dots4(tree, acc[i], i + 1 < RB * TB ? acc[i + 1] : z, i + 2 < RB * TB ? acc[i + 2] : z,
                                       i + 3 < RB * TB ? acc[i + 3] : z);
        int32_t tmp[4];
        _mm_storeu_si128((__m128i *)tmp, h);
        for (int u = 0; u < 4 && i + u < RB * TB; u++) dot[i + u] = tmp[u];
    }
    for (int r = 0; r < RB; r++)
        for (int t = 0; t < TB; t++) s[r * lds + t] = fmaf(dz[2 * r], (float)dot[r * TB + t], dz[2 * r + 1]);
}

VQ_INLINE void qk8_rows(int bits, int RB, int n, int64_t D, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                        const float *dz, float *s, int64_t lds)
{
    const int TB = RB <= 2 ? 4 : 2;
    int j = 0;
    for (; j + TB <= n; j += TB) qk8_tile(bits, RB, TB, D, codes + j * ldc, ldc, xq, dz, s + j, lds);
    for (; j < n; j++) qk8_tile(bits, RB, 1, D, codes + j * ldc, ldc, xq, dz, s + j, lds);
}

#endif /* VQ_ATTN_Q8_AVX2_H */
