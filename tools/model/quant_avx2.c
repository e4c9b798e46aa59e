/* quant_avx2.c — AVX2+FMA+F16C dot kernels. The weights are unpacked to
 * f32 in registers once per block and used by up to four activation rows
 * (batched prefill reads each weight block once per four tokens). */
#include <immintrin.h>
#include <string.h>

#include "quant.h"

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* 32 weights of a 4-bit block as 4 x 8 f32 (elements 0-7, 8-15, 16-23, 24-31). */
static inline void unpack_q4(const uint8_t *qs, __m256 f[4])
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)qs);
    const __m128i m4 = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
    f[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    f[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
}

static inline __m256 block_dot(const __m256 f[4], const float *x)
{
    __m256 s = _mm256_mul_ps(f[0], _mm256_loadu_ps(x));
    s = _mm256_fmadd_ps(f[1], _mm256_loadu_ps(x + 8), s);
    s = _mm256_fmadd_ps(f[2], _mm256_loadu_ps(x + 16), s);
    return _mm256_fmadd_ps(f[3], _mm256_loadu_ps(x + 24), s);
}

/* The 4-bit affine types: Q4_1 (d, m) and Q4_0 (d, m = -8 d). */
static inline void dot_q4(int64_t cols, const uint8_t *row, const int nx, const float *x, size_t xs,
                          const float *xsum, float *out, const int has_m)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bs = has_m ? sizeof(vqm_block_q4_1) : sizeof(vqm_block_q4_0);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float macc[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bs;
        uint16_t dh, mh = 0;
        memcpy(&dh, b, 2);
        if (has_m) memcpy(&mh, b + 2, 2);
        const float d = h2f(dh), m = has_m ? h2f(mh) : -8.0f * d;
        __m256 f[4];
        unpack_q4(b + (has_m ? 4 : 2), f);
        const __m256 vd = _mm256_set1_ps(d);
        for (int j = 0; j < nx; j++) {
            acc[j] = _mm256_fmadd_ps(block_dot(f, x + j * xs + i * VQM_QK), vd, acc[j]);
            macc[j] += m * xsum[j * nb + i];
        }
    }
    for (int j = 0; j < nx; j++) out[j] = hsum(acc[j]) + macc[j];
}

static inline void dot_q8(int64_t cols, const uint8_t *row, const int nx, const float *x, size_t xs, float *out)
{
    const vqm_block_q8_0 *b = (const vqm_block_q8_0 *)(const void *)row;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < cols / VQM_QK; i++) {
        __m256 f[4];
        for (int q = 0; q < 4; q++) {
            const __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)(b[i].qs + 8 * q));
            f[q] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
        }
        const __m256 vd = _mm256_set1_ps(h2f(b[i].d));
        for (int j = 0; j < nx; j++) acc[j] = _mm256_fmadd_ps(block_dot(f, x + j * xs + i * VQM_QK), vd, acc[j]);
    }
    for (int j = 0; j < nx; j++) out[j] = hsum(acc[j]);
}

/* 16-bit floats (F16 or BF16) and F32: 32 weights per step. */
static inline __m256 load8(const uint8_t *row, int64_t c, int type)
{
    if (type == VQM_W_F32) return _mm256_loadu_ps((const float *)(const void *)row + c);
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * c));
    if (type == VQM_W_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline void dot_float(int64_t cols, const uint8_t *row, const int nx, const float *x, size_t xs,
                             float *out, const int type)
{
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t c = 0; c < cols; c += VQM_QK) {
        __m256 f[4];
        for (int q = 0; q < 4; q++) f[q] = load8(row, c + 8 * q, type);
        for (int j = 0; j < nx; j++) acc[j] = _mm256_add_ps(acc[j], block_dot(f, x + j * xs + c));
    }
    for (int j = 0; j < nx; j++) out[j] = hsum(acc[j]);
}

/* ---- the packed layout (quant.h): a lane per row, the tile's 16 rows as
 * two halves of 8; the prefetch as in the AVX-512 file ---- */
static inline void tile_q4(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs,
                           const float *xsum, float *out, const int has_m)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bb = has_m ? 20 * VQM_TILE : 18 * VQM_TILE;
    const __m256i m4 = _mm256_set1_epi32(15);
    __m256 acc[4][2];
    for (int j = 0; j < nx; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = tile + (size_t)b * bb;
        __m256 vd[2], vm[2];
        for (int h = 0; h < 2; h++) {
            vd[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * h)));
            vm[h] = has_m ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 32 + 16 * h)))
                          : _mm256_mul_ps(vd[h], _mm256_set1_ps(-8.0f));
        }
        const uint8_t *qs = p + (has_m ? 64 : 32);
        for (size_t o = 0; o < bb; o += 64) _mm_prefetch((const char *)(p + VQM_PF_BLOCKS * bb + o), _MM_HINT_T0);
        __m256 s[4][2];
        for (int j = 0; j < nx; j++) s[j][0] = s[j][1] = _mm256_setzero_ps();
        for (int e = 0; e < VQM_QK / 2; e++) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(qs + e * VQM_TILE));
            for (int h = 0; h < 2; h++) {
                const __m256i w = _mm256_cvtepu8_epi32(h ? _mm_srli_si128(v, 8) : v);
                const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(w, m4));
                const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(w, 4));
                for (int j = 0; j < nx; j++) {
                    const float *xb = x + j * xs + b * VQM_QK;
                    s[j][h] = _mm256_fmadd_ps(lo, _mm256_set1_ps(xb[e]), s[j][h]);
                    s[j][h] = _mm256_fmadd_ps(hi, _mm256_set1_ps(xb[e + 16]), s[j][h]);
                }
            }
        }
        for (int j = 0; j < nx; j++)
            for (int h = 0; h < 2; h++) {
                acc[j][h] = _mm256_fmadd_ps(s[j][h], vd[h], acc[j][h]);
                acc[j][h] = _mm256_fmadd_ps(vm[h], _mm256_set1_ps(xsum[j * nb + b]), acc[j][h]);
            }
    }
    for (int j = 0; j < nx; j++)
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + j * VQM_TILE + 8 * h, acc[j][h]);
}

static inline void tile_q8(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs, float *out)
{
    const int64_t nb = cols / VQM_QK;
    __m256 acc[4][2];
    for (int j = 0; j < nx; j++) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = tile + (size_t)b * 34 * VQM_TILE;
        const uint8_t *qs = p + 32;
        for (size_t o = 0; o < 34 * VQM_TILE; o += 64)
            _mm_prefetch((const char *)(p + VQM_PF_BLOCKS * 34 * VQM_TILE + o), _MM_HINT_T0);
        __m256 s[4][2];
        for (int j = 0; j < nx; j++) s[j][0] = s[j][1] = _mm256_setzero_ps();
        for (int e = 0; e < VQM_QK; e++) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(qs + e * VQM_TILE));
            for (int h = 0; h < 2; h++) {
                const __m256 w = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h ? _mm_srli_si128(v, 8) : v));
                for (int j = 0; j < nx; j++)
                    s[j][h] = _mm256_fmadd_ps(w, _mm256_set1_ps(x[j * xs + b * VQM_QK + e]), s[j][h]);
            }
        }
        for (int j = 0; j < nx; j++)
            for (int h = 0; h < 2; h++)
                acc[j][h] = _mm256_fmadd_ps(
                    s[j][h], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * h))), acc[j][h]);
    }
    for (int j = 0; j < nx; j++)
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + j * VQM_TILE + 8 * h, acc[j][h]);
}

#define VQM_ISA_NAME "avx2"
#define VQM_ISA_INIT vqm_kernels_avx2
#include "quant_entries.h"
