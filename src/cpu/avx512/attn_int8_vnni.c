/* attn_vnni_avx512.c — AVX-512 VNNI integer key scores for 2/4-bit affine
 * keys (attn_kernels.h, kivi_qk8), installed only where the CPU has
 * AVX512_VNNI (this file alone is built with -mavx512vnni).
 *
 * Tokens in lanes: 16 tokens are scored at once, lane l holding one token, so
 * a vpdpbusd multiplies 4 code bytes of each of 16 tokens by the same 4 query
 * bytes (one broadcast dword) and no horizontal sums are needed. A 32-byte
 * chunk of 16 code rows (8 dwords each) is loaded as 8 registers of two rows
 * and transposed to 8 registers of one dword index each (three stages of
 * vpermt2d, 24 shuffles per 16 tokens, shared by all rows). Each dword then
 * gives its K = 8/bits shifts with one shift and one mask (also shared), and
 * each row adds one vpdpbusd per shift: 2 per token and row at D = 128.
 * The transposition leaves token t in lane (t >> 1) + 8 (t & 1); one vpermd
 * per row and 16 tokens puts the scores back in order. */
#include <immintrin.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_qk8_vnni.h"

static void kivi_qk8_vnni(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                            const float *dz, float *s, int64_t lds)
{
    for (int r0 = 0; r0 < R; r0 += 4) {
        const int rb = R - r0 < 4 ? R - r0 : 4;
        const int8_t *x = xq + r0 * D;
        const float *z = dz + 2 * r0;
        for (int j = 0; j < n; j += 16) {
            const int nb = n - j < 16 ? n - j : 16;
            const uint8_t *cj = codes + j * ldc;
            float *sr = s + r0 * lds + j;
#define VQ_CASE(B, RB) \
    case B * 8 + RB: qk8_block16(B, RB, nb, D, cj, ldc, x, z, sr, lds); break;
            if (D == 128 && bits == 2) { /* decode's layout: every offset a constant */
                switch (rb) {
                case 1: qk8_block16(2, 1, nb, 128, cj, ldc, x, z, sr, lds); break;
                case 2: qk8_block16(2, 2, nb, 128, cj, ldc, x, z, sr, lds); break;
                case 3: qk8_block16(2, 3, nb, 128, cj, ldc, x, z, sr, lds); break;
                default: qk8_block16(2, 4, nb, 128, cj, ldc, x, z, sr, lds); break;
                }
                continue;
            }
            switch (bits * 8 + rb) {
                VQ_CASE(2, 1) VQ_CASE(2, 2) VQ_CASE(2, 3) VQ_CASE(2, 4)
                VQ_CASE(4, 1) VQ_CASE(4, 2) VQ_CASE(4, 3) VQ_CASE(4, 4)
            default: break;
            }
#undef VQ_CASE
        }
    }
}

void vq_attn_kernels_init_avx512_vnni(vq_attn_kernels *k) { k->kivi_qk8 = kivi_qk8_vnni; }
