/* commvq.c — CommVQ (docs/FORMATS.md §10): keys as sums of R codewords, RoPE applied at
 * decode. Validation, the public entry points and their CPU drivers; the
 * per-token decoder lives in formats/format_commvq.h, the ISA kernels
 * (gather + RoPE, nearest-centroid search) in codecs/centroids.h, and the trainer's
 * k-means in codecs/kmeans.h. */
#include <stdlib.h>
#include <string.h>

#include "codecs/kmeans.h"
#include "codecs/centroids.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

#define VQ_DTM_CODES (VQ_DTM_U8 | VQ_DTM_U16 | VQ_DTM_I32)

/* Validates codebook [R, C, D] f32 against R stages (R < 0: any) and D. */
static vq_status check_codebook(vq_ctx *ctx, const DLTensor *codebook, int64_t R, int64_t D)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, codebook, "codebook", VQ_DTM_F32, 3, 3));
    return vq_check_shape(ctx, codebook, "codebook", 3, (const int64_t[]){R, -1, D});
}

/* ---- decode ---- */

typedef struct decode_job {
    const vq_centroids_kernels *k;
    const vq_row_kernels *conv; /* f16/f32 row conversions */
    vq_commvq_layout L;
    int64_t rows, H, S, chunk;
    const void *idx;          /* [rows, R] */
    const float *codebook;    /* [R, C, D] */
    const float *cos, *sin;   /* [P, D/2] */
    const int32_t *pos;       /* [S] or [B, S], in [0, P) */
    int64_t P;
    bool pos_per_batch;
    const float *scale;       /* [rows] or NULL */
    void *out;                /* [rows, D] */
    vq_dtype out_dt;
    vq_centroids_work w;            /* per thread: one row [D] */
} decode_job;

/* Rows of one task: codes -> RoPE'd keys. */
static void decode_task(void *arg, int64_t task, int thread)
{
    const decode_job *j = arg;
    const int64_t D = j->L.D, half = D / 2;
    const int64_t end = vq_centroids_task_end(task, j->chunk, j->rows);
    float *tmp = vq_centroids_row(&j->w, thread);
    for (int64_t row = task * j->chunk; row < end; row++) {
        const int64_t b = row / (j->H * j->S), s = row % j->S;
        const int64_t p = vq_commvq_position(j->pos[(j->pos_per_batch ? b * j->S : 0) + s], j->P);
        float *dst = j->out_dt == VQ_DT_F32 ? (float *)j->out + row * D : tmp;
        j->k->commvq_decode(&j->L, (const char *)j->idx + row * j->L.R * j->L.idx_bytes, j->codebook,
                            j->scale ? j->scale[row] : 1.0f, j->cos + p * half, j->sin + p * half, dst);
        if (dst == tmp) j->conv->from_f32(tmp, D, j->out_dt, (char *)j->out + row * D * (int64_t)vq_dtype_size(j->out_dt));
    }
}

/* Every shape and dtype of vq_commvq_decode; fills the job's geometry. */
static vq_status check_decode(vq_ctx *ctx, const DLTensor *indices, const DLTensor *codebook,
                              const DLTensor *cos_freqs, const DLTensor *sin_freqs, const DLTensor *positions,
                              const DLTensor *out, const vq_commvq_opts *opts, decode_job *j)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, indices, "indices", VQ_DTM_CODES, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_F16_F32, 4, 4));
    const int64_t B = vq_dim(indices, 0), H = vq_dim(indices, 1), S = vq_dim(indices, 2), D = vq_dim(out, 3);
    VQ_RETURN_IF(ctx, D % 2 != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'out': D = %lld must be even (RoPE rotates pairs of channels)", (long long)D);
    VQ_FORWARD_IF_ERROR(check_codebook(ctx, codebook, vq_dim(indices, 3), D));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, out, "out", 4, (const int64_t[]){B, H, S, D}));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cos_freqs, "cos_freqs", VQ_DTM_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, cos_freqs, "cos_freqs", 1, D / 2, "D/2"));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, sin_freqs, "sin_freqs", VQ_DTM_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, sin_freqs, "sin_freqs", 2, (const int64_t[]){vq_dim(cos_freqs, 0), D / 2}));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, positions, "positions", VQ_DTM_I32, 1, 2));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, positions, "positions", positions->ndim,
                                       positions->ndim == 2 ? (const int64_t[]){B, S} : (const int64_t[]){S}));
    const vq_rope_layout rope = opts ? opts->rope : VQ_ROPE_HALF;
    VQ_RETURN_IF(ctx, rope != VQ_ROPE_HALF && rope != VQ_ROPE_INTERLEAVED, VQ_ERR_INVALID_ARGUMENT,
                 "opts->rope must be VQ_ROPE_HALF (0) or VQ_ROPE_INTERLEAVED (1), got %d", (int)rope);
    const DLTensor *scale = opts ? opts->scale : NULL;
    if (scale != NULL) {
        VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, scale, "opts->scale", VQ_DTM_F32, 3, 3));
        VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, scale, "opts->scale", 3, (const int64_t[]){B, H, S}));
    }
    const int64_t C = vq_dim(codebook, 1);
    VQ_RETURN_IF(ctx, C > INT32_MAX || D > INT32_MAX, VQ_ERR_UNSUPPORTED,
                 "argument 'codebook' %lld x %lld is beyond 32-bit indexing", (long long)C, (long long)D);
    j->L = (vq_commvq_layout){(int32_t)vq_dim(indices, 3), (int32_t)C, (int32_t)D,
                              (int32_t)vq_dtype_size(vq_dtype_of(indices)), (int32_t)rope};
    j->rows = B * H * S;
    j->H = H;
    j->S = S;
    j->pos_per_batch = positions->ndim == 2;
    j->scale = scale ? vq_data(scale) : NULL;
    return VQ_OK;
}

vq_status vq_commvq_decode(vq_ctx *ctx, const DLTensor *indices, const DLTensor *codebook,
                            const DLTensor *cos_freqs, const DLTensor *sin_freqs, const DLTensor *positions,
                            DLTensor *out, const vq_commvq_opts *opts)
{
    VQ_ENTER(ctx);
    decode_job j = {0};
    VQ_FORWARD_IF_ERROR(check_decode(ctx, indices, codebook, cos_freqs, sin_freqs, positions, out, opts, &j));
    /* The range checks below read the data, which the host cannot do for
     * device memory: the CUDA kernel clamps codes to [0, C) and positions
     * to [0, P) instead (formats/format_commvq.h). */
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_commvq_decode(
            ctx, indices, codebook, cos_freqs, sin_freqs, positions, out, opts);
#endif
    const vq_dtype idx_dt = vq_dtype_of(indices);
    const int64_t bad = vq_centroids_find_bad_code(vq_data(indices), idx_dt, j.rows * j.L.R, j.L.C);
    VQ_RETURN_IF(ctx, bad >= 0, VQ_ERR_INVALID_ARGUMENT, "argument 'indices': element %lld is %lld, outside [0, C = %d)",
                 (long long)bad, (long long)vq_load_i(vq_data(indices), idx_dt, bad), j.L.C);
    const int64_t P = vq_dim(cos_freqs, 0);
    const int64_t bad_pos = vq_centroids_find_bad_code(vq_data(positions), VQ_DT_I32, vq_numel(positions), P);
    VQ_RETURN_IF(ctx, bad_pos >= 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'positions': element %lld is %d, outside [0, P = %lld) (the rows of 'cos_freqs')",
                 (long long)bad_pos, ((const int32_t *)vq_data(positions))[bad_pos], (long long)P);
    j.k = vq_centroids_kernels_for(ctx->isa);
    j.conv = vq_row_kernels_for(ctx->isa);
    j.idx = vq_data(indices);
    j.codebook = vq_data(codebook);
    j.cos = vq_data(cos_freqs);
    j.sin = vq_data(sin_freqs);
    j.pos = vq_data(positions);
    j.P = P;
    j.out = vq_data(out);
    j.out_dt = vq_dtype_of(out);
    VQ_FORWARD_IF_ERROR(vq_centroids_work_alloc(ctx, 0, j.L.D, &j.w));
    vq_parallel_for(ctx, vq_centroids_tasks(ctx, j.rows, (int64_t)j.L.D * j.L.R, &j.chunk), decode_task, &j);
    return VQ_OK;
}

/* ---- greedy residual encoding ---- */

typedef struct encode_job {
    const vq_centroids_kernels *k;
    const vq_row_kernels *conv; /* f16/f32 row conversions */
    int64_t rows, R, C, D, ld, chunk;
    const void *keys;          /* [rows, D] (NULL: x already holds f32 rows) */
    vq_dtype keys_dt;
    float *x;                  /* [rows, D] f32 residuals updated in place, when keys is NULL */
    const float *codebook;     /* [R, C, D] */
    int64_t r0;                /* first stage to apply */
    void *idx;                 /* [rows, R] or NULL */
    vq_dtype idx_dt;
    vq_centroids_work w;             /* cbt [R - r0, D, ld] of stages r0..; per thread: a residual [D] */
} encode_job;

/* Residual res [D] through stages [r0, R) of the greedy encoder: each picks
 * the centroid nearest the residual and subtracts it. */
static void encode_residual(const encode_job *j, int64_t row, float *res)
{
    for (int64_t r = j->r0; r < j->R; r++) {
        const int32_t c = j->k->nearest(res, j->w.cbt + (r - j->r0) * j->D * j->ld, (int32_t)j->C, j->ld, (int32_t)j->D);
        if (j->idx) vq_store_i(j->idx, j->idx_dt, row * j->R + r, c);
        const float *cent = j->codebook + (r * j->C + c) * j->D;
        for (int64_t t = 0; t < j->D; t++) res[t] -= cent[t];
    }
}

static void encode_task(void *arg, int64_t task, int thread)
{
    const encode_job *j = arg;
    const int64_t end = vq_centroids_task_end(task, j->chunk, j->rows);
    float *res = vq_centroids_row(&j->w, thread);
    for (int64_t row = task * j->chunk; row < end; row++) {
        if (j->keys == NULL) {
            encode_residual(j, row, j->x + row * j->D);
            continue;
        }
        j->conv->to_f32((const char *)j->keys + row * j->D * (int64_t)vq_dtype_size(j->keys_dt), j->keys_dt, j->D, res);
        encode_residual(j, row, res);
    }
}

vq_status vq_commvq_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook, DLTensor *indices_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, keys, "keys", VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, indices_out, "indices_out", VQ_DTM_CODES, 4, 4));
    const int64_t D = vq_dim(keys, 3);
    VQ_FORWARD_IF_ERROR(check_codebook(ctx, codebook, -1, D));
    const int64_t R = vq_dim(codebook, 0), C = vq_dim(codebook, 1);
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, indices_out, "indices_out", 4,
                                       (const int64_t[]){keys->shape[0], keys->shape[1], keys->shape[2], R}));
    const vq_dtype idx_dt = vq_dtype_of(indices_out);
    const int64_t cap = idx_dt == VQ_DT_U8 ? 256 : idx_dt == VQ_DT_U16 ? 65536 : INT32_MAX;
    VQ_RETURN_IF(ctx, C > cap, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'indices_out' is %s, which holds C <= %lld centroids, but the codebook has C = %lld",
                 vq_dtype_name(idx_dt), (long long)cap, (long long)C);
    VQ_RETURN_IF(ctx, D > INT32_MAX, VQ_ERR_UNSUPPORTED, "D = %lld is beyond 32-bit indexing", (long long)D);
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_commvq_encode(ctx, keys, codebook, indices_out);
#endif
    encode_job j = {.k = vq_centroids_kernels_for(ctx->isa),
                    .conv = vq_row_kernels_for(ctx->isa),
                    .rows = vq_prod(keys, 0, 3), .R = R, .C = C, .D = D,
                    .ld = vq_centroids_ld(C), .keys = vq_data(keys), .keys_dt = vq_dtype_of(keys),
                    .codebook = vq_data(codebook), .idx = vq_data(indices_out), .idx_dt = idx_dt};
    VQ_FORWARD_IF_ERROR(vq_centroids_work_alloc(ctx, R * D * j.ld, D, &j.w));
    vq_centroids_transpose(ctx, j.codebook, R, C, D, j.w.cbt);
    vq_parallel_for(ctx, vq_centroids_tasks(ctx, j.rows, R * D * C, &j.chunk), encode_task, &j);
    return VQ_OK;
}

/* ---- residual k-means training ---- */

vq_status vq_commvq_train(vq_ctx *ctx, const DLTensor *samples, int R, int C, int iters, uint64_t seed,
                           DLTensor *codebook_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, samples, "samples", VQ_DTM_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, codebook_out, "codebook_out", VQ_DTM_F32, 3, 3));
    const int64_t N = vq_dim(samples, 0), D = vq_dim(samples, 1);
    VQ_RETURN_IF(ctx, R < 1, VQ_ERR_INVALID_ARGUMENT, "R must be >= 1, got %d", R);
    VQ_RETURN_IF(ctx, C < 1 || C > N, VQ_ERR_INVALID_ARGUMENT, "C must be in 1..N = %lld (the samples), got %d",
                 (long long)N, C);
    VQ_RETURN_IF(ctx, iters < 0, VQ_ERR_INVALID_ARGUMENT, "iters must be >= 0, got %d", iters);
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, codebook_out, "codebook_out", 3, (const int64_t[]){R, C, D}));
    VQ_RETURN_IF(ctx, D > INT32_MAX, VQ_ERR_UNSUPPORTED, "D = %lld is beyond 32-bit indexing", (long long)D);
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED,
                 "this trainer runs on CPU contexts only: train on host tensors and copy the result to the device");
    /* The residuals live across k-means calls, which own the ctx scratch, so
     * they get their own buffer (training is not a hot path). The scratch is
     * reserved up front so an out-of-memory fails before anything is written. */
    encode_job j = {.k = vq_centroids_kernels_for(ctx->isa),
                    .conv = vq_row_kernels_for(ctx->isa),
                    .rows = N, .R = R, .C = C, .D = D, .ld = vq_centroids_ld(C),
                    .codebook = vq_data(codebook_out)};
    VQ_FORWARD_IF_ERROR(vq_centroids_work_alloc(ctx, D * j.ld, D, &j.w));
    const size_t km = vq_kmeans_scratch_bytes(N, D, C);
    VQ_RETURN_IF(ctx, vq_ctx_scratch(ctx, km) == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of scratch", km);
    j.x = malloc((size_t)(N * D) * sizeof(float));
    VQ_RETURN_IF(ctx, j.x == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %lld residuals of D = %lld", (long long)N,
                 (long long)D);
    memcpy(j.x, vq_data(samples), (size_t)(N * D) * sizeof(float));
    float *cb = vq_data(codebook_out);
    vq_status st = VQ_OK;
    for (int r = 0; r < R && st == VQ_OK; r++) {
        st = vq_kmeans_run(ctx, j.x, N, D, C, iters, seed + (uint64_t)r, cb + (int64_t)r * C * D);
        if (st != VQ_OK || r + 1 == R) break;
        /* residuals after stage r: the greedy encoder's, stage r alone */
        st = vq_centroids_work_alloc(ctx, D * j.ld, D, &j.w);  /* fits: reserved above */
        if (st != VQ_OK) break;
        vq_centroids_transpose(ctx, cb + (int64_t)r * C * D, 1, C, D, j.w.cbt);
        j.r0 = r;
        j.R = r + 1;
        vq_parallel_for(ctx, vq_centroids_tasks(ctx, N, D * C, &j.chunk), encode_task, &j);
    }
    free(j.x);
    return st;
}
