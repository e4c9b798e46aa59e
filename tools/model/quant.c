/* quant.c — scalar dot kernels (the readable reference of every weight
 * type), row dequantization, the kernel table and the threaded matmul. */
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

#define VQM_ISA_NAME "scalar"
#define VQM_ISA_INIT scalar_table
#include "quant_entries.h"

void vqm_kernels_scalar(vqm_kernels *k)
{
    memset(k, 0, sizeof *k);
    scalar_table(k);
}

void vqm_kernels_init(vqm_kernels *k, const char *isa)
{
    vqm_kernels_scalar(k);
    if (isa == NULL) return;
#if defined(VQM_HAVE_AVX2)
    if (strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0) vqm_kernels_avx2(k);
#endif
#if defined(VQM_HAVE_AVX512)
    if (strcmp(isa, "avx512") == 0) vqm_kernels_avx512(k);
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
    default: memset(out, 0, (size_t)n * 4); break;
    }
}

/* ---- the threaded matmul ---- */

enum { ROW_TILE = 16, X_GROUP = 4 };

typedef struct matmul_job {
    const vqm_kernels *k;
    const vqm_matrix *w;
    int64_t n;
    const float *x, *xsum;
    float *y;
    size_t y_stride;
} matmul_job;

static void matmul_part(void *arg, int ti, int tn)
{
    const matmul_job *j = arg;
    const vqm_matrix *w = j->w;
    /* rows split in tiles, tiles split over threads */
    const int64_t tiles = (w->rows + ROW_TILE - 1) / ROW_TILE;
    const int64_t t0 = tiles * ti / tn, t1 = tiles * (ti + 1) / tn;
    const vqm_dot_fn dot = j->k->dot[w->type];
    const int64_t nb = w->cols / VQM_QK;
    float out[X_GROUP];
    for (int64_t t = t0; t < t1; t++) {
        const int64_t r0 = t * ROW_TILE, r1 = r0 + ROW_TILE < w->rows ? r0 + ROW_TILE : w->rows;
        for (int64_t x0 = 0; x0 < j->n; x0 += X_GROUP) {
            const int nx = (int)(j->n - x0 < X_GROUP ? j->n - x0 : X_GROUP);
            for (int64_t r = r0; r < r1; r++) {
                dot(w->cols, w->data + (size_t)r * w->row_bytes, nx, j->x + (size_t)x0 * (size_t)w->cols,
                    (size_t)w->cols, j->xsum + (size_t)x0 * (size_t)nb, out);
                for (int q = 0; q < nx; q++) j->y[(size_t)(x0 + q) * j->y_stride + (size_t)r] = out[q];
            }
        }
    }
}

void vqm_matmul(vqm_pool *pool, const vqm_kernels *k, const vqm_matrix *w, int64_t n, const float *x, float *y,
                size_t y_stride, float *xsum)
{
    /* block sums of x for the affine types (Q4_1's m term, Q4_0's -8):
     * computed once, used by every row */
    const int64_t nb = w->cols / VQM_QK;
    for (int64_t t = 0; t < n; t++)
        for (int64_t b = 0; b < nb; b++) {
            float s = 0;
            for (int e = 0; e < VQM_QK; e++) s += x[t * w->cols + b * VQM_QK + e];
            xsum[t * nb + b] = s;
        }
    matmul_job job = {k, w, n, x, xsum, y, y_stride};
    vqm_pool_run(pool, matmul_part, &job);
}
