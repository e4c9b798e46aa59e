/* attn_q8_vbmi.c — AVX-512 query quantisation for the integer key scores
 * (attn_kernels.h, affine_q8), installed only where the CPU has AVX512_VBMI
 * (this file alone is built with -mavx512vbmi).
 *
 * One pass computes x = q * scale (kept in a stack row), max |x|, the
 * non-finite flag (vfpclassps) and q . zero; a second rounds x * (127 / amax)
 * to int32 (nearest even, the same f32 products as the other ISAs), narrows
 * 16 lanes at a time to bytes (vpmovsdb; |x| <= 127 so nothing saturates)
 * into natural channel order, and moves every byte to its plane position
 * (vq_attn_q8_pos) with two-source byte permutes (vpermt2b), the index
 * vectors built once per (bits, D) at table construction. */
#include <immintrin.h>
#include <math.h>

#include "attention/attn_kernels.h"

/* Plane-order gathers: output byte b of register a (position 64a + b) takes
 * natural channel src[a][b]; D <= 256 gives at most 4 registers. */
typedef struct plane_perm {
    uint8_t src[4][64];
} plane_perm;

/* [bits == 4][D / 64 - 1] for D in {64, 128, 192, 256} */
static plane_perm perms[2][4];

static void build_perms(void)
{
    for (int b4 = 0; b4 < 2; b4++)
        for (int nd = 1; nd <= 4; nd++) {
            const int bits = b4 ? 4 : 2;
            const int64_t D = 64 * nd;
            if (!vq_attn_q8_supported(bits, D)) continue;
            for (int64_t c = 0; c < D; c++) {
                const int64_t pos = vq_attn_q8_pos(c, bits, D);
                perms[b4][nd - 1].src[pos / 64][pos % 64] = (uint8_t)c;
            }
        }
}

static void affine_q8_vbmi(int R, int64_t D, int bits, const float *q, int64_t ldq, const float *scale,
                           const float *zero, int8_t *xq, float *dz)
{
    const int NR = (int)(D / 64); /* output registers */
    const plane_perm *pp = &perms[bits == 4][NR - 1];
    __m512i idx[4];
    for (int a = 0; a < NR; a++) idx[a] = _mm512_loadu_si512(pp->src[a]);
    for (int r = 0; r < R; r++) {
        const float *qr = q + r * ldq;
        float xs[256];
        __m512 amax = _mm512_setzero_ps(), qz = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int64_t c = 0; c < D; c += 16) {
            const __m512 qv = _mm512_loadu_ps(qr + c), x = _mm512_mul_ps(qv, _mm512_loadu_ps(scale + c));
            _mm512_storeu_ps(xs + c, x);
            amax = _mm512_max_ps(amax, _mm512_abs_ps(x));
            bad |= _mm512_fpclass_ps_mask(x, 0x99); /* QNaN | SNaN | +inf | -inf */
            qz = _mm512_fmadd_ps(qv, _mm512_loadu_ps(zero + c), qz);
        }
        const float am = _mm512_reduce_max_ps(amax), z = _mm512_reduce_add_ps(qz);
        const bool finite = bad == 0 && isfinite(z);
        const __m512 inv = _mm512_set1_ps(vq_attn_q8_inv(am, finite));
        __m512i nat[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                          _mm512_setzero_si512()}; /* int8 in natural order, 64 channels per register */
        for (int a = 0; a < NR; a++) {
            __m128i part[4];
            for (int u = 0; u < 4; u++)
                part[u] = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + 64 * a + 16 * u), inv)));
            const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(part[0]), part[1], 1);
            const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(part[2]), part[3], 1);
            nat[a] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
        int8_t *xr = xq + r * D;
        for (int a = 0; a < NR; a++) {
            /* channels < 128 from nat[0..1], >= 128 from nat[2..3] (index bit 7) */
            __m512i v = _mm512_permutex2var_epi8(nat[0], idx[a], NR > 1 ? nat[1] : nat[0]);
            if (NR > 2) {
                const __m512i h = _mm512_permutex2var_epi8(nat[2], idx[a], NR > 3 ? nat[3] : nat[2]);
                v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx[a]), v, h);
            }
            _mm512_storeu_si512(xr + 64 * a, v);
        }
        dz[2 * r] = finite ? am / 127.0f : NAN;
        dz[2 * r + 1] = z;
    }
}

void vq_attn_kernels_init_avx512_vbmi(vq_attn_kernels *k)
{
    build_perms();
    k->affine_q8 = affine_q8_vbmi;
}
