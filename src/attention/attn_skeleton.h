/* attn_skeleton.h — the one CPU attention skeleton, specialised per key and
 * value format. Internal.
 *
 *   out = softmax(score(q, k_hat) + mask) v_hat, softmax in f32.
 *
 * The skeleton (attn_skeleton.c) owns everything that is the same for every
 * format: the block loop over the kv axis (VQ_ATTN_BN tokens per block), the
 * online softmax state {m, d, o[]} per query row, causal limits, the additive
 * mask, the split of the kv axis over threads and the merge() of the partial
 * states, GQA (all Hq/Hkv query heads and all Sq rows of a kv head form the
 * rows of one tile, scored against each kv block once), row tiling for large
 * Sq (prefill), f32 accumulation and the output store. A format supplies two
 * small tables of functions:
 *
 *   vq_attn_key_ops    prep_q: one raw f32 query row -> the format's query
 *                      representation (scaled, rotated, sign bits, ...);
 *                      score: the scores of R prepared rows against one block
 *                      of tokens [t0, t0 + n), scale already folded in.
 *   vq_attn_value_ops  accumulate: o[r][:] += sum_j p[r][j] * v_hat[t0 + j][:].
 *
 * Both get a per-thread vq_attn_thread: the ISA kernel table (attn_kernels.h)
 * and an L1-sized f32 tile (VQ_ATTN_BN x D) in which a compressed block may be
 * decoded once and then reused by all R rows; plus `extra` floats of
 * per-thread scratch the format asked for. They must not allocate.
 *
 * HOW TO ADD A KEY FORMAT to vq_fused_sdpa (one file, e.g. attn_keys_turbo.c):
 *   1. Define a descriptor struct (data pointers, dtypes, Hkv/Skv/D, ...) and
 *      write `static void prep_q(...)` and `static void score(...)` against it.
 *      Decode a block with kern->... primitives into th->tile and score it
 *      with th->kern->qk[VQ_ATTN_F32], or score directly from the codes.
 *   2. Write the binder
 *        vq_status vq_attn_bind_keys_<fmt>(vq_ctx *ctx, const vq_encoded_keys *keys,
 *                                         const vq_attn_dims *dims, vq_attn_keys *out);
 *      that validates every tensor of the format (shapes [B,Hkv,Skv,...],
 *      dtypes, scalars) with VQ_RETURN_IF / vq_check_*, writing nothing, and
 *      fills out->ops, out->desc (point into out->storage), out->qp_floats
 *      and out->thread_floats.
 *   3. Declare the binder in attn_formats.h and add one line to the table in
 *      fused_sdpa.c. A CUDA path goes behind the dispatch point there.
 * A value format is the same with vq_attn_value_ops (attn_values_*.c).
 * Tests: tests/unit/test_attention_sdpa.c holds the float64 reference loop; add
 * the format's decode to it.
 */
#ifndef VQ_ATTN_SKELETON_H
#define VQ_ATTN_SKELETON_H

#include "attention/attn_kernels.h"
#include "core/core.h"

/* Tokens per kv block: the unit of the online softmax and of tile decoding
 * (VQ_ATTN_BN x 256 f32 = 32 KB fits L1/L2 next to the query rows). */
#define VQ_ATTN_BN 32
/* Query rows per tile: bounds per-thread scratch; large Sq is tiled. */
#define VQ_ATTN_MAX_ROWS 64

/* Where the rows of a [B, H, S, ...] or [B, H, S] tensor are: the byte
 * strides of its three leading axes (vq_check_tensor_view lets them be any
 * non-negative values; the last axis is contiguous). For a per-token tensor
 * [B, H, S] st is the element size. */
typedef struct vq_attn_view {
    const char *base;
    int64_t sb, sh, st;
} vq_attn_view;

/* The view of a validated tensor of rank >= 3 (its first three axes). */
vq_attn_view vq_attn_view_of(const DLTensor *t);

/* Address of row (b, h, t). */
static inline const void *vq_attn_at(const vq_attn_view *v, int64_t b, int64_t h, int64_t t)
{
    return v->base + b * v->sb + h * v->sh + t * v->st;
}

/* The sizes of one attention call. */
typedef struct vq_attn_dims {
    int64_t B, Hq, Hkv, Sq, Skv, D;
} vq_attn_dims;

/* What the keys prepared for one key group of a task's rows: keys whose
 * groups span several blocks (KIVI groups of 128 tokens) quantise the rows
 * once per group, not once per block. The skeleton clears it (desc NULL)
 * when a task starts, as the task's rows are new; score() reads the memo's
 * data only when vq_attn_memo_hit says it is the same group. */
typedef struct vq_attn_memo {
    const void *desc;
    const float *qp;
    int64_t b, hk, grp;
    int R;
} vq_attn_memo;

/* Floats of a memo's data: one key group's int8 query rows
 * [VQ_ATTN_MAX_ROWS][D] and a step and zero term per row. */
static inline int64_t vq_attn_memo_floats(int64_t D) { return VQ_ATTN_MAX_ROWS * D / 4 + 2 * VQ_ATTN_MAX_ROWS; }

/* What a format's functions get per thread. */
typedef struct vq_attn_thread {
    const vq_attn_kernels *kern;
    float *tile;   /* VQ_ATTN_BN * D floats, 64-byte aligned */
    float *extra;  /* max(keys, values thread_floats), 64-byte aligned; score() and
                      accumulate() run in turn, so each may clobber it */
    vq_attn_memo *memo;  /* the keys' alone: the values never touch it */
    float *memo_data;    /* vq_attn_memo_floats(D), 64-byte aligned */
} vq_attn_thread;

/* True when th's memo holds group grp of (desc, blk's b and hk) for the
 * rows qp [R]; else it records that group (the caller then fills
 * memo_data) and returns false. */
static inline bool vq_attn_memo_hit(const vq_attn_thread *th, const void *desc, int64_t b, int64_t hk, int64_t grp,
                                    const float *qp, int R)
{
    vq_attn_memo *m = th->memo;
    if (m->desc == desc && m->qp == qp && m->R == R && m->b == b && m->hk == hk && m->grp == grp) return true;
    *m = (vq_attn_memo){desc, qp, b, hk, grp, R};
    return false;
}

/* One block of tokens [t0, t0 + n) of kv head hk in batch b. */
typedef struct vq_attn_block {
    int64_t b, hk, t0;
    int n;  /* 1..VQ_ATTN_BN */
} vq_attn_block;

struct vq_attn_keys;
struct vq_attn_values;

typedef struct vq_attn_key_ops {
    /* q [D] raw f32 query row with global index row = (b*Hq + h)*Sq + i ->
     * qp [qp_floats]: whatever score() wants per row. */
    void (*prep_q)(const void *desc, const float *q, int64_t row, float *qp);
    /* qp [R][qp_floats] -> s [R][VQ_ATTN_BN]: s[r][j] = score of row r against
     * token t0 + j, j < n, including the softmax scale and additive terms. */
    void (*score)(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s);
    /* NULL, or the switch to the format's integer scores (vq_key_scores):
     * asked = INT8 requested (any layout its kernels take), else AUTO (only
     * where the format measured it faster with the kernels of kern). May
     * change the bound keys' ops, qp_floats and thread_floats; returns
     * false, changing nothing, where it does not apply. Called by
     * vq_attn_choose_arith (attn_arith.c) before the keys are used. */
    bool (*use_int8)(struct vq_attn_keys *keys, const vq_attn_kernels *kern, bool asked);
    /* NULL, or the keys' part of the fused block of mixed-width keys and
     * TurboQuant values (attn_kernels.h, kivi_turbo_block): b's kcodes, xq
     * and dz for the whole block blk, its R rows qp prepared against the
     * block's key group; false, filling nothing, where these keys do not
     * take that kernel (layout, widths, float scores, a block across key
     * groups). */
    bool (*kivi_turbo_keys)(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                           int R, vq_attn_kivi_turbo_block *b);
} vq_attn_key_ops;

typedef struct vq_attn_keys vq_attn_keys;

typedef struct vq_attn_value_ops {
    /* p [R][VQ_ATTN_BN], o [R][D]: o[r][c] += sum_{j<n} p[r][j] * B(v_hat[t0+j])[c]
     * for a linear map B of the format (the identity for most). */
    void (*accumulate)(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                       int R, float *o);
    /* NULL, or o [D] <- B^-1(o) once per row before the output is written:
     * values stored in a rotated basis are accumulated there and rotated back
     * once (attention is linear in the values). */
    void (*finish)(const void *desc, float *o);
    /* NULL, or the whole step of `count` consecutive blocks at once, blk the
     * first, each whole (VQ_ATTN_BN tokens) with no mask and no row's causal
     * limit inside it: per block the keys' score, the non-finite rule and
     * softmax step on m / d / bad (as the skeleton runs them), the rescale
     * of o and accumulate, in one kernel call where the format pair and the
     * ISA have one (a run per call: the per-block glue once per run).
     * Returns how many of the blocks it ran, from blk on (1..count), or 0,
     * having done nothing, where it does not apply (these keys, R, the
     * ISA): the skeleton then runs the steps of the block itself. */
    int64_t (*block)(const void *desc, const vq_attn_keys *keys, const vq_attn_thread *th, const vq_attn_block *blk,
                     int64_t count, const float *qp, int R, float *o, float *m, float *d, bool *bad);
    /* NULL, or the switch to the format's integer p.V (vq_value_accum), as
     * the keys' use_int8. */
    bool (*use_int8)(struct vq_attn_values *values, const vq_attn_kernels *kern, bool asked);
} vq_attn_value_ops;

/* Storage big enough for any format's descriptor, so binders need no malloc. */
typedef struct vq_attn_desc_storage {
    _Alignas(64) unsigned char bytes[2048];
} vq_attn_desc_storage;

/* A bound key format: what a binder fills. */
struct vq_attn_keys {
    const vq_attn_key_ops *ops;
    const void *desc;
    int64_t qp_floats;      /* floats per prepared query row */
    int64_t thread_floats;  /* per-thread scratch for score() */
    vq_attn_desc_storage storage;
};

typedef struct vq_attn_values {
    const vq_attn_value_ops *ops;
    const void *desc;
    int64_t thread_floats;  /* per-thread scratch for accumulate() */
    vq_attn_desc_storage storage;
} vq_attn_values;

/* A run of tokens of one batch row with its own bound keys and values (a
 * run of pages of a cache, a residual window). Segment tokens are addressed
 * as batch row `b`, tokens [0, n) of its own bindings; n may exceed their
 * Skv where batch row b + 1's rows follow row b's in every tensor (the
 * cache's head-major pools: a run of consecutive pages). Bindings of one `kind` must
 * prepare queries alike (same format and parameters: only data differ), so
 * a row is prepared once per kind: kinds[kind] holds the bindings used for
 * that (and for sizing per-thread scratch). */
typedef struct vq_attn_segment {
    const vq_attn_keys *keys;
    const vq_attn_values *values;
    int64_t b, n;
    int kind;
} vq_attn_segment;

/* At most this many kinds of segments in one problem. */
#define VQ_ATTN_MAX_KINDS 4

typedef struct vq_attn_kind {
    const vq_attn_keys *keys;
    const vq_attn_values *values;
} vq_attn_kind;

/* One attention call, validated. */
typedef struct vq_attn_problem {
    vq_attn_dims dims;
    vq_attn_view q;  /* [B,Hq,Sq,D] */
    vq_dtype q_dt;
    const vq_attn_keys *keys;
    const vq_attn_values *values;
    /* additive mask: element (b, h, i, t) at mask + b*mask_sb + h*mask_sh +
     * i*mask_si + t (elements), or NULL; strides 0 broadcast */
    const void *mask;
    vq_dtype mask_dt;
    int64_t mask_sb, mask_sh, mask_si;
    bool causal;       /* query i sees tokens <= Skv - Sq + i */
    /* Sliding window, or 0: a row whose first invisible token is lim
     * (Skv, or its causal limit) sees only tokens [lim - window, lim), and
     * tokens [0, window_keep) of its row whatever the window (attention
     * sinks). Tokens outside are never read by the values. */
    int64_t window, window_keep;
    int num_splits;    /* kv splits per (b, kv head, row tile); 0 = automatic */
    vq_attn_view out;  /* [B,Hq,Sq,D] */
    vq_dtype out_dt;
    vq_attn_view lse;  /* [B,Hq,Sq] f32 log-sum-exp per row, or base NULL */
    /* Segmented kv axis (the cache), or segs NULL: then keys/values cover
     * tokens [0, Skv) of every batch row. With segs, batch row b's kv axis is
     * segs[seg_off[b] .. seg_off[b+1]) in order, skv[b] tokens in all (sum of
     * their n; dims.Skv is the largest), keys/values are ignored, kinds[k]
     * prepare queries for segments of kind k, and mask must be NULL. Every
     * kind's values must share one `finish` (or none). */
    const vq_attn_segment *segs;
    const int64_t *seg_off;  /* [B + 1] */
    const int64_t *skv;      /* [B] */
    vq_attn_kind kinds[VQ_ATTN_MAX_KINDS];
    int n_kinds;
} vq_attn_problem;

/* Runs a validated problem on the CPU. The only failure is
 * VQ_ERR_OUT_OF_MEMORY (scratch), reported before any output is written. */
vq_status vq_attn_run(vq_ctx *ctx, const vq_attn_problem *p);

/* Online softmax state of one row: running max m, running sum d and the
 * unnormalised accumulator o[D] (FlashInfer's state_t). */
typedef struct vq_attn_state {
    float m, d;
    float *o;
} vq_attn_state;

/* a <- merge(a, b): the state of the union of both token sets; m = NaN marks
 * a poisoned state (a non-finite query or score, attn_skeleton.c), and
 * poisons the union. */
void vq_attn_state_merge(vq_attn_state *a, const vq_attn_state *b, int64_t D);

/* An environment switch is on: set, not empty and not "0" (for benchmarks
 * and tests of the fused block kernels: VQ_ATTN_UNFUSED, read by the value
 * formats when they bind, keeps the separate kernels; VQ_ATTN_ONE_BLOCK,
 * read by vq_attn_run once per call, passes the block hook runs of one
 * block). */
bool vq_attn_env_on(const char *name);

/* Each format file checks its descriptor fits:
 * _Static_assert(sizeof(my_desc) <= sizeof(vq_attn_desc_storage), "...");  */

#endif /* VQ_ATTN_SKELETON_H */
