/* core.h — what every part of the library shares: the context, error
 * reporting, dtype and tensor helpers, the thread pool and the ISA choice.
 * Internal: nothing here is public API. */
#ifndef VQ_CORE_H
#define VQ_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"
#include "backend.h"

/* ---- dtypes ---- */

typedef enum vq_dtype {
    VQ_DT_INVALID = 0,
    VQ_DT_F32,
    VQ_DT_F16,
    VQ_DT_BF16,
    VQ_DT_U8,
    VQ_DT_U16,
    VQ_DT_I32,
    VQ_DT_U32,
    VQ_DT_COUNT
} vq_dtype;

/* Bit masks of accepted dtypes, for vq_check_tensor. */
#define VQ_DTM(dt) (1u << (dt))
#define VQ_DTM_F32 VQ_DTM(VQ_DT_F32)
#define VQ_DTM_F16 VQ_DTM(VQ_DT_F16)
#define VQ_DTM_BF16 VQ_DTM(VQ_DT_BF16)
#define VQ_DTM_U8 VQ_DTM(VQ_DT_U8)
#define VQ_DTM_U16 VQ_DTM(VQ_DT_U16)
#define VQ_DTM_I32 VQ_DTM(VQ_DT_I32)
#define VQ_DTM_U32 VQ_DTM(VQ_DT_U32)
#define VQ_DTM_F16_F32 (VQ_DTM_F16 | VQ_DTM_F32)
#define VQ_DTM_FLOAT (VQ_DTM_F16 | VQ_DTM_F32 | VQ_DTM_BF16)

vq_dtype vq_dtype_of(const DLTensor *t);   /* VQ_DT_INVALID for anything else */
const char *vq_dtype_name(vq_dtype dt);    /* "f32", "u8", ... */
/* A DLPack device as messages spell it: "cpu", "cuda:0" (else "device type
 * 7:0"); writes and returns buf. */
const char *vq_device_name(int type, int id, char *buf, size_t cap);
size_t vq_dtype_size(vq_dtype dt);

/* ---- CPU instruction sets ---- */

typedef enum vq_isa {
    VQ_ISA_SCALAR = 0,
    VQ_ISA_AVX2,    /* AVX2 + FMA + F16C */
    VQ_ISA_AVX512,  /* AVX-512 F/BW/VL/DQ + VPOPCNTDQ */
    VQ_ISA_AMX,     /* AVX-512 with VNNI + VBMI, and AMX-TILE + AMX-INT8 tiles the OS grants */
    VQ_ISA_NEON,
    VQ_ISA_COUNT
} vq_isa;

vq_isa vq_cpu_best_isa(void);           /* what this CPU (and build) can run */
vq_isa vq_cpu_select_isa(void);         /* best, capped by the VQ_ISA environment variable */
const char *vq_isa_name(vq_isa isa);
/* AVX512_VNNI (vpdpbusd) on this CPU, built with AVX-512 and the OS saving
 * zmm state: an extension within VQ_ISA_AVX512 whose kernels are swapped in
 * where present (never on CPUs without it). */
bool vq_cpu_has_avx512_vnni(void);
/* AVX512_VBMI (vpermb / vpermt2b byte permutes), likewise. */
bool vq_cpu_has_avx512_vbmi(void);
/* The ARMv8.2 dot-product instructions (sdot / udot; Linux HWCAP_ASIMDDP) on
 * this CPU, built with NEON and a compiler that targets them: an extension
 * within VQ_ISA_NEON whose kernels (src/cpu/neon, files named *_dotprod.c)
 * are swapped in where present; ARMv8.0 CPUs run the smull versions. */
bool vq_cpu_has_neon_dotprod(void);
/* True when a kernel table for `want` may be installed on a ctx running `have`
 * (x86 ISAs are ordered scalar < avx2 < avx512 < amx; NEON stands alone). */
bool vq_isa_includes(vq_isa have, vq_isa want);

/* ---- the context ---- */

typedef struct vq_threadpool vq_threadpool;

struct vq_ctx {
    vq_backend backend;
    int device;            /* CUDA ordinal */
    void *stream;          /* cudaStream_t */
    void *cuda;            /* backend state owned by src/cuda (NULL on CPU) */
    const vq_backend_ops *ops; /* the device backend's hooks (core/backend.h); NULL on CPU */
    vq_isa isa;
    int num_threads;
    vq_threadpool *pool;
    void *scratch;         /* grown by vq_ctx_scratch, freed with the ctx (unless external) */
    size_t scratch_size;
    bool scratch_external; /* scratch is the caller's workspace (vq_ctx_set_workspace): never grown or freed */
    size_t scratch_peak;   /* the most any call asked of vq_ctx_scratch */
    const char *fn;        /* public function being run, for messages */
    char last_error[1024];
};

/* Starts a public call: remembers its name for messages and clears the last
 * error. Returns VQ_ERR_INVALID_ARGUMENT if ctx is NULL. */
vq_status vq_enter(vq_ctx *ctx, const char *fn);
#define VQ_ENTER(ctx)                                           \
    do {                                                        \
        vq_status vq_enter_status_ = vq_enter((ctx), __func__); \
        if (vq_enter_status_ != VQ_OK) return vq_enter_status_; \
    } while (0)

/* Records "fn: <message>" on the ctx and in the calling thread's last error
 * (vq_last_error) and returns `status`. ctx NULL: the thread's only. */
vq_status vq_fail(vq_ctx *ctx, vq_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Records "fn: <message>" in the calling thread's last error only (calls that
 * have no context yet: vq_ctx_create); returns `status`. */
vq_status vq_fail_thread(vq_status status, const char *fn, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#define VQ_RETURN_IF(ctx, cond, status, ...)                          \
    do {                                                              \
        if (cond) return vq_fail((ctx), (status), __VA_ARGS__);       \
    } while (0)

#define VQ_FORWARD_IF_ERROR(expr)                  \
    do {                                           \
        vq_status vq_forward_status_ = (expr);     \
        if (vq_forward_status_ != VQ_OK) return vq_forward_status_; \
    } while (0)

static inline bool vq_ctx_is_cuda(const vq_ctx *ctx) { return ctx->backend == VQ_BACKEND_CUDA; }

/* Scratch memory owned by the ctx: at least `bytes`, 64-byte aligned, kept and
 * reused across calls (grown when too small, unless it is the caller's
 * workspace). NULL on out-of-memory or a workspace too small: callers report
 * VQ_ERR_OUT_OF_MEMORY with vq_ctx_scratch_why(). Only the innermost kernel of
 * a call may use it. */
void *vq_ctx_scratch(vq_ctx *ctx, size_t bytes);
/* Why vq_ctx_scratch(ctx, bytes) gave NULL, for the message. */
const char *vq_ctx_scratch_why(const vq_ctx *ctx);

/* ---- tensors ---- */

static inline void *vq_data(const DLTensor *t) { return (char *)t->data + t->byte_offset; }
int64_t vq_numel(const DLTensor *t);
/* Size of axis `axis`; negative counts from the end (-1 = last). */
static inline int64_t vq_dim(const DLTensor *t, int axis) { return t->shape[axis < 0 ? t->ndim + axis : axis]; }
/* Product of the dims [0, end) — the "leading" count. */
int64_t vq_prod(const DLTensor *t, int begin, int end);

/* Validates a tensor argument: not NULL, 1 <= ndim in [min_ndim, max_ndim],
 * dims >= 1 with a product that fits in int64, dtype in `dtype_mask`, on the
 * ctx's device, compact row-major strides, data not NULL. `name` is the
 * argument's name as the header spells it. */
vq_status vq_check_tensor(vq_ctx *ctx, const DLTensor *t, const char *name, unsigned dtype_mask,
                          int min_ndim, int max_ndim);
/* As vq_check_tensor, but strides on every axis but the last are free
 * (non-negative; the last axis contiguous): the attention entry points'
 * tensors, which may be views of capacity buffers or framework slices. Read
 * them through vq_stride(). */
vq_status vq_check_tensor_view(vq_ctx *ctx, const DLTensor *t, const char *name, unsigned dtype_mask,
                               int min_ndim, int max_ndim);
/* An output view: no two elements may share memory. */
vq_status vq_check_no_overlap(vq_ctx *ctx, const DLTensor *t, const char *name);
/* Stride of `axis` in elements (compact when t->strides is NULL; 0 for an
 * axis of size 1, so that a size-1 axis broadcasts). */
int64_t vq_stride(const DLTensor *t, int axis);
/* True when t's strides are NULL or compact row-major. */
bool vq_tensor_is_compact(const DLTensor *t);
/* Exact rank and shape; expected[i] < 0 matches any size. */
vq_status vq_check_shape(vq_ctx *ctx, const DLTensor *t, const char *name, int ndim, const int64_t *expected);
/* One axis (negative from the end) must equal `expected`. `what` names the
 * expected quantity in the message, e.g. "D/8". */
vq_status vq_check_dim(vq_ctx *ctx, const DLTensor *t, const char *name, int axis, int64_t expected,
                       const char *what);
/* Two tensors must have identical shapes over axes [0, n). */
vq_status vq_check_same_leading(vq_ctx *ctx, const DLTensor *a, const char *a_name, const DLTensor *b,
                                const char *b_name, int n);
/* Formats a shape as "[2, 4, 128]" into buf (returns buf). */
const char *vq_shape_str(const DLTensor *t, char *buf, size_t cap);

/* ---- element access (host memory) ---- */

float vq_half_to_float(uint16_t h);
uint16_t vq_float_to_half(float f);
float vq_bf16_to_float(uint16_t h);
uint16_t vq_float_to_bf16(float f);

static inline float vq_load_f(const void *base, vq_dtype dt, int64_t i)
{
    switch (dt) {
    case VQ_DT_F32: return ((const float *)base)[i];
    case VQ_DT_F16: return vq_half_to_float(((const uint16_t *)base)[i]);
    case VQ_DT_BF16: return vq_bf16_to_float(((const uint16_t *)base)[i]);
    default: return 0.0f;
    }
}

static inline void vq_store_f(void *base, vq_dtype dt, int64_t i, float v)
{
    switch (dt) {
    case VQ_DT_F32: ((float *)base)[i] = v; break;
    case VQ_DT_F16: ((uint16_t *)base)[i] = vq_float_to_half(v); break;
    case VQ_DT_BF16: ((uint16_t *)base)[i] = vq_float_to_bf16(v); break;
    default: break;
    }
}

static inline int64_t vq_load_i(const void *base, vq_dtype dt, int64_t i)
{
    switch (dt) {
    case VQ_DT_U8: return ((const uint8_t *)base)[i];
    case VQ_DT_U16: return ((const uint16_t *)base)[i];
    case VQ_DT_I32: return ((const int32_t *)base)[i];
    case VQ_DT_U32: return ((const uint32_t *)base)[i];
    default: return 0;
    }
}

static inline void vq_store_i(void *base, vq_dtype dt, int64_t i, int64_t v)
{
    switch (dt) {
    case VQ_DT_U8: ((uint8_t *)base)[i] = (uint8_t)v; break;
    case VQ_DT_U16: ((uint16_t *)base)[i] = (uint16_t)v; break;
    case VQ_DT_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    case VQ_DT_U32: ((uint32_t *)base)[i] = (uint32_t)v; break;
    default: break;
    }
}

/* Row conversions; n elements. Portable and element-by-element: the
 * reference that the ISA tables below reproduce bit for bit. */
void vq_row_to_f32(const void *src, vq_dtype dt, int64_t n, float *dst);
void vq_row_from_f32(const float *src, int64_t n, vq_dtype dt, void *dst);

/* The same conversions per ISA (F16C on AVX2, AVX-512F), because converting
 * f16 rows one element at a time costs more than most codecs. Identical
 * results to the functions above (the hardware only quiets signalling NaNs).
 * Other dtypes go to the portable functions. */
typedef struct vq_row_kernels {
    void (*to_f32)(const void *src, vq_dtype dt, int64_t n, float *dst);   /* src [n] f32/f16/bf16 -> dst [n] */
    void (*from_f32)(const float *src, int64_t n, vq_dtype dt, void *dst); /* src [n] -> dst [n] f32/f16/bf16 */
} vq_row_kernels;

/* The table for `isa` (always complete). */
const vq_row_kernels *vq_row_kernels_for(vq_isa isa);
void vq_row_kernels_init_avx2(vq_row_kernels *k);
void vq_row_kernels_init_avx512(vq_row_kernels *k);

/* ---- threads ---- */

/* fn(arg, task, thread) for task in [0, n_tasks), spread over the ctx's pool;
 * thread is in [0, vq_ctx_num_threads(ctx)) and identifies per-thread scratch.
 * Returns when all tasks are done. Runs inline when n_tasks == 1 or the pool
 * has one thread. Not re-entrant: tasks must not call vq_parallel_for. */
typedef vq_parallel_fn vq_task_fn;
void vq_parallel_for(vq_ctx *ctx, int64_t n_tasks, vq_task_fn fn, void *arg);
/* True on a thread while it runs a task of any pool (the public
 * vq_ctx_parallel_for refuses to nest). */
bool vq_threadpool_in_task(void);

vq_threadpool *vq_threadpool_create(int num_threads);
void vq_threadpool_free(vq_threadpool *pool);
int vq_threadpool_size(const vq_threadpool *pool);

static inline bool vq_is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }
static inline int64_t vq_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif /* VQ_CORE_H */
