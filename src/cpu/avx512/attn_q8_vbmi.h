/* attn_q8_vbmi.h — the inline body of kivi_q8 (attn_q8_vbmi.c: how it works), shared with the fused KIVI block kernel
 * (attn_kivi_int8_vnnivbmi.c). Internal; include only from a file built with its
 * flags (the file names say which). */
#ifndef VQ_ATTN_Q8_VBMI_H
#define VQ_ATTN_Q8_VBMI_H

#include <immintrin.h>
#include <math.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_avx512_inline.h"


/* Plane-order gathers: output byte b of register a (position 64a + b) takes
 * byte src[a][b] of the packed registers (bit 7: registers 2-3); D <= 256
 * gives at most 4 registers. */
typedef struct plane_perm {
    uint8_t src[4][64];
} plane_perm;

/* [bits == 4][D / 64 - 1] for D in {64, 128, 192, 256} */
static plane_perm perms[2][4];

/* Where channel c sits after vpackssdw(v0, v1), vpackssdw(v2, v3),
 * vpacksswb of the two (v_i = channels 64a + 16i .. +15 as int32): byte k of
 * 128-bit lane L holds lane 4L + k % 4 of v_{k / 4}. */
static int packed_pos(int64_t c)
{
    const int64_t e = c % 16, vi = (c % 64) / 16;
    return (int)(64 * (c / 64) + 16 * (e / 4) + 4 * vi + e % 4);
}

static void build_perms(void)
{
    for (int b4 = 0; b4 < 2; b4++)
        for (int nd = 1; nd <= 4; nd++) {
            const int bits = b4 ? 4 : 2;
            const int64_t D = 64 * nd;
            if (!vq_attn_q8_supported(bits, D)) continue;
            for (int64_t c = 0; c < D; c++) {
                const int64_t pos = vq_attn_q8_pos(c, bits, D);
                perms[b4][nd - 1].src[pos / 64][pos % 64] = (uint8_t)packed_pos(c);
            }
        }
}


/* RB <= 4 rows of NV = D / 16 vectors; sfin: every scale[c] is finite. */
VQ_INLINE void q8_rows(int RB, int NV, const __m512i *idx, const float *q, int64_t ldq, const float *scale,
                       const float *zero, bool sfin, int8_t *xq, float *dz)
{
    const int NR = NV / 4; /* 64-channel registers */
    /* the products q * scale, kept for the rounding pass: a load there (a
     * memory operand of its product) where recomputing them was a second
     * vector product per element, on the ports the block is bound by */
    _Alignas(64) float xs[4][256];
    __m512 am[4], qz[4];
    for (int r = 0; r < 4; r++) {
        am[r] = _mm512_setzero_ps();
        qz[r] = _mm512_setzero_ps();
        if (r >= RB) continue;
        const float *qr = q + r * ldq;
        __m512 a2[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, z2[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int v = 0; v < NV; v++) {
            const __m512 qv = _mm512_loadu_ps(qr + 16 * v), x = _mm512_mul_ps(qv, _mm512_loadu_ps(scale + 16 * v));
            _mm512_store_ps(xs[r] + 16 * v, x);
            a2[v & 1] = absmax(a2[v & 1], x);
            z2[v & 1] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(zero + 16 * v), z2[v & 1]);
        }
        am[r] = absmax(a2[0], a2[1]);
        qz[r] = _mm512_add_ps(z2[0], z2[1]);
    }
    const __m512 amax = VQ_REDUCE4(absmax, am), z = VQ_REDUCE4(_mm512_add_ps, qz);
    /* lane 4r: row r. finite: scale, q . zero and amax finite (top of file) */
    const __mmask16 fin = (__mmask16)(sfin ? 0xffff : 0) & (__mmask16)~_mm512_fpclass_ps_mask(amax, 0x99) &
                          (__mmask16)~_mm512_fpclass_ps_mask(z, 0x99);
    __m512 inv = _mm512_div_ps(_mm512_set1_ps(127.0f), amax); /* vq_attn_q8_inv */
    inv = _mm512_maskz_mov_ps(fin & _mm512_cmp_ps_mask(inv, _mm512_set1_ps(3.40282347e38f), _CMP_LE_OQ), inv);
    const __m512 step = _mm512_mask_blend_ps(fin, _mm512_set1_ps(NAN), _mm512_div_ps(amax, _mm512_set1_ps(127.0f)));
    _Alignas(64) float st[16], zz[16];
    _mm512_store_ps(st, step);
    _mm512_store_ps(zz, z);
    for (int r = 0; r < RB; r++) {
        const __m512 iv = _mm512_permutexvar_ps(_mm512_set1_epi32(4 * r), inv);
        __m512i pk[4]; /* int8 in the packs' order, 64 channels per register */
        for (int a = 0; a < NR; a++) {
            __m512i w[4];
            for (int u = 0; u < 4; u++) {
                const int v = 4 * a + u;
                w[u] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(xs[r] + 16 * v), iv));
            }
            pk[a] = _mm512_packs_epi16(_mm512_packs_epi32(w[0], w[1]), _mm512_packs_epi32(w[2], w[3]));
        }
        int8_t *xr = xq + r * 16 * NV;
        if (!(fin >> (4 * r) & 1)) { /* the other ISAs' zeros, not x * 0 of a NaN */
            for (int a = 0; a < NR; a++) _mm512_storeu_si512(xr + 64 * a, _mm512_setzero_si512());
            dz[2 * r] = st[4 * r];
            dz[2 * r + 1] = zz[4 * r];
            continue;
        }
        for (int a = 0; a < NR; a++) {
            /* channels < 128 from pk[0..1], >= 128 from pk[2..3] (index bit 7) */
            __m512i v = _mm512_permutex2var_epi8(pk[0], idx[a], NR > 1 ? pk[1] : pk[0]);
            if (NR > 2) {
                const __m512i h = _mm512_permutex2var_epi8(pk[2], idx[a], NR > 3 ? pk[3] : pk[2]);
                v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx[a]), v, h);
            }
            _mm512_storeu_si512(xr + 64 * a, v);
        }
        dz[2 * r] = st[4 * r];
        dz[2 * r + 1] = zz[4 * r];
    }
}

VQ_INLINE void q8_all(int R, int NV, const plane_perm *pp, const float *q, int64_t ldq, const float *scale,
                      const float *zero, int8_t *xq, float *dz)
{
    __m512i idx[4];
    __mmask16 bad = 0;
    for (int a = 0; a < NV / 4; a++) idx[a] = _mm512_loadu_si512(pp->src[a]);
    for (int v = 0; v < NV; v++) bad |= _mm512_fpclass_ps_mask(_mm512_loadu_ps(scale + 16 * v), 0x99);
    for (int r0 = 0; r0 < R; r0 += 4) {
        const float *qr = q + r0 * ldq;
        int8_t *x = xq + r0 * 16 * NV;
        float *d = dz + 2 * r0;
        switch (R - r0 < 4 ? R - r0 : 4) {
        case 1: q8_rows(1, NV, idx, qr, ldq, scale, zero, bad == 0, x, d); break;
        case 2: q8_rows(2, NV, idx, qr, ldq, scale, zero, bad == 0, x, d); break;
        case 3: q8_rows(3, NV, idx, qr, ldq, scale, zero, bad == 0, x, d); break;
        default: q8_rows(4, NV, idx, qr, ldq, scale, zero, bad == 0, x, d); break;
        }
    }
}

#endif /* VQ_ATTN_Q8_VBMI_H */
