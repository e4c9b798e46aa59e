/* kivi.c — KIVI group-affine quantizers and dequantizers (docs/FORMATS.md §6):
 * validation, the public entry points and the threaded CPU drivers. The
 * per-row arithmetic lives in the kernel tables (kivi_kernels.h); the layout
 * in formats/format_kivi.h.
 *
 * Keys group g tokens per channel: scale/zero [B,H,ceil(S/g),D].
 * Values group g channels per token: scale/zero [B,H,S,ceil(D/g)]. */
#include <string.h>

#include "codecs/kivi_kernels.h"
#include "core/core.h"
#include "formats/format_kivi.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

/* Which tensor the groups run along. */
typedef enum { KIVI_KEYS, KIVI_VALUES } kivi_axis;

/* A validated call: geometry, dtypes and data pointers. */
typedef struct kivi_job {
    kivi_axis axis;
    int64_t bh, s, d, g;     /* B*H slices of S tokens by D channels, group size */
    int64_t gs;              /* scale/zero rows per slice (keys: ceil(S/g), values: S) */
    int64_t gd;              /* scale/zero columns (keys: D, values: ceil(D/g)) */
    int bits;
    bool packed;             /* codes bit-packed along D */
    int64_t code_row;        /* bytes per code row: D or D*bits/8 */
    vq_dtype x_dt, p_dt;     /* dtype of the float tensor (input or output) and of scale/zero */
    void *x;                 /* k/v (quantize) or out (dequantize) */
    uint8_t *codes;
    void *scale, *zero;
    const vq_kivi_kernels *kern;
    const vq_row_kernels *cvt;
    char *scratch;           /* per-thread slices of scratch_stride bytes */
    size_t scratch_stride;
} kivi_job;

/* ---- validation ---- */

/* Checks codes [B,H,S,CD] u8 against x [B,H,S,D] and decides the layout. */
static vq_status check_codes(vq_ctx *ctx, const DLTensor *codes, const char *name, const DLTensor *x,
                             const char *x_name, int bits, kivi_job *job)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, codes, name, VQ_DTM_U8, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_same_leading(ctx, codes, name, x, x_name, 3));
    const int64_t d = vq_dim(x, 3), cd = vq_dim(codes, 3);
    const bool can_pack = vq_kivi_packable_bits(bits) && (d * bits) % 8 == 0;
    if (cd == d) {
        job->packed = false;
    } else if (can_pack && cd == vq_kivi_packed_row_bytes(d, bits)) {
        job->packed = true;
    } else if (can_pack) {
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT,
                       "argument '%s': last dimension is %lld, expected D = %lld (one code per byte) or D*bits/8 = "
                       "%lld (bit-packed)",
                       name, (long long)cd, (long long)d, (long long)vq_kivi_packed_row_bytes(d, bits));
    } else {
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT,
                       "argument '%s': last dimension is %lld, expected D = %lld (bit-packed codes need bits 2, 4 "
                       "or 8 and D*bits %% 8 == 0; bits is %d)",
                       name, (long long)cd, (long long)d, bits);
    }
    job->code_row = cd;
    return VQ_OK;
}

/* Checks bits, group size and the scale/zero pair; fills the geometry of job
 * from x [B,H,S,D] (the float tensor: input or output). */
static vq_status check_common(vq_ctx *ctx, kivi_axis axis, const DLTensor *x, const char *x_name, int bits,
                              int group_size, const DLTensor *scale, const char *scale_name, const DLTensor *zero,
                              const char *zero_name, kivi_job *job)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, x, x_name, VQ_DTM_F16_F32, 4, 4));
    VQ_RETURN_IF(ctx, bits < 1 || bits > VQ_KIVI_MAX_BITS, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'bits' must be in 1..8, got %d", bits);
    VQ_RETURN_IF(ctx, group_size < 1, VQ_ERR_INVALID_ARGUMENT, "argument 'group_size' must be >= 1, got %d",
                 group_size);
    job->axis = axis;
    job->bh = vq_dim(x, 0) * vq_dim(x, 1);
    job->s = vq_dim(x, 2);
    job->d = vq_dim(x, 3);
    job->g = group_size;
    job->bits = bits;
    job->gs = axis == KIVI_KEYS ? vq_ceil_div(job->s, job->g) : job->s;
    job->gd = axis == KIVI_KEYS ? job->d : vq_ceil_div(job->d, job->g);
    const int64_t want[4] = {vq_dim(x, 0), vq_dim(x, 1), job->gs, job->gd};
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, scale, scale_name, VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, scale, scale_name, 4, want));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, zero, zero_name, VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, zero, zero_name, 4, want));
    VQ_RETURN_IF(ctx, vq_dtype_of(zero) != vq_dtype_of(scale), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s' has dtype %s but '%s' has %s; they must match", zero_name,
                 vq_dtype_name(vq_dtype_of(zero)), scale_name, vq_dtype_name(vq_dtype_of(scale)));
    job->x_dt = vq_dtype_of(x);
    job->p_dt = vq_dtype_of(scale);
    return VQ_OK;
}

/* Validates a whole call (x: the float tensor, input or output) and fills job,
 * data pointers included; writes nothing. */
static vq_status check_call(vq_ctx *ctx, kivi_axis axis, const DLTensor *x, const char *x_name,
                            const DLTensor *codes, const char *codes_name, const DLTensor *scale,
                            const char *scale_name, const DLTensor *zero, const char *zero_name, int bits,
                            int group_size, kivi_job *job)
{
    memset(job, 0, sizeof *job);
    VQ_FORWARD_IF_ERROR(check_common(ctx, axis, x, x_name, bits, group_size, scale, scale_name, zero, zero_name, job));
    VQ_FORWARD_IF_ERROR(check_codes(ctx, codes, codes_name, x, x_name, bits, job));
    job->x = vq_data(x);
    job->codes = vq_data(codes);
    job->scale = vq_data(scale);
    job->zero = vq_data(zero);
    return VQ_OK;
}

/* Rows per task of the row-wise drivers: enough work to amortise a task. */
static int64_t rows_per_task(const kivi_job *job) { return job->d >= 4096 ? 1 : 4096 / job->d; }

/* Per-thread scratch: f32 rows of D (x, mn, mx, scale, zero), the group
 * ranges of a task's rows (pm, px: rows_per_task * gd each) and a u8 row of D
 * (codes before packing). */
typedef struct { float *x, *mn, *mx, *scale, *zero, *pm, *px; uint8_t *codes; } thread_rows;

static size_t scratch_floats(const kivi_job *job) { return (size_t)(5 * job->d + 2 * rows_per_task(job) * job->gd); }

static vq_status take_scratch(vq_ctx *ctx, kivi_job *job)
{
    job->scratch_stride = (scratch_floats(job) * sizeof(float) + (size_t)job->d + 63) & ~(size_t)63;
    job->scratch = vq_ctx_scratch(ctx, job->scratch_stride * (size_t)ctx->num_threads);
    VQ_RETURN_IF(ctx, job->scratch == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of scratch",
                 job->scratch_stride * (size_t)ctx->num_threads);
    job->kern = vq_kivi_kernels_for(ctx->isa);
    job->cvt = vq_row_kernels_for(ctx->isa);
    return VQ_OK;
}

static thread_rows rows_of(const kivi_job *job, int thread)
{
    float *f = (float *)(job->scratch + job->scratch_stride * (size_t)thread);
    const int64_t d = job->d, block = rows_per_task(job) * job->gd;
    return (thread_rows){f, f + d, f + 2 * d, f + 3 * d, f + 4 * d, f + 5 * d, f + 5 * d + block,
                         (uint8_t *)(f + scratch_floats(job))};
}

/* Token row t of slice bh of the float tensor, as f32 (a pointer into the
 * tensor when it is f32, else converted into buf). */
static const float *load_row(const kivi_job *job, int64_t bh, int64_t t, float *buf)
{
    const int64_t off = (bh * job->s + t) * job->d;
    if (job->x_dt == VQ_DT_F32) return (const float *)job->x + off;
    job->cvt->to_f32((const uint16_t *)job->x + off, job->x_dt, job->d, buf);
    return buf;
}

/* Stores codes [D] of row t of slice bh, packing them when the layout says so. */
static void store_codes(const kivi_job *job, int64_t bh, int64_t t, const uint8_t *codes)
{
    uint8_t *dst = job->codes + (bh * job->s + t) * job->code_row;
    if (job->packed) vq_kivi_pack_row(codes, job->d, job->bits, dst);
    else if (dst != codes) memcpy(dst, codes, (size_t)job->d);
}

/* Turns the [mn, mx] ranges of parameter rows [prow, prow + n_rows) ([gd]
 * groups each, contiguous in the tensors) into scale and zero, stores them in
 * the parameter dtype and returns them as stored (f16-rounded when the
 * tensors are f16), so that the codes are computed against what decoding
 * reads. scale/zero may alias mn/mx. */
static void store_params(const kivi_job *job, int64_t prow, int64_t n_rows, const float *mn, const float *mx,
                         float *scale, float *zero)
{
    const float maxq = (float)((1 << job->bits) - 1);
    const int64_t n = n_rows * job->gd;
    for (int64_t j = 0; j < n; j++) {
        const float lo = mn[j], hi = mx[j];
        scale[j] = hi > lo ? (hi - lo) / maxq : 0.0f;
        zero[j] = lo;
    }
    const size_t at = (size_t)(prow * job->gd) * vq_dtype_size(job->p_dt);
    job->cvt->from_f32(scale, n, job->p_dt, (char *)job->scale + at);
    job->cvt->from_f32(zero, n, job->p_dt, (char *)job->zero + at);
    if (job->p_dt != VQ_DT_F32) {
        job->cvt->to_f32((const char *)job->scale + at, job->p_dt, n, scale);
        job->cvt->to_f32((const char *)job->zero + at, job->p_dt, n, zero);
    }
}

/* Per-group scale/zero [ceil(d/g)] -> per-channel rows [d] (values). */
static void spread_groups(const float *gs, const float *gz, int64_t d, int64_t g, float *scale, float *zero)
{
    for (int64_t c0 = 0, j = 0; c0 < d; c0 += g, j++)
        for (int64_t c = c0; c < c0 + g && c < d; c++) {
            scale[c] = gs[j];
            zero[c] = gz[j];
        }
}

/* ---- quantize ---- */

/* One task = one group of g tokens of one slice: per-channel min/max over the
 * group, then one code row per token. */
static void quantize_keys_task(void *arg, int64_t task, int thread)
{
    const kivi_job *job = arg;
    const thread_rows r = rows_of(job, thread);
    const int64_t bh = task / job->gs, gi = task % job->gs, d = job->d;
    const int64_t t0 = gi * job->g, t1 = t0 + job->g < job->s ? t0 + job->g : job->s;
    const float *x = load_row(job, bh, t0, r.x);
    memcpy(r.mn, x, (size_t)d * sizeof(float));
    memcpy(r.mx, x, (size_t)d * sizeof(float));
    for (int64_t t = t0 + 1; t < t1; t++) job->kern->minmax_update(load_row(job, bh, t, r.x), d, r.mn, r.mx);
    store_params(job, bh * job->gs + gi, 1, r.mn, r.mx, r.scale, r.zero);
    const float maxq = (float)((1 << job->bits) - 1);
    for (int64_t t = t0; t < t1; t++) {
        uint8_t *dst = job->packed ? r.codes : job->codes + (bh * job->s + t) * job->code_row;
        job->kern->encode_row(load_row(job, bh, t, r.x), r.scale, r.zero, d, maxq, dst);
        store_codes(job, bh, t, dst);
    }
}

/* One task = a run of token rows: per-group min/max along each row, the
 * parameters of the whole run stored at once (they are contiguous), then
 * each row's codes against its parameters spread per channel. */
static void quantize_values_task(void *arg, int64_t task, int thread)
{
    const kivi_job *job = arg;
    const thread_rows r = rows_of(job, thread);
    const int64_t d = job->d, g = job->g, gd = job->gd, rpt = rows_per_task(job);
    const int64_t r0 = task * rpt, r1 = r0 + rpt < job->bh * job->s ? r0 + rpt : job->bh * job->s;
    const float maxq = (float)((1 << job->bits) - 1);
    for (int64_t row = r0; row < r1; row++) {
        const float *x = load_row(job, row / job->s, row % job->s, r.x);
        for (int64_t j = 0; j < gd; j++) {
            const int64_t c0 = j * g, c1 = c0 + g < d ? c0 + g : d;
            float mn = x[c0], mx = x[c0];
            for (int64_t c = c0 + 1; c < c1; c++) {
                mn = x[c] < mn ? x[c] : mn;
                mx = x[c] > mx ? x[c] : mx;
            }
            r.pm[(row - r0) * gd + j] = mn;
            r.px[(row - r0) * gd + j] = mx;
        }
    }
    /* pm / px become the stored scale / zero of rows [r0, r1) */
    store_params(job, r0, r1 - r0, r.pm, r.px, r.pm, r.px);
    for (int64_t row = r0; row < r1; row++) {
        const float *x = load_row(job, row / job->s, row % job->s, r.x);
        const float *ps = r.pm + (row - r0) * gd, *pz = r.px + (row - r0) * gd;
        spread_groups(ps, pz, d, g, r.scale, r.zero);
        uint8_t *dst = job->packed ? r.codes : job->codes + row * job->code_row;
        job->kern->encode_row(x, r.scale, r.zero, d, maxq, dst);
        store_codes(job, row / job->s, row % job->s, dst);
    }
}

static vq_status quantize(vq_ctx *ctx, kivi_axis axis, const DLTensor *x, const char *x_name, int bits,
                          int group_size, DLTensor *codes_out, DLTensor *scale_out, DLTensor *zero_out)
{
    kivi_job job;
    VQ_FORWARD_IF_ERROR(check_call(ctx, axis, x, x_name, codes_out, "codes_out", scale_out, "scale_out", zero_out,
                                   "zero_out", bits, group_size, &job));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx))
        return axis == KIVI_KEYS
                   ? vq_cuda_kivi_quantize_keys(ctx, x, bits, group_size, codes_out, scale_out, zero_out)
                   : vq_cuda_kivi_quantize_values(ctx, x, bits, group_size, codes_out, scale_out, zero_out);
#endif
    VQ_FORWARD_IF_ERROR(take_scratch(ctx, &job));
    if (axis == KIVI_KEYS)
        vq_parallel_for(ctx, job.bh * job.gs, quantize_keys_task, &job);
    else
        vq_parallel_for(ctx, vq_ceil_div(job.bh * job.s, rows_per_task(&job)), quantize_values_task, &job);
    return VQ_OK;
}

vq_status vq_kivi_quantize_keys(vq_ctx *ctx, const DLTensor *k, int bits, int group_size, DLTensor *codes_out,
                                  DLTensor *scale_out, DLTensor *zero_out)
{
    VQ_ENTER(ctx);
    return quantize(ctx, KIVI_KEYS, k, "k", bits, group_size, codes_out, scale_out, zero_out);
}

vq_status vq_kivi_quantize_values(vq_ctx *ctx, const DLTensor *v, int bits, int group_size, DLTensor *codes_out,
                                    DLTensor *scale_out, DLTensor *zero_out)
{
    VQ_ENTER(ctx);
    return quantize(ctx, KIVI_VALUES, v, "v", bits, group_size, codes_out, scale_out, zero_out);
}

/* ---- dequantize ---- */

/* Scale/zero row `prow` of the parameter tensors ([gd] elements) as f32. */
static void load_param_row(const kivi_job *job, int64_t prow, float *scale, float *zero)
{
    const size_t es = vq_dtype_size(job->p_dt);
    job->cvt->to_f32((const char *)job->scale + (size_t)(prow * job->gd) * es, job->p_dt, job->gd, scale);
    job->cvt->to_f32((const char *)job->zero + (size_t)(prow * job->gd) * es, job->p_dt, job->gd, zero);
}

/* One task = a run of token rows: codes unpacked when packed, parameters
 * loaded once per key group (keys) or spread per channel (values), one
 * decoded row. */
static void dequantize_task(void *arg, int64_t task, int thread)
{
    const kivi_job *job = arg;
    const thread_rows r = rows_of(job, thread);
    const int64_t d = job->d, g = job->g, n = job->bh * job->s, rpt = rows_per_task(job);
    int64_t loaded = -1;   /* key parameter row held in r.scale / r.zero */
    for (int64_t row = task * rpt; row < n && row < (task + 1) * rpt; row++) {
        const int64_t bh = row / job->s, t = row % job->s;
        const uint8_t *src = job->codes + row * job->code_row;
        if (job->packed) {
            vq_kivi_unpack_row(src, d, job->bits, r.codes);
            src = r.codes;
        }
        if (job->axis == KIVI_KEYS) {
            const int64_t prow = bh * job->gs + t / g;
            if (prow != loaded) load_param_row(job, prow, r.scale, r.zero);
            loaded = prow;
        } else {
            load_param_row(job, row, r.mn, r.mx);
            spread_groups(r.mn, r.mx, d, g, r.scale, r.zero);
        }
        float *dst = job->x_dt == VQ_DT_F32 ? (float *)job->x + row * d : r.x;
        job->kern->decode_row(src, r.scale, r.zero, d, dst);
        if (dst == r.x) job->cvt->from_f32(r.x, d, job->x_dt, (uint16_t *)job->x + row * d);
    }
}

static vq_status dequantize(vq_ctx *ctx, kivi_axis axis, const DLTensor *codes, const DLTensor *scale,
                            const DLTensor *zero, int bits, int group_size, DLTensor *out)
{
    kivi_job job;
    VQ_FORWARD_IF_ERROR(
        check_call(ctx, axis, out, "out", codes, "codes", scale, "scale", zero, "zero", bits, group_size, &job));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx))
        return axis == KIVI_KEYS ? vq_cuda_kivi_dequantize_keys(ctx, codes, scale, zero, bits, group_size, out)
                                   : vq_cuda_kivi_dequantize_values(ctx, codes, scale, zero, bits, group_size, out);
#endif
    VQ_FORWARD_IF_ERROR(take_scratch(ctx, &job));
    vq_parallel_for(ctx, vq_ceil_div(job.bh * job.s, rows_per_task(&job)), dequantize_task, &job);
    return VQ_OK;
}

vq_status vq_kivi_dequantize_keys(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale, const DLTensor *zero,
                                    int bits, int group_size, DLTensor *out)
{
    VQ_ENTER(ctx);
    return dequantize(ctx, KIVI_KEYS, codes, scale, zero, bits, group_size, out);
}

vq_status vq_kivi_dequantize_values(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                      const DLTensor *zero, int bits, int group_size, DLTensor *out)
{
    VQ_ENTER(ctx);
    return dequantize(ctx, KIVI_VALUES, codes, scale, zero, bits, group_size, out);
}
