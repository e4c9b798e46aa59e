/* format_vecinfer.h — the VecInfer product-VQ key layout and its per-token decoders.
 *
 * Layout (docs/FORMATS.md §8), for a cache of B batches, Hkv heads, S tokens, head dim D
 * split into M subspaces of dsub = D / M channels:
 *   idx      [B, Hkv, S, M]        u8 (C <= 256) or u16 (C <= 65536)
 *   codebook [M, C, dsub]          f32, shared by all heads, or
 *            [Hkv, M, C, dsub]     f32, one per kv head
 *   smooth   [D] or [Hkv, D]       f32 > 0; keys were divided by it before VQ
 * A token decodes to k_hat = concat_m codebook[m, idx[m]] ⊙ smooth, and a query
 * scores it through a look-up table lut [M, C] with lut[m, c] =
 * (q ⊙ smooth)[m-th slice] . codebook[m, c]: q . k_hat = sum_m lut[m, idx[m]].
 *
 * Read by the C compiler and by nvcc (format_common.h): plain C99
 * `static inline VQ_HOST_DEVICE VQ_HOST_DEVICE`, no libc. Indices >= C are clamped to C - 1 here, so a decoder never reads out of
 * bounds; the CPU entry points reject such indices before decoding. */
#ifndef VQ_FORMAT_VECINFER_H
#define VQ_FORMAT_VECINFER_H

#include "format_common.h"

/* Largest codebook a subspace may have: indices are at most u16. */
#define VQ_VECINFER_MAX_CENTROIDS 65536

/* What a decoder needs to know about one head's codes. */
typedef struct vq_vecinfer_layout {
    int32_t M;          /* subspaces */
    int32_t dsub;       /* channels per subspace, D = M * dsub */
    int32_t C;          /* centroids per subspace */
    int32_t idx_bytes;  /* 1 (u8 codes) or 2 (u16 codes) */
} vq_vecinfer_layout;
VQ_STATIC_ASSERT(sizeof(vq_vecinfer_layout) == 16, "vq_vecinfer_layout is passed by value to CUDA kernels");

/* Code of subspace m of one token (codes [M]), clamped to [0, C). */
static inline VQ_HOST_DEVICE uint32_t vq_vecinfer_code(const vq_vecinfer_layout *L, const void *codes, int32_t m)
{
    const uint32_t c = L->idx_bytes == 1 ? ((const uint8_t *)codes)[m] : ((const uint16_t *)codes)[m];
    return c < (uint32_t)L->C ? c : (uint32_t)L->C - 1u;
}

/* One token: codes [M], codebook [M, C, dsub] (this head's), smooth [D]
 * (this head's) -> out [D] = concat_m codebook[m, codes[m]] ⊙ smooth. */
static inline VQ_HOST_DEVICE void vq_vecinfer_decode_token(const vq_vecinfer_layout *L, const void *codes, const float *codebook,
                                      const float *smooth, float *out)
{
    for (int32_t m = 0; m < L->M; m++) {
        const float *cent = codebook + ((int64_t)m * L->C + vq_vecinfer_code(L, codes, m)) * L->dsub;
        const int32_t base = m * L->dsub;
        for (int32_t j = 0; j < L->dsub; j++) out[base + j] = cent[j] * smooth[base + j];
    }
}

/* One token against a query's table: codes [M], lut [M, C] -> q . k_hat. */
static inline VQ_HOST_DEVICE float vq_vecinfer_score(const vq_vecinfer_layout *L, const void *codes, const float *lut)
{
    float s = 0.0f;
    for (int32_t m = 0; m < L->M; m++) s += lut[(int64_t)m * L->C + vq_vecinfer_code(L, codes, m)];
    return s;
}

#endif /* VQ_FORMAT_VECINFER_H */
