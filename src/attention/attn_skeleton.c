/* attn_skeleton.c — the CPU attention skeleton (see attn_skeleton.h): block
 * loop, online softmax, causal/mask, kv splits over threads and their merge.
 *
 * Work decomposition. The rows of one kv head are all its query heads times
 * all Sq queries: R_total = (Hq/Hkv) * Sq rows, contiguous in q and out
 * (row r of kv head hk in batch b is global row (b*Hkv + hk)*R_total + r).
 * They are cut into row tiles of at most VQ_ATTN_MAX_ROWS; a unit is
 * (b, hk, row tile), and each unit's kv axis is cut into S splits. A task is
 * (unit, split): it prepares its rows once, then streams its blocks, so every
 * decoded block is used by all rows of the tile. With S > 1 the tasks leave
 * partial states {m, d, o} that a second pass merges. */
#include <math.h>
#include <string.h>

#include "attention/attn_skeleton.h"

typedef struct plan {
    const vq_attn_problem *p;
    const vq_attn_kernels *kern;
    int64_t G, R_total, RT, n_rt, units, S;
    int64_t stride;    /* floats of per-thread scratch */
    float *threads;    /* num_threads * stride */
    float *partials;   /* units * S * RT * (D + 2), when S > 1 */
} plan;

/* Per-thread scratch regions, each 64-byte aligned. */
typedef struct thread_mem {
    float *qrow, *qp, *s, *o, *m, *d, *alpha;
    vq_attn_thread th;
} thread_mem;

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

static int64_t thread_layout(const plan *pl, float *base, thread_mem *tm)
{
    const vq_attn_problem *p = pl->p;
    const int64_t D = p->dims.D, RT = pl->RT;
    int64_t off = 0;
#define VQ_TAKE(ptr, n)                          \
    do {                                         \
        if (base) ptr = base + off;              \
        off += round16(n);                       \
    } while (0)
    float *qrow = NULL, *qp = NULL, *s = NULL, *o = NULL, *m = NULL, *d = NULL, *alpha = NULL, *tile = NULL,
          *extra = NULL;
    VQ_TAKE(qrow, D);
    VQ_TAKE(qp, RT * p->keys->qp_floats);
    VQ_TAKE(s, RT * VQ_ATTN_BN);
    VQ_TAKE(o, RT * D);
    VQ_TAKE(m, RT);
    VQ_TAKE(d, RT);
    VQ_TAKE(alpha, RT);
    VQ_TAKE(tile, VQ_ATTN_BN * D);
    VQ_TAKE(extra, p->keys->thread_floats > p->values->thread_floats ? p->keys->thread_floats
                                                                        : p->values->thread_floats);
#undef VQ_TAKE
    if (tm) *tm = (thread_mem){qrow, qp, s, o, m, d, alpha, {pl->kern, tile, extra}};
    return off;
}

/* Row rr (index within its kv head): its first invisible token (causal). */
static int64_t row_limit(const vq_attn_problem *p, int64_t rr)
{
    const int64_t Sq = p->dims.Sq, Skv = p->dims.Skv;
    if (!p->causal) return Skv;
    const int64_t lim = Skv - Sq + rr % Sq + 1;
    return lim < 0 ? 0 : (lim > Skv ? Skv : lim);
}

/* Rows [r0, r0 + R): the first token no row of the tile may see. */
static int64_t tile_limit(const vq_attn_problem *p, int64_t r0, int64_t R)
{
    const int64_t Sq = p->dims.Sq;
    if (!p->causal) return p->dims.Skv;
    /* the largest query index i among the rows; a tile that wraps past Sq - 1 has them all */
    const int64_t last = r0 % Sq + R - 1;
    return row_limit(p, last >= Sq ? Sq - 1 : last);
}

/* Adds the mask and applies the causal limit to s [R][BN] of one block. */
static void mask_block(const plan *pl, int64_t b, int64_t hk, int64_t r0, int R, int64_t t0, int n, float *s)
{
    const vq_attn_problem *p = pl->p;
    const int64_t Sq = p->dims.Sq, Skv = p->dims.Skv;
    for (int r = 0; r < R; r++) {
        float *row = s + (int64_t)r * VQ_ATTN_BN;
        const int64_t rr = r0 + r;
        if (p->mask) {
            const int64_t h = hk * pl->G + rr / Sq, i = rr % Sq;
            const int64_t base = b * p->mask_sb + h * p->mask_sh + i * Skv + t0;
            for (int j = 0; j < n; j++) row[j] += vq_load_f(p->mask, p->mask_dt, base + j);
        }
        const int64_t lim = row_limit(p, rr) - t0;
        for (int j = lim < 0 ? 0 : (int)(lim < n ? lim : n); j < n; j++) row[j] = -INFINITY;
    }
}

/* Writes o / d of one row to global output row `grow` (0 when d == 0). */
static void store_row(const vq_attn_problem *p, int64_t grow, const float *o, float d, float *tmp)
{
    const int64_t D = p->dims.D;
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    for (int64_t c = 0; c < D; c++) tmp[c] = o[c] * inv;
    vq_row_from_f32(tmp, D, p->out_dt, (char *)p->out + grow * D * (int64_t)vq_dtype_size(p->out_dt));
}

static void run_task(void *arg, int64_t task, int thread)
{
    const plan *pl = arg;
    const vq_attn_problem *p = pl->p;
    const int64_t D = p->dims.D, Hkv = p->dims.Hkv, qpf = p->keys->qp_floats;
    const int64_t u = task / pl->S, sp = task % pl->S;
    const int64_t rt = u % pl->n_rt, hk = (u / pl->n_rt) % Hkv, b = u / (pl->n_rt * Hkv);
    const int64_t r0 = rt * pl->RT;
    const int R = (int)(pl->R_total - r0 < pl->RT ? pl->R_total - r0 : pl->RT);
    const int64_t grow0 = (b * Hkv + hk) * pl->R_total + r0;
    thread_mem tm;
    thread_layout(pl, pl->threads + (int64_t)thread * pl->stride, &tm);

    const size_t qsz = vq_dtype_size(p->q_dt);
    for (int r = 0; r < R; r++) {
        vq_row_to_f32((const char *)p->q + (grow0 + r) * D * (int64_t)qsz, p->q_dt, D, tm.qrow);
        p->keys->ops->prep_q(p->keys->desc, tm.qrow, grow0 + r, tm.qp + r * qpf);
        tm.m[r] = -INFINITY;
        tm.d[r] = 0.0f;
    }
    memset(tm.o, 0, sizeof(float) * (size_t)(R * D));

    const int64_t T = tile_limit(p, r0, R);
    const int64_t nb = (T + VQ_ATTN_BN - 1) / VQ_ATTN_BN;
    const int64_t blo = sp * nb / pl->S, bhi = (sp + 1) * nb / pl->S;
    for (int64_t blk_i = blo; blk_i < bhi; blk_i++) {
        const int64_t t0 = blk_i * VQ_ATTN_BN;
        const vq_attn_block blk = {b, hk, t0, (int)(T - t0 < VQ_ATTN_BN ? T - t0 : VQ_ATTN_BN)};
        p->keys->ops->score(p->keys->desc, &tm.th, &blk, tm.qp, R, tm.s);
        mask_block(pl, b, hk, r0, R, t0, blk.n, tm.s);
        pl->kern->softmax(R, blk.n, tm.s, VQ_ATTN_BN, tm.m, tm.d, tm.alpha);
        for (int r = 0; r < R; r++) {
            if (tm.alpha[r] == 1.0f) continue;
            float *o = tm.o + r * D;
            for (int64_t c = 0; c < D; c++) o[c] *= tm.alpha[r];
        }
        p->values->ops->accumulate(p->values->desc, &tm.th, &blk, tm.s, R, tm.o);
    }

    if (pl->S == 1) {
        for (int r = 0; r < R; r++) store_row(p, grow0 + r, tm.o + r * D, tm.d[r], tm.qrow);
        return;
    }
    float *part = pl->partials + (u * pl->S + sp) * pl->RT * (D + 2);
    for (int r = 0; r < R; r++) {
        float *st = part + r * (D + 2);
        st[0] = tm.m[r];
        st[1] = tm.d[r];
        memcpy(st + 2, tm.o + r * D, sizeof(float) * (size_t)D);
    }
}

void vq_attn_state_merge(vq_attn_state *a, const vq_attn_state *b, int64_t D)
{
    if (b->m == -INFINITY) return;
    if (a->m == -INFINITY) {
        a->m = b->m;
        a->d = b->d;
        memcpy(a->o, b->o, sizeof(float) * (size_t)D);
        return;
    }
    const float m = a->m > b->m ? a->m : b->m;
    const float ea = expf(a->m - m), eb = expf(b->m - m);
    for (int64_t c = 0; c < D; c++) a->o[c] = a->o[c] * ea + b->o[c] * eb;
    a->d = a->d * ea + b->d * eb;
    a->m = m;
}

/* Merges the S partial states of every row of one unit and stores them. */
static void merge_unit(void *arg, int64_t u, int thread)
{
    const plan *pl = arg;
    const vq_attn_problem *p = pl->p;
    const int64_t D = p->dims.D, Hkv = p->dims.Hkv;
    const int64_t rt = u % pl->n_rt, hk = (u / pl->n_rt) % Hkv, b = u / (pl->n_rt * Hkv);
    const int64_t r0 = rt * pl->RT;
    const int R = (int)(pl->R_total - r0 < pl->RT ? pl->R_total - r0 : pl->RT);
    thread_mem tm;
    thread_layout(pl, pl->threads + (int64_t)thread * pl->stride, &tm);
    for (int r = 0; r < R; r++) {
        vq_attn_state acc = {-INFINITY, 0.0f, tm.o};
        for (int64_t sp = 0; sp < pl->S; sp++) {
            float *st = pl->partials + ((u * pl->S + sp) * pl->RT + r) * (D + 2);
            const vq_attn_state part = {st[0], st[1], st + 2};
            vq_attn_state_merge(&acc, &part, D);
        }
        store_row(p, (b * Hkv + hk) * pl->R_total + r0 + r, acc.o, acc.d, tm.qrow);
    }
}

/* Automatic splits: enough tasks to keep every thread busy (4 per thread
 * evens out the tail), but at least 4 blocks per split so the merge stays
 * negligible. Any request is capped at one split per block and at 64 MiB of
 * partial states (units * S * rows * (D + 2) floats): the result does not
 * depend on S beyond rounding, and a prefill with many units gains nothing
 * from splitting. */
static int64_t choose_splits(int64_t requested, int64_t units, int threads, int64_t n_blocks, int64_t state_floats)
{
    int64_t S = requested;
    if (S <= 0) {
        S = units >= 2 * (int64_t)threads ? 1 : (4 * (int64_t)threads + units - 1) / units;
        const int64_t cap = n_blocks / 4 > 1 ? n_blocks / 4 : 1;
        if (S > cap) S = cap;
    }
    const int64_t mem_cap = ((int64_t)64 << 20) / (int64_t)sizeof(float) / (units * state_floats);
    if (S > mem_cap) S = mem_cap;
    if (S > n_blocks) S = n_blocks;
    return S < 1 ? 1 : S;
}

vq_status vq_attn_run(vq_ctx *ctx, const vq_attn_problem *p)
{
    plan pl = {.p = p, .kern = vq_attn_kernels_for(ctx->isa)};
    const vq_attn_dims *dm = &p->dims;
    pl.G = dm->Hq / dm->Hkv;
    pl.R_total = pl.G * dm->Sq;
    pl.RT = pl.R_total < VQ_ATTN_MAX_ROWS ? pl.R_total : VQ_ATTN_MAX_ROWS;
    pl.n_rt = (pl.R_total + pl.RT - 1) / pl.RT;
    pl.units = dm->B * dm->Hkv * pl.n_rt;
    const int threads = vq_ctx_num_threads(ctx);
    pl.S = choose_splits(p->num_splits, pl.units, threads, (dm->Skv + VQ_ATTN_BN - 1) / VQ_ATTN_BN,
                         pl.RT * (dm->D + 2));
    pl.stride = thread_layout(&pl, NULL, NULL);
    const int64_t part_floats = pl.S > 1 ? pl.units * pl.S * pl.RT * (dm->D + 2) : 0;
    const int64_t total = pl.stride * threads + part_floats;
    VQ_RETURN_IF(ctx, total > INT64_MAX / 8, VQ_ERR_OUT_OF_MEMORY, "scratch size overflows");
    float *mem = vq_ctx_scratch(ctx, sizeof(float) * (size_t)total);
    VQ_RETURN_IF(ctx, mem == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %lld bytes of attention scratch",
                 (long long)(sizeof(float) * (size_t)total));
    pl.threads = mem;
    pl.partials = pl.S > 1 ? mem + pl.stride * threads : NULL;
    vq_parallel_for(ctx, pl.units * pl.S, run_task, &pl);
    if (pl.S > 1) vq_parallel_for(ctx, pl.units, merge_unit, &pl);
    return VQ_OK;
}
