/* quant_avx2.c — AVX2+FMA+F16C primitives of the tile kernels
 * (quant_tiles.h): the 16 rows of a tile are two ymm of 8. */
#include <immintrin.h>

#include "quant.h"

typedef struct vr {
    __m256 h[2]; /* rows 0-7, 8-15 */
} vr;
#define VR_CHAINS 2 /* of two ymm each: 16 registers hold no more */

static inline vr vr_two(__m256 a, __m256 b) { return (vr){{a, b}}; }
static inline vr vr_zero(void) { return vr_two(_mm256_setzero_ps(), _mm256_setzero_ps()); }
static inline vr vr_set1(float f) { return vr_two(_mm256_set1_ps(f), _mm256_set1_ps(f)); }
static inline vr vr_add(vr a, vr b) { return vr_two(_mm256_add_ps(a.h[0], b.h[0]), _mm256_add_ps(a.h[1], b.h[1])); }
static inline vr vr_mul(vr a, vr b) { return vr_two(_mm256_mul_ps(a.h[0], b.h[0]), _mm256_mul_ps(a.h[1], b.h[1])); }
static inline vr vr_fma(vr a, vr b, vr c)
{
    return vr_two(_mm256_fmadd_ps(a.h[0], b.h[0], c.h[0]), _mm256_fmadd_ps(a.h[1], b.h[1], c.h[1]));
}
static inline void vr_store(float *out, vr v)
{
    _mm256_storeu_ps(out, v.h[0]);
    _mm256_storeu_ps(out + 8, v.h[1]);
}
static inline __m128i load16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }
static inline vr vr_f16(const uint8_t *p) { return vr_two(_mm256_cvtph_ps(load16(p)), _mm256_cvtph_ps(load16(p + 16))); }
static inline __m256 bf16x8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
static inline vr vr_bf16(const uint8_t *p) { return vr_two(bf16x8(load16(p)), bf16x8(load16(p + 16))); }
static inline vr vr_f32(const uint8_t *p)
{
    return vr_two(_mm256_loadu_ps((const float *)(const void *)p), _mm256_loadu_ps((const float *)(const void *)p + 8));
}
static inline vr vr_q8(const uint8_t *p)
{
    const __m128i v = load16(p);
    return vr_two(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8))));
}
static inline void vr_q4(const uint8_t *p, vr *lo, vr *hi)
{
    const __m128i v = load16(p);
    const __m256i a = _mm256_cvtepu8_epi32(v), b = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
    const __m256i m4 = _mm256_set1_epi32(15);
    *lo = vr_two(_mm256_cvtepi32_ps(_mm256_and_si256(a, m4)), _mm256_cvtepi32_ps(_mm256_and_si256(b, m4)));
    *hi = vr_two(_mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4)));
}

static inline vr vr_bits(const uint8_t *p, int shift, int mask, int sub)
{
    const __m128i sh = _mm_cvtsi32_si128(shift);
    const __m256i m = _mm256_set1_epi32(mask), s = _mm256_set1_epi32(sub);
    const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)p);
    const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32));
    return vr_two(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(_mm256_srl_epi32(a, sh), m), s)),
                  _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(_mm256_srl_epi32(b, sh), m), s)));
}

#include "quant_tiles.h"

#define VQM_ISA_NAME "avx2"
#define VQM_ISA_INIT vqm_kernels_avx2
#include "quant_entries.h"
