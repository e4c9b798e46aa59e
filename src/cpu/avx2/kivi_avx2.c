/* kivi_avx2.c — AVX2 kernels of the group-affine codec, 8 channels per step
 * with the scalar loop for the tail. Same arithmetic as the scalar kernels
 * (IEEE division, round-half-to-even, multiply then add), so the codes and
 * decodes are bit-identical to them. */
#include <immintrin.h>
#include <math.h>

#include "codecs/kivi_kernels.h"

static void minmax_update_avx2(const float *x, int64_t d, float *mn, float *mx)
{
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) {
        const __m256 v = _mm256_loadu_ps(x + c);
        _mm256_storeu_ps(mn + c, _mm256_min_ps(v, _mm256_loadu_ps(mn + c)));
        _mm256_storeu_ps(mx + c, _mm256_max_ps(v, _mm256_loadu_ps(mx + c)));
    }
    for (; c < d; c++) {
        mn[c] = x[c] < mn[c] ? x[c] : mn[c];
        mx[c] = x[c] > mx[c] ? x[c] : mx[c];
    }
}

/* 8 quotients -> 8 codes in the low 8 bytes. */
static inline __m128i codes8(__m256 x, __m256 scale, __m256 zero, __m256 maxq)
{
    __m256 q = _mm256_div_ps(_mm256_sub_ps(x, zero), scale);
    q = _mm256_max_ps(q, _mm256_setzero_ps());   /* NaN -> 0: max returns its 2nd operand */
    q = _mm256_min_ps(q, maxq);
    q = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm256_andnot_ps(_mm256_cmp_ps(scale, _mm256_setzero_ps(), _CMP_EQ_OQ), q);
    const __m256i i = _mm256_cvttps_epi32(q);
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    return _mm_packus_epi16(w, w);
}

static void encode_row_avx2(const float *x, const float *scale, const float *zero, int64_t d, float maxq,
                            uint8_t *codes)
{
    const __m256 vmax = _mm256_set1_ps(maxq);
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) {
        const __m128i b = codes8(_mm256_loadu_ps(x + c), _mm256_loadu_ps(scale + c), _mm256_loadu_ps(zero + c), vmax);
        _mm_storel_epi64((__m128i *)(codes + c), b);
    }
    for (; c < d; c++) {
        float q = (x[c] - zero[c]) / scale[c];
        q = q > 0.0f ? q : 0.0f;
        q = q < maxq ? q : maxq;
        codes[c] = scale[c] != 0.0f ? (uint8_t)nearbyintf(q) : 0;
    }
}

static void decode_row_avx2(const uint8_t *codes, const float *scale, const float *zero, int64_t d, float *out)
{
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) {
        const __m128i b = _mm_loadl_epi64((const __m128i *)(codes + c));
        const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
        _mm256_storeu_ps(out + c, _mm256_add_ps(_mm256_mul_ps(f, _mm256_loadu_ps(scale + c)), _mm256_loadu_ps(zero + c)));
    }
    for (; c < d; c++) out[c] = (float)codes[c] * scale[c] + zero[c];
}

void vq_kivi_kernels_init_avx2(vq_kivi_kernels *k)
{
    k->minmax_update = minmax_update_avx2;
    k->encode_row = encode_row_avx2;
    k->decode_row = decode_row_avx2;
}
