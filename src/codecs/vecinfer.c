/* vecinfer.c — VecInfer product VQ (docs/FORMATS.md §8): validation, the public entry
 * points and their CPU drivers. Keys are smoothed channel-wise (k / s), split
 * into M subspaces of dsub channels, and each slice is replaced by the index
 * of its nearest centroid; a query meets the codes through a look-up table.
 * The per-token decoders live in formats/format_vecinfer.h; the search and dot
 * kernels, per ISA, in codecs/centroids.h. */
#include "codecs/centroids.h"
#include "formats/format_vecinfer.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

/* Shapes of one call, after validation. */
typedef struct vecinfer_geom {
    int64_t rows;            /* B * H * S token (or query) rows */
    int64_t H, S, D;         /* row r belongs to head (r / S) % H */
    int64_t M, C, dsub;
    bool cb_per_head;        /* codebook [H, M, C, dsub] rather than [M, C, dsub] */
    bool smooth_per_head;    /* smooth [H, D] rather than [D] */
} vecinfer_geom;

/* Validates codebook [M, C, D/M] or [H, M, C, D/M] f32 and smooth [D] or
 * [H, D] f32 for H heads of dimension D. M < 0 takes M from the codebook;
 * otherwise it is num_subspaces and must divide D. Fills g's model fields. */
static vq_status check_model(vq_ctx *ctx, const DLTensor *codebook, const DLTensor *smooth, int64_t H, int64_t D,
                             int64_t M, vecinfer_geom *g)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, codebook, "codebook", VQ_DTM_F32, 3, 4));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, smooth, "smooth", VQ_DTM_F32, 1, 2));
    if (M < 0) {
        M = vq_dim(codebook, -3);
        VQ_RETURN_IF(ctx, D % M != 0, VQ_ERR_INVALID_ARGUMENT,
                     "argument 'codebook' has M = %lld subspaces, which does not divide D = %lld", (long long)M,
                     (long long)D);
    }
    const int64_t cb_shape[4] = {H, M, -1, D / M};
    const bool per_head = codebook->ndim == 4;
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, codebook, "codebook", codebook->ndim, per_head ? cb_shape : cb_shape + 1));
    const int64_t C = vq_dim(codebook, -2);
    VQ_RETURN_IF(ctx, C > VQ_VECINFER_MAX_CENTROIDS, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'codebook' has C = %lld centroids per subspace, at most %d are supported", (long long)C,
                 VQ_VECINFER_MAX_CENTROIDS);
    const int64_t sm_shape[2] = {H, D};
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, smooth, "smooth", smooth->ndim, smooth->ndim == 2 ? sm_shape : sm_shape + 1));
    g->H = H;
    g->D = D;
    g->M = M;
    g->C = C;
    g->dsub = D / M;
    g->cb_per_head = per_head;
    g->smooth_per_head = smooth->ndim == 2;
    return VQ_OK;
}

/* Validates keys [B,H,S,D] f16/f32 with num_subspaces dividing D, the model,
 * and idx [B,H,S,M] u8/u16 (u8 only when C <= 256). */
static vq_status check_encode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook, const DLTensor *smooth,
                              int num_subspaces, const DLTensor *idx_out, vecinfer_geom *g)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, keys, "keys", VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, idx_out, "idx_out", VQ_DTM_U8 | VQ_DTM_U16, 4, 4));
    const int64_t D = vq_dim(keys, 3);
    VQ_RETURN_IF(ctx, num_subspaces < 1, VQ_ERR_INVALID_ARGUMENT, "num_subspaces must be >= 1, got %d",
                 num_subspaces);
    VQ_RETURN_IF(ctx, D % num_subspaces != 0, VQ_ERR_INVALID_ARGUMENT,
                 "num_subspaces = %d must divide D = %lld (the last dimension of 'keys')", num_subspaces,
                 (long long)D);
    VQ_FORWARD_IF_ERROR(check_model(ctx, codebook, smooth, vq_dim(keys, 1), D, num_subspaces, g));
    const int64_t idx_shape[4] = {keys->shape[0], keys->shape[1], keys->shape[2], g->M};
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, idx_out, "idx_out", 4, idx_shape));
    VQ_RETURN_IF(ctx, vq_dtype_of(idx_out) == VQ_DT_U8 && g->C > 256, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'idx_out' is u8, which holds C <= 256 centroids, but the codebook has C = %lld; use u16",
                 (long long)g->C);
    g->S = vq_dim(keys, 2);
    g->rows = vq_prod(keys, 0, 3);
    return VQ_OK;
}

/* Validates keys_out [B,H,S,D] f16/f32 against the leading shape of `like`. */
static vq_status check_keys_out(vq_ctx *ctx, const DLTensor *keys_out, const DLTensor *like, const vecinfer_geom *g)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, keys_out, "keys_out", VQ_DTM_F16_F32, 4, 4));
    const int64_t shape[4] = {like->shape[0], like->shape[1], like->shape[2], g->D};
    return vq_check_shape(ctx, keys_out, "keys_out", 4, shape);
}

static vq_vecinfer_layout layout_of(const vecinfer_geom *g, vq_dtype idx_dt)
{
    return (vq_vecinfer_layout){(int32_t)g->M, (int32_t)g->dsub, (int32_t)g->C, idx_dt == VQ_DT_U8 ? 1 : 2};
}

/* Everything a CPU task reads; one per call. */
typedef struct vecinfer_job {
    const vq_centroids_kernels *k;
    const vq_row_kernels *conv; /* f16/f32 row conversions */
    vecinfer_geom g;
    vq_vecinfer_layout L;
    const void *in;          /* keys or queries [rows, D] */
    vq_dtype in_dt;
    const float *codebook;   /* [(H,) M, C, dsub] */
    const float *smooth;     /* [(H,) D] */
    vq_centroids_work w;           /* transposed codebook [(H,) M, dsub, ld]; per-thread rows [2D] */
    int64_t ld, chunk;
    void *idx;               /* [rows, M] */
    vq_dtype idx_dt;
    void *out;               /* keys_out [rows, D] or lut [rows, M, C] */
    vq_dtype out_dt;
} vecinfer_job;

static int64_t head_of(const vecinfer_geom *g, int64_t row) { return (row / g->S) % g->H; }
static const float *smooth_of(const vecinfer_job *j, int64_t h) { return j->smooth + (j->g.smooth_per_head ? h * j->g.D : 0); }
static const float *codebook_of(const vecinfer_job *j, int64_t h)
{
    return j->codebook + (j->g.cb_per_head ? h * j->g.M * j->g.C * j->g.dsub : 0);
}
static const float *cbt_of(const vecinfer_job *j, int64_t h)
{
    return j->w.cbt + (j->g.cb_per_head ? h * j->g.M * j->g.dsub * j->ld : 0);
}

/* Row `row` of the input as f32 in x [D]. */
static void load_row(const vecinfer_job *j, int64_t row, float *x)
{
    j->conv->to_f32((const char *)j->in + row * j->g.D * (int64_t)vq_dtype_size(j->in_dt), j->in_dt, j->g.D, x);
}

/* Decodes the codes of `row` (already in j->idx) into the keys_out row,
 * through tmp [D] when the output is not f32. */
static void decode_row(const vecinfer_job *j, int64_t row, float *tmp)
{
    const int64_t h = head_of(&j->g, row), D = j->g.D;
    const void *codes = (const char *)j->idx + row * j->g.M * (int64_t)vq_dtype_size(j->idx_dt);
    float *dst = j->out_dt == VQ_DT_F32 ? (float *)j->out + row * D : tmp;
    vq_vecinfer_decode_token(&j->L, codes, codebook_of(j, h), smooth_of(j, h), dst);
    if (dst == tmp) j->conv->from_f32(tmp, D, j->out_dt, (char *)j->out + row * D * (int64_t)vq_dtype_size(j->out_dt));
}

/* Rows of one task: keys -> idx (and keys_out when j->out is set). */
static void encode_task(void *arg, int64_t task, int thread)
{
    const vecinfer_job *j = arg;
    const vecinfer_geom *g = &j->g;
    float *x = vq_centroids_row(&j->w, thread), *tmp = x + g->D;
    const int64_t end = vq_centroids_task_end(task, j->chunk, g->rows);
    for (int64_t row = task * j->chunk; row < end; row++) {
        const int64_t h = head_of(g, row);
        const float *s = smooth_of(j, h), *cbt = cbt_of(j, h);
        load_row(j, row, x);
        for (int64_t c = 0; c < g->D; c++) x[c] /= s[c];
        for (int64_t m = 0; m < g->M; m++) {
            const int32_t code = j->k->nearest(x + m * g->dsub, cbt + m * g->dsub * j->ld, (int32_t)g->C, j->ld,
                                               (int32_t)g->dsub);
            vq_store_i(j->idx, j->idx_dt, row * g->M + m, code);
        }
        if (j->out != NULL) decode_row(j, row, tmp);
    }
}

/* Rows of one task: idx -> keys_out. */
static void decode_task(void *arg, int64_t task, int thread)
{
    const vecinfer_job *j = arg;
    float *tmp = vq_centroids_row(&j->w, thread);
    const int64_t end = vq_centroids_task_end(task, j->chunk, j->g.rows);
    for (int64_t row = task * j->chunk; row < end; row++) decode_row(j, row, tmp);
}

/* Rows of one task: queries -> lut [M, C] per row. */
static void lut_task(void *arg, int64_t task, int thread)
{
    const vecinfer_job *j = arg;
    const vecinfer_geom *g = &j->g;
    float *x = vq_centroids_row(&j->w, thread);
    const int64_t end = vq_centroids_task_end(task, j->chunk, g->rows);
    for (int64_t row = task * j->chunk; row < end; row++) {
        const int64_t h = head_of(g, row);
        const float *s = smooth_of(j, h), *cbt = cbt_of(j, h);
        load_row(j, row, x);
        for (int64_t c = 0; c < g->D; c++) x[c] *= s[c];
        float *lut = (float *)j->out + row * g->M * g->C;
        for (int64_t m = 0; m < g->M; m++)
            j->k->dots(x + m * g->dsub, cbt + m * g->dsub * j->ld, (int32_t)g->C, j->ld, (int32_t)g->dsub,
                       lut + m * g->C);
    }
}

/* Fills the job's scratch: the transposed codebook (when `transpose`) and
 * two rows of D floats per thread. */
static vq_status prepare(vq_ctx *ctx, vecinfer_job *j, bool transpose)
{
    const vecinfer_geom *g = &j->g;
    const int64_t groups = (g->cb_per_head ? g->H : 1) * g->M;
    j->k = vq_centroids_kernels_for(ctx->isa);
    j->conv = vq_row_kernels_for(ctx->isa);
    j->ld = vq_centroids_ld(g->C);
    VQ_FORWARD_IF_ERROR(vq_centroids_work_alloc(ctx, transpose ? groups * g->dsub * j->ld : 0, 2 * g->D, &j->w));
    if (transpose) vq_centroids_transpose(ctx, j->codebook, groups, g->C, g->dsub, j->w.cbt);
    return VQ_OK;
}

/* The CPU driver of quantize / encode_decode (keys_out NULL: indices only). */
static vq_status encode_cpu(vq_ctx *ctx, const vecinfer_geom *g, const DLTensor *keys, const DLTensor *codebook,
                            const DLTensor *smooth, DLTensor *idx_out, DLTensor *keys_out)
{
    vecinfer_job j = {.g = *g,
                .in = vq_data(keys),
                .in_dt = vq_dtype_of(keys),
                .codebook = vq_data(codebook),
                .smooth = vq_data(smooth),
                .idx = vq_data(idx_out),
                .idx_dt = vq_dtype_of(idx_out),
                .out = keys_out ? vq_data(keys_out) : NULL,
                .out_dt = keys_out ? vq_dtype_of(keys_out) : VQ_DT_INVALID};
    j.L = layout_of(g, j.idx_dt);
    VQ_FORWARD_IF_ERROR(prepare(ctx, &j, true));
    vq_parallel_for(ctx, vq_centroids_tasks(ctx, g->rows, g->D * g->C, &j.chunk), encode_task, &j);
    return VQ_OK;
}

vq_status vq_vecinfer_quantize(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook, const DLTensor *smooth,
                               int num_subspaces, DLTensor *idx_out)
{
    VQ_ENTER(ctx);
    vecinfer_geom g;
    VQ_FORWARD_IF_ERROR(check_encode(ctx, keys, codebook, smooth, num_subspaces, idx_out, &g));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_vecinfer_quantize(ctx, keys, codebook, smooth, num_subspaces, idx_out);
#endif
    return encode_cpu(ctx, &g, keys, codebook, smooth, idx_out, NULL);
}

vq_status vq_vecinfer_encode_decode(vq_ctx *ctx, const DLTensor *keys, const DLTensor *codebook,
                                    const DLTensor *smooth, int num_subspaces, DLTensor *idx_out,
                                    DLTensor *keys_out)
{
    VQ_ENTER(ctx);
    vecinfer_geom g;
    VQ_FORWARD_IF_ERROR(check_encode(ctx, keys, codebook, smooth, num_subspaces, idx_out, &g));
    VQ_FORWARD_IF_ERROR(check_keys_out(ctx, keys_out, keys, &g));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_vecinfer_encode_decode(
            ctx, keys, codebook, smooth, num_subspaces, idx_out, keys_out);
#endif
    return encode_cpu(ctx, &g, keys, codebook, smooth, idx_out, keys_out);
}

vq_status vq_vecinfer_dequant(vq_ctx *ctx, const DLTensor *idx, const DLTensor *codebook, const DLTensor *smooth,
                              DLTensor *keys_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, idx, "idx", VQ_DTM_U8 | VQ_DTM_U16, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, keys_out, "keys_out", VQ_DTM_F16_F32, 4, 4));
    vecinfer_geom g;
    VQ_FORWARD_IF_ERROR(check_model(ctx, codebook, smooth, vq_dim(idx, 1), vq_dim(keys_out, 3), -1, &g));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, idx, "idx", 3, g.M, "M (the codebook's subspaces)"));
    VQ_FORWARD_IF_ERROR(check_keys_out(ctx, keys_out, idx, &g));
    g.S = vq_dim(idx, 2);
    g.rows = vq_prod(idx, 0, 3);
    /* The range check below reads the data, which the host cannot do for
     * device memory: the CUDA kernel clamps indices to C - 1 instead
     * (formats/format_vecinfer.h). */
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_vecinfer_dequant(ctx, idx, codebook, smooth, keys_out);
#endif
    const int64_t bad = vq_centroids_find_bad_code(vq_data(idx), vq_dtype_of(idx), g.rows * g.M, g.C);
    VQ_RETURN_IF(ctx, bad >= 0, VQ_ERR_INVALID_ARGUMENT, "argument 'idx': element %lld is %lld, outside [0, C = %lld)",
                 (long long)bad, (long long)vq_load_i(vq_data(idx), vq_dtype_of(idx), bad), (long long)g.C);
    vecinfer_job j = {.g = g,
                .codebook = vq_data(codebook),
                .smooth = vq_data(smooth),
                .idx = vq_data(idx),
                .idx_dt = vq_dtype_of(idx),
                .out = vq_data(keys_out),
                .out_dt = vq_dtype_of(keys_out)};
    j.L = layout_of(&g, j.idx_dt);
    VQ_FORWARD_IF_ERROR(prepare(ctx, &j, false));
    vq_parallel_for(ctx, vq_centroids_tasks(ctx, g.rows, g.D, &j.chunk), decode_task, &j);
    return VQ_OK;
}

vq_status vq_vecinfer_query_lut(vq_ctx *ctx, const DLTensor *queries, const DLTensor *codebook,
                                const DLTensor *smooth, DLTensor *lut_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, queries, "queries", VQ_DTM_F16_F32, 3, 4));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, lut_out, "lut_out", VQ_DTM_F32, 4, 5));
    vecinfer_geom g;
    VQ_FORWARD_IF_ERROR(check_model(ctx, codebook, smooth, vq_dim(queries, 1), vq_dim(queries, -1), -1, &g));
    const int lead = queries->ndim - 1;  /* [B,H] or [B,H,Sq] */
    int64_t lut_shape[5];
    for (int i = 0; i < lead; i++) lut_shape[i] = queries->shape[i];
    lut_shape[lead] = g.M;
    lut_shape[lead + 1] = g.C;
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, lut_out, "lut_out", lead + 2, lut_shape));
    g.S = lead == 3 ? vq_dim(queries, 2) : 1;
    g.rows = vq_prod(queries, 0, lead);
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_vecinfer_query_lut(ctx, queries, codebook, smooth, lut_out);
#endif
    vecinfer_job j = {.g = g,
                .in = vq_data(queries),
                .in_dt = vq_dtype_of(queries),
                .codebook = vq_data(codebook),
                .smooth = vq_data(smooth),
                .out = vq_data(lut_out),
                .out_dt = VQ_DT_F32};
    VQ_FORWARD_IF_ERROR(prepare(ctx, &j, true));
    vq_parallel_for(ctx, vq_centroids_tasks(ctx, g.rows, g.D * g.C, &j.chunk), lut_task, &j);
    return VQ_OK;
}
