/* turboquant.c — the TurboQuant scalar codec and the Hadamard codec
 * (rotate, normalise, nearest Lloyd-Max centroid), public entry points and
 * their multithreaded CPU drivers. */
#include <math.h>

#include "hadamard.h"
#include "formats/lloyd_max.h"
#include "turboquant.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

/* ---- shared internals ---- */

void vq_turbo_boundaries(int bits, vq_boundaries *q)
{
    vq_boundaries_init(q, vq_lloyd_max_boundaries(bits), (1 << bits) - 1);
}

float vq_turbo_quantize_rotated(const vq_turbo_kernels *k, const float *y, int64_t d, const vq_boundaries *q,
                                const float *cents, bool norm_correct, uint8_t *idx)
{
    const double ss = k->sumsq(y, d);
    const float scale = (float)sqrt(ss / (double)d);
    /* scale 0: every y * 0 is 0, whose nearest centroid is the one below 0 */
    k->quantize_row(y, d, scale > 0.0f ? 1.0f / scale : 0.0f, q, idx);
    if (!norm_correct) return scale;
    double dot = 0.0;
    for (int64_t j = 0; j < d; j++) dot += (double)cents[idx[j]] * y[j];
    return dot > 0.0 ? (float)(ss / dot) : scale;
}

vq_status vq_check_row_scalars(vq_ctx *ctx, const DLTensor *t, const char *name, const DLTensor *x,
                               const char *x_name)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, t, name, VQ_DTM_F32, 1, 8));
    if (x->ndim == 1) return vq_check_shape(ctx, t, name, 1, (const int64_t[]){1});
    VQ_RETURN_IF(ctx, t->ndim != x->ndim - 1, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s': expected rank %d (the leading dimensions of '%s'), got rank %d", name,
                 x->ndim - 1, x_name, t->ndim);
    return vq_check_same_leading(ctx, x, x_name, t, name, x->ndim - 1);
}

vq_status vq_check_bits8(vq_ctx *ctx, int bits, const char *name)
{
    VQ_RETURN_IF(ctx, bits < 1 || bits > 8, VQ_ERR_INVALID_ARGUMENT, "%s must be in 1..8, got %d", name, bits);
    return VQ_OK;
}

vq_status vq_check_turbo_codes(vq_ctx *ctx, const DLTensor *idx, const char *idx_name, const DLTensor *scale,
                               const char *scale_name, const DLTensor *x, const char *x_name)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, idx, idx_name, VQ_DTM_U8, 1, 8));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, idx, idx_name, x->ndim, x->shape));
    return vq_check_row_scalars(ctx, scale, scale_name, x, x_name);
}

/* ---- scalar codec: element-wise over any shape, in chunks ---- */

enum { CHUNK = 4096 };

typedef struct scalar_job {
    const vq_turbo_kernels *k;
    const vq_row_kernels *cv;     /* row conversions */
    const void *x;        /* quantize: input values; dequantize: u8 indices */
    vq_dtype x_dt;
    void *out;            /* quantize: u8 indices; dequantize: values */
    vq_dtype out_dt;
    int64_t n;
    vq_boundaries q;
    const uint8_t *remap; /* quantize: index -> output index, or NULL */
    const float *cents;
    uint8_t mask;
    float scale;
    float *scratch;       /* [threads, CHUNK] */
} scalar_job;

static void scalar_quantize_task(void *arg, int64_t task, int thread)
{
    const scalar_job *j = arg;
    const int64_t e0 = task * CHUNK, len = j->n - e0 < CHUNK ? j->n - e0 : CHUNK;
    const float *src = (const float *)j->x + e0;
    if (j->x_dt != VQ_DT_F32) {
        float *buf = j->scratch + (size_t)thread * CHUNK;
        j->cv->to_f32((const uint16_t *)j->x + e0, j->x_dt, len, buf);
        src = buf;
    }
    uint8_t *idx = (uint8_t *)j->out + e0;
    j->k->quantize_row(src, len, 1.0f, &j->q, idx);
    if (j->remap != NULL)
        for (int64_t i = 0; i < len; i++) idx[i] = j->remap[idx[i]];
}

static void scalar_dequantize_task(void *arg, int64_t task, int thread)
{
    const scalar_job *j = arg;
    const int64_t e0 = task * CHUNK, len = j->n - e0 < CHUNK ? j->n - e0 : CHUNK;
    const bool f32 = j->out_dt == VQ_DT_F32;
    float *buf = f32 ? (float *)j->out + e0 : j->scratch + (size_t)thread * CHUNK;
    j->k->gather_row((const uint8_t *)j->x + e0, len, j->cents, j->mask, j->scale, false, buf);
    if (!f32) j->cv->from_f32(buf, len, j->out_dt, (uint16_t *)j->out + e0);
}

/* Runs a scalar job over all elements; scratch only when converting. */
static vq_status run_scalar(vq_ctx *ctx, scalar_job *j, bool convert, vq_task_fn fn)
{
    j->k = vq_turbo_kernels_for(ctx->isa);
    j->cv = vq_row_kernels_for(ctx->isa);
    if (convert) {
        j->scratch = vq_ctx_scratch(ctx, (size_t)ctx->num_threads * CHUNK * sizeof(float));
        VQ_RETURN_IF(ctx, j->scratch == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate conversion buffers");
    }
    vq_parallel_for(ctx, vq_ceil_div(j->n, CHUNK), fn, j);
    return VQ_OK;
}

vq_status vq_turboquant_scalar_quantize(vq_ctx *ctx, const DLTensor *x, int bits, DLTensor *idx_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, x, "x", VQ_DTM_F16_F32, 1, 8));
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, bits, "bits"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, idx_out, "idx_out", VQ_DTM_U8, 1, 8));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, idx_out, "idx_out", x->ndim, x->shape));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_turboquant_scalar_quantize(ctx, x, bits, idx_out);
#endif

    vq_boundaries q;
    vq_turbo_boundaries(bits, &q);
    return vq_turbo_quantize_elements(ctx, x, &q, NULL, idx_out);
}

vq_status vq_turbo_quantize_elements(vq_ctx *ctx, const DLTensor *x, const vq_boundaries *q, const uint8_t *remap,
                                     DLTensor *idx_out)
{
    scalar_job j = {.x = vq_data(x), .x_dt = vq_dtype_of(x), .out = vq_data(idx_out), .n = vq_numel(x),
                    .q = *q, .remap = remap};
    return run_scalar(ctx, &j, j.x_dt != VQ_DT_F32, scalar_quantize_task);
}

vq_status vq_turboquant_scalar_dequantize(vq_ctx *ctx, const DLTensor *idx, int bits, float scale, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, idx, "idx", VQ_DTM_U8, 1, 8));
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, bits, "bits"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_F16_F32, 1, 8));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, out, "out", idx->ndim, idx->shape));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_turboquant_scalar_dequantize(ctx, idx, bits, scale, out);
#endif

    scalar_job j = {.x = vq_data(idx), .out = vq_data(out), .out_dt = vq_dtype_of(out), .n = vq_numel(idx),
                    .cents = vq_lloyd_max_centroids(bits), .mask = (uint8_t)((1u << bits) - 1u), .scale = scale};
    return run_scalar(ctx, &j, j.out_dt != VQ_DT_F32, scalar_dequantize_task);
}

/* ---- Hadamard codec: per row of D ---- */

void vq_turbo_stage_init(vq_turbo_stage *st, int bits, const DLTensor *idx, const DLTensor *scale)
{
    st->idx = vq_data(idx);
    st->scale = vq_data(scale);
    vq_turbo_boundaries(bits, &st->q);
    st->cents = vq_lloyd_max_centroids(bits);
    st->mask = (uint8_t)((1u << bits) - 1u);
}

vq_status vq_turbo_run_rows(vq_ctx *ctx, vq_turbo_rows_job *j, bool need_scratch, vq_task_fn fn)
{
    j->k = vq_turbo_kernels_for(ctx->isa);
    j->cv = vq_row_kernels_for(ctx->isa);
    j->rotate = vq_hadamard_kernels_for(ctx->isa)->rotate_row;
    j->rows_per_task = vq_rows_per_task(j->n_rows, j->d, ctx->num_threads);
    if (need_scratch) {
        j->scratch = vq_ctx_scratch(ctx, (size_t)ctx->num_threads * (size_t)j->d * sizeof(float));
        VQ_RETURN_IF(ctx, j->scratch == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate row buffers");
    }
    vq_parallel_for(ctx, vq_ceil_div(j->n_rows, j->rows_per_task), fn, j);
    return VQ_OK;
}

float *vq_turbo_load_row(const vq_turbo_rows_job *j, int64_t r, int thread)
{
    float *y = j->scratch + (size_t)thread * (size_t)j->d;
    j->cv->to_f32((const char *)j->rows + (size_t)(r * j->d) * vq_dtype_size(j->rows_dt), j->rows_dt, j->d, y);
    return y;
}

float *vq_turbo_out_row(const vq_turbo_rows_job *j, int64_t r, int thread)
{
    if (j->rows_dt == VQ_DT_F32) return (float *)j->rows + r * j->d;
    return j->scratch + (size_t)thread * (size_t)j->d;
}

void vq_turbo_store_row(const vq_turbo_rows_job *j, int64_t r, float *y)
{
    j->rotate(y, j->d, j->diag, true);
    if (j->rows_dt != VQ_DT_F32)
        j->cv->from_f32(y, j->d, j->rows_dt, (char *)j->rows + (size_t)(r * j->d) * vq_dtype_size(j->rows_dt));
}

/* rows -> rot -> stage 0 codes and scales */
static void hadamard_quantize_task(void *arg, int64_t task, int thread)
{
    const vq_turbo_rows_job *j = arg;
    const vq_turbo_stage *st = &j->stage[0];
    int64_t r0, r1;
    vq_task_rows(task, j->rows_per_task, j->n_rows, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *y = vq_turbo_load_row(j, r, thread);
        j->rotate(y, j->d, j->diag, false);
        st->scale[r] = vq_turbo_quantize_rotated(j->k, y, j->d, &st->q, st->cents, j->norm_correct, st->idx + r * j->d);
    }
}

/* stage 0 codes and scales -> rot^-1 -> rows */
static void hadamard_dequantize_task(void *arg, int64_t task, int thread)
{
    const vq_turbo_rows_job *j = arg;
    const vq_turbo_stage *st = &j->stage[0];
    int64_t r0, r1;
    vq_task_rows(task, j->rows_per_task, j->n_rows, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *y = vq_turbo_out_row(j, r, thread);
        j->k->gather_row(st->idx + r * j->d, j->d, st->cents, st->mask, st->scale[r], false, y);
        vq_turbo_store_row(j, r, y);
    }
}

vq_status vq_turboquant_hadamard_quantize(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, int bits,
                                          DLTensor *idx_out, DLTensor *scale_out, const vq_turboquant_opts *opts)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, x, "x", VQ_DTM_F16_F32, 1, 8));
    int64_t d;
    VQ_FORWARD_IF_ERROR(vq_check_rotation(ctx, x, "x", diag, &d));
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, bits, "bits"));
    VQ_FORWARD_IF_ERROR(vq_check_turbo_codes(ctx, idx_out, "idx_out", scale_out, "scale_out", x, "x"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_turboquant_hadamard_quantize(ctx, x, diag, bits, idx_out, scale_out, opts);
#endif

    vq_turbo_rows_job j = {.rows = vq_data(x), .rows_dt = vq_dtype_of(x), .diag = diag ? vq_data(diag) : NULL,
                           .n_rows = vq_numel(x) / d, .d = d, .norm_correct = opts != NULL && opts->norm_correct};
    vq_turbo_stage_init(&j.stage[0], bits, idx_out, scale_out);
    return vq_turbo_run_rows(ctx, &j, true, hadamard_quantize_task);
}

vq_status vq_turboquant_hadamard_dequantize(vq_ctx *ctx, const DLTensor *idx, const DLTensor *scale,
                                            const DLTensor *diag, int bits, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_F16_F32, 1, 8));
    int64_t d;
    VQ_FORWARD_IF_ERROR(vq_check_rotation(ctx, out, "out", diag, &d));
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, bits, "bits"));
    VQ_FORWARD_IF_ERROR(vq_check_turbo_codes(ctx, idx, "idx", scale, "scale", out, "out"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_turboquant_hadamard_dequantize(ctx, idx, scale, diag, bits, out);
#endif

    vq_turbo_rows_job j = {.rows = vq_data(out), .rows_dt = vq_dtype_of(out), .diag = diag ? vq_data(diag) : NULL,
                           .n_rows = vq_numel(out) / d, .d = d};
    vq_turbo_stage_init(&j.stage[0], bits, idx, scale);
    return vq_turbo_run_rows(ctx, &j, j.rows_dt != VQ_DT_F32, hadamard_dequantize_task);
}
