/* calibration.c — fitting the tables of a vq_calibration and reading them
 * (API: section 6 of veloxquant.h).
 *
 * Every fit is one of the library's trainers on samples gathered per layer:
 * VecInfer smooth factors (vq_vecinfer_smooth_factors) on all of a group's
 * tokens, then k-means (vq_kmeans_run) per subspace on the smoothed sample;
 * CommVQ residual k-means (vq_commvq_train) on the pooled keys; Lloyd-Max
 * (vq_lloyd_max_fit) on RMS-normalised values. Each trainer is deterministic
 * for its seed whatever the thread count, and each fit's seed is derived
 * from the config's seed and the fit's (method, layer, head, subspace), so
 * the whole calibration is too. */
#include "calib/calibration.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/kmeans.h"

static const char *const table_names[VQ_CAL_TABLES] = {"VQ_CAL_VECINFER_SMOOTH", "VQ_CAL_VECINFER_CODEBOOK",
                                                       "VQ_CAL_COMMVQ_CODEBOOK", "VQ_CAL_VALUE_CENTROIDS"};

vq_status vq_calibration_resolve(vq_ctx *ctx, int L, int H, int D, const vq_calibration_config *in,
                                 vq_calibration *cal)
{
    vq_calibration_config c = *in;
    c.progress = NULL;
    c.progress_user = NULL;
    VQ_RETURN_IF(ctx, L < 1 || L > VQ_CAL_MAX_LAYERS, VQ_ERR_INVALID_ARGUMENT, "layers L must be in 1..%d, got %d",
                 VQ_CAL_MAX_LAYERS, L);
    VQ_RETURN_IF(ctx, H < 1 || H > VQ_CAL_MAX_HEADS, VQ_ERR_INVALID_ARGUMENT, "kv heads Hkv must be in 1..%d, got %d",
                 VQ_CAL_MAX_HEADS, H);
    VQ_RETURN_IF(ctx, D < 1 || D > VQ_CAL_MAX_DIM, VQ_ERR_INVALID_ARGUMENT, "head dim D must be in 1..%d, got %d",
                 VQ_CAL_MAX_DIM, D);
    if (c.vecinfer_subspaces != 0 && c.vecinfer_centroids == 0) c.vecinfer_centroids = 256;
    if (c.commvq_stages != 0 && c.commvq_centroids == 0) c.commvq_centroids = 256;
    if (c.iters == 0) c.iters = 25;
    if (c.max_samples == 0) c.max_samples = 16384;
    if (c.vecinfer_subspaces == 0) {
        c.vecinfer_centroids = 0;
        c.vecinfer_shared = false;
    }
    if (c.commvq_stages == 0) c.commvq_centroids = 0;
    VQ_RETURN_IF(ctx, c.vecinfer_subspaces < 0 || c.vecinfer_subspaces > D || (c.vecinfer_subspaces > 0 && D % c.vecinfer_subspaces != 0),
                 VQ_ERR_INVALID_ARGUMENT, "cfg->vecinfer_subspaces must be 0 or a divisor of D = %d, got %d", D,
                 c.vecinfer_subspaces);
    VQ_RETURN_IF(ctx, c.vecinfer_subspaces > 0 && (c.vecinfer_centroids < 1 || c.vecinfer_centroids > VQ_CAL_MAX_CENTROIDS),
                 VQ_ERR_INVALID_ARGUMENT, "cfg->vecinfer_centroids must be in 1..%d, got %d", VQ_CAL_MAX_CENTROIDS,
                 c.vecinfer_centroids);
    VQ_RETURN_IF(ctx, c.commvq_stages < 0 || c.commvq_stages > VQ_CAL_MAX_STAGES, VQ_ERR_INVALID_ARGUMENT,
                 "cfg->commvq_stages must be in 0..%d, got %d", VQ_CAL_MAX_STAGES, c.commvq_stages);
    VQ_RETURN_IF(ctx, c.commvq_stages > 0 && (c.commvq_centroids < 1 || c.commvq_centroids > VQ_CAL_MAX_CENTROIDS),
                 VQ_ERR_INVALID_ARGUMENT, "cfg->commvq_centroids must be in 1..%d, got %d", VQ_CAL_MAX_CENTROIDS,
                 c.commvq_centroids);
    VQ_RETURN_IF(ctx, c.value_centroids < 0 || c.value_centroids > VQ_CAL_MAX_VALUE_CENTROIDS,
                 VQ_ERR_INVALID_ARGUMENT, "cfg->value_centroids must be in 0..%d, got %d",
                 VQ_CAL_MAX_VALUE_CENTROIDS, c.value_centroids);
    VQ_RETURN_IF(ctx, c.iters < 1 || c.iters > VQ_CAL_MAX_ITERS, VQ_ERR_INVALID_ARGUMENT,
                 "cfg->iters must be in 0..%d (0 = 25), got %d", VQ_CAL_MAX_ITERS, c.iters);
    VQ_RETURN_IF(ctx, c.max_samples < 1 || c.max_samples > (1 << 30), VQ_ERR_INVALID_ARGUMENT,
                 "cfg->max_samples must be in 0..2^30 (0 = 16384), got %lld", (long long)c.max_samples);
    VQ_RETURN_IF(ctx, c.vecinfer_subspaces == 0 && c.commvq_stages == 0 && c.value_centroids == 0,
                 VQ_ERR_INVALID_ARGUMENT,
                 "cfg asks for no table: set vecinfer_subspaces, commvq_stages or value_centroids");

    memset(cal, 0, sizeof *cal);
    cal->n_layers = L;
    cal->n_kv_heads = H;
    cal->head_dim = D;
    cal->cfg = c;
    if (c.vecinfer_subspaces > 0) {
        const int64_t M = c.vecinfer_subspaces, C = c.vecinfer_centroids, G = c.vecinfer_shared ? 1 : H;
        cal->count[0] = G * D;
        cal->count[1] = G * C * D;  /* M * C * (D / M) per group */
        if (c.vecinfer_shared) {
            cal->ndim[0] = 1;
            cal->shape[0][0] = D;
            cal->ndim[1] = 3;
            memcpy(cal->shape[1], (int64_t[]){M, C, D / M}, 3 * sizeof(int64_t));
        } else {
            cal->ndim[0] = 2;
            memcpy(cal->shape[0], (int64_t[]){H, D}, 2 * sizeof(int64_t));
            cal->ndim[1] = 4;
            memcpy(cal->shape[1], (int64_t[]){H, M, C, D / M}, 4 * sizeof(int64_t));
        }
    }
    if (c.commvq_stages > 0) {
        cal->count[2] = (int64_t)c.commvq_stages * c.commvq_centroids * D;
        cal->ndim[2] = 3;
        memcpy(cal->shape[2], (int64_t[]){c.commvq_stages, c.commvq_centroids, D}, 3 * sizeof(int64_t));
    }
    if (c.value_centroids > 0) {
        cal->count[3] = c.value_centroids;
        cal->ndim[3] = 1;
        cal->shape[3][0] = c.value_centroids;
    }
    return VQ_OK;
}

vq_status vq_calibration_alloc_tables(vq_ctx *ctx, vq_calibration *cal)
{
    for (int t = 0; t < VQ_CAL_TABLES; t++) {
        if (cal->count[t] == 0) continue;
        /* counts are bounded by the limits above: L * count < 2^12 * 2^12 * 2^16 * 2^12 */
        const size_t n = (size_t)cal->n_layers * (size_t)cal->count[t];
        cal->tables[t] = malloc(n * sizeof(float));
        VQ_RETURN_IF(ctx, cal->tables[t] == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu floats for %s", n,
                     table_names[t]);
    }
    return VQ_OK;
}

void vq_calibration_free(vq_calibration *cal)
{
    if (!cal) return;
    for (int t = 0; t < VQ_CAL_TABLES; t++) free(cal->tables[t]);
    free(cal);
}

vq_status vq_calibration_check_values(vq_ctx *ctx, const vq_calibration *cal, vq_status status, const char *where)
{
    for (int t = 0; t < VQ_CAL_TABLES; t++) {
        const int64_t per = cal->count[t];
        for (int64_t l = 0; l < cal->n_layers && per > 0; l++) {
            const float *v = cal->tables[t] + l * per;
            for (int64_t i = 0; i < per; i++) {
                VQ_RETURN_IF(ctx, !isfinite(v[i]), status, "%s %s of layer %lld: element %lld is not finite", where,
                             table_names[t], (long long)l, (long long)i);
                VQ_RETURN_IF(ctx, t == 0 && !(v[i] > 0.0f), status,
                             "%s %s of layer %lld: element %lld is %g, smooth factors must be > 0", where,
                             table_names[t], (long long)l, (long long)i, (double)v[i]);
                VQ_RETURN_IF(ctx, t == 3 && i > 0 && v[i] < v[i - 1], status,
                             "%s %s of layer %lld: centroids %lld and %lld are not ascending (%g > %g)", where,
                             table_names[t], (long long)l, (long long)i - 1, (long long)i, (double)v[i - 1],
                             (double)v[i]);
            }
        }
    }
    return VQ_OK;
}

/* ---- fitting ---- */

/* The seed of one fit: the config seed mixed with what the fit is, through
 * the library PRNG (SplitMix64 seeding), so neighbouring fits get unrelated
 * seeds. */
static uint64_t fit_seed(uint64_t seed, int method, int layer, int head, int sub)
{
    vq_rng r;
    vq_rng_seed(&r, seed ^ ((uint64_t)method << 60) ^ ((uint64_t)(uint32_t)layer << 36) ^
                        ((uint64_t)(uint32_t)head << 18) ^ (uint64_t)(uint32_t)sub);
    return vq_rng_next(&r);
}

/* Token j of n_use evenly spaced over total: floor(j * total / n_use),
 * without overflow (j, n_use <= 2^30). */
static int64_t spaced(int64_t j, int64_t total, int64_t n_use)
{
    const int64_t q = total / n_use, r = total % n_use;
    return j * q + (j * r) / n_use;
}

/* A compact host DLTensor over f32 memory. */
typedef struct host_tensor {
    DLTensor t;
    int64_t shape[4];
} host_tensor;

static DLTensor *host_f32(host_tensor *h, void *data, int ndim, const int64_t *shape, DLDataType dt)
{
    memset(h, 0, sizeof *h);
    memcpy(h->shape, shape, (size_t)ndim * sizeof(int64_t));
    h->t = (DLTensor){.data = data, .device = {kDLCPU, 0}, .ndim = ndim, .dtype = dt, .shape = h->shape};
    return &h->t;
}

static const DLDataType DT_F32 = {kDLFloat, 32, 1};

/* The state of one fit call. */
typedef struct fitter {
    vq_ctx *ctx;
    const vq_calibration_config *cfg;
    vq_calibration *cal;
    const void *keys, *values;  /* [L, H, N, D] */
    vq_dtype kdt, vdt;
    int64_t L, H, N, D;
    float *rows;                /* [max group rows, D] gathered samples */
    float *slice;               /* [max rows, D] one subspace, contiguous */
} fitter;

/* Gathers n_use of the `total` rows starting at row `first` of src into
 * f->rows (f32). */
static void gather(const fitter *f, const void *src, vq_dtype dt, int64_t first, int64_t total, int64_t n_use)
{
    const size_t es = vq_dtype_size(dt);
    for (int64_t j = 0; j < n_use; j++) {
        const int64_t row = first + spaced(j, total, n_use);
        vq_row_to_f32((const char *)src + (size_t)(row * f->D) * es, dt, f->D, f->rows + j * f->D);
    }
}

/* Runs a public trainer and restores this function's name for messages. */
#define CALL_TRAINER(f, expr)                       \
    do {                                            \
        const char *fn_ = (f)->ctx->fn;             \
        vq_status st_ = (expr);                     \
        (f)->ctx->fn = fn_;                         \
        if (st_ != VQ_OK) return st_;               \
    } while (0)

/* VECINFER tables of layer l: per group g (a kv head, or all heads pooled). */
static vq_status fit_vecinfer(fitter *f, int l)
{
    vq_calibration *cal = f->cal;
    const int64_t M = f->cfg->vecinfer_subspaces, C = f->cfg->vecinfer_centroids, D = f->D, sub = D / M;
    const int64_t G = f->cfg->vecinfer_shared ? 1 : f->H, rows_per_group = f->cfg->vecinfer_shared ? f->H * f->N : f->N;
    const int64_t n_use = rows_per_group < f->cfg->max_samples ? rows_per_group : f->cfg->max_samples;
    const size_t es = vq_dtype_size(f->kdt);
    for (int64_t g = 0; g < G; g++) {
        const int64_t first = ((int64_t)l * f->H + g) * f->N;  /* pooled: g == 0, all H * N rows of layer l */
        float *smooth = cal->tables[0] + l * cal->count[0] + g * D;
        float *cb = cal->tables[1] + l * cal->count[1] + g * M * C * sub;
        host_tensor hk, hs;
        const DLTensor *kt = host_f32(&hk, (char *)f->keys + (size_t)(first * D) * es, 2,
                                      (int64_t[]){rows_per_group, D}, (DLDataType){kDLFloat, (uint8_t)(8 * es), 1});
        CALL_TRAINER(f, vq_vecinfer_smooth_factors(f->ctx, kt, host_f32(&hs, smooth, 1, (int64_t[]){D}, DT_F32)));
        gather(f, f->keys, f->kdt, first, rows_per_group, n_use);
        for (int64_t m = 0; m < M; m++) {
            for (int64_t j = 0; j < n_use; j++)
                for (int64_t c = 0; c < sub; c++)
                    f->slice[j * sub + c] = f->rows[j * D + m * sub + c] / smooth[m * sub + c];
            VQ_FORWARD_IF_ERROR(vq_kmeans_run(f->ctx, f->slice, n_use, sub, C, f->cfg->iters,
                                              fit_seed(f->cfg->seed, 1, l, (int)g, (int)m), cb + m * C * sub));
        }
    }
    return VQ_OK;
}

static vq_status fit_commvq(fitter *f, int l)
{
    vq_calibration *cal = f->cal;
    const int64_t total = f->H * f->N, n_use = total < f->cfg->max_samples ? total : f->cfg->max_samples;
    gather(f, f->keys, f->kdt, (int64_t)l * total, total, n_use);
    host_tensor hx, hc;
    CALL_TRAINER(f, vq_commvq_train(f->ctx, host_f32(&hx, f->rows, 2, (int64_t[]){n_use, f->D}, DT_F32),
                                     f->cfg->commvq_stages, f->cfg->commvq_centroids, f->cfg->iters,
                                     fit_seed(f->cfg->seed, 2, l, 0, 0),
                                     host_f32(&hc, cal->tables[2] + l * cal->count[2], 3, cal->shape[2], DT_F32)));
    return VQ_OK;
}

static vq_status fit_values(fitter *f, int l)
{
    vq_calibration *cal = f->cal;
    const int64_t total = f->H * f->N, n_use = total < f->cfg->max_samples ? total : f->cfg->max_samples;
    gather(f, f->values, f->vdt, (int64_t)l * total, total, n_use);
    /* normalise each token by its RMS in place, compacting away zero tokens */
    int64_t kept = 0;
    for (int64_t j = 0; j < n_use; j++) {
        const float *v = f->rows + j * f->D;
        double ss = 0.0;
        for (int64_t c = 0; c < f->D; c++) ss += (double)v[c] * v[c];
        if (ss == 0.0) continue;
        const double inv = 1.0 / sqrt(ss / (double)f->D);
        float *o = f->rows + kept * f->D;
        for (int64_t c = 0; c < f->D; c++) o[c] = (float)(v[c] * inv);
        kept++;
    }
    const int n = f->cfg->value_centroids;
    VQ_RETURN_IF(f->ctx, kept * f->D < n, VQ_ERR_INVALID_ARGUMENT,
                 "layer %d has %lld non-zero value elements in its sample, fewer than value_centroids = %d", l,
                 (long long)(kept * f->D), n);
    host_tensor hx, hc;
    CALL_TRAINER(f, vq_lloyd_max_fit(f->ctx, host_f32(&hx, f->rows, 1, (int64_t[]){kept * f->D}, DT_F32), n,
                                     f->cfg->iters,
                                     host_f32(&hc, cal->tables[3] + l * cal->count[3], 1, cal->shape[3], DT_F32)));
    return VQ_OK;
}

/* Every element of a [L,H,N,D] f16/f32 tensor finite. */
static vq_status check_finite(vq_ctx *ctx, const DLTensor *t, const char *name)
{
    const vq_dtype dt = vq_dtype_of(t);
    const int64_t n = vq_numel(t);
    const void *p = vq_data(t);
    for (int64_t i = 0; i < n; i++)
        VQ_RETURN_IF(ctx, !isfinite(vq_load_f(p, dt, i)), VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s': element %lld is not finite", name, (long long)i);
    return VQ_OK;
}

static vq_status fit_all(fitter *f)
{
    for (int l = 0; l < f->L; l++) {
        if (f->cfg->vecinfer_subspaces > 0) VQ_FORWARD_IF_ERROR(fit_vecinfer(f, l));
        if (f->cfg->commvq_stages > 0) VQ_FORWARD_IF_ERROR(fit_commvq(f, l));
        if (f->cfg->value_centroids > 0) VQ_FORWARD_IF_ERROR(fit_values(f, l));
        if (f->cfg->progress) f->cfg->progress(f->cfg->progress_user, l + 1, (int)f->L);
    }
    return vq_calibration_check_values(f->ctx, f->cal, VQ_ERR_INVALID_ARGUMENT, "fitted");
}

vq_status vq_calibration_fit(vq_ctx *ctx, const vq_calibration_config *cfg, const DLTensor *keys,
                             const DLTensor *values, vq_calibration **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    VQ_RETURN_IF(ctx, cfg == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'cfg' is NULL");
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, keys, "keys", VQ_DTM_F16_F32, 4, 4));
    const bool need_values = cfg->value_centroids != 0;
    if (need_values || values != NULL) {
        VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, values, "values", VQ_DTM_F16_F32, 4, 4));
        VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, values, "values", 4, keys->shape));
    }
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED,
                 "calibration fits on CPU contexts only: fit on host tensors");
    const int64_t L = keys->shape[0], H = keys->shape[1], N = keys->shape[2], D = keys->shape[3];
    VQ_RETURN_IF(ctx, L > VQ_CAL_MAX_LAYERS || H > VQ_CAL_MAX_HEADS || D > VQ_CAL_MAX_DIM, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'keys' [L, Hkv, N, D] = [%lld, %lld, %lld, %lld] exceeds the limits L <= %d, Hkv <= %d, "
                 "D <= %d",
                 (long long)L, (long long)H, (long long)N, (long long)D, VQ_CAL_MAX_LAYERS, VQ_CAL_MAX_HEADS,
                 VQ_CAL_MAX_DIM);
    vq_calibration tmp;
    VQ_FORWARD_IF_ERROR(vq_calibration_resolve(ctx, (int)L, (int)H, (int)D, cfg, &tmp));
    tmp.n_samples = N;
    const vq_calibration_config *c = &tmp.cfg;
    /* every fit needs at least as many sample tokens as centroids */
    const int64_t ms = c->max_samples;
    const int64_t per_head = N < ms ? N : ms, pooled = H * N < ms ? H * N : ms;
    if (c->vecinfer_subspaces > 0) {
        const int64_t have = c->vecinfer_shared ? pooled : per_head;
        VQ_RETURN_IF(ctx, have < c->vecinfer_centroids, VQ_ERR_INVALID_ARGUMENT,
                     "VECINFER fits on %lld sample tokens%s, fewer than cfg->vecinfer_centroids = %d", (long long)have,
                     c->vecinfer_shared ? "" : " per kv head", c->vecinfer_centroids);
    }
    VQ_RETURN_IF(ctx, c->commvq_stages > 0 && pooled < c->commvq_centroids, VQ_ERR_INVALID_ARGUMENT,
                 "CommVQ fits on %lld sample tokens, fewer than cfg->commvq_centroids = %d", (long long)pooled,
                 c->commvq_centroids);
    VQ_FORWARD_IF_ERROR(check_finite(ctx, keys, "keys"));
    if (need_values) VQ_FORWARD_IF_ERROR(check_finite(ctx, values, "values"));

    vq_calibration *cal = malloc(sizeof *cal);
    VQ_RETURN_IF(ctx, cal == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate the calibration");
    *cal = tmp;
    fitter f = {.ctx = ctx, .cfg = cfg, .cal = cal, .keys = vq_data(keys), .kdt = vq_dtype_of(keys),
                .L = L, .H = H, .N = N, .D = D};
    if (need_values) {
        f.values = vq_data(values);
        f.vdt = vq_dtype_of(values);
    }
    /* cfg's counts with defaults resolved, but the caller's progress hook */
    vq_calibration_config run = cal->cfg;
    run.progress = cfg->progress;
    run.progress_user = cfg->progress_user;
    f.cfg = &run;
    const size_t rows = (size_t)(pooled > per_head ? pooled : per_head) * (size_t)D;
    vq_status st = vq_calibration_alloc_tables(ctx, cal);
    if (st == VQ_OK) {
        f.rows = malloc(rows * sizeof(float));
        f.slice = malloc(rows * sizeof(float));
        st = (f.rows && f.slice) ? fit_all(&f)
                                 : vq_fail(ctx, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu floats of samples", rows);
    }
    free(f.rows);
    free(f.slice);
    if (st != VQ_OK) {
        vq_calibration_free(cal);
        return st;
    }
    *out = cal;
    return VQ_OK;
}

/* ---- reading ---- */

vq_status vq_calibration_get_info(vq_ctx *ctx, const vq_calibration *cal, vq_calibration_info *out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, cal == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'cal' is NULL");
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = (vq_calibration_info){.n_layers = cal->n_layers, .n_kv_heads = cal->n_kv_heads,
                                 .head_dim = cal->head_dim, .n_samples = cal->n_samples, .config = cal->cfg};
    return VQ_OK;
}

vq_status vq_calibration_get_table(vq_ctx *ctx, const vq_calibration *cal, int layer, vq_calibration_table which,
                                   DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, cal == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'cal' is NULL");
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    VQ_RETURN_IF(ctx, which < VQ_CAL_VECINFER_SMOOTH || which > VQ_CAL_VALUE_CENTROIDS, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'which' must be a vq_calibration_table (1..4), got %d", (int)which);
    VQ_RETURN_IF(ctx, layer < 0 || layer >= cal->n_layers, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'layer' must be in [0, %d), got %d", cal->n_layers, layer);
    const int t = (int)which - 1;
    VQ_RETURN_IF(ctx, cal->count[t] == 0, VQ_ERR_INVALID_ARGUMENT, "this calibration has no %s (not fitted)",
                 table_names[t]);
    *out = (DLTensor){.data = cal->tables[t] + (int64_t)layer * cal->count[t], .device = {kDLCPU, 0},
                      .ndim = cal->ndim[t], .dtype = DT_F32, .shape = (int64_t *)cal->shape[t]};
    return VQ_OK;
}
