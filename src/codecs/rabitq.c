/* rabitq.c — RaBitQ 1-bit keys (docs/FORMATS.md §5): the encoder (rotation, sign bits,
 * magnitude), the Hamming scorer and the nibble packer of value
 * indices. Validation, public entry points and threaded CPU drivers; the
 * per-row loops are in the kernel tables (rabitq_kernels.h), the layout in
 * formats/format_rabitq.h, the rotation in codecs/hadamard.h. */
#include <string.h>

#include "codecs/hadamard.h"
#include "codecs/rabitq_kernels.h"
#include "core/core.h"
#include "formats/format_rabitq.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

#define RABITQ_MAX_RANK 8

/* ---- encode ---- */

typedef struct {
    const vq_ctx *ctx;
    const vq_rabitq_kernels *kern;
    const vq_row_kernels *cvt;
    const void *keys;
    vq_dtype dt;
    const float *diag;
    vq_rabitq_mag mag;
    int64_t n_rows, d, rows_per_task;
    uint8_t *bits;
    float *k_mag;
    float *scratch;   /* [threads, rows_per_task, d] */
} encode_job;

/* The magnitude of a row from its norms: L1 = ||y||_1 / D, the least-squares
 * fit of y by k_mag * sign(y); unbiased = ||y||_2^2 / ||y||_1 =
 * ||y|| / <y/||y||, sign(y)/sqrt(D)>, RaBitQ's correction for the cosine
 * between y and its quantized direction. A zero row gets 0. */
static float magnitude(vq_rabitq_mag mag, double l1, double l2, int64_t d)
{
    if (l1 == 0.0) return 0.0f;
    return (float)(mag == VQ_RABITQ_MAG_UNBIASED ? l2 / l1 : l1 / (double)d);
}

/* rows [task * rows_per_task, ...): to f32, rotate, signs and magnitude. */
static void encode_task(void *arg, int64_t task, int thread)
{
    const encode_job *job = arg;
    const int64_t d = job->d, r0 = task * job->rows_per_task;
    const int64_t r1 = r0 + job->rows_per_task < job->n_rows ? r0 + job->rows_per_task : job->n_rows;
    float *y = job->scratch + (size_t)thread * (size_t)(job->rows_per_task * d);
    job->cvt->to_f32((const char *)job->keys + (size_t)(r0 * d) * vq_dtype_size(job->dt), job->dt, (r1 - r0) * d,
                   y);
    vq_rotate_rows(job->ctx, y, r1 - r0, d, job->diag, false);
    for (int64_t r = r0; r < r1; r++) {
        double l1, l2;
        job->kern->sign_norms(y + (r - r0) * d, d, job->bits + r * (d / 8), &l1, &l2);
        job->k_mag[r] = magnitude(job->mag, l1, l2, d);
    }
}

vq_status vq_rabitq_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *diag, DLTensor *k_bits_out,
                           DLTensor *k_mag_out, const vq_rabitq_encode_opts *opts)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, keys, "keys", VQ_DTM_F16_F32, 2, RABITQ_MAX_RANK));
    int64_t d;
    VQ_FORWARD_IF_ERROR(vq_check_rotation(ctx, keys, "keys", diag, &d));
    VQ_RETURN_IF(ctx, d % 8 != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'keys': the last dimension D = %lld must be a multiple of 8", (long long)d);
    const int r = keys->ndim;
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, k_bits_out, "k_bits_out", VQ_DTM_U8, r, r));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, k_bits_out, "k_bits_out", keys, "keys", r - 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, k_bits_out, "k_bits_out", -1, d / 8, "D/8"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, k_mag_out, "k_mag_out", VQ_DTM_F32, r - 1, r - 1));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, k_mag_out, "k_mag_out", keys, "keys", r - 1));
    const vq_rabitq_mag mag = opts ? opts->mag : VQ_RABITQ_MAG_L1;
    VQ_RETURN_IF(ctx, mag != VQ_RABITQ_MAG_L1 && mag != VQ_RABITQ_MAG_UNBIASED, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'opts->mag' must be VQ_RABITQ_MAG_L1 or VQ_RABITQ_MAG_UNBIASED, got %d", (int)mag);
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_rabitq_encode(ctx, keys, diag, k_bits_out, k_mag_out, opts);
#endif
    encode_job job = {ctx, vq_rabitq_kernels_for(ctx->isa), vq_row_kernels_for(ctx->isa), vq_data(keys), vq_dtype_of(keys),
                      diag ? vq_data(diag) : NULL, mag, vq_numel(keys) / d, d, 0,
                      vq_data(k_bits_out), vq_data(k_mag_out), NULL};
    job.rows_per_task = vq_rows_per_task(job.n_rows, d, ctx->num_threads);
    const size_t bytes = (size_t)ctx->num_threads * (size_t)(job.rows_per_task * d) * sizeof(float);
    job.scratch = vq_ctx_scratch(ctx, bytes);
    VQ_RETURN_IF(ctx, job.scratch == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of scratch", bytes);
    vq_parallel_for(ctx, vq_ceil_div(job.n_rows, job.rows_per_task), encode_task, &job);
    return VQ_OK;
}

/* ---- Hamming score ---- */

typedef struct {
    const vq_rabitq_kernels *kern;
    const uint8_t *qbits, *bits;
    const float *cx;
    float scale;
    int64_t n, nbytes, chunk;
    float *out;
} hamming_job;

static void hamming_task(void *arg, int64_t task, int thread)
{
    const hamming_job *job = arg;
    const int64_t i0 = task * job->chunk, i1 = i0 + job->chunk < job->n ? i0 + job->chunk : job->n;
    for (int64_t i = i0; i < i1; i++)
        job->out[i] = (float)job->kern->hamming(job->qbits, job->bits + i * job->nbytes, job->nbytes) * job->scale +
                      job->cx[i];
}

vq_status vq_rabitq_hamming_score(vq_ctx *ctx, const DLTensor *qbits, const DLTensor *bits, const DLTensor *cx,
                                  const DLTensor *scale, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, qbits, "qbits", VQ_DTM_U8, 1, 1));
    const int64_t nbytes = vq_dim(qbits, 0);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, bits, "bits", VQ_DTM_U8, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, bits, "bits", 1, nbytes, "D/8 (the length of qbits)"));
    const int64_t n = vq_dim(bits, 0);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cx, "cx", VQ_DTM_F32, 1, 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, cx, "cx", 0, n, "N"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, scale, "scale", VQ_DTM_F32, 1, 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, scale, "scale", 0, 1, "1"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_F32, 1, 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, out, "out", 0, n, "N"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_rabitq_hamming_score(ctx, qbits, bits, cx, scale, out);
#endif
    hamming_job job = {vq_rabitq_kernels_for(ctx->isa), vq_data(qbits), vq_data(bits), vq_data(cx),
                       *(const float *)vq_data(scale), n, nbytes, 0, vq_data(out)};
    job.chunk = nbytes >= 8192 ? 8 : 65536 / nbytes;
    vq_parallel_for(ctx, vq_ceil_div(n, job.chunk), hamming_task, &job);
    return VQ_OK;
}

/* ---- nibble packing of value indices ---- */

typedef struct {
    const uint8_t *in;
    uint8_t *out;
    int64_t n, chunk;
} pack_job;

static void pack_task(void *arg, int64_t task, int thread)
{
    const pack_job *job = arg;
    const int64_t i0 = task * job->chunk, i1 = i0 + job->chunk < job->n ? i0 + job->chunk : job->n;
    for (int64_t i = i0; i < i1; i++) job->out[i] = vq_rabitq_pack_pair(job->in[2 * i], job->in[2 * i + 1]);
}

vq_status vq_rabitq_pack_values(vq_ctx *ctx, const DLTensor *v_idx, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, v_idx, "v_idx", VQ_DTM_U8, 1, RABITQ_MAX_RANK));
    const int64_t last = vq_dim(v_idx, -1);
    VQ_RETURN_IF(ctx, last % 2 != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'v_idx': the last dimension %lld must be even (two indices per byte)", (long long)last);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_U8, v_idx->ndim, v_idx->ndim));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, out, "out", v_idx, "v_idx", v_idx->ndim - 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, out, "out", -1, last / 2, "n (half the last dimension of v_idx)"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_rabitq_pack_values(ctx, v_idx, out);
#endif
    pack_job job = {vq_data(v_idx), vq_data(out), vq_numel(out), 1 << 16};
    vq_parallel_for(ctx, vq_ceil_div(job.n, job.chunk), pack_task, &job);
    return VQ_OK;
}
