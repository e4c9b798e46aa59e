/* tensor.c — DLTensor validation shared by every public entry point, so that
 * every message names the argument and the expected vs actual value. */
#include <stdio.h>
#include <string.h>

#include "core.h"

vq_dtype vq_dtype_of(const DLTensor *t)
{
    const DLDataType d = t->dtype;
    if (d.lanes != 1) return VQ_DT_INVALID;
    switch (d.code) {
    case kDLFloat:
        if (d.bits == 32) return VQ_DT_F32;
        if (d.bits == 16) return VQ_DT_F16;
        return VQ_DT_INVALID;
    case kDLBfloat: return d.bits == 16 ? VQ_DT_BF16 : VQ_DT_INVALID;
    case kDLUInt:
        if (d.bits == 8) return VQ_DT_U8;
        if (d.bits == 16) return VQ_DT_U16;
        if (d.bits == 32) return VQ_DT_U32;
        return VQ_DT_INVALID;
    case kDLInt: return d.bits == 32 ? VQ_DT_I32 : VQ_DT_INVALID;
    default: return VQ_DT_INVALID;
    }
}

const char *vq_dtype_name(vq_dtype dt)
{
    static const char *const names[VQ_DT_COUNT] = {"invalid", "f32", "f16", "bf16", "u8", "u16", "i32", "u32"};
    return (dt >= 0 && dt < VQ_DT_COUNT) ? names[dt] : "invalid";
}

size_t vq_dtype_size(vq_dtype dt)
{
    static const size_t sizes[VQ_DT_COUNT] = {0, 4, 2, 2, 1, 2, 4, 4};
    return (dt >= 0 && dt < VQ_DT_COUNT) ? sizes[dt] : 0;
}

/* Any DLPack dtype, spelled as vq_dtype_name spells ours: f32, u8, bf16,
 * i64, f16x2 (lanes), bool8. */
static void describe_dtype(const DLDataType d, char *buf, size_t cap)
{
    static const char *const codes[] = {"i", "u", "f", "opaque", "bf", "c", "bool"};
    const char *code = d.code < sizeof codes / sizeof codes[0] ? codes[d.code] : "code?";
    if (d.lanes == 1) snprintf(buf, cap, "%s%u", code, (unsigned)d.bits);
    else snprintf(buf, cap, "%s%ux%u", code, (unsigned)d.bits, (unsigned)d.lanes);
}

const char *vq_device_name(int type, int id, char *buf, size_t cap)
{
    if (type == kDLCPU) snprintf(buf, cap, "cpu");
    else if (type == kDLCUDA) snprintf(buf, cap, "cuda:%d", id);
    else if (type == kDLCUDAHost) snprintf(buf, cap, "cuda_host:%d", id);
    else if (type == kDLCUDAManaged) snprintf(buf, cap, "cuda_managed:%d", id);
    else snprintf(buf, cap, "device type %d:%d", type, id);
    return buf;
}

static void describe_mask(unsigned mask, char *buf, size_t cap)
{
    buf[0] = '\0';
    size_t used = 0;
    for (int dt = 1; dt < VQ_DT_COUNT; dt++) {
        if (!(mask & VQ_DTM(dt))) continue;
        int n = snprintf(buf + used, cap - used, "%s%s", used ? "/" : "", vq_dtype_name((vq_dtype)dt));
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
    }
}

const char *vq_shape_str(const DLTensor *t, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    int n = snprintf(buf, cap, "[");
    if (n > 0) used = (size_t)n;
    for (int i = 0; i < t->ndim && used < cap; i++) {
        n = snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

int64_t vq_numel(const DLTensor *t) { return vq_prod(t, 0, t->ndim); }

int64_t vq_prod(const DLTensor *t, int begin, int end)
{
    int64_t n = 1;
    for (int i = begin; i < end; i++) n *= t->shape[i];
    return n;
}

/* Strides of a strided ("view") tensor: the last axis contiguous, the others
 * any non-negative value; the farthest element must stay addressable. */
static vq_status check_view_strides(vq_ctx *ctx, const DLTensor *t, const char *name)
{
    const int last = t->ndim - 1;
    VQ_RETURN_IF(ctx, t->shape[last] != 1 && t->strides[last] != 1, VQ_ERR_UNSUPPORTED,
                 "argument '%s': the last axis has stride %lld, expected 1 (the innermost axis must be contiguous)",
                 name, (long long)t->strides[last]);
    int64_t span = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 1) continue;
        VQ_RETURN_IF(ctx, t->strides[i] < 0, VQ_ERR_UNSUPPORTED,
                     "argument '%s': axis %d has stride %lld; negative strides are not supported", name, i,
                     (long long)t->strides[i]);
        VQ_RETURN_IF(ctx, t->strides[i] > 0 && (t->shape[i] - 1) > (INT64_MAX / 8 - span) / t->strides[i],
                     VQ_ERR_INVALID_ARGUMENT, "argument '%s': its strides address more than 2^60 elements", name);
        span += (t->shape[i] - 1) * t->strides[i];
    }
    return VQ_OK;
}

/* Compact row-major strides (NULL strides are compact). */
static vq_status check_compact_strides(vq_ctx *ctx, const DLTensor *t, const char *name)
{
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) {
            return vq_fail(ctx, VQ_ERR_UNSUPPORTED,
                           "argument '%s': axis %d has stride %lld, expected %lld (only compact row-major "
                           "tensors are supported here)",
                           name, i, (long long)t->strides[i], (long long)expect);
        }
        expect *= t->shape[i];
    }
    return VQ_OK;
}

bool vq_tensor_is_compact(const DLTensor *t)
{
    if (t->strides == NULL) return true;
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

int64_t vq_stride(const DLTensor *t, int axis)
{
    if (t->shape[axis] == 1) return 0;
    if (t->strides != NULL) return t->strides[axis];
    int64_t s = 1;
    for (int i = t->ndim - 1; i > axis; i--) s *= t->shape[i];
    return s;
}

vq_status vq_check_no_overlap(vq_ctx *ctx, const DLTensor *t, const char *name)
{
    if (t->strides == NULL) return VQ_OK;
    /* Sort the axes of size > 1 by stride; each must step past everything the
     * smaller ones span (the usual non-overlap condition, exact for strides
     * that nest, conservative otherwise). */
    int axes[8], n = 0;
    for (int i = 0; i < t->ndim && n < 8; i++)
        if (t->shape[i] > 1) axes[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t->strides[axes[j]] < t->strides[axes[j - 1]]; j--) {
            const int tmp = axes[j];
            axes[j] = axes[j - 1];
            axes[j - 1] = tmp;
        }
    int64_t span = 1;
    for (int i = 0; i < n; i++) {
        const int a = axes[i];
        VQ_RETURN_IF(ctx, t->strides[a] < span, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s': axis %d has stride %lld, so its elements overlap (an output needs stride >= "
                     "%lld there)",
                     name, a, (long long)t->strides[a], (long long)span);
        span = t->strides[a] * t->shape[a];
    }
    return VQ_OK;
}

static vq_status check_tensor(vq_ctx *ctx, const DLTensor *t, const char *name, unsigned dtype_mask, int min_ndim,
                              int max_ndim, bool view)
{
    VQ_RETURN_IF(ctx, t == NULL, VQ_ERR_INVALID_ARGUMENT, "argument '%s' is NULL", name);
    if (t->ndim < min_ndim || t->ndim > max_ndim || t->ndim < 1) {
        if (min_ndim == max_ndim)
            return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument '%s': expected rank %d, got rank %d", name,
                           min_ndim, t->ndim);
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument '%s': expected rank %d..%d, got rank %d", name,
                       min_ndim, max_ndim, t->ndim);
    }
    VQ_RETURN_IF(ctx, t->shape == NULL, VQ_ERR_INVALID_ARGUMENT, "argument '%s': shape pointer is NULL", name);
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        const int64_t d = t->shape[i];
        if (d < 1) {
            char s[160];
            return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT,
                           "argument '%s' has shape %s: dimension %d is %lld, expected >= 1 (empty tensors are "
                           "not accepted)",
                           name, vq_shape_str(t, s, sizeof s), i, (long long)d);
        }
        VQ_RETURN_IF(ctx, n > INT64_MAX / 4 / d, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s': element count overflows", name);
        n *= d;
    }
    const vq_dtype dt = vq_dtype_of(t);
    if (dt == VQ_DT_INVALID || !(dtype_mask & VQ_DTM(dt))) {
        char want[64], got[32];
        describe_mask(dtype_mask, want, sizeof want);
        describe_dtype(t->dtype, got, sizeof got);
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument '%s': expected dtype %s, got %s", name, want, got);
    }
    const int want_device = ctx->backend == VQ_BACKEND_CUDA ? kDLCUDA : kDLCPU;
    if ((int)t->device.device_type != want_device ||
        (want_device == kDLCUDA && t->device.device_id != ctx->device)) {
        char got[48], want[48];
        vq_device_name((int)t->device.device_type, (int)t->device.device_id, got, sizeof got);
        vq_device_name(want_device, want_device == kDLCUDA ? ctx->device : 0, want, sizeof want);
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument '%s': lives on %s, expected the context's device %s",
                       name, got, want);
    }
    if (t->strides != NULL)
        VQ_FORWARD_IF_ERROR(view ? check_view_strides(ctx, t, name) : check_compact_strides(ctx, t, name));
    VQ_RETURN_IF(ctx, t->data == NULL, VQ_ERR_INVALID_ARGUMENT, "argument '%s': data pointer is NULL", name);
    /* Kernels load elements through typed pointers: a misaligned one is
     * undefined behaviour (and faults on some CPUs), so it is refused. */
    const size_t elem = vq_dtype_size(dt);
    VQ_RETURN_IF(ctx, ((uintptr_t)t->data + t->byte_offset) % elem != 0, VQ_ERR_UNSUPPORTED,
                 "argument '%s': data + byte_offset (%llu) is not aligned to its %zu-byte elements", name,
                 (unsigned long long)t->byte_offset, elem);
    return VQ_OK;
}

vq_status vq_check_tensor(vq_ctx *ctx, const DLTensor *t, const char *name, unsigned dtype_mask, int min_ndim,
                          int max_ndim)
{
    return check_tensor(ctx, t, name, dtype_mask, min_ndim, max_ndim, false);
}

vq_status vq_check_tensor_view(vq_ctx *ctx, const DLTensor *t, const char *name, unsigned dtype_mask, int min_ndim,
                               int max_ndim)
{
    return check_tensor(ctx, t, name, dtype_mask, min_ndim, max_ndim, true);
}

vq_status vq_check_shape(vq_ctx *ctx, const DLTensor *t, const char *name, int ndim, const int64_t *expected)
{
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = expected[i] < 0 || t->shape[i] == expected[i];
    if (ok) return VQ_OK;
    char want[200], got[160];
    size_t used = 0;
    want[0] = '\0';
    for (int i = 0; i < ndim && used < sizeof want; i++) {
        int n = expected[i] < 0 ? snprintf(want + used, sizeof want - used, "%s*", i ? ", " : "")
                                : snprintf(want + used, sizeof want - used, "%s%lld", i ? ", " : "",
                                           (long long)expected[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
    return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument '%s': expected shape [%s], got %s", name, want,
                   vq_shape_str(t, got, sizeof got));
}

vq_status vq_check_dim(vq_ctx *ctx, const DLTensor *t, const char *name, int axis, int64_t expected,
                       const char *what)
{
    const int a = axis < 0 ? t->ndim + axis : axis;
    if (a >= 0 && a < t->ndim && t->shape[a] == expected) return VQ_OK;
    char got[160];
    return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument '%s' has shape %s: axis %d must be %s = %lld", name,
                   vq_shape_str(t, got, sizeof got), a, what ? what : "", (long long)expected);
}

vq_status vq_check_same_leading(vq_ctx *ctx, const DLTensor *a, const char *a_name, const DLTensor *b,
                                const char *b_name, int n)
{
    bool ok = a->ndim >= n && b->ndim >= n;
    for (int i = 0; ok && i < n; i++) ok = a->shape[i] == b->shape[i];
    if (ok) return VQ_OK;
    char sa[160], sb[160];
    return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT,
                   "arguments '%s' %s and '%s' %s disagree: their first %d dimensions must be equal", a_name,
                   vq_shape_str(a, sa, sizeof sa), b_name, vq_shape_str(b, sb, sizeof sb), n);
}
