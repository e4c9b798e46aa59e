/* tool.c — helpers shared by the vq commands (see tool.h). */
#include "tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"

const DLDataType TOOL_F32 = {kDLFloat, 32, 1}, TOOL_F16 = {kDLFloat, 16, 1}, TOOL_U8 = {kDLUInt, 8, 1},
                 TOOL_U16 = {kDLUInt, 16, 1}, TOOL_U32 = {kDLUInt, 32, 1}, TOOL_I32 = {kDLInt, 32, 1};

enum { TOOL_MAX_DIMS = 6 };

/* The tensor header, its shape and (separately) its data; freed together. */
typedef struct tool_tensor_block {
    DLTensor t;
    int64_t shape[TOOL_MAX_DIMS];
} tool_tensor_block;

void *tool_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) {
        fprintf(stderr, "vq: out of memory (%zu x %zu bytes)\n", n, size);
        exit(VQ_EXIT_FAILURE);
    }
    return p;
}

DLTensor *tool_tensor(DLDataType dtype, int ndim, const int64_t *shape)
{
    if (ndim < 1 || ndim > TOOL_MAX_DIMS) {
        fprintf(stderr, "vq: internal error: tensor rank %d\n", ndim);
        exit(VQ_EXIT_FAILURE);
    }
    tool_tensor_block *b = tool_calloc(1, sizeof *b);
    memcpy(b->shape, shape, (size_t)ndim * sizeof *shape);
    b->t.device = (DLDevice){kDLCPU, 0};
    b->t.ndim = ndim;
    b->t.dtype = dtype;
    b->t.shape = b->shape;
    b->t.data = tool_calloc((size_t)tool_numel(&b->t), (size_t)dtype.bits / 8);
    return &b->t;
}

void tool_tensor_free(DLTensor *t)
{
    if (t == NULL) return;
    free(t->data);
    free((tool_tensor_block *)t);  /* t is the first member of its block */
}

int64_t tool_numel(const DLTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t tool_bytes(const DLTensor *t) { return (size_t)tool_numel(t) * t->dtype.bits / 8; }

void tool_check(vq_ctx *ctx, vq_status status, const char *what)
{
    if (status == VQ_OK) return;
    fprintf(stderr, "vq: %s failed: %s: %s\n", what, vq_status_string(status), vq_ctx_last_error(ctx));
    exit(VQ_EXIT_FAILURE);
}

vq_ctx *tool_ctx(int threads, const char *isa)
{
    const char *old = getenv("VQ_ISA");
    char *saved = old ? strdup(old) : NULL;
    if (isa != NULL) setenv("VQ_ISA", isa, 1);
    const vq_ctx_config cfg = {.backend = VQ_BACKEND_CPU, .num_threads = threads};
    vq_ctx *ctx = NULL;
    const vq_status s = vq_ctx_create(&cfg, &ctx);
    if (saved != NULL) {
        setenv("VQ_ISA", saved, 1);
        free(saved);
    } else if (isa != NULL) {
        unsetenv("VQ_ISA");
    }
    if (s != VQ_OK) {
        fprintf(stderr, "vq: %s (%s)\n", vq_last_error(), vq_status_string(s));
        exit(VQ_EXIT_FAILURE);
    }
    return ctx;
}

void tool_fill_normal(DLTensor *x, vq_rng *rng)
{
    float *p = tool_f32(x);
    const int64_t n = tool_numel(x);
    for (int64_t i = 0; i < n; i++) p[i] = (float)vq_rng_normal(rng);
}

double tool_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
