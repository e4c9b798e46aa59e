/* centroids.c — the vector-quantization kernel tables and the scratch/transposition
 * helpers their drivers share (see centroids.h). */
#include <pthread.h>
#include <string.h>

#include "codecs/centroids.h"

static vq_centroids_kernels tables[VQ_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* Each table starts as the scalar one and takes every ISA it includes. */
static void build_tables(void)
{
    for (int i = 0; i < VQ_ISA_COUNT; i++) {
        vq_centroids_kernels_init_scalar(&tables[i]);
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)i, VQ_ISA_AVX2)) vq_centroids_kernels_init_avx2(&tables[i]);
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)i, VQ_ISA_AVX512)) vq_centroids_kernels_init_avx512(&tables[i]);
#endif
    }
}

const vq_centroids_kernels *vq_centroids_kernels_for(vq_isa isa)
{
    pthread_once(&tables_once, build_tables);
    return &tables[(unsigned)isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}

typedef struct transpose_job {
    const float *cb;
    int64_t C, n, ld;
    float *cbt;
} transpose_job;

/* One group: [C, n] -> [n, ld]. */
static void transpose_group(void *arg, int64_t g, int thread)
{
    (void)thread;
    const transpose_job *job = arg;
    const float *src = job->cb + g * job->C * job->n;
    float *dst = job->cbt + g * job->n * job->ld;
    for (int64_t j = 0; j < job->n; j++) {
        float *row = dst + j * job->ld;
        for (int64_t c = 0; c < job->C; c++) row[c] = src[c * job->n + j];
        memset(row + job->C, 0, (size_t)(job->ld - job->C) * sizeof(float));
    }
}

void vq_centroids_transpose(vq_ctx *ctx, const float *cb, int64_t G, int64_t C, int64_t n, float *cbt)
{
    transpose_job job = {cb, C, n, vq_centroids_ld(C), cbt};
    vq_parallel_for(ctx, G, transpose_group, &job);
}

/* Floats rounded up to a 64-byte multiple, so every row starts aligned. */
static int64_t round16(int64_t floats) { return vq_ceil_div(floats, 16) * 16; }

vq_status vq_centroids_work_alloc(vq_ctx *ctx, int64_t cbt_floats, int64_t row_floats, vq_centroids_work *w)
{
    const int64_t cbt = round16(cbt_floats), stride = round16(row_floats);
    const int64_t threads = ctx->num_threads < 1 ? 1 : ctx->num_threads;
    VQ_RETURN_IF(ctx, cbt > (INT64_MAX / 8) || stride > (INT64_MAX / 8) / threads ||
                          cbt + stride * threads > (int64_t)(SIZE_MAX / sizeof(float)),
                 VQ_ERR_OUT_OF_MEMORY, "scratch of %lld + %lld x %lld floats is too large", (long long)cbt,
                 (long long)threads, (long long)stride);
    float *base = vq_ctx_scratch(ctx, (size_t)(cbt + stride * threads) * sizeof(float));
    VQ_RETURN_IF(ctx, base == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %lld bytes of scratch",
                 (long long)((cbt + stride * threads) * (int64_t)sizeof(float)));
    w->cbt = base;
    w->rows = base + cbt;
    w->row_stride = stride;
    return VQ_OK;
}

/* Work below which a task is not worth a thread's wake-up (~tens of us). */
#define VQ_CENTROIDS_MIN_TASK_COST ((int64_t)1 << 18)

int64_t vq_centroids_tasks(const vq_ctx *ctx, int64_t rows, int64_t row_cost, int64_t *chunk)
{
    const int64_t want = (int64_t)(ctx->num_threads < 1 ? 1 : ctx->num_threads) * 8;
    const int64_t balanced = vq_ceil_div(rows, want);
    const int64_t worthwhile = vq_ceil_div(VQ_CENTROIDS_MIN_TASK_COST, row_cost < 1 ? 1 : row_cost);
    *chunk = balanced > worthwhile ? balanced : worthwhile;
    return vq_ceil_div(rows, *chunk);
}

/* True when some codes[i] >= C: one pass with no early exit, which the
 * compiler vectorizes. */
#define ANY_AT_LEAST(type)                                                     \
    do {                                                                       \
        const type *p = codes;                                                 \
        for (int64_t i = 0; i < n; i++) any |= (int64_t)p[i] < 0 || (int64_t)p[i] >= C; \
    } while (0)

int64_t vq_centroids_find_bad_code(const void *codes, vq_dtype dt, int64_t n, int64_t C)
{
    bool any = false;
    switch (dt) {
    case VQ_DT_U8: if (C < 256) ANY_AT_LEAST(uint8_t); break;
    case VQ_DT_U16: if (C < 65536) ANY_AT_LEAST(uint16_t); break;
    default: ANY_AT_LEAST(int32_t); break;
    }
    if (!any) return -1;
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = vq_load_i(codes, dt, i);
        if (c < 0 || c >= C) return i;
    }
    return -1;
}
