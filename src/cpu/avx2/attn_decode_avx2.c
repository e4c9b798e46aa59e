/* attn_decode_avx2.c — AVX2 block decoders of the compressed formats: affine
 * codes, RaBitQ signs and Hamming distances, codebook (nibble) values.
 * Codes are expanded in registers (broadcast + variable shift, or vpshufb /
 * vpermps tables) and written once into the thread's L1 tile. */
#include <immintrin.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "formats/format_bitpack.h"

#include "cpu/avx2/attn_avx2_inline.h"

/* codes [n][ldc] -> out [n][D] = code * scale[c] + zero[c] */
static void kivi_k_tile_avx2(int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *scale,
                               const float *zero, float *out)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *row = codes + j * ldc;
        for (int64_t c = 0; c < D; c += 8) {
            const __m256 x = _mm256_cvtepi32_ps(codes8(row, bits, c));
            _mm256_storeu_ps(out + j * D + c, _mm256_fmadd_ps(x, _mm256_loadu_ps(scale + c), _mm256_loadu_ps(zero + c)));
        }
    }
}

/* codes [n][ldc], vs/vz [n][GV] -> out [n][D] = code * vs[c/g] + vz[c/g];
 * vector path when a group covers whole 8-lane chunks (g % 8 == 0) */
static void kivi_v_tile_avx2(int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *vs,
                               const float *vz, int64_t GV, int64_t g, float *out)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *row = codes + j * ldc;
        const float *s = vs + j * GV, *z = vz + j * GV;
        for (int64_t c = 0; c < D; c += 8) {
            const __m256 x = _mm256_cvtepi32_ps(codes8(row, bits, c));
            __m256 sc, zc;
            if (g % 8 == 0) {
                sc = _mm256_set1_ps(s[c / g]);
                zc = _mm256_set1_ps(z[c / g]);
            } else {
                float st[8], zt[8];
                for (int t = 0; t < 8; t++) {
                    st[t] = s[(c + t) / g];
                    zt[t] = z[(c + t) / g];
                }
                sc = _mm256_loadu_ps(st);
                zc = _mm256_loadu_ps(zt);
            }
            _mm256_storeu_ps(out + j * D + c, _mm256_fmadd_ps(x, sc, zc));
        }
    }
}

/* qb [R][ldq], kb [n][nbytes] -> ham [R][ldh]: 64-bit popcnt over the bytes */
static void hamming_avx2(int R, int n, int64_t nbytes, const uint8_t *qb, int64_t ldq, const uint8_t *kb,
                         int32_t *ham, int64_t ldh)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *k = kb + j * nbytes;
        for (int r = 0; r < R; r++) {
            const uint8_t *q = qb + r * ldq;
            int64_t h = 0, i = 0;
            for (; i + 8 <= nbytes; i += 8) {
                uint64_t a, b;
                __builtin_memcpy(&a, q + i, 8);
                __builtin_memcpy(&b, k + i, 8);
                h += _mm_popcnt_u64(a ^ b);
            }
            for (; i < nbytes; i++) h += _mm_popcnt_u32((unsigned)(q[i] ^ k[i]));
            ham[r * ldh + j] = (int32_t)h;
        }
    }
}

/* bits [n][D/8], mag [n] -> out [n][D] = ±mag: each byte broadcast, tested
 * against the 8 lane bits, and the sign of mag flipped where the bit is 0 */
static void sign_tile_avx2(int n, int64_t D, const uint8_t *bits, const float *mag, float *out)
{
    const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int j = 0; j < n; j++) {
        const __m256 m = _mm256_set1_ps(mag[j]);
        const uint8_t *row = bits + j * (D / 8);
        for (int64_t c = 0; c < D; c += 8) {
            const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(row[c / 8]), lane), lane);
            const __m256 flip = _mm256_andnot_ps(_mm256_castsi256_ps(set), sign);
            _mm256_storeu_ps(out + j * D + c, _mm256_xor_ps(m, flip));
        }
    }
}

/* idx [n][D/2 or D] -> out [n][D] = cents[min(idx, n_cents - 1)] * vscale.
 * Up to 16 centroids live in two registers (vpermps + blend on bit 3);
 * larger codebooks gather. */
static void codebook_tile_avx2(int n, int64_t D, bool packed, const uint8_t *idx, const float *cents, int n_cents,
                               const float *vscale, float *out)
{
    const bool small = n_cents <= 16;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    if (small) lut16_table(cents, n_cents, &lo, &hi);
    /* padded table: clamp to 15; larger codebooks gather, clamped to n_cents - 1 */
    const __m256i top = _mm256_set1_epi32(small ? 15 : n_cents - 1);
    for (int j = 0; j < n; j++) {
        const __m256 sc = _mm256_set1_ps(vscale ? vscale[j] : 1.0f);
        float *o = out + j * D;
        for (int64_t c = 0; c < D; c += 8) {
            const __m256i i8 = cb_index8(idx, packed, D, j, c, top);
            const __m256 x = small ? lut16(i8, lo, hi) : _mm256_i32gather_ps(cents, i8, 4);
            _mm256_storeu_ps(o + c, _mm256_mul_ps(x, sc));
        }
    }
}

/* Two chunks of 32 3-bit codes (12 bytes each), one per 128-bit lane of x
 * at byte offset 0 (lane 0) and off1 (lane 1, 0 or 4) -> their 2 x 16
 * nibble bytes. Output byte k of a chunk is the 6 bits at chunk bit 6k:
 * the word of chunk bytes 6k / 8 and 6k / 8 + 1 (vpshufb), times 2^(10 -
 * 6k % 8) to put the field at bits 10-15 (vpmullw: AVX2 has no per-word
 * shift), >> 10, then the two 3-bit codes split into nibbles. */
static inline __m256i nibbles3_2chunks(__m256i x, int off1)
{
    const __m256i lo = off1 ? _mm256_setr_epi8(0, 1, 0, 1, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 5, 6, 4, 5, 4, 5, 5, 6, 6, 7,
                                              7, 8, 7, 8, 8, 9, 9, 10)
                            : _mm256_setr_epi8(0, 1, 0, 1, 1, 2, 2, 3, 3, 4, 3, 4, 4, 5, 5, 6, 0, 1, 0, 1, 1, 2, 2, 3,
                                              3, 4, 3, 4, 4, 5, 5, 6);
    const __m256i hi = off1 ? _mm256_setr_epi8(6, 7, 6, 7, 7, 8, 8, 9, 9, 10, 9, 10, 10, 11, 11, -1, 10, 11, 10, 11, 11,
                                              12, 12, 13, 13, 14, 13, 14, 14, 15, 15, -1)
                            : _mm256_setr_epi8(6, 7, 6, 7, 7, 8, 8, 9, 9, 10, 9, 10, 10, 11, 11, -1, 6, 7, 6, 7, 7, 8,
                                              8, 9, 9, 10, 9, 10, 10, 11, 11, -1);
    const __m256i mul = _mm256_setr_epi16(1024, 16, 64, 256, 1024, 16, 64, 256, 1024, 16, 64, 256, 1024, 16, 64, 256);
    const __m256i m7 = _mm256_set1_epi16(7), m70 = _mm256_set1_epi16(0x70);
    __m256i w[2];
    for (int h = 0; h < 2; h++) {
        const __m256i v = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(x, h ? hi : lo), mul), 10);
        w[h] = _mm256_or_si256(_mm256_and_si256(v, m7), _mm256_and_si256(_mm256_slli_epi16(v, 1), m70));
    }
    return _mm256_packus_epi16(w[0], w[1]);
}

/* rows [n][ldr] of 48 bytes -> out [n][64] (attn_kernels.h, nibbles3): the
 * chunks at bytes 0 and 12 in one register, those at 24 and 36 (loaded from
 * 32: nothing past the row is read) in another. */
static void nibbles3_avx2(int n, const uint8_t *rows, int64_t ldr, uint8_t *out)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *r = rows + j * ldr;
        const __m256i a = _mm256_loadu2_m128i((const __m128i *)(r + 12), (const __m128i *)r);
        const __m256i b = _mm256_loadu2_m128i((const __m128i *)(r + 32), (const __m128i *)(r + 24));
        _mm256_storeu_si256((__m256i *)(out + j * 64), nibbles3_2chunks(a, 0));
        _mm256_storeu_si256((__m256i *)(out + j * 64 + 32), nibbles3_2chunks(b, 4));
    }
}

/* 16 bytes of 2-bit codes -> their 32 nibble bytes: a byte widened to a
 * word by vpmovzxbw, its four codes moved to the word's four nibbles by
 * shifts and masks. */
static inline __m256i spread2_16(__m128i b)
{
    const __m256i x = _mm256_cvtepu8_epi16(b);
    return _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi16(0x3)), _mm256_and_si256(_mm256_slli_epi16(x, 2), _mm256_set1_epi16(0x30))),
        _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(x, 4), _mm256_set1_epi16(0x300)),
                        _mm256_and_si256(_mm256_slli_epi16(x, 6), _mm256_set1_epi16(0x3000))));
}

/* One row's nibbles (nwb bytes) copied and 2-bit codes (nb2 bytes) spread,
 * 16 source bytes a step. Loads may read up to 15 bytes past the row's
 * nwb + nb2, stores write up to 31 past out + nwb + 2 nb2 (later rows
 * overwrite them). */
static inline void mix_nibbles_row(const uint8_t *row, int64_t nwb, int64_t nb2, uint8_t *out)
{
    for (int64_t i = 0; i < nwb; i += 16) _mm_storeu_si128((__m128i *)(out + i), _mm_loadu_si128((const __m128i *)(row + i)));
    for (int64_t i = 0; i < nb2; i += 16)
        _mm256_storeu_si256((__m256i *)(out + nwb + 2 * i), spread2_16(_mm_loadu_si128((const __m128i *)(row + nwb + i))));
}

/* attn_kernels.h, mix_nibbles: rows whose reads stay inside the rows go
 * straight through (rows of at most 16 bytes of each part, D = 64's, in one
 * step each), the last few through a padded copy (rows of at most 256
 * bytes: D <= 256; longer ones by the scalar form). */
static void mix_nibbles_avx2(int n, const uint8_t *rows, int64_t ldr, int64_t nwb, int64_t nb2, uint8_t *out)
{
    const int64_t rb = nwb + nb2, ldo = nwb + 2 * nb2, c16 = (nwb + 15) / 16 * 16, n16 = nwb + (nb2 + 15) / 16 * 16;
    const int64_t reach = c16 > n16 ? c16 : n16, end = (int64_t)(n - 1) * ldr + rb; /* bytes read, bytes readable */
    int j = 0;
    if (nwb <= 16 && nb2 <= 16)
        for (; j < n && j * ldr + reach <= end; j++) {
            const uint8_t *row = rows + j * ldr;
            uint8_t *dst = out + j * ldo;
            _mm_storeu_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)row));
            _mm256_storeu_si256((__m256i *)(dst + nwb), spread2_16(_mm_loadu_si128((const __m128i *)(row + nwb))));
        }
    _Alignas(32) uint8_t pad[256 + 32];
    for (; j < n; j++) {
        const uint8_t *row = rows + j * ldr;
        uint8_t *dst = out + j * ldo;
        if (j * ldr + reach <= end) {
            mix_nibbles_row(row, nwb, nb2, dst);
        } else if (rb <= 256) {
            memcpy(pad, row, (size_t)rb);
            memset(pad + rb, 0, 32); /* what the loads read past the row */
            mix_nibbles_row(pad, nwb, nb2, dst);
        } else {
            memcpy(dst, row, (size_t)nwb);
            vq_bitpack_spread2_nibbles(row + nwb, nb2, dst + nwb);
        }
    }
}

void vq_attn_kernels_init_avx2_decode(vq_attn_kernels *k)
{
    k->mix_nibbles = mix_nibbles_avx2;
    k->nibbles3 = nibbles3_avx2;
    k->nibbles3_fast = true; /* 3-bit TurboQuant pages 3-7x faster on integers: bench/results/cache_cpu.md */
    k->kivi_k_tile = kivi_k_tile_avx2;
    k->kivi_v_tile = kivi_v_tile_avx2;
    k->hamming = hamming_avx2;
    k->sign_tile = sign_tile_avx2;
    k->codebook_tile = codebook_tile_avx2;
}
