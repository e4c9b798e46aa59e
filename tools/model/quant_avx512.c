/* quant_avx512.c — AVX-512 primitives of the tile kernels (quant_tiles.h):
 * the 16 rows of a tile are one zmm. A 4-bit code widened to a dword
 * indexes a 16-float table of 0..15 directly (vpermps reads only the
 * index's low 4 bits; the high nibble after a 4-bit shift): two shuffles
 * instead of two masks and two int-to-float conversions. */
#include <immintrin.h>

#include "quant.h"

typedef __m512 vr;
#define VR_CHAINS 4

static inline vr vr_zero(void) { return _mm512_setzero_ps(); }
static inline vr vr_set1(float f) { return _mm512_set1_ps(f); }
static inline vr vr_add(vr a, vr b) { return _mm512_add_ps(a, b); }
static inline vr vr_mul(vr a, vr b) { return _mm512_mul_ps(a, b); }
static inline vr vr_fma(vr a, vr b, vr c) { return _mm512_fmadd_ps(a, b, c); }
static inline void vr_store(float *out, vr v) { _mm512_storeu_ps(out, v); }
static inline __m128i load16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }
static inline __m256i load32(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
static inline vr vr_f16(const uint8_t *p) { return _mm512_cvtph_ps(load32(p)); }
static inline vr vr_bf16(const uint8_t *p) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load32(p)), 16)); }
static inline vr vr_f32(const uint8_t *p) { return _mm512_loadu_ps((const float *)(const void *)p); }
static inline vr vr_q8(const uint8_t *p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load16(p))); }
static inline void vr_q4(const uint8_t *p, vr *lo, vr *hi)
{
    const __m512 lut = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i v = _mm512_cvtepu8_epi32(load16(p));
    *lo = _mm512_permutexvar_ps(v, lut);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut);
}

static inline vr vr_bits(const uint8_t *p, int shift, int mask, int sub)
{
    const __m512i v = _mm512_srl_epi32(_mm512_loadu_si512((const void *)p), _mm_cvtsi32_si128(shift));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(v, _mm512_set1_epi32(mask)), _mm512_set1_epi32(sub)));
}

#include "quant_tiles.h"

#define VQM_ISA_NAME "avx512"
#define VQM_ISA_INIT vqm_kernels_avx512
#include "quant_entries.h"
