/* quant.c — the scalar kernels (the readable reference of every weight
 * type): row kernels for matrices in their file layout, tile kernels for
 * the packed one; the packing, row dequantization, the kernel table and
 * the threaded matmul. The SIMD files have tile kernels only (the model
 * packs every matrix it multiplies by). */
#include "quant.h"

#include <string.h>

static inline float h2f(uint16_t h) { return vq_f16_to_f32(h); }

/* Element c of a row of float weights (F32, F16, BF16). */
static inline float float_at(const uint8_t *row, int64_t c, uint32_t type)
{
    if (type == VQM_W_F32) {
        float f;
        memcpy(&f, row + 4 * c, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, row + 2 * c, 2);
    return type == VQM_W_F16 ? h2f(h) : vq_bf16_to_f32(h);
}

/* out[j] = dot(row, x_j) for float weights. */
static inline void dot_float(int64_t cols, const uint8_t *row, int nx, const float *x, size_t xs, float *out,
                             uint32_t type)
{
    for (int j = 0; j < nx; j++) {
        float acc = 0;
        for (int64_t c = 0; c < cols; c++) acc += float_at(row, c, type) * x[j * xs + c];
        out[j] = acc;
    }
}

/* The 4-bit types: sum_b d_b * sum_i q_i x_i + m_b * sum_i x_i with Q4_1's
 * m, or Q4_0's m = -8 d (the block sums of x come precomputed). */
static inline void dot_q4(int64_t cols, const uint8_t *row, int nx, const float *x, size_t xs, const float *xsum,
                          float *out, bool has_m)
{
    const size_t bs = has_m ? sizeof(vqm_block_q4_1) : sizeof(vqm_block_q4_0);
    const int64_t nb = cols / VQM_QK;
    for (int j = 0; j < nx; j++) {
        const float *xj = x + j * xs;
        float acc = 0;
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *b = row + (size_t)i * bs;
            uint16_t dh, mh;
            memcpy(&dh, b, 2);
            memcpy(&mh, b + 2, 2);
            const float d = h2f(dh), m = has_m ? h2f(mh) : -8.0f * d;
            const uint8_t *qs = b + (has_m ? 4 : 2);
            float s = 0;
            for (int e = 0; e < VQM_QK / 2; e++) {
                s += (float)(qs[e] & 15) * xj[i * VQM_QK + e];
                s += (float)(qs[e] >> 4) * xj[i * VQM_QK + e + 16];
            }
            acc += d * s + m * xsum[j * nb + i];
        }
        out[j] = acc;
    }
}

static inline void dot_q8(int64_t cols, const uint8_t *row, int nx, const float *x, size_t xs, float *out)
{
    const vqm_block_q8_0 *b = (const vqm_block_q8_0 *)(const void *)row;
    const int64_t nb = cols / VQM_QK;
    for (int j = 0; j < nx; j++) {
        const float *xj = x + j * xs;
        float acc = 0;
        for (int64_t i = 0; i < nb; i++) {
            float s = 0;
            for (int e = 0; e < VQM_QK; e++) s += (float)b[i].qs[e] * xj[i * VQM_QK + e];
            acc += h2f(b[i].d) * s;
        }
        out[j] = acc;
    }
}

/* ---- Q5_0 and the K-quants: codes in element order, then scales ---- */

/* 6-bit scale and min of sub-block j of a Q4_K block (ggml's get_scale_min_k4). */
static inline void q4k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void q5_0_codes(const uint8_t *blk, uint8_t q[VQM_QK])
{
    const vqm_block_q5_0 *b = (const vqm_block_q5_0 *)(const void *)blk;
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    for (int e = 0; e < VQM_QK / 2; e++) {
        q[e] = (uint8_t)((b->qs[e] & 15) | (((qh >> e) & 1) << 4));
        q[e + 16] = (uint8_t)((b->qs[e] >> 4) | (((qh >> (e + 16)) & 1) << 4));
    }
}

static void q4_k_codes(const uint8_t *blk, uint8_t q[VQM_QK_K])
{
    const vqm_block_q4_k *b = (const vqm_block_q4_k *)(const void *)blk;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = b->qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = b->qs[32 * c + l] >> 4;
        }
}

static void q6_k_codes(const uint8_t *blk, uint8_t q[VQM_QK_K])
{
    const vqm_block_q6_k *b = (const vqm_block_q6_k *)(const void *)blk;
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *ql = b->ql + 64 * h, qh = b->qh[32 * h + l];
            q[128 * h + l] = (uint8_t)((ql[l] & 15) | ((qh & 3) << 4));
            q[128 * h + 32 + l] = (uint8_t)((ql[l + 32] & 15) | (((qh >> 2) & 3) << 4));
            q[128 * h + 64 + l] = (uint8_t)((ql[l] >> 4) | (((qh >> 4) & 3) << 4));
            q[128 * h + 96 + l] = (uint8_t)((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4));
        }
}

/* Elements per block of Q5_0 (32) and the K-quants (256). */
static inline int deq_block_len(uint32_t type) { return type == VQM_W_Q5_0 ? VQM_QK : VQM_QK_K; }

/* Dequantizes one block of Q5_0, Q4_K or Q6_K into out. */
static void deq_block(uint32_t type, const uint8_t *blk, float *out)
{
    uint8_t q[VQM_QK_K];
    uint16_t h;
    if (type == VQM_W_Q5_0) {
        q5_0_codes(blk, q);
        memcpy(&h, blk, 2);
        for (int e = 0; e < VQM_QK; e++) out[e] = h2f(h) * (float)(q[e] - 16);
    } else if (type == VQM_W_Q4_K) {
        const vqm_block_q4_k *b = (const vqm_block_q4_k *)(const void *)blk;
        q4_k_codes(blk, q);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            q4k_scale_min(b->scales, j, &sc, &m);
            const float d = h2f(b->d) * (float)sc, mn = h2f(b->dmin) * (float)m;
            for (int e = 0; e < 32; e++) out[32 * j + e] = d * (float)q[32 * j + e] - mn;
        }
    } else {
        const vqm_block_q6_k *b = (const vqm_block_q6_k *)(const void *)blk;
        q6_k_codes(blk, q);
        for (int i = 0; i < VQM_QK_K; i++) out[i] = h2f(b->d) * (float)b->scales[i / 16] * (float)(q[i] - 32);
    }
}

/* The row kernel of Q5_0 and the K-quants: a block dequantized, then dotted. */
static inline void dot_deq(int64_t cols, const uint8_t *row, int nx, const float *x, size_t xs, float *out,
                           uint32_t type)
{
    const int bl = deq_block_len(type);
    const size_t bs = (size_t)vqm_wtype_row_bytes(type, bl, NULL);
    float w[VQM_QK_K];
    for (int j = 0; j < nx; j++) {
        float acc = 0;
        for (int64_t b = 0; b < cols / bl; b++) {
            deq_block(type, row + (size_t)b * bs, w);
            for (int e = 0; e < bl; e++) acc += w[e] * x[j * xs + b * bl + e];
        }
        out[j] = acc;
    }
}

/* The packed layouts (quant.h): the readable reference of the tile kernels. */
static inline void tile_q4(int64_t cols, const uint8_t *tile, int nx, const float *x, size_t xs, const float *xsum,
                           float *out, bool has_m)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bb = has_m ? 20 * VQM_TILE : 18 * VQM_TILE;
    for (int j = 0; j < nx; j++)
        for (int r = 0; r < VQM_TILE; r++) {
            float acc = 0;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *p = tile + (size_t)b * bb;
                uint16_t dh, mh;
                memcpy(&dh, p + 2 * r, 2);
                memcpy(&mh, p + 2 * VQM_TILE + 2 * r, 2);
                const float d = h2f(dh), m = has_m ? h2f(mh) : -8.0f * d;
                const uint8_t *qs = p + (has_m ? 4 : 2) * VQM_TILE;
                const float *xb = x + j * xs + b * VQM_QK;
                float s = 0;
                for (int e = 0; e < VQM_QK / 2; e++) {
                    s += (float)(qs[e * VQM_TILE + r] & 15) * xb[e];
                    s += (float)(qs[e * VQM_TILE + r] >> 4) * xb[e + 16];
                }
                acc += d * s + m * xsum[j * nb + b];
            }
            out[j * VQM_TILE + r] = acc;
        }
}

/* Q8_0 (d q) and the float types (d = 1): 32 elements per row and block. */
static inline void tile_linear(int64_t cols, const uint8_t *tile, int nx, const float *x, size_t xs, float *out,
                               uint32_t type)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bb = vqm_packed_block_bytes(type);
    for (int j = 0; j < nx; j++)
        for (int r = 0; r < VQM_TILE; r++) {
            float acc = 0;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *p = tile + (size_t)b * bb;
                float s = 0;
                for (int e = 0; e < VQM_QK; e++) {
                    const float xe = x[j * xs + b * VQM_QK + e];
                    if (type == VQM_W_Q8_0) s += (float)(int8_t)p[2 * VQM_TILE + e * VQM_TILE + r] * xe;
                    else s += float_at(p, e * VQM_TILE + r, type) * xe;
                }
                if (type == VQM_W_Q8_0) {
                    uint16_t dh;
                    memcpy(&dh, p + 2 * r, 2);
                    s *= h2f(dh);
                }
                acc += s;
            }
            out[j * VQM_TILE + r] = acc;
        }
}

/* Q5_0: d (q - 16), the fifth bit from the row's qh word. */
static inline void tile_q5_0(int64_t cols, const uint8_t *tile, int nx, const float *x, size_t xs, const float *xsum,
                             float *out)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bb = vqm_packed_block_bytes(VQM_W_Q5_0);
    for (int j = 0; j < nx; j++)
        for (int r = 0; r < VQM_TILE; r++) {
            float acc = 0;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *p = tile + (size_t)b * bb;
                uint16_t dh;
                uint32_t qh;
                memcpy(&dh, p + 2 * r, 2);
                memcpy(&qh, p + 2 * VQM_TILE + 4 * r, 4);
                const uint8_t *qs = p + 6 * VQM_TILE;
                const float *xb = x + j * xs + b * VQM_QK;
                float s = 0;
                for (int e = 0; e < VQM_QK / 2; e++) {
                    s += (float)((qs[e * VQM_TILE + r] & 15) | (((qh >> e) & 1) << 4)) * xb[e];
                    s += (float)((qs[e * VQM_TILE + r] >> 4) | (((qh >> (e + 16)) & 1) << 4)) * xb[e + 16];
                }
                acc += h2f(dh) * s - 16.0f * h2f(dh) * xsum[j * nb + b];
            }
            out[j * VQM_TILE + r] = acc;
        }
}

/* Q4_K: per sub-block j of 32, (d sc_j) sum q x - (dmin m_j) sum x. */
static inline void tile_q4_k(int64_t cols, const uint8_t *tile, int nx, const float *x, size_t xs, const float *xsum,
                             float *out)
{
    const int64_t nsb = cols / VQM_QK_K, nb = cols / VQM_QK;
    for (int jx = 0; jx < nx; jx++)
        for (int r = 0; r < VQM_TILE; r++) {
            float acc = 0;
            for (int64_t sb = 0; sb < nsb; sb++) {
                const uint8_t *p = tile + (size_t)sb * VQM_Q4K_BYTES;
                uint16_t dh, mh;
                memcpy(&dh, p + 2 * r, 2);
                memcpy(&mh, p + 2 * VQM_TILE + 2 * r, 2);
                for (int j = 0; j < 8; j++) {
                    const uint8_t *qs = p + VQM_Q4K_QS + j * VQM_TILE * 16;
                    const float *xb = x + jx * xs + sb * VQM_QK_K + j * VQM_QK;
                    float s = 0;
                    for (int e = 0; e < 16; e++) {
                        s += (float)(qs[e * VQM_TILE + r] & 15) * xb[e];
                        s += (float)(qs[e * VQM_TILE + r] >> 4) * xb[e + 16];
                    }
                    const float sc = h2f(dh) * (float)p[VQM_Q4K_SC + j * VQM_TILE + r];
                    const float mn = h2f(mh) * (float)p[VQM_Q4K_M + j * VQM_TILE + r];
                    acc += sc * s - mn * xsum[jx * nb + sb * 8 + j];
                }
            }
            out[jx * VQM_TILE + r] = acc;
        }
}

/* Q6_K: per sub-block of 16, (d sc) sum (q - 32) x. */
static inline void tile_q6_k(int64_t cols, const uint8_t *tile, int nx, const float *x, size_t xs, float *out)
{
    const int64_t nsb = cols / VQM_QK_K;
    for (int jx = 0; jx < nx; jx++)
        for (int r = 0; r < VQM_TILE; r++) {
            float acc = 0;
            for (int64_t sb = 0; sb < nsb; sb++) {
                const uint8_t *p = tile + (size_t)sb * VQM_Q6K_BYTES;
                uint16_t dh;
                memcpy(&dh, p + 2 * r, 2);
                for (int j = 0; j < 8; j++) {
                    const uint8_t *ql = p + VQM_Q6K_QL + j * VQM_TILE * 16;
                    uint32_t h0, h1;
                    memcpy(&h0, p + VQM_Q6K_QH + (j * 2 * VQM_TILE + r) * 4, 4);
                    memcpy(&h1, p + VQM_Q6K_QH + ((j * 2 + 1) * VQM_TILE + r) * 4, 4);
                    const float *xb = x + jx * xs + sb * VQM_QK_K + j * VQM_QK;
                    float slo = 0, shi = 0;
                    for (int e = 0; e < 16; e++) {
                        slo += (float)((int)((ql[e * VQM_TILE + r] & 15) | (((h0 >> 2 * e) & 3) << 4)) - 32) * xb[e];
                        shi += (float)((int)((ql[e * VQM_TILE + r] >> 4) | (((h1 >> 2 * e) & 3) << 4)) - 32) * xb[e + 16];
                    }
                    const int8_t *sc = (const int8_t *)(p + VQM_Q6K_SC);
                    acc += h2f(dh) * (float)sc[2 * j * VQM_TILE + r] * slo +
                           h2f(dh) * (float)sc[(2 * j + 1) * VQM_TILE + r] * shi;
                }
            }
            out[jx * VQM_TILE + r] = acc;
        }
}

#define VQM_T_Q5_0(N) tile_q5_0(cols, row, N, x, xs, xsum, out)
#define VQM_ISA_NAME "scalar"
#define VQM_ISA_INIT scalar_tiles
#include "quant_entries.h"

/* the row kernels (unpacked matrices, every ISA) */
#define B_Q4_1(N) dot_q4(cols, row, N, x, xs, xsum, out, 1)
#define B_Q4_0(N) dot_q4(cols, row, N, x, xs, xsum, out, 0)
#define B_Q8_0(N) dot_q8(cols, row, N, x, xs, out)
#define B_F32(N) dot_float(cols, row, N, x, xs, out, VQM_W_F32)
#define B_F16(N) dot_float(cols, row, N, x, xs, out, VQM_W_F16)
#define B_BF16(N) dot_float(cols, row, N, x, xs, out, VQM_W_BF16)
#define B_Q5_0(N) dot_deq(cols, row, N, x, xs, out, VQM_W_Q5_0)
#define B_Q4_K(N) dot_deq(cols, row, N, x, xs, out, VQM_W_Q4_K)
#define B_Q6_K(N) dot_deq(cols, row, N, x, xs, out, VQM_W_Q6_K)
VQM_ENTRY(k_q4_1, B_Q4_1)
VQM_ENTRY(k_q4_0, B_Q4_0)
VQM_ENTRY(k_q8_0, B_Q8_0)
VQM_ENTRY(k_f32, B_F32)
VQM_ENTRY(k_f16, B_F16)
VQM_ENTRY(k_bf16, B_BF16)
VQM_ENTRY(k_q5_0, B_Q5_0)
VQM_ENTRY(k_q4_k, B_Q4_K)
VQM_ENTRY(k_q6_k, B_Q6_K)

void vqm_kernels_scalar(vqm_kernels *k)
{
    memset(k, 0, sizeof *k);
    scalar_tiles(k);
    VQM_FILL(k->dot, k_);
}
/* The library's x86 kernel sets in order (vq_ctx_isa's names): each one
 * runs on a CPU that runs the next, so "amx" (AVX-512 with tiles, which
 * these matrix kernels do not use) gets the AVX-512 set. 0 for the rest. */
static int x86_rank(const char *isa)
{
    static const char *const order[] = {"scalar", "avx2", "avx512", "amx"};
    for (int i = 0; i < 4; i++)
        if (strcmp(isa, order[i]) == 0) return i;
    return 0;
}

void vqm_kernels_init(vqm_kernels *k, const char *isa)
{
    vqm_kernels_scalar(k);
    if (isa == NULL) return;
    const int rank = x86_rank(isa);
    (void)rank;
#if defined(VQM_HAVE_AVX2)
    if (rank >= 1) vqm_kernels_avx2(k);
#endif
#if defined(VQM_HAVE_AVX512)
    if (rank >= 2) vqm_kernels_avx512(k);
#endif
}

void vqm_matrix_row(const vqm_matrix *w, int64_t r, float *out)
{
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    const int64_t n = w->cols;
    switch (w->type) {
    case VQM_W_F32:
    case VQM_W_F16:
    case VQM_W_BF16:
        for (int64_t c = 0; c < n; c++) out[c] = float_at(row, c, w->type);
        break;
    case VQM_W_Q4_0: {
        const vqm_block_q4_0 *b = (const vqm_block_q4_0 *)(const void *)row;
        for (int64_t i = 0; i < n / VQM_QK; i++)
            for (int e = 0; e < VQM_QK / 2; e++) {
                const float d = h2f(b[i].d);
                out[i * VQM_QK + e] = d * (float)((b[i].qs[e] & 15) - 8);
                out[i * VQM_QK + e + 16] = d * (float)((b[i].qs[e] >> 4) - 8);
            }
        break;
    }
    case VQM_W_Q4_1: {
        const vqm_block_q4_1 *b = (const vqm_block_q4_1 *)(const void *)row;
        for (int64_t i = 0; i < n / VQM_QK; i++)
            for (int e = 0; e < VQM_QK / 2; e++) {
                const float d = h2f(b[i].d), m = h2f(b[i].m);
                out[i * VQM_QK + e] = d * (float)(b[i].qs[e] & 15) + m;
                out[i * VQM_QK + e + 16] = d * (float)(b[i].qs[e] >> 4) + m;
            }
        break;
    }
    case VQM_W_Q8_0: {
        const vqm_block_q8_0 *b = (const vqm_block_q8_0 *)(const void *)row;
        for (int64_t i = 0; i < n / VQM_QK; i++)
            for (int e = 0; e < VQM_QK; e++) out[i * VQM_QK + e] = h2f(b[i].d) * (float)b[i].qs[e];
        break;
    }
    case VQM_W_Q5_0:
    case VQM_W_Q4_K:
    case VQM_W_Q6_K: {
        const int bl = deq_block_len(w->type);
        const size_t bs = (size_t)vqm_wtype_row_bytes(w->type, bl, NULL);
        for (int64_t i = 0; i < n / bl; i++) deq_block(w->type, row + (size_t)i * bs, out + i * bl);
        break;
    }
    default: memset(out, 0, (size_t)n * 4); break;
    }
}

/* ---- the packed layout ---- */

size_t vqm_matrix_packed_bytes(const vqm_matrix *w)
{
    const int64_t tiles = (w->rows + VQM_TILE - 1) / VQM_TILE;
    return (size_t)tiles * (size_t)(w->cols / VQM_QK) * vqm_packed_block_bytes(w->type);
}

/* Row r's codes of block b of Q5_0 / a K-quant into the packed tile-(super-)block p. */
static void pack_block_k(uint32_t type, const uint8_t *src, int r, uint8_t *p)
{
    uint8_t q[VQM_QK_K];
    const int nsub = type == VQM_W_Q5_0 ? 1 : 8;
    uint8_t *qs = p + (type == VQM_W_Q5_0 ? 6 * VQM_TILE : type == VQM_W_Q4_K ? VQM_Q4K_QS : VQM_Q6K_QL);
    if (type == VQM_W_Q5_0) {
        memcpy(p + 2 * r, src, 2);                   /* d */
        memcpy(p + 2 * VQM_TILE + 4 * r, src + 2, 4); /* qh */
        q5_0_codes(src, q);
    } else if (type == VQM_W_Q4_K) {
        const vqm_block_q4_k *b = (const vqm_block_q4_k *)(const void *)src;
        memcpy(p + 2 * r, &b->d, 2);
        memcpy(p + 2 * VQM_TILE + 2 * r, &b->dmin, 2);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            q4k_scale_min(b->scales, j, &sc, &m);
            p[VQM_Q4K_SC + j * VQM_TILE + r] = (uint8_t)sc;
            p[VQM_Q4K_M + j * VQM_TILE + r] = (uint8_t)m;
        }
        q4_k_codes(src, q);
    } else {
        const vqm_block_q6_k *b = (const vqm_block_q6_k *)(const void *)src;
        memcpy(p + 2 * r, &b->d, 2);
        for (int i = 0; i < 16; i++) p[VQM_Q6K_SC + i * VQM_TILE + r] = (uint8_t)b->scales[i];
        q6_k_codes(src, q);
        for (int j = 0; j < 8; j++)
            for (int half = 0; half < 2; half++) {
                uint32_t h = 0;
                for (int e = 0; e < 16; e++) h |= (uint32_t)(q[32 * j + 16 * half + e] >> 4) << (2 * e);
                memcpy(p + VQM_Q6K_QH + ((j * 2 + half) * VQM_TILE + r) * 4, &h, 4);
            }
    }
    for (int j = 0; j < nsub; j++)
        for (int e = 0; e < 16; e++)
            qs[(j * 16 + e) * VQM_TILE + r] = (uint8_t)((q[32 * j + e] & 15) | ((q[32 * j + e + 16] & 15) << 4));
}

void vqm_matrix_pack(const vqm_matrix *w, uint8_t *dst)
{
    const size_t bb = vqm_packed_block_bytes(w->type);
    if (bb == 0) return;
    if (w->type == VQM_W_Q5_0 || w->type == VQM_W_Q4_K || w->type == VQM_W_Q6_K) {
        const int bl = deq_block_len(w->type);
        const size_t bs = (size_t)vqm_wtype_row_bytes(w->type, bl, NULL), tb = bb * (size_t)(bl / VQM_QK);
        const int64_t nbk = w->cols / bl, tiles = (w->rows + VQM_TILE - 1) / VQM_TILE;
        memset(dst, 0, vqm_matrix_packed_bytes(w));
        for (int64_t t = 0; t < tiles; t++)
            for (int64_t b = 0; b < nbk; b++)
                for (int r = 0; r < VQM_TILE && t * VQM_TILE + r < w->rows; r++)
                    pack_block_k(w->type, w->data + (size_t)(t * VQM_TILE + r) * w->row_bytes + (size_t)b * bs, r,
                                 dst + ((size_t)t * (size_t)nbk + (size_t)b) * tb);
        return;
    }
    const size_t bs = bb / VQM_TILE;                                    /* a row's block */
    const size_t hdr = w->type == VQM_W_Q4_1 ? 4 : w->type == VQM_W_Q4_0 || w->type == VQM_W_Q8_0 ? 2 : 0;
    const size_t u = w->type == VQM_W_F32 ? 4 : w->type == VQM_W_F16 || w->type == VQM_W_BF16 ? 2 : 1;
    const int64_t nb = w->cols / VQM_QK, tiles = (w->rows + VQM_TILE - 1) / VQM_TILE;
    memset(dst, 0, vqm_matrix_packed_bytes(w)); /* padding rows: scales and codes 0 */
    for (int64_t t = 0; t < tiles; t++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *p = dst + ((size_t)t * (size_t)nb + (size_t)b) * bb;
            for (int r = 0; r < VQM_TILE && t * VQM_TILE + r < w->rows; r++) {
                const uint8_t *src = w->data + (size_t)(t * VQM_TILE + r) * w->row_bytes + (size_t)b * bs;
                for (size_t h = 0; h < hdr; h += 2) memcpy(p + h * VQM_TILE + 2 * (size_t)r, src + h, 2); /* d, m */
                for (size_t e = 0; e < (bs - hdr) / u; e++)                                        /* codes */
                    memcpy(p + hdr * VQM_TILE + (e * VQM_TILE + (size_t)r) * u, src + hdr + e * u, u);
            }
        }
}

/* ---- the threaded matmul ---- */

enum { X_GROUP = 4, MAX_MATS = 4 };

typedef struct matmul_job {
    const vqm_kernels *k;
    int count;
    const vqm_matrix *const *w;
    int64_t n;
    const float *x, *xsum;
    float *const *y;
    const size_t *y_stride;
    int64_t tiles[MAX_MATS + 1]; /* prefix sums of the matrices' tile counts */
} matmul_job;

/* Tile t (VQM_TILE rows from r0) of matrix w for every group of X_GROUP rows of x. */
static void matmul_tile(const matmul_job *j, const vqm_matrix *w, float *y, size_t ys, int64_t t)
{
    const int64_t r0 = t * VQM_TILE, nr = w->rows - r0 < VQM_TILE ? w->rows - r0 : VQM_TILE;
    const int64_t nb = w->cols / VQM_QK;
    const vqm_tile_fn tile = w->packed != NULL ? j->k->tile[w->type] : NULL;
    float out[X_GROUP * VQM_TILE];
    for (int64_t x0 = 0; x0 < j->n; x0 += X_GROUP) {
        const int nx = (int)(j->n - x0 < X_GROUP ? j->n - x0 : X_GROUP);
        const float *x = j->x + (size_t)x0 * (size_t)w->cols, *xsum = j->xsum + (size_t)x0 * (size_t)nb;
        if (tile != NULL) {
            tile(w->cols, w->packed + (size_t)t * (size_t)nb * vqm_packed_block_bytes(w->type), nx, x,
                 (size_t)w->cols, xsum, out);
            for (int q = 0; q < nx; q++)
                for (int64_t r = 0; r < nr; r++) y[(size_t)(x0 + q) * ys + (size_t)(r0 + r)] = out[q * VQM_TILE + r];
        } else {
            const vqm_dot_fn dot = j->k->dot[w->type];
            for (int64_t r = r0; r < r0 + nr; r++) {
                dot(w->cols, w->data + (size_t)r * w->row_bytes, nx, x, (size_t)w->cols, xsum, out);
                for (int q = 0; q < nx; q++) y[(size_t)(x0 + q) * ys + (size_t)r] = out[q];
            }
        }
    }
}

static void matmul_part(void *arg, int ti, int tn)
{
    const matmul_job *j = arg;
    /* the tiles of all matrices in a row, split evenly over the threads */
    const int64_t total = j->tiles[j->count];
    const int64_t t0 = total * ti / tn, t1 = total * (ti + 1) / tn;
    int i = 0;
    for (int64_t g = t0; g < t1; g++) {
        while (g >= j->tiles[i + 1]) i++;
        matmul_tile(j, j->w[i], j->y[i], j->y_stride[i], g - j->tiles[i]);
    }
}

void vqm_matmuls(vqm_pool *pool, const vqm_kernels *k, int count, const vqm_matrix *const *w, int64_t n,
                 const float *x, float *const *y, const size_t *y_stride, float *xsum)
{
    assert(count >= 1 && count <= MAX_MATS);
    const int64_t cols = w[0]->cols, nb = cols / VQM_QK;
    matmul_job job = {k, count, w, n, x, xsum, y, y_stride, {0}};
    bool affine = false;
    for (int i = 0; i < count; i++) {
        assert(w[i]->cols == cols);
        job.tiles[i + 1] = job.tiles[i] + (w[i]->rows + VQM_TILE - 1) / VQM_TILE;
        affine |= w[i]->type == VQM_W_Q4_1 || w[i]->type == VQM_W_Q4_0 || w[i]->type == VQM_W_Q5_0 ||
                  w[i]->type == VQM_W_Q4_K;
    }
    /* block sums of x for the affine types (Q4_1's m term, Q4_0's -8, Q5_0's
     * -16, Q4_K's mins):
     * computed once, used by every row; four partial sums, not one chain */
    for (int64_t t = 0; t < n && affine; t++)
        for (int64_t b = 0; b < nb; b++) {
            const float *xb = x + t * cols + b * VQM_QK;
            float s[4] = {0, 0, 0, 0};
            for (int e = 0; e < VQM_QK; e += 4)
                for (int q = 0; q < 4; q++) s[q] += xb[e + q];
            xsum[t * nb + b] = (s[0] + s[1]) + (s[2] + s[3]);
        }
    vqm_pool_run(pool, matmul_part, &job);
}

void vqm_matmul(vqm_pool *pool, const vqm_kernels *k, const vqm_matrix *w, int64_t n, const float *x, float *y,
                size_t y_stride, float *xsum)
{
    vqm_matmuls(pool, k, 1, &w, n, x, &y, &y_stride, xsum);
}
