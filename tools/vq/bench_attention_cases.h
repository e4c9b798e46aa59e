/* bench_attention_cases.h — the cases `vq bench attention` times: each one
 * call of the public API over synthetic caches of one shape. */
#ifndef VQ_BENCH_ATTENTION_CASES_H
#define VQ_BENCH_ATTENTION_CASES_H

#include "bench_attention.h"

#define VQB_MAX_CASES 48

typedef struct vqb_shape {
    int64_t B, Hq, Hkv, Sq, Skv, D;
} vqb_shape;

/* The tensors of one shape, shared by its cases; every tensor is listed in
 * all[] and freed with the data. */
typedef struct vqb_data {
    vqb_shape sh;
    int threads;
    vqb_tensor q, out, q_scale, scale1;
    vqb_tensor k16, v16, k32, v32;        /* plain caches; k32/v32 also the dequant targets */
    vqb_tensor kc, ks, kz, vc, vs, vz;    /* KIVI 2-bit packed, f16 scales, g = 32 */
    vqb_tensor kbits, kmag, vnib, cents;  /* RaBitQ 1-bit keys, 4-bit packed values */
    struct vqb_formats *formats;          /* vq_fused_sdpa key formats (bench_attention_formats.c) */
    vq_ctx *old_ctx;                      /* the "fused-old" cases' ctx (capped at AVX2), made on first use */
    vq_ctx *avx512_ctx;                   /* the "fused-avx512" case's ctx (capped at AVX-512), likewise */
    vqb_tensor *all[64];
    int n_all;
} vqb_data;

/* Allocates x, fills it with pseudo-random data and lists it in d->all. */
bool vqb_data_add(vqb_data *d, vqb_tensor *x, DLDataType dt, int ndim, const int64_t *shape);
/* Sets every element of a f32/f16 tensor to v. */
void vqb_set_floats(vqb_tensor *x, float v);
/* Tokens [lo, hi) of d's RaBitQ keys to f32 ±mag in d->k32 (vqb_parallel body). */
void vqb_decode_signs(void *arg, int64_t lo, int64_t hi);
/* vq_fused_sdpa over plain keys k and values v of d, scale 1/sqrt(D). */
vq_status vqb_sdpa(vqb_data *d, const DLTensor *k, const DLTensor *v, vq_ctx *ctx);

typedef struct vqb_case {
    const char *name;   /* cache format, e.g. "kivi-2b" */
    const char *kind;   /* "fused", "dequant+sdpa", "sdpa", "prefill" */
    size_t bytes;       /* bytes of cache the format stores (and a fused kernel reads) */
    vq_status (*run)(struct vqb_case *c, vq_ctx *ctx);
    vqb_data *data;     /* shared by all cases of one shape */
    void *arg;          /* the case's own state, if any */
} vqb_case;

/* Decode (Sq = 1): f16 and f32 SDPA, KIVI 2-bit fused (default, "fused-avx512"
 * = the vector-port kernel where the default runs the amx set, "fused-f32k"
 * = float key scores, "fused-old" = the kernels before the integer key scores: float
 * key scores on a ctx capped at AVX2, the baseline the integer paths are
 * measured against) and dequantize-then-SDPA, RaBitQ 1-bit/4-bit
 * fused, fused-old and dequantize-then-SDPA. False on out-of-memory. */
bool vqb_make_decode_cases(const vqb_shape *sh, int threads, vqb_case *cases, int *n);
/* Prefill (Sq = Skv): f32 blocked SDPA, then RaBitQ prefill. */
bool vqb_make_prefill_cases(const vqb_shape *sh, vqb_case *cases, int *n);
void vqb_free_cases(vqb_case *cases, int n);

/* Appends the vq_fused_sdpa cases of every compressed key format (values
 * f16): fused, and dequantize-then-SDPA where the library has a decoder.
 * False on out-of-memory (the data stays valid for vqb_free_cases). */
bool vqb_add_format_cases(vqb_data *d, vqb_case *cases, int *n);

#endif
