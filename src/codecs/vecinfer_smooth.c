/* vecinfer_smooth.c — VecInfer smooth factors from calibration keys:
 * s_c = sqrt(max_t |k[t, c]|), 1 for an all-zero channel. Dividing keys by s
 * flattens outlier channels before product VQ (docs/FORMATS.md §8). */
#include <math.h>

#include "codecs/centroids.h"

typedef struct smooth_job {
    const vq_centroids_kernels *k;
    const vq_row_kernels *conv; /* f16/f32 row conversions */
    const void *keys;     /* [N, D] */
    vq_dtype dt;
    int64_t N, D, chunk;
    vq_centroids_work w;        /* per thread: running max [D], then a row [D] */
} smooth_job;

/* Rows of one task folded into this thread's running max. */
static void smooth_task(void *arg, int64_t task, int thread)
{
    const smooth_job *j = arg;
    float *mx = vq_centroids_row(&j->w, thread), *row = mx + j->D;
    const int64_t end = vq_centroids_task_end(task, j->chunk, j->N);
    for (int64_t t = task * j->chunk; t < end; t++) {
        j->conv->to_f32((const char *)j->keys + t * j->D * (int64_t)vq_dtype_size(j->dt), j->dt, j->D, row);
        for (int64_t c = 0; c < j->D; c++) mx[c] = fmaxf(mx[c], fabsf(row[c]));
    }
}

vq_status vq_vecinfer_smooth_factors(vq_ctx *ctx, const DLTensor *keys, DLTensor *smooth_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, keys, "keys", VQ_DTM_F16_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, smooth_out, "smooth_out", VQ_DTM_F32, 1, 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, smooth_out, "smooth_out", 0, vq_dim(keys, 1), "D (the last dimension of 'keys')"));
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED,
                 "this trainer runs on CPU contexts only: train on host tensors and copy the result to the device");
    smooth_job j = {.k = vq_centroids_kernels_for(ctx->isa), .conv = vq_row_kernels_for(ctx->isa),
                    .keys = vq_data(keys),
                    .dt = vq_dtype_of(keys),
                    .N = vq_dim(keys, 0),
                    .D = vq_dim(keys, 1)};
    VQ_FORWARD_IF_ERROR(vq_centroids_work_alloc(ctx, 0, 2 * j.D, &j.w));
    const int threads = ctx->num_threads < 1 ? 1 : ctx->num_threads;
    for (int t = 0; t < threads; t++)
        for (int64_t c = 0; c < j.D; c++) vq_centroids_row(&j.w, t)[c] = 0.0f;
    vq_parallel_for(ctx, vq_centroids_tasks(ctx, j.N, j.D, &j.chunk), smooth_task, &j);
    float *out = vq_data(smooth_out);
    for (int64_t c = 0; c < j.D; c++) {
        float mx = 0.0f;
        for (int t = 0; t < threads; t++) mx = fmaxf(mx, vq_centroids_row(&j.w, t)[c]);
        out[c] = mx > 0.0f ? sqrtf(mx) : 1.0f;
    }
    return VQ_OK;
}
