/* kivi_avx512.c — AVX-512 kernels of the group-affine codec: 16 channels per
 * step, the tail through a lane mask (no scalar loop). Same arithmetic as the
 * scalar kernels, so the results are bit-identical to them. */
#include <immintrin.h>

#include "codecs/kivi_kernels.h"

static inline __mmask16 tail_mask(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u); }

static void minmax_update_avx512(const float *x, int64_t d, float *mn, float *mx)
{
    for (int64_t c = 0; c < d; c += 16) {
        const __mmask16 m = tail_mask(d - c);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + c);
        _mm512_mask_storeu_ps(mn + c, m, _mm512_min_ps(v, _mm512_maskz_loadu_ps(m, mn + c)));
        _mm512_mask_storeu_ps(mx + c, m, _mm512_max_ps(v, _mm512_maskz_loadu_ps(m, mx + c)));
    }
}

static void encode_row_avx512(const float *x, const float *scale, const float *zero, int64_t d, float maxq,
                              uint8_t *codes)
{
    const __m512 vmax = _mm512_set1_ps(maxq), z = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; c += 16) {
        const __mmask16 m = tail_mask(d - c);
        /* masked-off lanes divide 0 by 1 */
        const __m512 s = _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m, scale + c);
        __m512 q = _mm512_div_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + c), _mm512_maskz_loadu_ps(m, zero + c)), s);
        q = _mm512_max_ps(q, z);   /* NaN -> 0 */
        q = _mm512_min_ps(q, vmax);
        q = _mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __mmask16 live = _mm512_cmp_ps_mask(s, z, _CMP_NEQ_UQ);
        const __m512i i = _mm512_maskz_cvttps_epi32(live, q);
        _mm_mask_storeu_epi8(codes + c, m, _mm512_cvtepi32_epi8(i));
    }
}

static void decode_row_avx512(const uint8_t *codes, const float *scale, const float *zero, int64_t d, float *out)
{
    for (int64_t c = 0; c < d; c += 16) {
        const __mmask16 m = tail_mask(d - c);
        const __m128i b = _mm_maskz_loadu_epi8(m, codes + c);
        const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
        const __m512 r = _mm512_add_ps(_mm512_mul_ps(f, _mm512_maskz_loadu_ps(m, scale + c)),
                                       _mm512_maskz_loadu_ps(m, zero + c));
        _mm512_mask_storeu_ps(out + c, m, r);
    }
}

void vq_kivi_kernels_init_avx512(vq_kivi_kernels *k)
{
    k->minmax_update = minmax_update_avx512;
    k->encode_row = encode_row_avx512;
    k->decode_row = decode_row_avx512;
}
