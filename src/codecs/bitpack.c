/* bitpack.c — vq_bit_pack / vq_bit_unpack: codes <-> the u32 bit stream of
 * format_bitpack.h. Rows are cut into blocks of BLOCK elements (a multiple of
 * 32, so every block starts on a word boundary) and blocks run in parallel,
 * which spreads both many short rows and one long row over the pool. */
#include "core/core.h"
#include "formats/format_bitpack.h"
#include "row_tasks.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

enum { BLOCK = 32 * 512 };

typedef struct bitpack_job {
    const void *src;
    vq_dtype src_dt;
    void *dst;
    vq_dtype dst_dt;
    int bits;
    int64_t n, words;           /* elements and words per row */
    int64_t rows, blocks_per_row, rows_per_task;
} bitpack_job;

/* One task: rows [r0, r1), elements [e0, e1) of each, starting at word w0. */
typedef struct task_span { int64_t r0, r1, e0, e1, w0; } task_span;

static task_span task_range(const bitpack_job *j, int64_t task)
{
    task_span t;
    vq_task_rows(task / j->blocks_per_row, j->rows_per_task, j->rows, &t.r0, &t.r1);
    t.e0 = (task % j->blocks_per_row) * BLOCK;
    t.e1 = t.e0 + BLOCK < j->n ? t.e0 + BLOCK : j->n;
    t.w0 = t.e0 / 32 * j->bits;
    return t;
}

/* Elements [e0, e1) of src into words from w: a 64-bit accumulator collects
 * `bits` at a time and spills whole words. Always inlined with a constant
 * dtype, so each dtype gets its own loop without a per-element switch. */
static inline __attribute__((always_inline)) void pack_span(const void *src, vq_dtype dt, int64_t e0, int64_t e1,
                                                            int bits, uint32_t *out, int64_t w)
{
    const uint32_t mask = vq_bitpack_mask(bits);
    uint64_t acc = 0;
    unsigned fill = 0;
    for (int64_t i = e0; i < e1; i++) {
        acc |= (uint64_t)((uint32_t)vq_load_i(src, dt, i) & mask) << fill;
        fill += (unsigned)bits;
        if (fill >= 32) {
            out[w++] = (uint32_t)acc;
            acc >>= 32;
            fill -= 32;
        }
    }
    if (fill > 0) out[w] = (uint32_t)acc; /* the row's last word: high bits stay 0 */
}

/* Words from w into elements [e0, e1) of dst; inlined per dtype as above. */
static inline __attribute__((always_inline)) void unpack_span(const uint32_t *in, int64_t w, int bits, void *dst,
                                                              vq_dtype dt, int64_t e0, int64_t e1)
{
    const uint32_t mask = vq_bitpack_mask(bits);
    uint64_t acc = 0;
    unsigned fill = 0;
    for (int64_t i = e0; i < e1; i++) {
        if (fill < (unsigned)bits) {
            acc |= (uint64_t)in[w++] << fill;
            fill += 32;
        }
        vq_store_i(dst, dt, i, (int64_t)(acc & mask));
        acc >>= bits;
        fill -= (unsigned)bits;
    }
}

static void pack_task(void *arg, int64_t task, int thread)
{
    const bitpack_job *j = arg;
    const task_span t = task_range(j, task);
    const size_t es = vq_dtype_size(j->src_dt);
    for (int64_t row = t.r0; row < t.r1; row++) {
        const void *src = (const char *)j->src + (size_t)(row * j->n) * es;
        uint32_t *out = (uint32_t *)j->dst + row * j->words;
        switch (j->src_dt) {
        case VQ_DT_U8: pack_span(src, VQ_DT_U8, t.e0, t.e1, j->bits, out, t.w0); break;
        case VQ_DT_U16: pack_span(src, VQ_DT_U16, t.e0, t.e1, j->bits, out, t.w0); break;
        default: pack_span(src, VQ_DT_I32, t.e0, t.e1, j->bits, out, t.w0); break;
        }
    }
}

static void unpack_task(void *arg, int64_t task, int thread)
{
    const bitpack_job *j = arg;
    const task_span t = task_range(j, task);
    for (int64_t row = t.r0; row < t.r1; row++) {
        const uint32_t *in = (const uint32_t *)j->src + row * j->words;
        void *dst = (char *)j->dst + (size_t)(row * j->n) * vq_dtype_size(j->dst_dt);
        if (j->dst_dt == VQ_DT_U8) unpack_span(in, t.w0, j->bits, dst, VQ_DT_U8, t.e0, t.e1);
        else unpack_span(in, t.w0, j->bits, dst, VQ_DT_I32, t.e0, t.e1);
    }
}

/* Long rows split into blocks, short rows grouped, so that tasks are big
 * enough to amortise the pool and numerous enough to balance it. */
static void run(vq_ctx *ctx, bitpack_job *j, int64_t rows, vq_task_fn fn)
{
    j->rows = rows;
    j->blocks_per_row = vq_ceil_div(j->n, BLOCK);
    j->rows_per_task = j->blocks_per_row > 1 ? 1 : vq_rows_per_task(rows, j->n, ctx->num_threads);
    vq_parallel_for(ctx, vq_ceil_div(rows, j->rows_per_task) * j->blocks_per_row, fn, j);
}

vq_status vq_bit_pack(vq_ctx *ctx, const DLTensor *idx, int bits, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, idx, "idx", VQ_DTM_U8 | VQ_DTM_U16 | VQ_DTM_I32, 1, 8));
    VQ_RETURN_IF(ctx, bits < 1 || bits > 16, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..16, got %d", bits);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_U32, idx->ndim, idx->ndim));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, idx, "idx", out, "out", idx->ndim - 1));
    const int64_t n = vq_dim(idx, -1);
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, out, "out", -1, vq_bitpack_words(n, bits), "ceil(N*bits/32)"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_bit_pack(ctx, idx, bits, out);
#endif

    bitpack_job j = {.src = vq_data(idx), .src_dt = vq_dtype_of(idx), .dst = vq_data(out), .dst_dt = VQ_DT_U32,
                     .bits = bits, .n = n, .words = vq_bitpack_words(n, bits)};
    run(ctx, &j, vq_numel(idx) / n, pack_task);
    return VQ_OK;
}

vq_status vq_bit_unpack(vq_ctx *ctx, const DLTensor *packed, int bits, int64_t original_length, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, packed, "packed", VQ_DTM_U32, 1, 8));
    VQ_RETURN_IF(ctx, bits < 1 || bits > 16, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..16, got %d", bits);
    VQ_RETURN_IF(ctx, original_length < 1 || original_length > INT64_MAX / 32, VQ_ERR_INVALID_ARGUMENT,
                 "original_length must be >= 1, got %lld", (long long)original_length);
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, packed, "packed", -1, vq_bitpack_words(original_length, bits),
                                     "ceil(original_length*bits/32)"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_I32 | VQ_DTM_U8, packed->ndim, packed->ndim));
    VQ_RETURN_IF(ctx, vq_dtype_of(out) == VQ_DT_U8 && bits > 8, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'out': dtype u8 holds at most 8 bits, got bits = %d (use i32)", bits);
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, packed, "packed", out, "out", packed->ndim - 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, out, "out", -1, original_length, "original_length"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_bit_unpack(ctx, packed, bits, original_length, out);
#endif

    bitpack_job j = {.src = vq_data(packed), .src_dt = VQ_DT_U32, .dst = vq_data(out), .dst_dt = vq_dtype_of(out),
                     .bits = bits, .n = original_length, .words = vq_bitpack_words(original_length, bits)};
    run(ctx, &j, vq_numel(out) / original_length, unpack_task);
    return VQ_OK;
}
