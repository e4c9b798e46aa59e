/* quant_avx512.c — AVX-512 dot kernels: a 32-weight block is two zmm
 * registers; as in the AVX2 file, each unpacked block serves up to four
 * activation rows. */
#include <immintrin.h>
#include <string.h>

#include "quant.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline __m512 dot2(__m512 f0, __m512 f1, const float *x)
{
    return _mm512_fmadd_ps(f1, _mm512_loadu_ps(x + 16), _mm512_mul_ps(f0, _mm512_loadu_ps(x)));
}

static inline void dot_q4(int64_t cols, const uint8_t *row, const int nx, const float *x, size_t xs,
                          const float *xsum, float *out, const int has_m)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bs = has_m ? sizeof(vqm_block_q4_1) : sizeof(vqm_block_q4_0);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    float macc[4] = {0, 0, 0, 0};
    const __m128i m4 = _mm_set1_epi8(15);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bs;
        uint16_t dh, mh = 0;
        memcpy(&dh, b, 2);
        if (has_m) memcpy(&mh, b + 2, 2);
        const float d = h2f(dh), m = has_m ? h2f(mh) : -8.0f * d;
        const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + (has_m ? 4 : 2)));
        const __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(v, m4)));
        const __m512 f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), m4)));
        const __m512 vd = _mm512_set1_ps(d);
        for (int j = 0; j < nx; j++) {
            acc[j] = _mm512_fmadd_ps(dot2(f0, f1, x + j * xs + i * VQM_QK), vd, acc[j]);
            macc[j] += m * xsum[j * nb + i];
        }
    }
    for (int j = 0; j < nx; j++) out[j] = _mm512_reduce_add_ps(acc[j]) + macc[j];
}

static inline void dot_q8(int64_t cols, const uint8_t *row, const int nx, const float *x, size_t xs, float *out)
{
    const vqm_block_q8_0 *b = (const vqm_block_q8_0 *)(const void *)row;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < cols / VQM_QK; i++) {
        const __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)b[i].qs)));
        const __m512 f1 =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(b[i].qs + 16))));
        const __m512 vd = _mm512_set1_ps(h2f(b[i].d));
        for (int j = 0; j < nx; j++) acc[j] = _mm512_fmadd_ps(dot2(f0, f1, x + j * xs + i * VQM_QK), vd, acc[j]);
    }
    for (int j = 0; j < nx; j++) out[j] = _mm512_reduce_add_ps(acc[j]);
}

static inline __m512 load16(const uint8_t *row, int64_t c, int type)
{
    if (type == VQM_W_F32) return _mm512_loadu_ps((const float *)(const void *)row + c);
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * c));
    if (type == VQM_W_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline void dot_float(int64_t cols, const uint8_t *row, const int nx, const float *x, size_t xs,
                             float *out, const int type)
{
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t c = 0; c < cols; c += VQM_QK) {
        const __m512 f0 = load16(row, c, type), f1 = load16(row, c + 16, type);
        for (int j = 0; j < nx; j++) acc[j] = _mm512_add_ps(acc[j], dot2(f0, f1, x + j * xs + c));
    }
    for (int j = 0; j < nx; j++) out[j] = _mm512_reduce_add_ps(acc[j]);
}

#define VQM_ISA_NAME "avx512"
#define VQM_ISA_INIT vqm_kernels_avx512
#include "quant_entries.h"
