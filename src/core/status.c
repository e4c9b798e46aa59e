/* status.c — status names, the per-ctx and per-thread last-error messages,
 * the version. */
#include <stdarg.h>
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

/* The message of the last failure on this thread (vq_last_error). */
static _Thread_local char thread_error[1024];
_Static_assert(sizeof thread_error == sizeof ((vq_ctx *)0)->last_error, "one message size");

vq_status vq_enter(vq_ctx *ctx, const char *fn)
{
    if (ctx == NULL) return vq_fail_thread(VQ_ERR_INVALID_ARGUMENT, fn, "ctx is NULL");
    ctx->fn = fn;
    ctx->last_error[0] = '\0';
    return VQ_OK;
}

static void vformat(char *buf, size_t size, const char *fn, const char *fmt, va_list ap)
{
    const int n = snprintf(buf, size, "%s: ", fn ? fn : "veloxquant");
    if (n < 0 || (size_t)n >= size) return;
    vsnprintf(buf + n, size - (size_t)n, fmt, ap);
}

vq_status vq_fail(vq_ctx *ctx, vq_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat(thread_error, sizeof thread_error, ctx ? ctx->fn : NULL, fmt, ap);
    va_end(ap);
    if (ctx != NULL) memcpy(ctx->last_error, thread_error, sizeof ctx->last_error);
    return status;
}

vq_status vq_fail_thread(vq_status status, const char *fn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat(thread_error, sizeof thread_error, fn, fmt, ap);
    va_end(ap);
    return status;
}

const char *vq_ctx_last_error(const vq_ctx *ctx)
{
    if (ctx == NULL) return "vq_ctx_last_error: ctx is NULL";
    return ctx->last_error;
}

const char *vq_last_error(void) { return thread_error; }
