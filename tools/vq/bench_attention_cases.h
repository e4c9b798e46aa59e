/* bench_attention_cases.h — the cases `vq bench attention` times: each one
 * call of the public API over synthetic caches of one shape. */
#ifndef VQ_BENCH_ATTENTION_CASES_H
#define VQ_BENCH_ATTENTION_CASES_H

#include "bench_attention.h"

#define VQB_MAX_CASES 8

typedef struct vqb_shape {
    int64_t B, Hq, Hkv, Sq, Skv, D;
} vqb_shape;

typedef struct vqb_data vqb_data;

typedef struct vqb_case {
    const char *name;   /* cache format, e.g. "kivi-2b" */
    const char *kind;   /* "fused", "dequant+sdpa", "sdpa", "prefill" */
    size_t bytes;       /* bytes of cache the format stores (and a fused kernel reads) */
    vq_status (*run)(struct vqb_case *c, vq_ctx *ctx);
    vqb_data *data;     /* shared by all cases of one shape */
} vqb_case;

/* Decode (Sq = 1): f16 and f32 SDPA, KIVI 2-bit fused and dequantize-then-SDPA,
 * RaBitQ 1-bit/4-bit fused and dequantize-then-SDPA. False on out-of-memory. */
bool vqb_make_decode_cases(const vqb_shape *sh, int threads, vqb_case *cases, int *n);
/* Prefill (Sq = Skv): f32 blocked SDPA, then RaBitQ prefill. */
bool vqb_make_prefill_cases(const vqb_shape *sh, vqb_case *cases, int *n);
void vqb_free_cases(vqb_case *cases, int n);

#endif
