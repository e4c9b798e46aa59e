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

/* ---- the packed layout (quant.h): a lane per row of the tile ----
 * Per byte position e: one 16-byte load (byte e of the 16 rows) widened to
 * dwords; the low nibble indexes a 16-float table of 0..15 directly
 * (vpermps reads the index's low 4 bits) and so does the word shifted by 4:
 * the two weight vectors of elements e and e + 16, each multiplied by one
 * broadcast activation. Four accumulator chains per activation row hide
 * the FMA latency; the block's d (and m, or -8 d) are one vector each.
 * Each tile-block prefetches the one VQM_PF_BLOCKS ahead (the next tile
 * follows in memory): without it decode waited on every cache line
 * (about 21 -> 14 CPU-ms per token on the shared Xeon VM). */
static inline void tile_q4(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs,
                           const float *xsum, float *out, const int has_m)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bb = has_m ? 20 * VQM_TILE : 18 * VQM_TILE;
    const __m512 lut = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = tile + (size_t)b * bb;
        const __m512 vd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
        const __m512 vm = has_m ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)))
                                : _mm512_mul_ps(vd, _mm512_set1_ps(-8.0f));
        const uint8_t *qs = p + (has_m ? 64 : 32);
        for (size_t o = 0; o < bb; o += 64) _mm_prefetch((const char *)(p + VQM_PF_BLOCKS * bb + o), _MM_HINT_T0);
        __m512 s[4][4];
        for (int j = 0; j < nx; j++)
            for (int c = 0; c < 4; c++) s[j][c] = _mm512_setzero_ps();
        for (int e = 0; e < VQM_QK / 2; e += 2)
            for (int u = 0; u < 2; u++) {
                const __m512i v =
                    _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(qs + (e + u) * VQM_TILE)));
                const __m512 lo = _mm512_permutexvar_ps(v, lut);
                const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut);
                for (int j = 0; j < nx; j++) {
                    const float *xb = x + j * xs + b * VQM_QK;
                    s[j][2 * u] = _mm512_fmadd_ps(lo, _mm512_set1_ps(xb[e + u]), s[j][2 * u]);
                    s[j][2 * u + 1] = _mm512_fmadd_ps(hi, _mm512_set1_ps(xb[e + u + 16]), s[j][2 * u + 1]);
                }
            }
        for (int j = 0; j < nx; j++) {
            const __m512 sj = _mm512_add_ps(_mm512_add_ps(s[j][0], s[j][1]), _mm512_add_ps(s[j][2], s[j][3]));
            acc[j] = _mm512_fmadd_ps(sj, vd, acc[j]);
            acc[j] = _mm512_fmadd_ps(vm, _mm512_set1_ps(xsum[j * nb + b]), acc[j]);
        }
    }
    for (int j = 0; j < nx; j++) _mm512_storeu_ps(out + j * VQM_TILE, acc[j]);
}

static inline void tile_q8(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs, float *out)
{
    const int64_t nb = cols / VQM_QK;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = tile + (size_t)b * 34 * VQM_TILE;
        const __m512 vd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
        const uint8_t *qs = p + 32;
        for (size_t o = 0; o < 34 * VQM_TILE; o += 64)
            _mm_prefetch((const char *)(p + VQM_PF_BLOCKS * 34 * VQM_TILE + o), _MM_HINT_T0);
        __m512 s[4][4];
        for (int j = 0; j < nx; j++)
            for (int c = 0; c < 4; c++) s[j][c] = _mm512_setzero_ps();
        for (int e = 0; e < VQM_QK; e += 4)
            for (int u = 0; u < 4; u++) {
                const __m512 w = _mm512_cvtepi32_ps(
                    _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(qs + (e + u) * VQM_TILE))));
                for (int j = 0; j < nx; j++)
                    s[j][u] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[j * xs + b * VQM_QK + e + u]), s[j][u]);
            }
        for (int j = 0; j < nx; j++) {
            const __m512 sj = _mm512_add_ps(_mm512_add_ps(s[j][0], s[j][1]), _mm512_add_ps(s[j][2], s[j][3]));
            acc[j] = _mm512_fmadd_ps(sj, vd, acc[j]);
        }
    }
    for (int j = 0; j < nx; j++) _mm512_storeu_ps(out + j * VQM_TILE, acc[j]);
}

#define VQM_ISA_NAME "avx512"
#define VQM_ISA_INIT vqm_kernels_avx512
#include "quant_entries.h"
