/* status.c — status names, the per-ctx last-error message, the version. */
#include <stdio.h>
#include <string.h>

#include "core.h"

#define VQ_STR2(x) #x
#define VQ_STR(x) VQ_STR2(x)

const char *vq_version_string(void)
{
    return VQ_STR(VQ_VERSION_MAJOR) "." VQ_STR(VQ_VERSION_MINOR) "." VQ_STR(VQ_VERSION_PATCH);
}

const char *vq_status_string(vq_status status)
{
    switch (status) {
    case VQ_OK: return "VQ_OK";
    case VQ_ERR_INVALID_ARGUMENT: return "VQ_ERR_INVALID_ARGUMENT";
    case VQ_ERR_UNSUPPORTED: return "VQ_ERR_UNSUPPORTED";
    case VQ_ERR_BACKEND_UNAVAILABLE: return "VQ_ERR_BACKEND_UNAVAILABLE";
    case VQ_ERR_OUT_OF_MEMORY: return "VQ_ERR_OUT_OF_MEMORY";
    case VQ_ERR_DEVICE: return "VQ_ERR_DEVICE";
    case VQ_ERR_IO: return "VQ_ERR_IO";
    case VQ_ERR_CORRUPT_DATA: return "VQ_ERR_CORRUPT_DATA";
    }
    return "VQ_ERR_UNKNOWN";
}

vq_status vq_enter(vq_ctx *ctx, const char *fn)
{
    if (ctx == NULL) return VQ_ERR_INVALID_ARGUMENT;
    ctx->fn = fn;
    ctx->last_error[0] = '\0';
    return VQ_OK;
}

vq_status vq_fail(vq_ctx *ctx, vq_status status, const char *fmt, ...)
{
    if (ctx == NULL) return status;
    const char *fn = ctx->fn ? ctx->fn : "veloxquant";
    int n = snprintf(ctx->last_error, sizeof ctx->last_error, "%s: ", fn);
    if (n < 0 || (size_t)n >= sizeof ctx->last_error) return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->last_error + n, sizeof ctx->last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

const char *vq_ctx_last_error(const vq_ctx *ctx)
{
    if (ctx == NULL) return "vq_ctx_last_error: ctx is NULL";
    return ctx->last_error;
}
