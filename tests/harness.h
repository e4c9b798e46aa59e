/* harness.h — the test harness: owned tensors, seeded random fills, float64
 * comparisons, error-path checks and a pass/fail tally.
 *
 * A test file defines test functions and a main() that calls VT_RUN(fn) for
 * each, then returns vt_finish(). Exit status 0 = all passed, 1 = a failure,
 * 77 = skipped (ctest's SKIP_RETURN_CODE). Every ISA path is covered by
 * vt_for_each_isa(), which creates one ctx per instruction set this CPU runs. */
#ifndef VQ_TEST_HARNESS_H
#define VQ_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "veloxquant.h"

extern int vt_failures;
extern int vt_checks;
extern const char *vt_current;

#define VT_CHECK(cond, ...)                                                            \
    do {                                                                               \
        vt_checks++;                                                                   \
        if (!(cond)) {                                                                 \
            vt_failures++;                                                             \
            fprintf(stderr, "FAIL %s (%s:%d): %s: ", vt_current, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

/* Checks a call returns VQ_OK; prints the ctx message otherwise. */
#define VT_OK(ctx, call)                                                               \
    do {                                                                               \
        vq_status vt_s_ = (call);                                                      \
        VT_CHECK(vt_s_ == VQ_OK, "%s -> %s: %s", #call, vq_status_string(vt_s_),       \
                 vq_ctx_last_error(ctx));                                              \
    } while (0)

/* Checks a call fails with `status` and a message containing `needle`. */
#define VT_FAILS(ctx, status, needle, call)                                            \
    do {                                                                               \
        vq_status vt_s_ = (call);                                                      \
        VT_CHECK(vt_s_ == (status), "%s -> %s, expected %s (message: %s)", #call,      \
                 vq_status_string(vt_s_), vq_status_string(status), vq_ctx_last_error(ctx)); \
        VT_CHECK(strstr(vq_ctx_last_error(ctx), (needle)) != NULL,                     \
                 "%s: message \"%s\" lacks \"%s\"", #call, vq_ctx_last_error(ctx), (needle)); \
    } while (0)

#define VT_RUN(fn)                             \
    do {                                       \
        vt_current = #fn;                      \
        int vt_before_ = vt_failures;          \
        fn();                                  \
        printf("%-48s %s\n", #fn, vt_failures == vt_before_ ? "ok" : "FAILED"); \
        fflush(stdout);                        \
    } while (0)

int vt_finish(void);

/* ---- dtypes ---- */
extern const DLDataType VT_F32, VT_F16, VT_BF16, VT_U8, VT_U16, VT_I32, VT_U32;

/* ---- owned CPU tensors ----
 * vt_new allocates a compact tensor and fills it with a poison pattern (0xA5
 * bytes: NaN-ish for floats, large for ints) so unwritten outputs show up.
 * The shape macro: vt_new(VT_F32, VT_DIMS(2, 3, 4)). */
/* Plain values v (a DLTensor *) as the vq_encoded_values vq_fused_sdpa takes. */
#define VT_F16_VALUES(v) (&(vq_encoded_values){.format = VQ_VALUES_F16, .f16 = {(v)}})

#define VT_DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}
DLTensor *vt_new(DLDataType dt, int ndim, const int64_t *shape);
DLTensor *vt_like(const DLTensor *t, DLDataType dt);   /* same shape, other dtype */
void vt_free(DLTensor *t);
DLTensor *vt_view(DLTensor *t, int ndim, const int64_t *shape); /* a second header on the same data (free with vt_free_view) */
void vt_free_view(DLTensor *t);

int64_t vt_numel(const DLTensor *t);
size_t vt_bytes(const DLTensor *t);
double vt_get(const DLTensor *t, int64_t i);          /* any dtype, as double */
void vt_set(DLTensor *t, int64_t i, double v);        /* rounds to the dtype */
void vt_poison(DLTensor *t);

/* Seeded fills. */
void vt_fill_normal(DLTensor *t, vq_rng *rng, double mean, double sigma);
void vt_fill_uniform_int(DLTensor *t, vq_rng *rng, int64_t lo, int64_t hi_inclusive);
void vt_fill_signs(DLTensor *t, vq_rng *rng);         /* ±1 floats */
/* Realistic keys: N(0,1) with a few outlier channels scaled by `outlier`. */
void vt_fill_keys(DLTensor *t, vq_rng *rng, int n_outlier_channels, double outlier);

/* ---- comparisons ---- */
/* ||out - ref||_2 / ||ref||_2 over all elements (ref as float64 array). */
double vt_rel_l2(const DLTensor *out, const double *ref);
/* Max |out - ref| over all elements. */
double vt_max_abs(const DLTensor *out, const double *ref);
/* Tolerance of docs/FORMATS.md §1 for an output dtype: 1e-5 for f32, 2e-3 for f16/bf16. */
double vt_tol(const DLTensor *out);
/* Number of elements whose bytes still hold the poison pattern. */
int64_t vt_count_poisoned(const DLTensor *t);
/* True when the bytes of `t` equal `snapshot` (for "writes nothing" checks). */
void *vt_snapshot(const DLTensor *t);
int vt_unchanged(const DLTensor *t, const void *snapshot);

/* ---- contexts ---- */
vq_ctx *vt_ctx(int threads);                     /* CPU ctx, best ISA */
/* Calls fn(ctx, isa_name) once per ISA this machine can run (scalar, avx2,
 * avx512 / neon), each with a fresh ctx of `threads` threads. */
void vt_for_each_isa(int threads, void (*fn)(vq_ctx *ctx, const char *isa));

/* The skeleton's middle steps of one block on s [R][lds] (n scores a row):
 * poison, softmax, rescale of o [R][D], with the kernels k (the separate
 * sequence the fused block kernels are checked against). */
struct vq_attn_kernels;
void vt_softmax_step(const struct vq_attn_kernels *k, int R, int n, float *s, int64_t lds, bool *bad, float *m,
                     float *d, float *alpha, float *o, int D);

/* The state of R rows before a fused block kernel check, the same in both
 * copies (index 0 and 1; o0 / o1 [R][D]): a first block (m = -inf, d = 0)
 * for it % 7 < 2, else a later one; row 0 poisoned already for it % 11 == 0. */
void vt_init_block_state(vq_rng *rng, int it, int R, int D, bool (*bad)[4], float (*m)[4], float (*d)[4], float *o0,
                         float *o1);

/* The state of R rows after a fused block kernel (index 0) against the
 * separate kernels' sequence (index 1), bit for bit: the poison flags, m,
 * d and o [R][D] (what: the kernel's name in the messages, it / nb the
 * iteration and blocks of the run). */
void vt_check_block_state(const char *isa, const char *what, int it, int R, int nb, int D, bool (*bad)[4],
                          float (*m)[4], float (*d)[4], const float *o0, const float *o1);

/* Same float, NaN or not: bit for bit, any NaN matching any NaN. */
static inline bool vt_same_float(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0; }

#endif
