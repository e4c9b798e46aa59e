/* attn_codebook_vbmi.c — codebook values by byte look-ups (attn_kernels.h,
 * codebook_tile), installed where the CPU has AVX512_VBMI (this file alone
 * is built with -mavx512vbmi).
 *
 * The AVX2 kernel gathers one f32 per element for codebooks past 16
 * centroids (the 8-bit TurboQuant window's 256): on Zen 4 a gather of 8
 * costs about as much as 20 vector ops. Here the table is split into its
 * four byte planes (plane p: byte p of every centroid, 256 bytes = 4
 * registers), and 64 codes look up each plane with two vpermi2b (centroids
 * 0-127 and 128-255 by the low 7 bits) and one blend on bit 7; two rounds
 * of unpacks put the planes' bytes back together as 64 floats. The codes
 * are first moved (one vpermb) so that those in-lane unpacks leave the
 * floats in order. A centroid index past n_cents - 1 reads the last
 * centroid (the table is padded with it), as the other ISAs clamp; the
 * floats are the centroids' bits, times the row's scale as the others
 * multiply, so the tile is theirs bit for bit. The planes are built once
 * per call (about a token's worth of look-ups): the callers pass a block's
 * contiguous rows in one call where they can, and short calls go to the
 * AVX2 kernel. */
#include <immintrin.h>
#include <string.h>

#include "attention/attn_kernels.h"

/* order[P]: the code that unpacks to float slot P: after the byte then the
 * word unpacks, float m of 128-bit lane k of result register u comes from
 * byte 16 k + 4 u + m of the planes, which must be code 16 u + 4 k + m. */
static uint8_t order[64];

static void build_order(void)
{
    for (int k = 0; k < 4; k++)
        for (int u = 0; u < 4; u++)
            for (int m = 0; m < 4; m++) order[16 * k + 4 * u + m] = (uint8_t)(16 * u + 4 * k + m);
}

/* The padded table's byte planes: pl[p][0..3] hold byte p of centroids
 * 64 i .. 64 i + 63 in register i. */
static void build_planes(const float *cents, int n_cents, __m512i pl[4][4])
{
    _Alignas(64) float t[256];
    memcpy(t, cents, sizeof(float) * (size_t)n_cents);
    for (int i = n_cents; i < 256; i++) t[i] = cents[n_cents - 1];
    for (int i = 0; i < 4; i++) {
        __m512i f[4];
        for (int j = 0; j < 4; j++) f[j] = _mm512_load_si512(t + 64 * i + 16 * j);
        for (int p = 0; p < 4; p++) {
            __m128i b[4];
            for (int j = 0; j < 4; j++) b[j] = _mm512_cvtepi32_epi8(_mm512_srli_epi32(f[j], 8 * p));
            const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(b[0]), b[1], 1);
            const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(b[2]), b[3], 1);
            pl[p][i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
    }
}

/* 64 codes (one a byte, in order) -> 64 floats (4 registers) of the table. */
static inline void look_up64(__m512i codes, const __m512i pl[4][4], __m512 out[4])
{
    const __m512i x = _mm512_permutexvar_epi8(_mm512_loadu_si512(order), codes);
    const __mmask64 high = _mm512_movepi8_mask(x); /* bit 7: centroids 128-255 */
    __m512i b[4];
    for (int p = 0; p < 4; p++) {
        const __m512i lo = _mm512_permutex2var_epi8(pl[p][0], x, pl[p][1]);
        const __m512i hi = _mm512_permutex2var_epi8(pl[p][2], x, pl[p][3]);
        b[p] = _mm512_mask_blend_epi8(high, lo, hi);
    }
    const __m512i w01l = _mm512_unpacklo_epi8(b[0], b[1]), w01h = _mm512_unpackhi_epi8(b[0], b[1]);
    const __m512i w23l = _mm512_unpacklo_epi8(b[2], b[3]), w23h = _mm512_unpackhi_epi8(b[2], b[3]);
    out[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w01l, w23l));
    out[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w01l, w23l));
    out[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w01h, w23h));
    out[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w01h, w23h));
}

/* The AVX2 kernel, for what the planes do not repay: nibble-packed codes
 * (16 centroids at most: a two-register look-up, no table to build) and
 * calls of fewer than 256 codes (a token at D = 64, as the 6-bit window's
 * token-by-token decode makes), where building the planes costs about what
 * its gathers do. */
static void (*codebook_tile_avx2)(int n, int64_t D, bool packed, const uint8_t *idx, const float *cents,
                                  int n_cents, const float *vscale, float *out);

static void codebook_tile_vbmi(int n, int64_t D, bool packed, const uint8_t *idx, const float *cents, int n_cents,
                               const float *vscale, float *out)
{
    if (packed || (int64_t)n * D < 256) {
        codebook_tile_avx2(n, D, packed, idx, cents, n_cents, vscale, out);
        return;
    }
    __m512i pl[4][4];
    build_planes(cents, n_cents, pl);
    for (int j = 0; j < n; j++) {
        const __m512 sc = _mm512_set1_ps(vscale ? vscale[j] : 1.0f);
        const uint8_t *row = idx + j * D;
        float *o = out + j * D;
        for (int64_t c = 0; c < D; c += 64) {
            const int m = D - c < 64 ? (int)(D - c) : 64; /* codes past the row's end: 0, not stored */
            __m512 f[4];
            look_up64(_mm512_maskz_loadu_epi8(m == 64 ? ~0ull : (1ull << m) - 1u, row + c), pl, f);
            for (int u = 0; u < 4 && 16 * u < m; u++) {
                const int left = m - 16 * u;
                const __mmask16 k = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
                _mm512_mask_storeu_ps(o + c + 16 * u, k, _mm512_mul_ps(f[u], sc));
            }
        }
    }
}

void vq_attn_kernels_init_avx512_codebook(vq_attn_kernels *k)
{
    build_order();
    if (k->codebook_tile != codebook_tile_vbmi) codebook_tile_avx2 = k->codebook_tile;
    k->codebook_tile = codebook_tile_vbmi;
}
