/* format_commvq.h — the CommVQ key layout and its per-token decoder.
 *
 * Layout (docs/FORMATS.md §10), for B batches, H heads, S tokens, head dim D (even):
 *   idx       [B, H, S, R]      u8, u16 or i32: one code per additive stage
 *   codebook  [R, C, D]         f32
 *   cos, sin  [P, D/2]          f32 tables by position
 *   positions [S] or [B, S]     i32 in [0, P)
 *   scale     [B, H, S]         f32 per-token scale, or absent (= 1)
 * A token at position p decodes to RoPE_p(scale * sum_r codebook[r, idx[r]]),
 * where pair i rotates by (cos[p, i], sin[p, i]): (a, b) -> (a cos - b sin,
 * a sin + b cos). Pair i is (i, i + D/2) in the half layout (Hugging Face /
 * NeoX) and (2i, 2i + 1) in the interleaved layout (GPT-J / Meta).
 *
 * Read by the C compiler and by nvcc (format_common.h): plain C99
 * `static inline VQ_HOST_DEVICE VQ_HOST_DEVICE`, no libc. Codes outside [0, C) are clamped, so a decoder never reads out of
 * bounds; the CPU entry points reject them before decoding. */
#ifndef VQ_FORMAT_COMMVQ_H
#define VQ_FORMAT_COMMVQ_H

#include "format_common.h"

/* RoPE pairings; the values equal the public vq_rope_layout's. */
#define VQ_FMT_ROPE_HALF 0
#define VQ_FMT_ROPE_INTERLEAVED 1

/* What a decoder needs to know about the codes. */
typedef struct vq_commvq_layout {
    int32_t R;          /* additive stages */
    int32_t C;          /* centroids per stage */
    int32_t D;          /* head dimension, even */
    int32_t idx_bytes;  /* 1 (u8), 2 (u16) or 4 (i32) */
    int32_t rope;       /* VQ_FMT_ROPE_HALF or VQ_FMT_ROPE_INTERLEAVED */
} vq_commvq_layout;
VQ_STATIC_ASSERT(sizeof(vq_commvq_layout) == 20, "vq_commvq_layout is passed by value to CUDA kernels");

/* Code of stage r of one token (codes [R]), clamped to [0, C). */
static inline VQ_HOST_DEVICE int32_t vq_commvq_code(const vq_commvq_layout *L, const void *codes, int32_t r)
{
    int32_t c;
    if (L->idx_bytes == 1) c = ((const uint8_t *)codes)[r];
    else if (L->idx_bytes == 2) c = ((const uint16_t *)codes)[r];
    else c = ((const int32_t *)codes)[r];
    return c < 0 ? 0 : (c >= L->C ? L->C - 1 : c);
}

/* Row of the cos/sin tables for position p of a [P, D/2] table, clamped to
 * [0, P) (the CPU entry point rejects positions outside it beforehand). */
static inline VQ_HOST_DEVICE int64_t vq_commvq_position(int32_t p, int64_t P)
{
    return p < 0 ? 0 : (p >= P ? P - 1 : p);
}

/* Channels of RoPE pair i (0 <= i < D/2). */
static inline VQ_HOST_DEVICE void vq_rope_pair(int32_t rope, int32_t D, int32_t i, int32_t *a, int32_t *b)
{
    if (rope == VQ_FMT_ROPE_INTERLEAVED) { *a = 2 * i; *b = 2 * i + 1; }
    else { *a = i; *b = i + D / 2; }
}

/* In place: k [D] -> RoPE(k) with cos, sin [D/2] (one position's rows). */
static inline VQ_HOST_DEVICE void vq_rope_apply(int32_t rope, int32_t D, const float *cos_row, const float *sin_row, float *k)
{
    for (int32_t i = 0; i < D / 2; i++) {
        int32_t ia, ib;
        vq_rope_pair(rope, D, i, &ia, &ib);
        const float a = k[ia], b = k[ib], c = cos_row[i], s = sin_row[i];
        k[ia] = a * c - b * s;
        k[ib] = a * s + b * c;
    }
}

/* One token: codes [R], codebook [R, C, D], cos/sin rows [D/2] of its
 * position -> out [D] = RoPE(scale * sum_r codebook[r, codes[r]]). */
static inline VQ_HOST_DEVICE void vq_commvq_decode_token(const vq_commvq_layout *L, const void *codes, const float *codebook,
                                          float scale, const float *cos_row, const float *sin_row, float *out)
{
    for (int32_t j = 0; j < L->D; j++) out[j] = 0.0f;
    for (int32_t r = 0; r < L->R; r++) {
        const float *cent = codebook + ((int64_t)r * L->C + vq_commvq_code(L, codes, r)) * L->D;
        for (int32_t j = 0; j < L->D; j++) out[j] += cent[j];
    }
    for (int32_t j = 0; j < L->D; j++) out[j] *= scale;
    vq_rope_apply(L->rope, L->D, cos_row, sin_row, out);
}

#endif /* VQ_FORMAT_COMMVQ_H */
