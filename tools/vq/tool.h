/* tool.h — helpers shared by the vq commands: host DLTensors, checked
 * library calls, seeded fills and timing. Public API only; options are
 * parsed by args.h.
 *
 * The tool is a process, not a library: on an allocation failure or a failed
 * library call these helpers print the reason and exit(VQ_EXIT_FAILURE),
 * which keeps every command free of cleanup paths. */
#ifndef VQ_TOOL_H
#define VQ_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"

extern const DLDataType TOOL_F32, TOOL_F16, TOOL_U8, TOOL_U16, TOOL_U32, TOOL_I32;

/* Shape literal: tool_tensor(TOOL_F32, TOOL_DIMS(1, 8, 1024, 128)). */
/* Plain values v (a DLTensor *) as the vq_encoded_values vq_fused_sdpa takes. */
#define VQ_TOOL_F16(v) (&(vq_encoded_values){.format = VQ_VALUES_F16, .f16 = {(v)}})

#define TOOL_DIMS(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

/* calloc that exits on failure. */
void *tool_calloc(size_t n, size_t size);

/* A compact zero-filled CPU tensor of up to 6 dims (its shape is owned). */
DLTensor *tool_tensor(DLDataType dtype, int ndim, const int64_t *shape);
void tool_tensor_free(DLTensor *t);   /* NULL is a no-op */
int64_t tool_numel(const DLTensor *t);
size_t tool_bytes(const DLTensor *t);
/* Element pointer of an f32 tensor's data. */
static inline float *tool_f32(const DLTensor *t) { return (float *)t->data; }

/* Exits with the library's message when status != VQ_OK; `what` names the call. */
void tool_check(vq_ctx *ctx, vq_status status, const char *what);
/* A CPU context with `threads` threads (0 = all) and the given ISA cap
 * (NULL = best): VQ_ISA is set around vq_ctx_create and restored after. */
vq_ctx *tool_ctx(int threads, const char *isa);

/* x [...] f32 = N(0,1) draws from rng. */
void tool_fill_normal(DLTensor *x, vq_rng *rng);

/* Monotonic wall clock, seconds. */
double tool_now(void);

#endif
