/* qjl.c — QJL sign sketches (docs/FORMATS.md §9): the Gaussian projection, the 1-bit
 * encoder, the symmetric (angle) estimator and the asymmetric unbiased score.
 * Validation, public entry points and threaded CPU drivers; the per-row loops
 * are in the kernel tables (qjl_kernels.h).
 *
 * Shapes: keys [..., D], projection S [m, D], sketches [..., ceil(m/32)] u32
 * (bit j = ((S k)_j >= 0), bit j % 32 of word j / 32). A query's leading
 * dims [...] equal the keys' leading dims without N. */
#include <math.h>
#include <string.h>

#include "codecs/qjl_kernels.h"
#include "core/core.h"
#include "formats/format_common.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

#define QJL_MAX_RANK 8

/* Rows per task: a task projects this many rows at a time (amortises S loads). */
#define QJL_ROWS_PER_TASK 16

vq_status vq_qjl_projection(uint64_t seed, int64_t m, int64_t d, float *out)
{
    if (out == NULL || m < 1 || d < 1 || m > INT64_MAX / 4 / d) return VQ_ERR_INVALID_ARGUMENT;
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    for (int64_t i = 0; i < m * d; i++) out[i] = (float)vq_rng_normal(&rng);
    return VQ_OK;
}

static int64_t words_of(int64_t m) { return (m + 31) / 32; }

/* popcount(a XOR b) over the first m bits of two u32 streams (a handful of
 * words per key, so it has no ISA variants). */
static int64_t hamming(const uint32_t *a, const uint32_t *b, int64_t m)
{
    const int64_t w = words_of(m);
    const uint32_t last = (m & 31) ? (1u << (m & 31)) - 1u : 0xffffffffu;
    int64_t ham = 0;
    for (int64_t i = 0; i + 1 < w; i++) ham += vq_popcount32(a[i] ^ b[i]);
    return ham + vq_popcount32((a[w - 1] ^ b[w - 1]) & last);
}

static size_t align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Takes `shared` bytes of scratch followed by `per_thread` bytes per thread. */
static vq_status take_scratch(vq_ctx *ctx, size_t shared, size_t per_thread, char **base)
{
    const size_t bytes = shared + per_thread * (size_t)ctx->num_threads;
    *base = vq_ctx_scratch(ctx, bytes);
    VQ_RETURN_IF(ctx, *base == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of scratch", bytes);
    return VQ_OK;
}

/* Rows [r0, r1) of x [n, d] (f16/f32) as f32: a pointer into x, or the rows
 * converted into xbuf [QJL_ROWS_PER_TASK, d]. */
static const float *rows_f32(const vq_row_kernels *cvt, const void *x, vq_dtype dt, int64_t d, int64_t r0,
                             int64_t r1, float *xbuf)
{
    if (dt == VQ_DT_F32) return (const float *)x + r0 * d;
    cvt->to_f32((const uint16_t *)x + r0 * d, dt, (r1 - r0) * d, xbuf);
    return xbuf;
}

/* ---- encode ---- */

/* The key projection runs as a GEMM against S^T [d, m_pad], zero-padded to
 * m_pad = m rounded up to VQ_QJL_COLS columns so the kernel has no column
 * tail; projected rows are [m_pad] with the first m meaningful. */
typedef struct {
    const vq_qjl_kernels *kern;
    const vq_row_kernels *cvt;
    const void *keys;
    vq_dtype dt;
    int64_t n, m, m_pad, d;
    const float *St;   /* shared scratch [d, m_pad] */
    uint32_t *bits;
    char *scratch;     /* per thread: xbuf [R, d], proj [R, m_pad] */
    size_t stride;
} encode_job;

static void encode_task(void *arg, int64_t task, int thread)
{
    const encode_job *job = arg;
    float *xbuf = (float *)(job->scratch + job->stride * (size_t)thread);
    float *proj = xbuf + QJL_ROWS_PER_TASK * job->d;
    const int64_t r0 = task * QJL_ROWS_PER_TASK;
    const int64_t r1 = r0 + QJL_ROWS_PER_TASK < job->n ? r0 + QJL_ROWS_PER_TASK : job->n;
    const float *x = rows_f32(job->cvt, job->keys, job->dt, job->d, r0, r1, xbuf);
    job->kern->project_t(job->St, job->m_pad, job->d, x, r1 - r0, proj);
    for (int64_t r = r0; r < r1; r++)
        job->kern->signs_to_bits(proj + (r - r0) * job->m_pad, job->m, job->bits + r * words_of(job->m));
}

/* Checks projection [m, D] f32 against the D of `x`; returns m. */
static vq_status check_projection(vq_ctx *ctx, const DLTensor *projection, int64_t d, int64_t *m)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, projection, "projection", VQ_DTM_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, projection, "projection", 1, d, "D"));
    *m = vq_dim(projection, 0);
    return VQ_OK;
}

vq_status vq_qjl_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *projection, DLTensor *bits_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, keys, "keys", VQ_DTM_F16_F32, 1, QJL_MAX_RANK));
    const int64_t d = vq_dim(keys, -1);
    int64_t m;
    VQ_FORWARD_IF_ERROR(check_projection(ctx, projection, d, &m));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, bits_out, "bits_out", VQ_DTM_U32, keys->ndim, keys->ndim));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, bits_out, "bits_out", keys, "keys", keys->ndim - 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, bits_out, "bits_out", -1, words_of(m), "ceil(m/32)"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_qjl_encode(ctx, keys, projection, bits_out);
#endif
    const int64_t m_pad = vq_ceil_div(m, VQ_QJL_COLS) * VQ_QJL_COLS;
    encode_job job = {vq_qjl_kernels_for(ctx->isa), vq_row_kernels_for(ctx->isa), vq_data(keys), vq_dtype_of(keys),
                      vq_numel(keys) / d, m, m_pad, d, NULL, vq_data(bits_out), NULL, 0};
    const size_t shared = align64((size_t)(d * m_pad) * sizeof(float));
    job.stride = align64((size_t)QJL_ROWS_PER_TASK * (size_t)(d + m_pad) * sizeof(float));
    char *base;
    VQ_FORWARD_IF_ERROR(take_scratch(ctx, shared, job.stride, &base));
    const float *S = vq_data(projection);
    float *St = (float *)base;
    for (int64_t c = 0; c < d; c++)
        for (int64_t j = 0; j < m_pad; j++) St[c * m_pad + j] = j < m ? S[j * d + c] : 0.0f;
    job.St = St;
    job.scratch = base + shared;
    vq_parallel_for(ctx, vq_ceil_div(job.n, QJL_ROWS_PER_TASK), encode_task, &job);
    return VQ_OK;
}

/* ---- shared validation of the estimators ---- */

/* key_bits [..., N, W] u32 against a query of rank r (its [...] = query dims
 * [0, r-1)); out (and key_norm when given) [..., N] f32. */
static vq_status check_keys_side(vq_ctx *ctx, const DLTensor *query, const char *query_name,
                                 const DLTensor *key_bits, int64_t m, const DLTensor *key_norm,
                                 const char *key_norm_name, const DLTensor *out)
{
    const int r = query->ndim;
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, key_bits, "key_bits", VQ_DTM_U32, r + 1, r + 1));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, key_bits, "key_bits", query, query_name, r - 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, key_bits, "key_bits", -1, words_of(m), "ceil(m/32)"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_F32, r, r));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, out, "out", key_bits, "key_bits", r));
    if (key_norm != NULL) {
        VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, key_norm, key_norm_name, VQ_DTM_F32, r, r));
        VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, key_norm, key_norm_name, key_bits, "key_bits", r));
    }
    return VQ_OK;
}

/* ---- symmetric estimator ---- */

typedef struct {
    const vq_qjl_kernels *kern;
    const uint32_t *qbits, *kbits;
    const float *qnorm, *knorm;   /* NULL = 1 */
    const float *cos_table;       /* [m + 1]: cos(pi * h / m), one per Hamming distance */
    int64_t n_queries, n, m, chunk;
    float *out;
} inner_job;

static void inner_task(void *arg, int64_t task, int thread)
{
    const inner_job *job = arg;
    const int64_t chunks = vq_ceil_div(job->n, job->chunk), l = task / chunks, i0 = (task % chunks) * job->chunk;
    const int64_t w = words_of(job->m), i1 = i0 + job->chunk < job->n ? i0 + job->chunk : job->n;
    const float qn = job->qnorm ? job->qnorm[l] : 1.0f;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t ham = hamming(job->qbits + l * w, job->kbits + (l * job->n + i) * w, job->m);
        float v = job->cos_table[ham] * qn;
        if (job->knorm) v *= job->knorm[l * job->n + i];
        job->out[l * job->n + i] = v;
    }
}

/* Keys per task of the estimators. */
static int64_t keys_per_task(int64_t m) { return m >= 4096 ? 16 : 65536 / m; }

vq_status vq_qjl_inner_product(vq_ctx *ctx, const DLTensor *query_bits, const DLTensor *key_bits, int head_dim,
                               int sketch_dim, DLTensor *out, const vq_qjl_inner_product_opts *opts)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, query_bits, "query_bits", VQ_DTM_U32, 1, QJL_MAX_RANK - 1));
    VQ_RETURN_IF(ctx, head_dim < 1, VQ_ERR_INVALID_ARGUMENT, "argument 'head_dim' must be >= 1, got %d", head_dim);
    VQ_RETURN_IF(ctx, sketch_dim < 1, VQ_ERR_INVALID_ARGUMENT, "argument 'sketch_dim' must be >= 1, got %d",
                 sketch_dim);
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, query_bits, "query_bits", -1, words_of(sketch_dim), "ceil(sketch_dim/32)"));
    const DLTensor *qn = opts ? opts->query_norm : NULL, *kn = opts ? opts->key_norm : NULL;
    VQ_FORWARD_IF_ERROR(check_keys_side(ctx, query_bits, "query_bits", key_bits, sketch_dim, kn, "key_norm", out));
    const int r = query_bits->ndim;
    if (qn != NULL) {
        /* [...] = query_bits without its last axis; [1] when that is empty */
        VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, qn, "query_norm", VQ_DTM_F32, r > 1 ? r - 1 : 1, r > 1 ? r - 1 : 1));
        if (r > 1) VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, qn, "query_norm", query_bits, "query_bits", r - 1));
        else VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, qn, "query_norm", 1, (const int64_t[]){1}));
    }
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_qjl_inner_product(
            ctx, query_bits, key_bits, head_dim, sketch_dim, out, opts);
#endif
    const int64_t n = vq_dim(key_bits, -2);
    char *base;
    VQ_FORWARD_IF_ERROR(take_scratch(ctx, (size_t)(sketch_dim + 1) * sizeof(float), 0, &base));
    float *cos_table = (float *)base;
    for (int64_t h = 0; h <= sketch_dim; h++) cos_table[h] = (float)cos(M_PI / (double)sketch_dim * (double)h);
    inner_job job = {vq_qjl_kernels_for(ctx->isa), vq_data(query_bits), vq_data(key_bits),
                     qn ? vq_data(qn) : NULL, kn ? vq_data(kn) : NULL, cos_table, vq_numel(out) / n, n,
                     sketch_dim, keys_per_task(sketch_dim), vq_data(out)};
    vq_parallel_for(ctx, job.n_queries * vq_ceil_div(n, job.chunk), inner_task, &job);
    return VQ_OK;
}

/* ---- asymmetric score ---- */

/* Queries are few: each is projected once by dot products (S as given),
 * then scored against every key of its row. */
typedef struct {
    const vq_qjl_kernels *kern;
    const vq_row_kernels *cvt;
    const void *query;
    vq_dtype dt;
    const float *S;
    const uint32_t *kbits;
    const float *knorm;
    int64_t n_queries, n, m, d, chunk;
    float *sq;       /* [n_queries, m] projected queries (shared scratch) */
    char *scratch;   /* per thread: xbuf [R, d] */
    size_t stride;
    float *out;
} score_job;

static void project_queries_task(void *arg, int64_t task, int thread)
{
    const score_job *job = arg;
    const int64_t r0 = task * QJL_ROWS_PER_TASK;
    const int64_t r1 = r0 + QJL_ROWS_PER_TASK < job->n_queries ? r0 + QJL_ROWS_PER_TASK : job->n_queries;
    float *xbuf = (float *)(job->scratch + job->stride * (size_t)thread);
    const float *x = rows_f32(job->cvt, job->query, job->dt, job->d, r0, r1, xbuf);
    job->kern->project(job->S, job->m, job->d, x, r1 - r0, job->sq + r0 * job->m);
}

static void score_task(void *arg, int64_t task, int thread)
{
    const score_job *job = arg;
    const int64_t m = job->m, chunks = vq_ceil_div(job->n, job->chunk);
    const int64_t l = task / chunks, i0 = (task % chunks) * job->chunk;
    const int64_t w = words_of(m), i1 = i0 + job->chunk < job->n ? i0 + job->chunk : job->n;
    /* E[(S q)_j sign((S k)_j)] = sqrt(2/pi) q.k / ||k||, hence sqrt(pi/2)/m */
    const float c = (float)(sqrt(M_PI / 2.0) / (double)m);
    const float *sq = job->sq + l * m;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t k = l * job->n + i;
        job->out[k] = c * job->knorm[k] * job->kern->signed_sum(sq, job->kbits + k * w, m);
    }
}

vq_status vq_qjl_score(vq_ctx *ctx, const DLTensor *query, const DLTensor *projection, const DLTensor *key_bits,
                       const DLTensor *key_norm, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, query, "query", VQ_DTM_F16_F32, 1, QJL_MAX_RANK - 1));
    const int64_t d = vq_dim(query, -1);
    int64_t m;
    VQ_FORWARD_IF_ERROR(check_projection(ctx, projection, d, &m));
    VQ_RETURN_IF(ctx, key_norm == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'key_norm' is NULL");
    VQ_FORWARD_IF_ERROR(check_keys_side(ctx, query, "query", key_bits, m, key_norm, "key_norm", out));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_qjl_score(ctx, query, projection, key_bits, key_norm, out);
#endif
    const int64_t n = vq_dim(key_bits, -2), n_queries = vq_numel(query) / d;
    score_job job = {vq_qjl_kernels_for(ctx->isa), vq_row_kernels_for(ctx->isa), vq_data(query), vq_dtype_of(query),
                     vq_data(projection), vq_data(key_bits), vq_data(key_norm), n_queries, n, m, d,
                     keys_per_task(m), NULL, NULL, 0, vq_data(out)};
    const size_t shared = align64((size_t)(n_queries * m) * sizeof(float));
    job.stride = align64((size_t)QJL_ROWS_PER_TASK * (size_t)d * sizeof(float));
    char *base;
    VQ_FORWARD_IF_ERROR(take_scratch(ctx, shared, job.stride, &base));
    job.sq = (float *)base;
    job.scratch = base + shared;
    vq_parallel_for(ctx, vq_ceil_div(n_queries, QJL_ROWS_PER_TASK), project_queries_task, &job);
    vq_parallel_for(ctx, n_queries * vq_ceil_div(n, job.chunk), score_task, &job);
    return VQ_OK;
}
