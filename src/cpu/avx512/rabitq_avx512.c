/* rabitq_avx512.c — AVX-512 kernels of the RaBitQ codec: two sign bytes per
 * 16 floats by compare-to-mask with float64 norms, VPOPCNTDQ Hamming over 64
 * bytes per step (tail by byte mask). */
#include <immintrin.h>

#include "codecs/rabitq_kernels.h"

static void sign_norms_avx512(const float *y, int64_t d, uint8_t *bits, double *l1, double *l2)
{
    __m512d a = _mm512_setzero_pd(), s = _mm512_setzero_pd();
    for (int64_t j = 0; j < d; j += 16) {
        /* d % 8 == 0: the last step may hold 8 lanes */
        const __mmask16 m = d - j >= 16 ? (__mmask16)0xffff : (__mmask16)0x00ff;
        const __m512 v = _mm512_maskz_loadu_ps(m, y + j);
        const __mmask16 ge = _mm512_mask_cmp_ps_mask(m, v, _mm512_setzero_ps(), _CMP_GE_OQ);
        bits[j / 8] = (uint8_t)ge;
        if (m == 0xffff) bits[j / 8 + 1] = (uint8_t)(ge >> 8);
        const __m512 av = _mm512_abs_ps(v);
        const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(av));
        const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(av), 1)));
        a = _mm512_add_pd(a, _mm512_add_pd(lo, hi));
        s = _mm512_fmadd_pd(lo, lo, _mm512_fmadd_pd(hi, hi, s));
    }
    *l1 = _mm512_reduce_add_pd(a);
    *l2 = _mm512_reduce_add_pd(s);
}

static int64_t hamming_avx512(const uint8_t *a, const uint8_t *b, int64_t n)
{
    __m512i acc = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 64) {
        const __mmask64 m = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
        const __m512i x = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, a + i), _mm512_maskz_loadu_epi8(m, b + i));
        acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(x));
    }
    return _mm512_reduce_add_epi64(acc);
}

void vq_rabitq_kernels_init_avx512(vq_rabitq_kernels *k)
{
    k->sign_norms = sign_norms_avx512;
    k->hamming = hamming_avx512;
}
