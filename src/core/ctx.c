/* ctx.c — context lifetime, backend availability, scratch memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

/* The hooks of a device backend, NULL for the CPU or a backend not built. */
static const vq_backend_ops *backend_ops(vq_backend backend)
{
#ifdef VQ_WITH_CUDA
    if (backend == VQ_BACKEND_CUDA) return vq_cuda_backend_ops();
#endif
    (void)backend;
    return NULL;
}

bool vq_backend_available(vq_backend backend)
{
    switch (backend) {
    case VQ_BACKEND_CPU: return true;
    case VQ_BACKEND_CUDA: {
        const vq_backend_ops *ops = backend_ops(backend);
        return ops != NULL && ops->available();
    }
    }
    return false;
}

static int online_cores(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 1024 ? 1024 : (int)n);
}

/* There is no ctx to hold a message yet: failures are described in the
 * calling thread's last error (vq_last_error). */
vq_status vq_ctx_create(const vq_ctx_config *cfg, vq_ctx **out)
{
    static const char fn[] = "vq_ctx_create";
    if (out == NULL) return vq_fail_thread(VQ_ERR_INVALID_ARGUMENT, fn, "out is NULL");
    *out = NULL;
    vq_ctx_config c = {0};
    if (cfg != NULL) c = *cfg;
    if (c.backend == 0) c.backend = VQ_BACKEND_CPU;
    if (c.backend != VQ_BACKEND_CPU && c.backend != VQ_BACKEND_CUDA)
        return vq_fail_thread(VQ_ERR_INVALID_ARGUMENT, fn, "cfg->backend is %d, expected VQ_BACKEND_CPU (1) or "
                              "VQ_BACKEND_CUDA (2)", (int)c.backend);
    if (c.num_threads < 0 || c.num_threads > 1024)
        return vq_fail_thread(VQ_ERR_INVALID_ARGUMENT, fn, "cfg->num_threads is %d, expected 0 (all cores) to 1024",
                              c.num_threads);
    if (c.device < 0)
        return vq_fail_thread(VQ_ERR_INVALID_ARGUMENT, fn, "cfg->device is %d, expected >= 0", c.device);
    if (!vq_backend_available(c.backend)) {
#ifdef VQ_WITH_CUDA
        return vq_fail_thread(VQ_ERR_BACKEND_UNAVAILABLE, fn, "cuda:%d: no CUDA device is visible (driver missing, "
                              "no GPU, or CUDA_VISIBLE_DEVICES hides them)", c.device);
#else
        return vq_fail_thread(VQ_ERR_BACKEND_UNAVAILABLE, fn, "cuda:%d: this library was built without the CUDA "
                              "backend (build with -DVQ_CUDA=ON or make CUDA=1)", c.device);
#endif
    }

    vq_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) return vq_fail_thread(VQ_ERR_OUT_OF_MEMORY, fn, "out of memory for the context");
    ctx->backend = c.backend;
    ctx->device = c.device;
    ctx->stream = c.stream;
    ctx->isa = vq_cpu_select_isa();
    ctx->num_threads = c.num_threads ? c.num_threads : online_cores();
    ctx->pool = vq_threadpool_create(ctx->num_threads);
    if (ctx->pool == NULL) {
        free(ctx);
        return vq_fail_thread(VQ_ERR_OUT_OF_MEMORY, fn, "could not start %d worker threads", c.num_threads);
    }
    ctx->num_threads = vq_threadpool_size(ctx->pool);
    ctx->ops = backend_ops(ctx->backend);
    if (ctx->ops) {
        /* ctx_init describes the device runtime's failures on ctx (and so in
         * the thread's last error); the rest is described here. */
        ctx->fn = fn;
        const vq_status s = ctx->ops->ctx_init(ctx);
        if (s != VQ_OK) {
            if (ctx->last_error[0] == '\0')
                vq_fail_thread(s, fn, "cuda:%d: could not be initialised (%s)", c.device, vq_status_string(s));
            vq_ctx_free(ctx);
            return s;
        }
    }
    *out = ctx;
    return VQ_OK;
}

void vq_ctx_free(vq_ctx *ctx)
{
    if (ctx == NULL) return;
    if (ctx->ops != NULL && ctx->cuda != NULL) ctx->ops->ctx_release(ctx);
    vq_threadpool_free(ctx->pool);
    if (!ctx->scratch_external) free(ctx->scratch);
    free(ctx);
}

vq_backend vq_ctx_backend(const vq_ctx *ctx) { return ctx ? ctx->backend : VQ_BACKEND_CPU; }
const char *vq_ctx_isa(const vq_ctx *ctx) { return ctx ? vq_isa_name(ctx->isa) : "unknown"; }
int vq_ctx_num_threads(const vq_ctx *ctx) { return ctx ? ctx->num_threads : 0; }

vq_status vq_ctx_parallel_for(vq_ctx *ctx, int64_t n_tasks, vq_parallel_fn fn, void *arg)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, fn == NULL, VQ_ERR_INVALID_ARGUMENT, "fn must not be NULL");
    VQ_RETURN_IF(ctx, n_tasks < 0, VQ_ERR_INVALID_ARGUMENT, "n_tasks must be >= 0, got %lld", (long long)n_tasks);
    VQ_RETURN_IF(ctx, vq_threadpool_in_task(), VQ_ERR_INVALID_ARGUMENT,
                 "called from inside a task (a task must not start another parallel loop)");
    vq_parallel_for(ctx, n_tasks, fn, arg);
    return VQ_OK;
}

vq_status vq_ctx_synchronize(vq_ctx *ctx)
{
    VQ_ENTER(ctx);
    if (ctx->ops) return ctx->ops->synchronize(ctx);
    return VQ_OK;
}

void *vq_ctx_scratch(vq_ctx *ctx, size_t bytes)
{
    if (bytes > ctx->scratch_peak) ctx->scratch_peak = bytes;
    if (bytes <= ctx->scratch_size) return ctx->scratch;
    if (ctx->scratch_external) return NULL;
    const size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded);
    if (p == NULL) return NULL;
    free(ctx->scratch);
    ctx->scratch = p;
    ctx->scratch_size = rounded;
    return p;
}

const char *vq_ctx_scratch_why(const vq_ctx *ctx)
{
    return ctx->scratch_external ? "the workspace given to vq_ctx_set_workspace is too small (vq_ctx_workspace_peak "
                                   "tells what the calls so far needed)"
                                 : "the allocation failed";
}

vq_status vq_ctx_set_workspace(vq_ctx *ctx, void *mem, size_t bytes)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, mem == NULL && bytes != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'mem' is NULL but 'bytes' is %zu (NULL, 0 returns to the ctx's own scratch)", bytes);
    VQ_RETURN_IF(ctx, ((uintptr_t)mem % 64) != 0, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'mem' must be 64-byte aligned, got an address %% 64 = %u", (unsigned)((uintptr_t)mem % 64));
    if (!ctx->scratch_external) free(ctx->scratch);
    ctx->scratch = mem;
    ctx->scratch_size = mem ? bytes : 0;
    ctx->scratch_external = mem != NULL;
    return VQ_OK;
}

size_t vq_ctx_workspace_peak(const vq_ctx *ctx) { return ctx ? ctx->scratch_peak : 0; }
