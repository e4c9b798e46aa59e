/* attn_turbo_stage.h — one stage of TurboQuant codes as the attention
 * formats read it: the rotated-basis keys (turbo, rvq) and TurboQuant values.
 * Internal. */
#ifndef VQ_ATTN_TURBO_STAGE_H
#define VQ_ATTN_TURBO_STAGE_H

#include "attention/attn_formats.h"

typedef struct vq_attn_turbo_stage {
    vq_attn_view idx;    /* [B,Hkv,Skv,ld]: u8 codes (ld = D) or u32 words (ld = ceil(D*bits/32)) */
    vq_attn_view scale;  /* [B,Hkv,Skv] f32, or f16 where scale_f16 */
    const float *cents;  /* the 2^bits Lloyd-Max centroids */
    int64_t ld;
    int bits;
    bool packed;
    bool scale_f16;
} vq_attn_turbo_stage;

/* Validates one stage — bits 1..8, idx [B,Hkv,Skv,D] u8 or
 * [B,Hkv,Skv,ceil(D*bits/32)] u32, scale [B,Hkv,Skv] of a dtype in
 * scale_dtypes (VQ_DTM_F32, or VQ_DTM_F16_F32 where the format allows f16
 * scales), all views; names "<fmt>.<idx_name>" etc. — and binds it to *st. */
vq_status vq_attn_turbo_check_stage(vq_ctx *ctx, const char *fmt, const char *idx_name, const DLTensor *idx,
                                    const char *scale_name, const DLTensor *scale, unsigned scale_dtypes,
                                    const char *bits_name, int bits, const vq_attn_dims *dims,
                                    vq_attn_turbo_stage *st);

/* Codes of token t of kv head hk in batch b as kern->codebook_tile reads
 * them (*nibbles: two per byte, low nibble first; else one per byte), masked
 * to the stage's bits: in place when the stored row already is such a layout,
 * else unpacked into scratch [D]. */
const uint8_t *vq_attn_turbo_stage_codes(const vq_attn_turbo_stage *st, int64_t b, int64_t hk, int64_t t,
                                         int64_t D, uint8_t *scratch, bool *nibbles);

/* Rows of nibble-packed codes of the n tokens from t0 (bits <= 4, D a
 * multiple of 16: byte c of a row holds code 2c in its low nibble, 2c + 1
 * in its high one), as kern->codebook_pv8 / codebook_qk8 read them: the
 * stored rows in place where they already are nibbles (4-bit u32 words),
 * else packed into pk [n][D / 2] (2- and 3-bit words spread in registers,
 * 3-bit rows at D = 128, at D = 256 as two such halves, and contiguous ones
 * at D = 64 in pairs, by kern->nibbles3; other layouts through
 * vq_attn_turbo_stage_codes and scratch [D]). pk needs 32 bytes of room
 * past its n rows (kern->mix_nibbles). *ldi: the row stride in bytes. */
const uint8_t *vq_attn_turbo_stage_nibble_rows(const vq_attn_kernels *kern, const vq_attn_turbo_stage *st, int64_t b,
                                               int64_t hk, int64_t t0, int n, int64_t D, uint8_t *scratch,
                                               uint8_t *pk, int64_t *ldi);

/* The TurboQuant code widths whose integer paths AUTO takes with the
 * kernels of kern, as a mask (bit b: b-bit codes in u32 words): those
 * measured faster than the f32 path (bench/results/cache_cpu.md), 3-bit
 * words only where they turn into nibbles in SIMD code, never 1-bit ones
 * (they go through the generic unpack). */
static inline unsigned vq_attn_turbo_auto_widths(const vq_attn_kernels *kern)
{
    return 1u << 2 | 1u << 4 | (kern->nibbles3_fast ? 1u << 3 : 0u);
}

/* Token t's scale. */
static inline float vq_attn_turbo_stage_scale(const vq_attn_turbo_stage *st, int64_t b, int64_t hk, int64_t t)
{
    const void *p = vq_attn_at(&st->scale, b, hk, t);
    return st->scale_f16 ? vq_half_to_float(*(const uint16_t *)p) : *(const float *)p;
}

/* The codes of the tokens from t0 as a tile of rows of D bytes, one code
 * a byte, for one kern->codebook_tile call over a block: where the stage
 * holds 8-bit codes in contiguous rows (the 8-bit window's); else NULL. */
static inline const uint8_t *vq_attn_turbo_stage_byte_rows(const vq_attn_turbo_stage *st, int64_t b, int64_t hk,
                                                           int64_t t0, int64_t D)
{
    return !st->packed && st->bits == 8 && st->idx.st == D ? (const uint8_t *)vq_attn_at(&st->idx, b, hk, t0) : NULL;
}

/* The scales of the n tokens from t0 -> sc [n]: contiguous f16 ones by
 * kern->cvt_f16 (exact, as vq_half_to_float). */
static inline void vq_attn_turbo_stage_scales(const vq_attn_kernels *kern, const vq_attn_turbo_stage *st, int64_t b,
                                              int64_t hk, int64_t t0, int n, float *sc)
{
    if (st->scale_f16 && st->scale.st == 2) {
        kern->cvt_f16(n, vq_attn_at(&st->scale, b, hk, t0), sc);
        return;
    }
    for (int j = 0; j < n; j++) sc[j] = vq_attn_turbo_stage_scale(st, b, hk, t0 + j);
}

#endif
