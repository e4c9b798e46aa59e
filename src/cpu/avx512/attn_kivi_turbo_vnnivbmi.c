/* attn_kivi_turbo_vnnivbmi.c — one block of KIVI keys (mixed-width: 24
 * wide 4-bit and 40 narrow 2-bit codes a token; or 4-bit) with 2- or 3-bit
 * TurboQuant values at D = 64 in one function (attn_kernels.h,
 * kivi_turbo_block; the presets balanced-3bit, compact-2.5bit and
 * quality-4bit on SmolLM2's heads): the integer scores, the non-finite rule, the
 * online-softmax step, the rescale of o and the integer p.V, for up to four
 * rows of a kv head (SmolLM2's three). Installed where the CPU has
 * AVX512_VNNI and AVX512_VBMI (this file is built with both).
 *
 * The separate kernels spread the narrow key codes and the value codes to
 * nibble rows in memory (mix_nibbles, nibbles3) and read them back; here
 * the codes are used where they lie.
 * Mixed-width keys: 16 tokens' rows (22 bytes at 24 wide channels) are
 * loaded as 8 pairs and transposed to dwords (tokens in lanes, as
 * kivi_qk8), then each wide dword (3 at 24 wide channels) gives 2 nibble
 * planes and each narrow dword (3) 4 planes of 2-bit codes, each plane one vpdpbusd per row against the query
 * bytes of the same codes: the integer dots of kivi_qk8 over the nibble
 * rows, exact. 4-bit keys: kivi_qk8's body.
 * 2-bit values: 4 tokens' 16-byte rows are one 64-byte load; one vpermb
 * makes dword lanes of the same code byte of the 4 tokens, 4 shift-and
 * planes look the centroids up (vpshufb) and each row adds 4 vpdpbusd.
 * 3-bit values: 2 tokens' 24-byte rows are one 48-byte load; one vpermb
 * puts 6 bytes (16 codes) in each qword, vpmultishiftqb takes the 8 bits
 * at each pair of codes and one vpermb of a 64-entry table makes them a
 * nibble pair: the two tokens' nibble rows (nibbles3's bytes); a vpermt2b
 * of two such registers makes dword lanes of 4 tokens, then 2 nibble
 * planes each, as above. Both are codebook_pv8_64's integer sums, with all
 * 64 lanes busy. The f32 steps (scores from the dots, the softmax, the
 * weights' rounding, o += step * sum) are the separate kernels' bodies on
 * the same operands, so the result is theirs bit for bit (d aside,
 * attn_kernels.h). */
#include <immintrin.h>
#include <math.h>

#include "attention/attn_kernels.h"
#define VQ_UNROLL /* the bodies' loops as GCC chooses (attn_avx512_inline.h) */
#include "cpu/avx512/attn_cb8_vnnivbmi.h"
#include "cpu/avx512/attn_qk8_vnni.h"
#include "cpu/avx512/attn_softmax_avx512.h"

/* A mixed-width row of nw wide channels (nw = 8 or 24): its bytes, its
 * dwords of wide codes, and of narrow ones (the last may end past the
 * row: those bytes read as zero). */
VQ_INLINE int mix_row(int nw) { return nw / 2 + (64 - nw) / 4; }
VQ_INLINE int wide_dw(int nw) { return nw / 8; }
VQ_INLINE int narrow_dw(int nw) { return ((64 - nw) / 4 + 3) / 4; }

/* qsrc[nw / 16][i] (nw = 8 or 24 wide channels): the stream code whose
 * query byte is byte i of the kernel's order, or 0xff for zero: bytes 4 (2
 * w + m) + k for wide dword w and nibble plane m (code 8 w + 2 k + m), then
 * 8 W + 4 (4 (w - W) + m) + k (W = nw / 8) for narrow dword w and 2-bit
 * plane m (row byte b = 4 w + k holds narrow codes 4 (b - nw / 2) .. + 3,
 * stream codes from nw; bytes past the row: zero). vperm[i]: value quad byte 4 (4 G + l) + t = row byte 4 l + G
 * of token t, so that after the in-lane 4 x 4 transpose of the four planes'
 * sums register u holds channels 16 u .. 16 u + 15 in order. */
static uint8_t qsrc[2][128], vperm[64];
/* 3-bit values: six[i] puts bytes 6 k .. 6 k + 5 in qword k (its bytes 6
 * and 7 are never read as codes), shifts[j] = 6 (j % 8) is the bit of code
 * pair j % 8 of a qword, pair[y] = (y & 7) | (y >> 3 & 7) << 4 the nibble
 * pair of its 6 bits, and ilv3[h] makes dword lane (G, l) of 4 tokens'
 * nibble byte 8 l + 2 G + h (token t: byte 32 (t % 2) of the first
 * register for t < 2, of the second, + 64, else), so that nibble plane m
 * of ilv3[h] sums channels 16 l + 4 G + 2 h + m, the order of the 2-bit
 * planes u = 2 h + m. */
static uint8_t six[64], shifts[64], pair[64], ilv3[2][64];

static void build_kivi_turbo_tables(void)
{
    for (int nw = 8; nw <= 24; nw += 16) {
        uint8_t *q = qsrc[nw / 16];
        const int W = wide_dw(nw);
        for (int i = 0; i < 128; i++) q[i] = 0xff;
        for (int w = 0; w < W; w++)
            for (int m = 0; m < 2; m++)
                for (int k = 0; k < 4; k++) q[4 * (2 * w + m) + k] = (uint8_t)(8 * w + 2 * k + m);
        for (int w = W; w < W + narrow_dw(nw); w++)
            for (int m = 0; m < 4; m++)
                for (int k = 0; k < 4; k++) {
                    const int b = 4 * w + k;
                    if (b < mix_row(nw)) q[8 * W + 4 * (4 * (w - W) + m) + k] = (uint8_t)(nw + 4 * (b - nw / 2) + m);
                }
    }
    for (int G = 0; G < 4; G++)
        for (int l = 0; l < 4; l++)
            for (int t = 0; t < 4; t++) {
                vperm[4 * (4 * G + l) + t] = (uint8_t)(16 * t + 4 * l + G);
                for (int h = 0; h < 2; h++)
                    ilv3[h][4 * (4 * G + l) + t] = (uint8_t)((t < 2 ? 0 : 64) + 32 * (t % 2) + 8 * l + 2 * G + h);
            }
    for (int i = 0; i < 64; i++) {
        six[i] = (uint8_t)(i % 8 < 6 ? 6 * (i / 8) + i % 8 : 0);
        shifts[i] = (uint8_t)(6 * (i % 8));
        pair[i] = (uint8_t)((i & 7) | (i >> 3 & 7) << 4);
    }
}

/* The RB rows' query bytes in the kernel's order -> xk [4][128]: the
 * group's gather table (qsrc through sidx), then one vpermb per row and
 * half. */
VQ_INLINE void order_query(int RB, int nw, const vq_attn_kivi_turbo_block *b, int8_t (*xk)[128])
{
    const __m512i q0 = _mm512_loadu_si512(qsrc[nw / 16]), q1 = _mm512_loadu_si512(qsrc[nw / 16] + 64);
    const __mmask64 k0 = _mm512_cmplt_epu8_mask(q0, _mm512_set1_epi8(64));
    const __mmask64 k1 = _mm512_cmplt_epu8_mask(q1, _mm512_set1_epi8(64));
    const __m512i sidx = _mm512_loadu_si512(b->sidx);
    const __m512i i0 = _mm512_permutexvar_epi8(q0, sidx), i1 = _mm512_permutexvar_epi8(q1, sidx);
    for (int r = 0; r < RB; r++) {
        const __m512i x = _mm512_loadu_si512(b->xc + 64 * r);
        _mm512_store_si512(xk[r], _mm512_maskz_permutexvar_epi8(k0, i0, x));
        _mm512_store_si512(xk[r] + 64, _mm512_maskz_permutexvar_epi8(k1, i1, x));
    }
}

/* One plane e of codes (a byte each, tokens in lanes) into the RB rows'
 * accumulators against their query bytes of the plane. */
VQ_INLINE void mix_plane(int RB, int NA, int plane, __m512i e, const int8_t (*xk)[128], __m512i (*acc)[4])
{
    VQ_UNROLL_ALWAYS
    for (int r = 0; r < RB; r++) {
        int32_t qw;
        memcpy(&qw, xk[r] + 4 * plane, 4);
        acc[r][plane % NA] = _mm512_dpbusd_epi32(acc[r][plane % NA], e, _mm512_set1_epi32(qw));
    }
}

/* Scores of tokens 0-15 of rows (RB rows, nw wide channels) -> v[r] in
 * token order, as kivi_qk8 gives them (qk8_finish). Each row's bytes are
 * loaded masked (nothing past a row is read), two rows a register. */
VQ_INLINE void mix_scores16(int RB, int nw, const uint8_t *rows, const int8_t (*xk)[128], const float *dz, __m512 *v)
{
    const int row = mix_row(nw), W = wide_dw(nw);
    const __mmask64 lo = (1ull << row) - 1u, hi = lo << 32;
    /* the query dwords from memory in each call, as broadcast operands of
     * the vpdpbusd: else the compiler keeps the 54 broadcasts of the first
     * half for the second, spilled as full registers */
    __asm__ volatile("" : : "r"(xk) : "memory");
    __m512i x[8];
    VQ_UNROLL_ALWAYS
    for (int i = 0; i < 8; i++) {
        const uint8_t *r0 = rows + 2 * i * row;
        x[i] = _mm512_mask_loadu_epi8(_mm512_maskz_loadu_epi8(lo, r0), hi, r0 + row - 32);
    }
    VQ_UNROLL_ALWAYS
    for (int st = 0; st < 3; st++)
        swap_stage(x, st, _mm512_loadu_si512(stages.lo[st]), _mm512_loadu_si512(stages.hi[st]));
    const int NA = RB <= 2 ? 4 : 2; /* >= 8 independent vpdpbusd chains */
    __m512i acc[4][4];
    VQ_UNROLL_ALWAYS
    for (int r = 0; r < RB; r++)
        VQ_UNROLL_ALWAYS
        for (int a = 0; a < NA; a++) acc[r][a] = _mm512_setzero_si512();
    /* plane p: wide dword p / 2 (nibbles of shift 4 (p % 2)), from p = 6
     * narrow dword 3 + (p - 6) / 4 (2-bit codes of shift 2 ((p - 6) % 4)) */
    VQ_UNROLL_ALWAYS
    for (int w = 0; w < W; w++)
        VQ_UNROLL_ALWAYS
        for (int m = 0; m < 2; m++)
            mix_plane(RB, NA, 2 * w + m, _mm512_and_si512(m ? _mm512_srli_epi32(x[w], 4) : x[w], _mm512_set1_epi8(15)),
                      xk, acc);
    VQ_UNROLL_ALWAYS
    for (int w = 0; w < narrow_dw(nw); w++)
        VQ_UNROLL_ALWAYS
        for (int m = 0; m < 4; m++)
            mix_plane(RB, NA, 2 * W + 4 * w + m,
                      _mm512_and_si512(m ? _mm512_srli_epi32(x[W + w], 2 * m) : x[W + w], _mm512_set1_epi8(3)), xk, acc);
    qk8_sum_finish(RB, NA, acc, dz, v);
}

/* o [RB][ldo] (D = 64) *= alpha[r] where alpha[r] != 1, one product per
 * element, as rescale. */
VQ_INLINE void rescale_rows64(int RB, const float *alpha, float *o, int64_t ldo)
{
    for (int r = 0; r < RB; r++) {
        if (alpha[r] == 1.0f) continue;
        const __m512 a = _mm512_set1_ps(alpha[r]);
        for (int c = 0; c < 64; c += 16) _mm512_storeu_ps(o + r * ldo + c, _mm512_mul_ps(_mm512_loadu_ps(o + r * ldo + c), a));
    }
}

/* The 4 planes of code bytes (one code a byte, tokens 4q .. 4q + 3 in the
 * bytes of each dword) of quad q of the value rows: plane u lane (G, l) is
 * channel 16 l + 4 G + u. */
VQ_INLINE void value_planes(int vbits, const uint8_t *vidx, int q, __m512i *E)
{
    if (vbits == 2) {
        const __m512i T = _mm512_permutexvar_epi8(_mm512_loadu_si512(vperm), _mm512_loadu_si512(vidx + 64 * q));
        VQ_UNROLL_ALWAYS
        for (int u = 0; u < 4; u++) E[u] = _mm512_and_si512(u ? _mm512_srli_epi32(T, 2 * u) : T, _mm512_set1_epi8(3));
        return;
    }
    const __m512i sx = _mm512_loadu_si512(six), sh = _mm512_loadu_si512(shifts), pr = _mm512_loadu_si512(pair);
    __m512i N[2]; /* nibble rows of tokens 4q, 4q + 1 / 4q + 2, 4q + 3 */
    VQ_UNROLL_ALWAYS
    for (int i = 0; i < 2; i++) {
        const __m512i raw = _mm512_maskz_loadu_epi8(0xffffffffffffull, vidx + 96 * q + 48 * i);
        N[i] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(sh, _mm512_permutexvar_epi8(sx, raw)), pr);
    }
    VQ_UNROLL_ALWAYS
    for (int h = 0; h < 2; h++) {
        const __m512i X = _mm512_permutex2var_epi8(N[0], _mm512_loadu_si512(ilv3[h]), N[1]);
        E[2 * h] = _mm512_and_si512(X, _mm512_set1_epi8(15));
        E[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi32(X, 4), _mm512_set1_epi8(15));
    }
}

/* o [RB][64] += the integer p.V of the weights w [4][32] over the block's
 * value rows (codebook_pv8_64's rounding and sums). */
VQ_INLINE void kivi_turbo_pv(int RB, int vbits, const vq_attn_kivi_turbo_block *b, const float (*w)[32], float *o,
                             int64_t ldo)
{
    _Alignas(64) int32_t w8[4][8];
    float sv[4];
    int32_t wsum[4];
    const unsigned uns = prep_rows(RB, 32, w[0], 32, b->cstep, w8, sv, wsum);
    const bool all_u = uns == (1u << RB) - 1u;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)b->cq));
    const __m512i flip = _mm512_set1_epi8(-128);
    __m512i acc[4][4];
    VQ_UNROLL_ALWAYS
    for (int r = 0; r < RB; r++)
        VQ_UNROLL_ALWAYS
        for (int u = 0; u < 4; u++) acc[r][u] = _mm512_set1_epi32(-128 * wsum[r]);
    for (int q = 0; q < 8; q++) {
        __m512i E[4];
        value_planes(vbits, b->vidx, q, E);
        VQ_UNROLL_ALWAYS
        for (int u = 0; u < 4; u++) {
            const __m512i U = _mm512_shuffle_epi8(lut, E[u]);
            if (all_u) {
                VQ_UNROLL_ALWAYS
                for (int r = 0; r < RB; r++)
                    acc[r][u] = _mm512_dpbusd_epi32(acc[r][u], _mm512_set1_epi32(w8[r][q]), U);
            } else {
                const __m512i Ub = _mm512_xor_si512(U, flip);
                VQ_UNROLL_ALWAYS
                for (int r = 0; r < RB; r++)
                    acc[r][u] = uns >> r & 1 ? _mm512_dpbusd_epi32(acc[r][u], _mm512_set1_epi32(w8[r][q]), U)
                                             : _mm512_dpbusd_epi32(acc[r][u], Ub, _mm512_set1_epi32(w8[r][q]));
            }
        }
    }
    VQ_UNROLL_ALWAYS
    for (int r = 0; r < RB; r++) {
        const __m512 s = _mm512_set1_ps(sv[r]);
        const __m512i t0 = _mm512_unpacklo_epi32(acc[r][0], acc[r][1]), t1 = _mm512_unpackhi_epi32(acc[r][0], acc[r][1]);
        const __m512i t2 = _mm512_unpacklo_epi32(acc[r][2], acc[r][3]), t3 = _mm512_unpackhi_epi32(acc[r][2], acc[r][3]);
        const __m512i P[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                              _mm512_unpackhi_epi64(t1, t3)};
        VQ_UNROLL_ALWAYS
        for (int u = 0; u < 4; u++) {
            float *dst = o + r * ldo + 16 * u;
            _mm512_storeu_ps(dst, _mm512_fmadd_ps(_mm512_cvtepi32_ps(P[u]), s, _mm512_loadu_ps(dst)));
        }
    }
}

/* One block of RB rows, mixed-width keys of nw wide channels (nw = 8 or
 * 24) or 4-bit ones (nw = 0), vbits-bit values (all constants after
 * inlining). */
VQ_INLINE void kivi_turbo_rows(int RB, int nw, int vbits, const vq_attn_kivi_turbo_block *b, float *o, int64_t ldo,
                               float *m, float *d, bool *bad)
{
    _Alignas(64) float w[4][32];
    _Alignas(16) float a4[4];
    __m512 x0[4], x1[4];
    if (nw) {
        int8_t(*xk)[128] = (int8_t(*)[128])b->xk;
        if (!b->xk_ready) order_query(RB, nw, b, xk); /* once per key group */
        mix_scores16(RB, nw, b->kcodes, (const int8_t(*)[128])xk, b->dz, x0);
        mix_scores16(RB, nw, b->kcodes + 16 * mix_row(nw), (const int8_t(*)[128])xk, b->dz, x1);
    } else {
        qk8_regs16(4, RB, 16, 64, b->kcodes, 32, b->xc, b->dz, x0);
        __asm__ volatile("" : : "r"(b->xc) : "memory"); /* as in mix_scores16 */
        qk8_regs16(4, RB, 16, 64, b->kcodes + 16 * 32, 32, b->xc, b->dz, x1);
    }
    poison_rows_regs(RB, x0, x1, bad);
    softmax_rows_regs(RB, x0, x1, m, d, a4);
    rescale_rows64(RB, a4, o, ldo);
    const __m512 s0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->vscale));
    const __m512 s1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b->vscale + 16)));
    for (int r = 0; r < RB; r++) {
        _mm512_store_ps(w[r], _mm512_mul_ps(x0[r], s0));
        _mm512_store_ps(w[r] + 16, _mm512_mul_ps(x1[r], s1));
    }
    kivi_turbo_pv(RB, vbits, b, (const float(*)[32])w, o, ldo);
}

/* The rows' cases for one pair of formats. */
VQ_INLINE void kivi_turbo_any(int R, int nw, int vbits, const vq_attn_kivi_turbo_block *b, float *o, int64_t ldo,
                              float *m, float *d, bool *bad)
{
    switch (R) {
    case 1: kivi_turbo_rows(1, nw, vbits, b, o, ldo, m, d, bad); break;
    case 2: kivi_turbo_rows(2, nw, vbits, b, o, ldo, m, d, bad); break;
    case 3: kivi_turbo_rows(3, nw, vbits, b, o, ldo, m, d, bad); break;
    default: kivi_turbo_rows(4, nw, vbits, b, o, ldo, m, d, bad); break;
    }
}

/* The pairs of the presets at D = 64: mixed-width keys of 24 or 8 wide
 * channels with 2-bit values (balanced-3bit, compact-2.5bit), 4-bit keys
 * with 3-bit values (quality-4bit); and the two other pairs of widths. */
static void kivi_turbo_block_avx512(int R, const vq_attn_kivi_turbo_block *b, float *o, int64_t ldo, float *m,
                                    float *d, bool *bad)
{
    const int nw = b->sidx ? b->nw : 0;
    if (nw == 24 && b->vbits == 2) kivi_turbo_any(R, 24, 2, b, o, ldo, m, d, bad);
    else if (nw == 8 && b->vbits == 2) kivi_turbo_any(R, 8, 2, b, o, ldo, m, d, bad);
    else if (nw == 24) kivi_turbo_any(R, 24, 3, b, o, ldo, m, d, bad);
    else if (nw == 8) kivi_turbo_any(R, 8, 3, b, o, ldo, m, d, bad);
    else if (b->vbits == 2) kivi_turbo_any(R, 0, 2, b, o, ldo, m, d, bad);
    else kivi_turbo_any(R, 0, 3, b, o, ldo, m, d, bad);
}

void vq_attn_kernels_init_avx512_kivi_turbo(vq_attn_kernels *k)
{
    build_cb8_tables(); /* the header's own table (unused here) */
    build_kivi_turbo_tables();
    k->kivi_turbo_block = kivi_turbo_block_avx512;
}
