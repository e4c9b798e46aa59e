/* attn_kernels.h — the attention kernel table: the small inner loops every
 * format composes (dots, p.V accumulation, the softmax step, block decoders),
 * one implementation per ISA. Internal.
 *
 * The table is always valid: filled with the scalar functions, then
 * overwritten by the best ISA the ctx runs (vq_attn_kernels_for(ctx->isa)).
 * Leading dimensions (ld*) are in elements. D is a multiple of 8. */
#ifndef VQ_ATTN_KERNELS_H
#define VQ_ATTN_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* Element types of plain keys/values, indexing qk[] and pv[]. */
typedef enum vq_attn_elt { VQ_ATTN_F32 = 0, VQ_ATTN_F16 = 1, VQ_ATTN_BF16 = 2, VQ_ATTN_ELT_COUNT } vq_attn_elt;

/* Tokens of a block of the fused KIVI kernel (kivi_int8_block): whole blocks
 * only, the partial last block of a call runs the separate kernels (the
 * kernel specialised to n = 32 is half the code and 3-5 % faster). */
#define VQ_ATTN_KIVI_INT8_N 32

/* A run of nb blocks of the KIVI 2-bit integer decode (kivi_int8_block), each
 * n = 32 tokens that form one key group (g = 32), D = 128, 2-bit codes
 * packed along D: block 0 at the pointers below, block i at them plus
 * i * step[]. */
typedef struct vq_attn_kivi_int8_block {
    /* [n][32]: rows of 128 codes, contiguous (the kernel's loads and
     * shuffles take that layout as constants; other strides run the
     * separate kernels) */
    const uint8_t *kcodes, *vcodes;
    const void *kscale, *kzero;     /* [128]: the key group's scale and zero rows */
    const void *vs, *vz;            /* [n][4]: the tokens' value scales and zeros */
    bool f16;                       /* the four are f16, else f32 */
    /* Ranges to prefetch (a later block's key codes, key scale, key zero,
     * value codes, value scales, value zeros; NULL: none), the kernel
     * issuing the key ones with the scores and the value ones with p.V. */
    const void *pf[6];
    int64_t pf_bytes[6];
    /* Blocks in the run (>= 1); the first pf_nb of them issue their
     * prefetches (the later ones' would lie past the data); the byte step
     * from one block to the next of the six arrays in pf's order (key codes,
     * key scale, key zero, value codes, value scales, value zeros), which
     * the prefetch addresses advance by too. */
    int64_t nb, pf_nb, step[6];
} vq_attn_kivi_int8_block;

/* The run's next block: every pointer (and prefetch address) one step on. */
static inline void vq_attn_kivi_int8_next(vq_attn_kivi_int8_block *b)
{
    b->kcodes += b->step[0];
    b->kscale = (const char *)b->kscale + b->step[1];
    b->kzero = (const char *)b->kzero + b->step[2];
    b->vcodes += b->step[3];
    b->vs = (const char *)b->vs + b->step[4];
    b->vz = (const char *)b->vz + b->step[5];
    for (int j = 0; j < 6; j++)
        if (b->pf[j]) b->pf[j] = (const char *)b->pf[j] + b->step[j];
}

/* From block pf_nb of a run on, no prefetches (they would lie past the data). */
static inline void vq_attn_kivi_int8_no_prefetch(vq_attn_kivi_int8_block *b)
{
    for (int j = 0; j < 6; j++) b->pf[j] = NULL;
}

/* The run loop of a kivi_int8_block kernel, shared by the ISAs: defines
 * `static void name(R, b, q, ldq, o, ldo, m, d, bad)` that runs
 * rows(RB, &block, q, ldq, o, ldo, m, d, bad) (RB = R as a constant, 1-4)
 * on each block of the run in turn: its pointers, its prefetches (none from
 * block pf_nb on), then the step to the next. */
#define VQ_ATTN_DEFINE_KIVI_INT8_BLOCK(name, rows)                                                              \
    static inline __attribute__((always_inline)) void name##_run(int RB, const vq_attn_kivi_int8_block *run,     \
                                                                 const float *q, int64_t ldq, float *o,       \
                                                                 int64_t ldo, float *m, float *d, bool *bad)  \
    {                                                                                                        \
        vq_attn_kivi_int8_block b = *run;                                                                        \
        for (int64_t i = 0; i < run->nb; i++) {                                                              \
            if (i == run->pf_nb) vq_attn_kivi_int8_no_prefetch(&b);                                              \
            rows(RB, &b, q, ldq, o, ldo, m, d, bad);                                                         \
            vq_attn_kivi_int8_next(&b);                                                                          \
        }                                                                                                    \
    }                                                                                                        \
    static void name(int R, const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, float *o, int64_t ldo, \
                     float *m, float *d, bool *bad)                                                          \
    {                                                                                                        \
        switch (R) {                                                                                         \
        case 1: name##_run(1, b, q, ldq, o, ldo, m, d, bad); break;                                          \
        case 2: name##_run(2, b, q, ldq, o, ldo, m, d, bad); break;                                          \
        case 3: name##_run(3, b, q, ldq, o, ldo, m, d, bad); break;                                          \
        default: name##_run(4, b, q, ldq, o, ldo, m, d, bad); break;                                         \
        }                                                                                                    \
    }

/* A run of nb blocks of the RaBitQ Hamming decode with 4-bit codebook
 * values (rabitq_block), each n = 32 tokens, D = 128: block 0 at the
 * pointers below, block i at them plus i * step[]. */
typedef struct vq_attn_rabitq_block {
    const uint8_t *kbits;  /* [32][16]: the tokens' sign bits, rows contiguous */
    const float *mag;      /* [32] */
    const float *cnst;     /* [32], or NULL */
    const uint8_t *vidx;   /* [32][64]: nibble-packed centroid indices, rows contiguous */
    const int8_t *cq;      /* [16]: the centroids rounded (vq_attn_cb8_round) */
    float cstep;
    /* Ranges to prefetch (a later block's key bits, magnitudes, value
     * indices; NULL: none), as vq_attn_kivi_int8_block's */
    const void *pf[3];
    int64_t pf_bytes[3];
    /* Blocks in the run (>= 1), how many of them issue their prefetches,
     * and the byte step from one block to the next of kbits, mag, cnst,
     * vidx (the prefetches of pf[0], pf[1], pf[2] advance by steps 0, 1, 3). */
    int64_t nb, pf_nb, step[4];
} vq_attn_rabitq_block;

/* The next block of a run (rabitq_block): kbits, mag, cnst and vidx by
 * step[0 .. 3], the prefetch ranges pf[0 .. 2] by steps 0, 1 and 3; the
 * prefetches stop (NULL) from block pf_nb on (`next` its index). Every
 * ISA's kernel walks its runs with it. */
static inline void vq_attn_rabitq_block_next(vq_attn_rabitq_block *b, int64_t next)
{
    static const int pf_step[3] = {0, 1, 3};
    b->kbits += b->step[0];
    b->mag = (const float *)((const char *)b->mag + b->step[1]);
    if (b->cnst) b->cnst = (const float *)((const char *)b->cnst + b->step[2]);
    b->vidx += b->step[3];
    for (int j = 0; j < 3; j++)
        b->pf[j] = next == b->pf_nb || b->pf[j] == NULL ? NULL : (const char *)b->pf[j] + b->step[pf_step[j]];
}

/* One block of the fused decode of KIVI keys with 2- or 3-bit TurboQuant
 * values at D = 64 (kivi_turbo_block): 32 tokens of one key group. */
typedef struct vq_attn_kivi_turbo_block {
    /* Key code rows, contiguous: mixed-width keys (sidx set) of nw = 8 or
     * 24 wide channels [32][nw / 2 + (64 - nw) / 4], per token the nw wide
     * 4-bit codes (stream codes 0 .. nw - 1, two a byte, low nibble first),
     * then the narrow 2-bit codes (four a byte, lowest bits first); 4-bit
     * keys (sidx NULL) [32][32], code c in nibble c % 2 of byte c / 2 */
    const uint8_t *kcodes;
    int nw;
    /* [R][64]: the rows' int8 against the key group as kivi_q8 (4 bits,
     * D = 64) leaves them, channel c at byte vq_attn_q8_pos(c, 4, 64);
     * mixed-width keys: sidx [64], the byte of such a row that holds stream
     * code s's channel (the group's order: its wide channels ascending,
     * then its narrow ones); dz [R][2]: the rows' step and zero term */
    const int8_t *xc;
    const uint8_t *sidx;
    const float *dz;
    /* mixed-width keys: [4][128] bytes, 64-byte aligned, kept with the key
     * group by the caller for the kernel's own order of the rows (built
     * from xc and sidx on a group's first block, when xk_ready is false,
     * and read as they are on its other blocks) */
    int8_t *xk;
    bool xk_ready;
    /* [32][8 vbits]: the TurboQuant codes of vbits = 2 or 3 bits (code c at
     * stream bits vbits c), rows contiguous; vscale [32]: the tokens' f16
     * scales */
    const uint8_t *vidx;
    int vbits;
    const uint16_t *vscale;
    const int8_t *cq; /* [16]: the centroids rounded (vq_attn_cb8_round) */
    float cstep;
} vq_attn_kivi_turbo_block;

typedef struct vq_attn_kernels {
    /* q [R][ldq] f32, k [n][ldk] of elt -> s[r*lds + j] = sum_{c<D} q[r][c] * k[j][c]. */
    void (*qk[VQ_ATTN_ELT_COUNT])(int R, int n, int64_t D, const float *q, int64_t ldq, const void *k,
                                  int64_t ldk, float *s, int64_t lds);
    /* p [R][ldp] f32, v [n][ldv] of elt, o [R][ldo] f32 ->
     * o[r][c] += sum_{j<n} p[r][j] * v[j][c]. (bf16 values are not offered.) */
    void (*pv[VQ_ATTN_ELT_COUNT])(int R, int n, int64_t D, const float *p, int64_t ldp, const void *v,
                                  int64_t ldv, float *o, int64_t ldo);
    /* One online-softmax step over s [R][lds], n scores per row:
     * m_new = max(m[r], max_j s[r][j]); alpha[r] = exp(m[r] - m_new);
     * s[r][j] = exp(s[r][j] - m_new); d[r] = d[r] * alpha[r] + sum_j s[r][j];
     * m[r] = m_new. A row still at -inf gets s = 0 and alpha = 1. */
    void (*softmax)(int R, int n, float *s, int64_t lds, float *m, float *d, float *alpha);
    /* The skeleton's per-block row passes (attn_skeleton.c), vectorised
     * because at one or four rows per kv head they run once per 32 scores:
     * poison: every score of s [R][lds] (n per row) that is NaN or +inf
     * becomes -inf and sets bad[r] (never cleared here);
     * rescale: o[r*ldo + c] *= alpha[r], c < D, rows with alpha[r] == 1 left
     * alone (one f32 product per element on every ISA: bit-identical). */
    void (*poison)(int R, int n, float *s, int64_t lds, bool *bad);
    void (*rescale)(int R, int64_t D, float *o, int64_t ldo, const float *alpha);
    /* Affine keys: codes [n][ldc] bytes holding D codes of `bits` (2 or 4:
     * bit-packed along D; 8: one code per byte) ->
     * out[j*D + c] = code(j, c) * scale[c] + zero[c]. */
    void (*kivi_k_tile)(int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *scale,
                          const float *zero, float *out);
    /* Affine values: out[j*D + c] = code(j, c) * vs[j*GV + c/g] + vz[j*GV + c/g]. */
    void (*kivi_v_tile)(int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *vs,
                          const float *vz, int64_t GV, int64_t g, float *out);
    /* ham[r*ldh + j] = popcount(qb[r*ldq ..] XOR kb[j*nbytes ..]) over nbytes
     * bytes. */
    void (*hamming)(int R, int n, int64_t nbytes, const uint8_t *qb, int64_t ldq, const uint8_t *kb,
                    int32_t *ham, int64_t ldh);
    /* Signs to floats: out[j*D + c] = bit c of bits[j*D/8 ..] ? mag[j] : -mag[j]. */
    void (*sign_tile)(int n, int64_t D, const uint8_t *bits, const float *mag, float *out);
    /* Codebook values: out[j*D + c] = cents[min(idx(j, c), n_cents - 1)] *
     * (vscale ? vscale[j] : 1), idx nibble-packed ([n][D/2], low nibble = even
     * element) or one per byte ([n][D]); cents [n_cents], 1 <= n_cents <= 256. */
    void (*codebook_tile)(int n, int64_t D, bool packed, const uint8_t *idx, const float *cents, int n_cents,
                          const float *vscale, float *out);

    /* Direct paths for few rows (decode): codes expanded in registers and used
     * at once, no tile. */
    /* Affine keys scored straight from the codes (as kivi_k_tile):
     * s[r*lds + j] = sum_c q[r*ldq + c] * (code(j, c) * scale[c] + zero[c]). */
    void (*kivi_qk)(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *scale,
                      const float *zero, const float *q, int64_t ldq, float *s, int64_t lds);
    /* Affine values accumulated straight from the codes (as kivi_v_tile), g % 8 == 0:
     * o[r*ldo + c] += sum_j p[r*ldp + j] * (code(j, c) * vs[j*GV + c/g] + vz[j*GV + c/g]). */
    void (*kivi_pv)(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *vs,
                      const float *vz, int64_t GV, int64_t g, const float *p, int64_t ldp, float *o, int64_t ldo);
    /* o[r*ldo + c] += sum_j w[r*ldw + j] * cents[min(idx(j, c), n_cents - 1)]
     * (idx as codebook_tile). */
    void (*codebook_pv)(int R, int n, int64_t D, bool packed, const uint8_t *idx, const float *cents, int n_cents,
                        const float *w, int64_t ldw, float *o, int64_t ldo);
    /* dst[i] = f16 src[i] as f32, i < n. */
    void (*cvt_f16)(int64_t n, const uint16_t *src, float *dst);

    /* Integer key scores for 2/4-bit affine keys (attn_keys_kivi.c; the
     * error bound is in veloxquant.h at vq_scalar_attend_opts). Both need
     * bits 2 or 4 and D % 64 == 0 (vq_attn_q8_supported: whole 32-byte
     * chunks of codes, then at most one 16-byte half chunk).
     * kivi_q8 quantises R query rows against one key group, once per group:
     *   x_c = q[r*ldq + c] * scale[c] (f32), amax = max_c |x_c|,
     *   xq[r*D + vq_attn_q8_pos(c, bits, D)] = rint(x_c * (127 / amax)),
     *   dz[2r] = amax / 127 (the step), dz[2r + 1] = sum_c q[r*ldq + c] * zero[c].
     * All ISAs compute xq and dz[2r] with these exact f32 operations, so the
     * integer dots below are bit-identical across ISAs. amax = 0 gives xq = 0
     * and step 0; a non-finite x_c or zero term gives step NaN (the group's
     * scores become NaN, as with the float path). */
    void (*kivi_q8)(int R, int64_t D, int bits, const float *q, int64_t ldq, const float *scale, const float *zero,
                      int8_t *xq, float *dz);
    /* s[r*lds + j] = dz[2r] * (sum_c xq[r*D + pos(c)] * code(j, c)) + dz[2r + 1], codes as kivi_qk. */
    void (*kivi_qk8)(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                       const float *dz, float *s, int64_t lds);
    /* Integer p.V for 2-bit affine values at D = 128, g = 32
     * (vq_attn_pv8_supported; vq_value_accum in veloxquant.h), codes [n][ldc]
     * packed along D, vs / vz [n][4] f32 (token j's 4 groups), p [R][ldp].
     * Per row r and group gi, with w_j = p[r*ldp + j] * vs[4j + gi] (f32):
     *   amax = max_j |w_j|; a non-finite w_j makes the group's step NaN;
     *   step = amax / 127, wq_j = rint(w_j * (127 / amax)) (0 when amax = 0),
     *   o[r*ldo + vq_attn_pv8_pos(c)] += step * (sum_j wq_j code(j, c)) + sum_j p[r*ldp + j] * vz[4j + gi]
     * for the 32 channels c of group gi, the integer sum exact: o holds the
     * channels in the order the SIMD kernel's lanes produce them, undone
     * once per row by the value format's finish(). Every ISA
     * computes wq and step with these f32 operations (the zero sum's order
     * may differ), so their outputs agree to f32 rounding for equal p. */
    void (*kivi_pv8)(int R, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                       const float *p, int64_t ldp, float *o, int64_t ldo);
    bool pv8_fast; /* kivi_pv8 is a SIMD kernel (AVX-512 VNNI, AVX2): faster than the f32 p.V, what AUTO picks */
    /* Integer p.V for nibble-packed codebook values at D = 128 (RaBitQ's
     * 4-bit values): idx [n][ldi] bytes, 64 per token (low nibble = even
     * channel, every nibble < 16 valid: the caller pads the table), cq [16]
     * the centroids rounded to int8 against cstep (vq_attn_cb8_round). Per
     * row r, with w_j = w[r*ldw + j] (f32: p_j times the token's value scale):
     *   amax = max_j |w_j|; a non-finite w_j makes the row's step NaN;
     *   L = 255 where no w_j < 0 (uint8 weights: always without v_scale),
     *   else 127 (int8);
     *   step = amax / L, wq_j = rint(w_j * vq_attn_q8_inv_levels(L, amax, ..))
     *   clamped to [0, 255] or [-127, 127],
     *   o[r*ldo + c] += (step * cstep) * sum_j wq_j cq[idx(j, c)]
     * the integer sum exact, o in channel order. Every ISA computes wq and
     * step with these f32 operations, so outputs agree to f32 rounding. */
    void (*codebook_pv8)(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                         const float *w, int64_t ldw, float *o, int64_t ldo);
    bool cb8_fast; /* codebook_pv8 is a SIMD kernel (AVX2; AVX-512 VNNI + VBMI): what AUTO picks */
    /* codebook_pv8 at D = 64: nibble rows of 32 bytes (64 channels), o
     * [R][64]; the same weights, rounding and sums. SIMD on AVX2 (and so
     * on AVX-512 machines) where cb8_fast; scalar elsewhere. */
    void (*codebook_pv8_64)(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                            const float *w, int64_t ldw, float *o, int64_t ldo);
    /* Integer scores against codebook keys at D = 128 (TurboQuant and RVQ
     * stages, attn_keys_rotated.c): idx [n][ldi] nibble rows (64 bytes,
     * channel 2k in the low nibble of byte k, 2k + 1 in the high one), cq
     * [16] the centroids rounded (vq_attn_cb8_round), xq [R][ldx] bytes:
     * each row's query rounded to int8 in plane order (xq[r*ldx + k] is
     * channel 2k, xq[r*ldx + 64 + k] channel 2k + 1, k < 64) ->
     *   isum[r*lds + j] = sum_c xq(r, c) * cq[idx(j, c)]
     * exact in int32: every ISA gives the same integers. */
    void (*codebook_qk8)(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, const int8_t *xq,
                         int64_t ldx, int32_t *isum, int64_t lds);
    bool cbqk8_fast; /* codebook_qk8 is a SIMD kernel (AVX2; AVX-512 VNNI): what AUTO picks */
    /* 3-bit codes to nibble rows at D = 128: rows [n][ldr] of 48 bytes
     * (code i at stream bits 3i) -> out [n][64] (code 2k in the low nibble
     * of byte k, 2k + 1 in the high one; vq_bitpack_spread3_nibbles), read
     * nothing past each row's 48 bytes. */
    void (*nibbles3)(int n, const uint8_t *rows, int64_t ldr, uint8_t *out);
    bool nibbles3_fast; /* nibbles3 is a SIMD kernel (AVX2): AUTO takes 3-bit TurboQuant codes on integers */
    /* Mixed-width key rows (KIVI_MIX, 4-bit wide and 2-bit narrow codes) to
     * nibble rows: rows [n][ldr] of nwb bytes of nibbles, then nb2 bytes of
     * 2-bit codes (ldr >= nwb + nb2) -> out [n][nwb + 2 nb2]: the nibbles
     * copied, the 2-bit codes spread (vq_bitpack_spread2_nibbles). Reads
     * nothing past the last row's nwb + nb2 bytes; out needs 32 bytes of
     * room past its last row (SIMD stores may spill into it). */
    void (*mix_nibbles)(int n, const uint8_t *rows, int64_t ldr, int64_t nwb, int64_t nb2, uint8_t *out);
    /* NULL, or the whole step of each KIVI block of the run b (b->nb blocks
     * in turn) for R <= 4 rows q [R][ldq] (softmax scale folded in) with no
     * mask and no causal limit inside the blocks: per block the same as, in
     * turn, kivi_q8(R, 128, 2, q, ldq, kscale, kzero, ..), kivi_qk8 into
     * s [R][32], poison(R, n, s, 32, bad), softmax(R, n, s, 32, m, d, alpha),
     * rescale(R, 128, o, ldo, alpha), kivi_pv8(R, n, vcodes, ldv, vs, vz,
     * s, 32, o, ldo) of the same ISA, bit for bit (a run in one call: the
     * skeleton's and the format's per-block glue once per run). Where
     * it is NULL (every ISA but AVX-512 with VNNI and VBMI, and AVX2) the
     * formats run that sequence. */
    void (*kivi_int8_block)(int R, const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, float *o, int64_t ldo,
                        float *m, float *d, bool *bad);
    /* NULL, or the whole step of one block b (32 tokens) for R <= 4 rows
     * with no mask and no causal limit inside it: the same as, in turn,
     * kivi_qk8(R, 32, 64, 4, key nibble rows, 32, xq, dz, s, 32) (the
     * 4-bit rows as they are, xq = xc; mixed-width rows spread by
     * mix_nibbles(32, kcodes, row bytes, nw / 2, (64 - nw) / 4, ..) and xq the rows in stream
     * order, xq[r*64 + i] = xc[r*64 + sidx[2i]], xq[r*64 + 32 + i] =
     * xc[r*64 + sidx[2i + 1]], i < 32), poison(R, 32, s, 32, bad),
     * softmax(R, 32, s, 32, m, d, alpha), rescale(R, 64, o, ldo, alpha),
     * w[r][j] = s[r][j] * vscale[j] (f32) and codebook_pv8_64(R, 32, the
     * value rows as nibble rows, 32, cq, cstep, w, 32, o, ldo) of the same
     * ISA, bit for bit but d, which may differ in f32 rounding for fewer
     * than four rows (the one-row softmax's sum order). The codes are read
     * in place: no nibble rows are stored. NULL on every ISA but AVX-512
     * with VNNI and VBMI: the formats run the sequence. */
    void (*kivi_turbo_block)(int R, const vq_attn_kivi_turbo_block *b, float *o, int64_t ldo, float *m, float *d,
                            bool *bad);
    /* NULL, or the whole step of each RaBitQ block of the run b (b->nb
     * blocks in turn) for R <= 4 rows, qb [R][ldq] their sign bytes and qs
     * [R][ldqs] their scales, with no mask and no causal limit inside the
     * blocks: per block the same as, in turn, hamming_score(R, 32, 128, qb,
     * ldq, qs, ldqs, kbits, mag, cnst, s, 32), poison(R, 32, s, 32, bad),
     * softmax(R, 32, s, 32, m, d, alpha), rescale(R, 128, o, ldo, alpha),
     * codebook_pv8(R, 32, vidx, 64, cq, cstep, s, 32, o, ldo) of the same
     * ISA, bit for bit. Where it is NULL (every ISA but AVX2 and AVX-512
     * with VNNI and VBMI; AVX-512 without both runs the sequence, its
     * scores and softmax not being the AVX2 kernel's) the formats run that
     * sequence. */
    void (*rabitq_block)(int R, const vq_attn_rabitq_block *b, const uint8_t *qb, int64_t ldq, const float *qs,
                         int64_t ldqs, float *o, int64_t ldo, float *m, float *d, bool *bad);
    /* RaBitQ Hamming scores straight from the bits, D = 8 * nbytes:
     * s[r*lds + j] = (float)(D - 2 ham(r, j)) * qs[r*ldqs] * mag[j] + (cnst ? cnst[j] : 0),
     * ham as hamming(). NULL where an ISA has no fused kernel: the format then
     * runs hamming() and the formula itself (the same floats up to FMA rounding). */
    void (*hamming_score)(int R, int n, int64_t D, const uint8_t *qb, int64_t ldq, const float *qs, int64_t ldqs,
                          const uint8_t *kb, const float *mag, const float *cnst, float *s, int64_t lds);
} vq_attn_kernels;

/* 127 / amax, the factor that rounds values of largest magnitude amax to
 * int8; 0 (everything rounds to 0) when amax is 0, not finite, `finite` is
 * false, or amax < 127 / FLT_MAX (~3.7e-37: the factor would overflow to inf
 * and 0 * inf make NaN codes). Every ISA's kivi_q8, kivi_pv8 and
 * codebook_pv8 use it, so they round alike. */
static inline float vq_attn_q8_inv(float amax, bool finite)
{
    const float inv = 127.0f / amax;
    return finite && inv <= 3.40282347e38f ? inv : 0.0f;
}

/* The same for `levels` steps (127: int8, 255: uint8): levels / amax, 0
 * under the same conditions (amax < levels / FLT_MAX included). */
static inline float vq_attn_q8_inv_levels(float levels, float amax, bool finite)
{
    const float inv = levels / amax;
    return finite && inv <= 3.40282347e38f ? inv : 0.0f;
}

/* Where channel c of a quantised query row sits (kivi_q8): grouped by the
 * shift that extracts it from a code byte. With K = 8 / bits codes per byte,
 * plane m = c % K holds the channels of shift m * bits in byte order, so that
 * one shift-and-mask of a run of code bytes lines up with a run of plane m. */
static inline int64_t vq_attn_q8_pos(int64_t c, int bits, int64_t D)
{
    const int64_t K = 8 / bits;
    return (c % K) * (D / K) + c / K;
}

/* Whether the integer key-score kernels take codes of this width and D:
 * 2 or 4 bits, D a multiple of 64, so a code row is whole 32-byte chunks
 * and at most one 16-byte half chunk (2 bits at D = 64 or 192). */
static inline bool vq_attn_q8_supported(int bits, int64_t D) { return (bits == 2 || bits == 4) && D % 64 == 0; }

/* Where kivi_pv8 accumulates channel c (D = 128): lane l = 2 b + i of
 * register (h, k) holds channel 32 (2 h + i) + 4 b + k (k: the code's
 * position in its byte, b: the byte within the group, i: which of the two
 * groups of the half), and sits at 64 h + 16 k + l. */
static inline int vq_attn_pv8_pos(int c)
{
    return 64 * (c / 64) + 16 * (c % 4) + 2 * ((c % 32) / 4) + (c / 32) % 2;
}

/* Whether kivi_pv8 takes values of this width, group size and D. */
static inline bool vq_attn_pv8_supported(int bits, int64_t g, int64_t D) { return bits == 2 && g == 32 && D == 128; }

/* The centroids of codebook_pv8: cstep = max_i |cents[i]| / 127 and cq[i] =
 * rint(cents[min(i, n_cents - 1)] / cstep) in [-127, 127] for i < 16 (the
 * table padded with the last centroid, as codebook_tile clamps). Returns
 * false (the integer kernel does not apply) when n_cents > 16 or a centroid
 * is not finite. */
static inline bool vq_attn_cb8_round(const float *cents, int n_cents, int8_t cq[16], float *cstep)
{
    if (n_cents < 1 || n_cents > 16) return false;
    float amax = 0.0f;
    for (int i = 0; i < n_cents; i++) {
        if (!(cents[i] - cents[i] == 0.0f)) return false; /* NaN or +-inf */
        const float a = cents[i] < 0.0f ? -cents[i] : cents[i];
        amax = a > amax ? a : amax;
    }
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < 16; i++) {
        const float x = __builtin_rintf(cents[i < n_cents ? i : n_cents - 1] * inv);
        cq[i] = (int8_t)(x > 127.0f ? 127.0f : x < -127.0f ? -127.0f : x);
    }
    *cstep = amax / 127.0f;
    return true;
}

/* Rows up to which formats take the direct paths rather than a decoded tile:
 * beyond it, decoding a block once and reusing it from L1 is cheaper. */
#define VQ_ATTN_DIRECT_ROWS 4

/* The table for an ISA (built once, thread-safe, never NULL). */
const vq_attn_kernels *vq_attn_kernels_for(vq_isa isa);

/* Fillers, one per ISA file: overwrite the entries that ISA implements. */
void vq_attn_kernels_init_scalar(vq_attn_kernels *k);
void vq_attn_kernels_init_avx2(vq_attn_kernels *k);        /* dots, p.V, softmax */
void vq_attn_kernels_init_avx2_decode(vq_attn_kernels *k); /* block decoders */
void vq_attn_kernels_init_avx2_direct(vq_attn_kernels *k); /* direct decode paths */
void vq_attn_kernels_init_avx2_int8(vq_attn_kernels *k);  /* integer key scores */
void vq_attn_kernels_init_avx2_cb8(vq_attn_kernels *k);   /* integer codebook p.V (codebook_pv8) */
void vq_attn_kernels_init_avx2_cbqk8(vq_attn_kernels *k); /* integer codebook key scores (codebook_qk8) */
void vq_attn_kernels_init_avx2_ham(vq_attn_kernels *k);   /* RaBitQ Hamming scores (hamming_score) */
void vq_attn_kernels_init_avx2_pv8(vq_attn_kernels *k);   /* integer p.V (kivi_pv8) */
void vq_attn_kernels_init_avx2_rabitq(vq_attn_kernels *k); /* fused RaBitQ blocks (rabitq_block) */
void vq_attn_kernels_init_avx2_kivi_int8(vq_attn_kernels *k); /* fused KIVI block kernel (kivi_int8_block) */
void vq_attn_kernels_init_avx512(vq_attn_kernels *k);
void vq_attn_kernels_init_avx512_values(vq_attn_kernels *k); /* direct p.V, after the AVX2 fillers */
void vq_attn_kernels_init_avx512_softmax(vq_attn_kernels *k);
void vq_attn_kernels_init_avx512_vnni(vq_attn_kernels *k); /* only where the CPU has AVX512_VNNI */
void vq_attn_kernels_init_avx512_cbqk8(vq_attn_kernels *k); /* only where the CPU has AVX512_VNNI */
void vq_attn_kernels_init_avx512_vbmi(vq_attn_kernels *k); /* only where the CPU has AVX512_VBMI */
void vq_attn_kernels_init_avx512_codebook(vq_attn_kernels *k); /* the same; after the AVX2 kernels */
void vq_attn_kernels_init_avx512_pv8(vq_attn_kernels *k);  /* only where the CPU has VNNI and VBMI */
void vq_attn_kernels_init_avx512_cb8(vq_attn_kernels *k);  /* only where the CPU has VNNI and VBMI */
void vq_attn_kernels_init_avx512_kivi_int8(vq_attn_kernels *k); /* only where the CPU has VNNI and VBMI */
/* The amx kernel set: the AMX kivi_int8_block over the VNNI one (k has it; the OS granted the tiles). */
void vq_attn_kernels_init_avx512_kivi_int8_amx(vq_attn_kernels *k);
void vq_attn_kernels_init_avx512_rabitq(vq_attn_kernels *k); /* only where the CPU has VNNI and VBMI */
void vq_attn_kernels_init_avx512_kivi_turbo(vq_attn_kernels *k); /* only where the CPU has VNNI and VBMI */
void vq_attn_kernels_init_neon(vq_attn_kernels *k);
void vq_attn_kernels_init_neon_popcnt(vq_attn_kernels *k);  /* Hamming distances, sign tiles */
void vq_attn_kernels_init_neon_int8(vq_attn_kernels *k);    /* integer key scores, smull (ARMv8.0) */
void vq_attn_kernels_init_neon_pv8(vq_attn_kernels *k);     /* integer p.V (kivi_pv8, codebook_pv8) */
void vq_attn_kernels_init_neon_dotprod(vq_attn_kernels *k); /* only where the CPU has the dot product (sdot) */
void vq_attn_kernels_init_neon_cbqk8_dotprod(vq_attn_kernels *k); /* codebook_qk8 on sdot, the same CPUs */

/* An ISA file writes element-generic static inline qk_any(e, ...) and
 * pv_any(e, ...) with the signatures of qk[]/pv[] plus a leading vq_attn_elt;
 * these two macros stamp out the per-element functions and install them. */
#define VQ_ATTN_DEFINE_ELT(name, e)                                                                      \
    static void qk_##name(int R, int n, int64_t D, const float *q, int64_t ldq, const void *k, int64_t ldk, \
                          float *s, int64_t lds)                                                         \
    {                                                                                                    \
        qk_any(e, R, n, D, q, ldq, k, ldk, s, lds);                                                      \
    }                                                                                                    \
    static void pv_##name(int R, int n, int64_t D, const float *p, int64_t ldp, const void *v, int64_t ldv, \
                          float *o, int64_t ldo)                                                         \
    {                                                                                                    \
        pv_any(e, R, n, D, p, ldp, v, ldv, o, ldo);                                                      \
    }
#define VQ_ATTN_DEFINE_F16_KERNELS     \
    VQ_ATTN_DEFINE_ELT(f32, VQ_ATTN_F32) \
    VQ_ATTN_DEFINE_ELT(f16, VQ_ATTN_F16) \
    VQ_ATTN_DEFINE_ELT(bf16, VQ_ATTN_BF16)
#define VQ_ATTN_SET_F16_KERNELS(k)   \
    do {                               \
        (k)->qk[VQ_ATTN_F32] = qk_f32;   \
        (k)->qk[VQ_ATTN_F16] = qk_f16;   \
        (k)->qk[VQ_ATTN_BF16] = qk_bf16; \
        (k)->pv[VQ_ATTN_F32] = pv_f32;   \
        (k)->pv[VQ_ATTN_F16] = pv_f16;   \
        (k)->pv[VQ_ATTN_BF16] = pv_bf16; \
    } while (0)

/* Scalar affine code access shared by every ISA's tails: code c of a row. */
static inline unsigned vq_attn_code(const uint8_t *row, int bits, int64_t c)
{
    if (bits == 8) return row[c];
    const int64_t bit = c * bits;
    return (unsigned)(row[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1u);
}

/* Codebook index of element c of token j, clamped to n_cents - 1. */
static inline int vq_attn_cb_index(const uint8_t *idx, bool packed, int64_t D, int64_t j, int64_t c, int n_cents)
{
    const int i = packed ? (idx[j * (D / 2) + c / 2] >> (4 * (c & 1))) & 15 : idx[j * D + c];
    return i < n_cents ? i : n_cents - 1;
}

#endif /* VQ_ATTN_KERNELS_H */
