/* attn_cb8_vnnivbmi.c — AVX-512 VNNI + VBMI integer p.V for nibble-packed
 * codebook values at D = 128 and 64 (attn_kernels.h, codebook_pv8 and
 * codebook_pv8_64; RaBitQ's 4-bit values, TurboQuant's), installed only
 * where the CPU has both (built with -mavx512vnni
 * -mavx512vbmi: CMakeLists.txt, *_vnnivbmi.c).
 *
 * Per row and block the weights w_j (p_j times the token's value scale) are
 * rounded against step = max_j |w_j| / L, the centroids were rounded once
 * per call (vq_attn_cb8_round), and sum_j w_j cent(j, c) becomes step *
 * cstep * sum_j wq_j cq(j, c), exact in int32 (the error bound: veloxquant.h
 * at vq_value_accum). vpdpbusd multiplies unsigned by signed bytes: a row
 * without negative weights (every row without v_scale) takes uint8 weights
 * (L = 255) times the signed table; a row with one takes int8 weights (L =
 * 127) times the table + 128, its accumulators starting at -128 sum_j wq_j.
 *
 * Decoding, shared by all rows, per half h (64 channels = 32 index bytes)
 * and 4 tokens: one vpermt2b per token pair gathers byte pairs (t0, t1) of
 * 32 index bytes, one vpunpck{l,h}wd of the two pairs' registers makes
 * dwords of 4 tokens' same index byte, two and/shift-and split the nibbles
 * (even / odd channels) and four vpshufb look the 16-entry table up. Each
 * row then adds 4 vpdpbusd per half and 4 tokens (2 per token, against 8
 * f32 FMAs). The byte order of the gather (tables.ilv) is chosen so that one
 * vpunpck{l,h}dq of the even and odd channels' accumulators gives 16
 * channels in order: o needs no permutation. The bodies: attn_cb8_vnnivbmi.h. */
#include <immintrin.h>

#include "attention/attn_kernels.h"
#include "cpu/avx512/attn_cb8_vnnivbmi.h"

/* R rows in groups of up to 4 over D = 128 or 64 channels (D a constant
 * after inlining). */
VQ_INLINE void pv8_rows(int D, int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                        const float *w, int64_t ldw, float *o, int64_t ldo)
{
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)cq));
    for (int r0 = 0; r0 < R; r0 += 4) {
        const float *wr = w + r0 * ldw;
        float *orow = o + r0 * ldo;
        switch (R - r0 < 4 ? R - r0 : 4) {
        case 1: cb8_rows_d(D, 1, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo); break;
        case 2: cb8_rows_d(D, 2, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo); break;
        case 3: cb8_rows_d(D, 3, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo); break;
        default: cb8_rows_d(D, 4, n, idx, ldi, lut, cstep, wr, ldw, orow, ldo); break;
        }
    }
}

static void codebook_pv8_avx512(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                                const float *w, int64_t ldw, float *o, int64_t ldo)
{
    pv8_rows(128, R, n, idx, ldi, cq, cstep, w, ldw, o, ldo);
}

static void codebook_pv8_64_avx512(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                                   const float *w, int64_t ldw, float *o, int64_t ldo)
{
    pv8_rows(64, R, n, idx, ldi, cq, cstep, w, ldw, o, ldo);
}

void vq_attn_kernels_init_avx512_cb8(vq_attn_kernels *k)
{
    build_cb8_tables();
    k->codebook_pv8 = codebook_pv8_avx512;
    k->codebook_pv8_64 = codebook_pv8_64_avx512;
    k->cb8_fast = true;
}
