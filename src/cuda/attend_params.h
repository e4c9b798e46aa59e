/* attend_params.h — launch parameters of the CUDA decode-attention kernels,
 * read by both the C host glue and nvcc. Plain data: device pointers already
 * offset (byte_offset applied), shapes as ints, flags as ints. */
#ifndef VQ_CUDA_ATTEND_PARAMS_H
#define VQ_CUDA_ATTEND_PARAMS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows per CTA: one CTA serves up to this many query rows (GQA group x Sq)
 * of one kv head, so the cache of a kv head is read once per row chunk. */
#define VQ_CU_ROWS_MAX 8

/* Sequences one paged launch serves (the KV cache launches per group of
 * this many; the per-sequence counts travel in the kernel parameters). */
#define VQ_CU_PAGED_MAX_B 16

/* Paged kv axis (the KV cache, src/cache/cache_cuda.c): token t of batch row
 * b is row t % P of page pages[slot[b] * ld + t / P] of a pool laid out per
 * stream as [pages][Hkv][P][...] (cache_internal.h), so its flattened token
 * index is (page * Hkv + hkv) * P + t % P; batch row b holds n_tok[b] <= Skv
 * tokens. P is a multiple of 32, so a 32-token tile never leaves its page.
 * pages == NULL: not paged, token t of (b, hkv) is (b * Hkv + hkv) * Skv + t. */
typedef struct vq_cu_paging {
    const int32_t *pages;  /* device, [slots][ld] page ids within the pool's one chunk */
    int ld, P;
    int slot[VQ_CU_PAGED_MAX_B];
    int n_tok[VQ_CU_PAGED_MAX_B];
} vq_cu_paging;

/* A lower bound on the tokens each query row sees (the KV cache's sliding
 * windows): with `on`, query row sq (its position among the call's Sq) of
 * batch row b sees token t of its kv axis only when t >= lo[b] + sq * step
 * (lo may be negative: no bound below the axis start); a call with a bound
 * has B <= VQ_CU_PAGED_MAX_B. Zeroed: no bound. */
typedef struct vq_cu_bound {
    int on, step;
    int lo[VQ_CU_PAGED_MAX_B];
} vq_cu_bound;

/* The Skv of a paged launch of B rows: the longest row, at least 1 so that
 * the split plan has a split (a row of 0 tokens reads nothing). */
static inline int64_t vq_cu_paging_skv(const vq_cu_paging *pg, int64_t B)
{
    int64_t skv = 1;
    for (int64_t b = 0; b < B; b++) skv = pg->n_tok[b] > skv ? pg->n_tok[b] : skv;
    return skv;
}

/* What every split-KV decode kernel shares. Query row `row` of kv head hkv is
 * (query head hkv*G + row / Sq, query position row % Sq), G = Hq / Hkv. */
typedef struct vq_cu_attend_common {
    int B, Hq, Hkv, Sq, Skv, D;
    int rows;          /* G * Sq query rows per kv head */
    int row_chunks;    /* ceil(rows / VQ_CU_ROWS_MAX) */
    int nsplit;        /* splits of the kv axis */
    int split_len;     /* tokens per split, a multiple of 32 */
    int causal;        /* row with position sq sees kv <= Skv - Sq + sq */
    int staged;        /* fast kernels: stage tiles in shared memory with cp.async */
    const void *q;     /* [B,Hq,Sq,D] */
    int q_f16;         /* 1: f16, 0: f32 */
    float *part_m;     /* [B*Hq*Sq, nsplit] running max (log2 domain) */
    float *part_l;     /* [B*Hq*Sq, nsplit] running sum of exp2 */
    float *part_acc;   /* [B*Hq*Sq, nsplit, D] unnormalised output */
    int rot_back;      /* merge: rotate each output row back (TurboQuant values) */
    const float *rot_diag; /* [D] or NULL: the rotation's diagonal */
    vq_cu_paging pg;       /* pg.pages NULL: contiguous [B,Hkv,Skv,...] */
    vq_cu_bound bound;     /* the sliding window's lower bound, or zeroed */
} vq_cu_attend_common;

/* A window of f16 keys and values per batch row that the merge kernel
 * attends itself and folds into the row's split states (the KV cache's
 * residual window, so a paged decode step is one attention launch and one
 * merge): row b's keys at kv[b] + (hkv * cap + t) * D, its values at
 * kv[b] + ((Hkv + hkv) * cap + t) * D, t < n[b] (the cache's res layout
 * [2][Hkv][cap][D]). Decode only (Sq == 1: no causal limit inside it).
 * Row b sees tokens [lo[b], n[b]) of its window only (a sliding window that
 * reaches into it; 0: all). */
typedef struct vq_cu_window {
    const void *kv[VQ_CU_PAGED_MAX_B];  /* device, f16 */
    int n[VQ_CU_PAGED_MAX_B];
    int lo[VQ_CU_PAGED_MAX_B];
    int cap;
    float qmul;                         /* softmax scale * log2(e) */
} vq_cu_window;

/* KIVI group-affine cache (codes bit-packed along D with `bits` 2/4/8; the
 * one-code-per-byte layout is bits 8). */
typedef struct vq_cu_kivi_params {
    vq_cu_attend_common c;
    float qmul;                     /* logit scale * log2(e), folded into q */
    int bits;                       /* 2, 4 or 8 */
    int group;                      /* g */
    const uint8_t *k_codes;         /* [B,Hkv,Skv,D*bits/8] */
    const void *k_scale, *k_zero;   /* [B,Hkv,ceil(Skv/g),D] */
    const uint8_t *v_codes;
    const void *v_scale, *v_zero;   /* [B,Hkv,Skv,ceil(D/g)] */
    int scale_f16;                  /* k and v scale/zero dtype: 1 f16, 0 f32 */
    int v_scale_f16;
} vq_cu_kivi_params;

/* RaBitQ: 1-bit keys, codebook values. */
typedef struct vq_cu_rabitq_params {
    vq_cu_attend_common c;
    int exact;                      /* 1: exact score, 0: Hamming */
    const float *q_scale;           /* [B,Hq,Sq] */
    const uint8_t *k_bits;          /* [B,Hkv,Skv,D/8] */
    const float *k_mag;             /* [B,Hkv,Skv] */
    const float *k_const;           /* [B,Hkv,Skv] or NULL */
    const uint8_t *v_idx;           /* [B,Hkv,Skv,D/2] packed or [..,D] */
    int v_packed;
    const float *v_cents;           /* [n_cents] */
    int n_cents;
    const float *v_scale;           /* [B,Hkv,Skv] or NULL */
} vq_cu_rabitq_params;

/* Launchers (defined in the .cu files). Each returns a cudaError_t as int.
 * With occupancy != NULL they launch nothing and store how many CTAs of the
 * kernel instance p selects fit on one SM (p->c needs D and rows only). */
int vq_cu_launch_kivi_decode_b2(const vq_cu_kivi_params *p, void *stream, int *occupancy);
int vq_cu_launch_kivi_decode_b4(const vq_cu_kivi_params *p, void *stream, int *occupancy);
int vq_cu_launch_kivi_decode_b8(const vq_cu_kivi_params *p, void *stream, int *occupancy);
int vq_cu_launch_rabitq_decode(const vq_cu_rabitq_params *p, void *stream, int *occupancy);
/* The fast kernels (attend_fast*.cuh): D must be 64, 128 or 256; the affine
 * one also needs group % 32 == 0 and one dtype for the key and value scales. */
int vq_cu_launch_kivi_fast_b2(const vq_cu_kivi_params *p, void *stream, int *occupancy);
int vq_cu_launch_kivi_fast_b4(const vq_cu_kivi_params *p, void *stream, int *occupancy);
int vq_cu_launch_kivi_fast_b8(const vq_cu_kivi_params *p, void *stream, int *occupancy);
int vq_cu_launch_rabitq_fast(const vq_cu_rabitq_params *p, void *stream, int *occupancy);
/* Merges the splits of every row into out [B*Hq*Sq, D] (f16 when out_f16)
 * and, when lse != NULL, each row's natural-log log-sum-exp into lse
 * [B*Hq*Sq] (-inf for a row that saw no token). */
int vq_cu_launch_merge(const vq_cu_attend_common *c, void *out, int out_f16, float *lse, void *stream);
/* The same, folding in the window w (NULL: none) of each row's kv head. */
int vq_cu_launch_merge_window(const vq_cu_attend_common *c, const vq_cu_window *w, void *out, int out_f16, float *lse,
                              void *stream);

/* Rows (b, h, s) of a [B,H,S,...] tensor at base + b*sb + h*sh + s*ss
 * (byte strides; the last axis contiguous). */
typedef struct vq_cu_view {
    const char *base;
    int64_t sb, sh, ss;
} vq_cu_view;

/* vq_attention_merge: out_a/out_b/out [B,H,S,D] f16/f32 and their
 * log-sum-exps [B,H,S] f32 (lse_out.base NULL: not written). */
typedef struct vq_cu_pair_merge {
    vq_cu_view a, b, out, lse_a, lse_b, lse_out;
    int a_f16, b_f16, out_f16;
    int B, H, S, D;
} vq_cu_pair_merge;
int vq_cu_launch_pair_merge(const vq_cu_pair_merge *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif
