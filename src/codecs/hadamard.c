/* hadamard.c — the rotation kernel table, vq_rotate_rows for internal
 * callers, and the public vq_hadamard (validation + multithreaded driver). */
#include <assert.h>
#include <pthread.h>
#include <string.h>

#include "hadamard.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

static vq_hadamard_kernels g_tables[VQ_ISA_COUNT];
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

/* Every table starts scalar, then takes each ISA's kernel it may run. */
static void init_tables(void)
{
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++) {
        vq_hadamard_kernels *k = &g_tables[isa];
        k->rotate_row = vq_rotate_row_scalar;
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX2)) k->rotate_row = vq_rotate_row_avx2;
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX512)) k->rotate_row = vq_rotate_row_avx512;
#endif
#ifdef VQ_HAVE_NEON
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_NEON)) k->rotate_row = vq_rotate_row_neon;
#endif
    }
}

const vq_hadamard_kernels *vq_hadamard_kernels_for(vq_isa isa)
{
    pthread_once(&g_tables_once, init_tables);
    return &g_tables[(unsigned)isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}

/* rows [n_rows, d] in place. */
void vq_rotate_rows(const vq_ctx *ctx, float *rows, int64_t n_rows, int64_t d, const float *diag, bool inverse)
{
    assert(vq_is_pow2(d) && "vq_rotate_rows: d must be a power of two");
    const vq_rotate_row_fn rotate = vq_hadamard_kernels_for(ctx->isa)->rotate_row;
    for (int64_t r = 0; r < n_rows; r++) rotate(rows + r * d, d, diag, inverse);
}

vq_status vq_check_rotation(vq_ctx *ctx, const DLTensor *x, const char *x_name, const DLTensor *diag,
                            int64_t *d_out)
{
    const int64_t d = vq_dim(x, -1);
    VQ_RETURN_IF(ctx, !vq_is_pow2(d), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s': the last dimension D = %lld must be a power of two", x_name, (long long)d);
    VQ_RETURN_IF(ctx, d > VQ_HADAMARD_MAX_D, VQ_ERR_UNSUPPORTED,
                 "argument '%s': the last dimension D = %lld exceeds the supported maximum %d", x_name,
                 (long long)d, VQ_HADAMARD_MAX_D);
    if (diag != NULL) {
        VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, diag, "diag", VQ_DTM_F32, 1, 1));
        VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, diag, "diag", 0, d, "D"));
    }
    *d_out = d;
    return VQ_OK;
}

typedef struct hadamard_job {
    const vq_ctx *ctx;
    const void *x;
    vq_dtype x_dt;
    void *out;
    vq_dtype out_dt;
    const float *diag;
    bool inverse;
    int64_t n_rows, d, rows_per_task;
    float *scratch; /* [threads, d] */
} hadamard_job;

/* rows [task * rows_per_task, ...) : convert to f32, rotate, convert back. */
static void hadamard_task(void *arg, int64_t task, int thread)
{
    const hadamard_job *j = arg;
    const vq_rotate_row_fn rotate = vq_hadamard_kernels_for(j->ctx->isa)->rotate_row;
    const vq_row_kernels *cv = vq_row_kernels_for(j->ctx->isa);
    int64_t r0, r1;
    vq_task_rows(task, j->rows_per_task, j->n_rows, &r0, &r1);
    const size_t xs = vq_dtype_size(j->x_dt), os = vq_dtype_size(j->out_dt);
    for (int64_t r = r0; r < r1; r++) {
        const void *src = (const char *)j->x + (size_t)(r * j->d) * xs;
        void *dst = (char *)j->out + (size_t)(r * j->d) * os;
        /* f32 output: rotate in the output row itself (x may be that row). */
        float *buf = j->out_dt == VQ_DT_F32 ? dst : j->scratch + (size_t)thread * (size_t)j->d;
        if ((const void *)buf != src) cv->to_f32(src, j->x_dt, j->d, buf);
        rotate(buf, j->d, j->diag, j->inverse);
        if (j->out_dt != VQ_DT_F32) cv->from_f32(buf, j->d, j->out_dt, dst);
    }
}

vq_status vq_hadamard(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, bool inverse, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, x, "x", VQ_DTM_F16_F32, 1, 8));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_F16_F32, 1, 8));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, out, "out", x->ndim, x->shape));
    int64_t d;
    VQ_FORWARD_IF_ERROR(vq_check_rotation(ctx, x, "x", diag, &d));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_hadamard(ctx, x, diag, inverse, out);
#endif

    hadamard_job job = {
        .ctx = ctx, .x = vq_data(x), .x_dt = vq_dtype_of(x), .out = vq_data(out), .out_dt = vq_dtype_of(out),
        .diag = diag ? vq_data(diag) : NULL, .inverse = inverse, .n_rows = vq_numel(x) / d, .d = d,
    };
    job.rows_per_task = vq_rows_per_task(job.n_rows, d, ctx->num_threads);
    if (job.out_dt != VQ_DT_F32) {
        job.scratch = vq_ctx_scratch(ctx, (size_t)ctx->num_threads * (size_t)d * sizeof(float));
        VQ_RETURN_IF(ctx, job.scratch == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %d row buffers of %lld floats",
                     ctx->num_threads, (long long)d);
    }
    vq_parallel_for(ctx, vq_ceil_div(job.n_rows, job.rows_per_task), hadamard_task, &job);
    return VQ_OK;
}
