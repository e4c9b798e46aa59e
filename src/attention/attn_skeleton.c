/* attn_skeleton.c — the CPU attention skeleton (see attn_skeleton.h): block
 * loop, online softmax, causal/mask, kv splits over threads and their merge.
 *
 * Work decomposition. The rows of one kv head are all its query heads times
 * all Sq queries: R_total = (Hq/Hkv) * Sq rows (row r of kv head hk in batch
 * b is query head hk*G + r/Sq, query r%Sq, global row (b*Hkv + hk)*R_total +
 * r = (b*Hq + h)*Sq + i). They are cut into row tiles of at most
 * VQ_ATTN_MAX_ROWS; a unit is (b, hk, row tile), and each unit's kv axis is
 * cut into S splits. A task is (unit, split): it prepares its rows once per
 * segment kind, then streams its blocks, so every decoded block is used by
 * all rows of the tile. With S > 1 the tasks leave partial states {m, d, o}
 * that a second pass merges.
 *
 * The kv axis of a batch row is a list of segments (attn_skeleton.h); a plain
 * call is one segment per row. Blocks never straddle segments, so a split is
 * a run of blocks over a run of segments (pages).
 *
 * Non-finite inputs (the rule the header states, made here for every format
 * and ISA alike): a query row with a NaN or +-inf element, or a score that
 * is NaN or +inf after the mask, poisons the row (bad[r]): its output and lse
 * are NaN. Poisoning scores are replaced by -inf before the ISA's softmax
 * step, which therefore only ever sees finite or -inf scores. Tokens past a
 * row's causal limit are never accumulated into it (the values of a block
 * that crosses some row's limit are accumulated row by row). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_skeleton.h"

typedef struct plan {
    const vq_attn_problem *p;
    const vq_attn_kernels *kern;
    vq_attn_kind kinds[VQ_ATTN_MAX_KINDS];
    int n_kinds;
    const vq_attn_value_ops *finish_ops;  /* whose finish() every row gets, or NULL */
    const void *finish_desc;
    int64_t G, R_total, RT, n_rt, units, S;
    bool one_block;     /* VQ_ATTN_ONE_BLOCK: the block hook gets runs of one block */
    int64_t kq;         /* floats per prepared row of any kind; kind k's rows start at k * RT * kq */
    int64_t stride;     /* floats of per-thread scratch */
    float *threads;     /* num_threads * stride */
    float *partials;    /* units * S * RT * (D + 2), when S > 1 */
} plan;

/* Per-thread scratch regions, each 64-byte aligned. */
typedef struct thread_mem {
    float *qrow, *qp, *s, *o, *m, *d, *alpha;
    bool *bad;  /* [RT]: the row is poisoned (see above) */
    vq_attn_thread th;
} thread_mem;

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t thread_layout(const plan *pl, float *base, thread_mem *tm)
{
    const vq_attn_problem *p = pl->p;
    const int64_t D = p->dims.D, RT = pl->RT;
    int64_t extra_floats = 0;
    for (int k = 0; k < pl->n_kinds; k++)
        extra_floats = max64(extra_floats, max64(pl->kinds[k].keys->thread_floats, pl->kinds[k].values->thread_floats));
    int64_t off = 0;
#define VQ_TAKE(ptr, n)                          \
    do {                                         \
        if (base) ptr = base + off;              \
        off += round16(n);                       \
    } while (0)
    float *qrow = NULL, *qp = NULL, *s = NULL, *o = NULL, *m = NULL, *d = NULL, *alpha = NULL, *tile = NULL,
          *extra = NULL, *bad = NULL, *memo = NULL, *memo_data = NULL;
    VQ_TAKE(qrow, D);
    VQ_TAKE(qp, pl->n_kinds * RT * pl->kq);
    VQ_TAKE(s, RT * VQ_ATTN_BN);
    VQ_TAKE(o, RT * D);
    VQ_TAKE(m, RT);
    VQ_TAKE(d, RT);
    VQ_TAKE(alpha, RT);
    VQ_TAKE(bad, (RT * (int64_t)sizeof(bool) + sizeof(float) - 1) / (int64_t)sizeof(float));
    VQ_TAKE(tile, VQ_ATTN_BN * D);
    VQ_TAKE(extra, extra_floats);
    VQ_TAKE(memo, (int64_t)((sizeof(vq_attn_memo) + sizeof(float) - 1) / sizeof(float)));
    VQ_TAKE(memo_data, vq_attn_memo_floats(D));
#undef VQ_TAKE
    if (tm)
        *tm = (thread_mem){qrow, qp, s, o, m, d, alpha, (bool *)bad,
                           {pl->kern, tile, extra, (vq_attn_memo *)(void *)memo, memo_data}};
    return off;
}

/* Tokens of batch row b. */
static int64_t row_skv(const vq_attn_problem *p, int64_t b) { return p->segs ? p->skv[b] : p->dims.Skv; }

/* Segment i of batch row b (a plain call has one per row). */
static vq_attn_segment segment(const vq_attn_problem *p, int64_t b, int64_t i)
{
    if (p->segs) return p->segs[p->seg_off[b] + i];
    return (vq_attn_segment){p->keys, p->values, b, p->dims.Skv, 0};
}

static int64_t n_segments(const vq_attn_problem *p, int64_t b)
{
    return p->segs ? p->seg_off[b + 1] - p->seg_off[b] : 1;
}

/* Row rr (index within its kv head) of batch row b: its first invisible
 * token (causal). */
static int64_t row_limit(const vq_attn_problem *p, int64_t b, int64_t rr)
{
    const int64_t Sq = p->dims.Sq, Skv = row_skv(p, b);
    if (!p->causal) return Skv;
    const int64_t lim = Skv - Sq + rr % Sq + 1;
    return lim < 0 ? 0 : (lim > Skv ? Skv : lim);
}

/* Row rr of batch row b: its first token not cut off by the sliding window
 * (tokens below window_keep are seen whatever this says). */
static int64_t row_low(const vq_attn_problem *p, int64_t b, int64_t rr)
{
    if (p->window <= 0) return 0;
    const int64_t lo = row_limit(p, b, rr) - p->window;
    return lo < 0 ? 0 : lo;
}

/* Tokens [t0, t0 + n) of batch row b: every row of the tile [r0, r0 + R)
 * sees all of them as far as the sliding window goes (inside its sinks, or
 * at or above every row's low bound). */
static bool window_whole(const vq_attn_problem *p, int64_t b, int64_t r0, int R, int64_t t0, int64_t n)
{
    if (p->window <= 0 || t0 + n <= p->window_keep) return true;
    for (int r = 0; r < R; r++)
        if (row_low(p, b, r0 + r) > t0) return false;
    return true;
}

/* Tokens [t0, t0 + n): no row of the tile sees any of them (all below every
 * row's low bound and at or above the sinks). */
static bool window_none(const vq_attn_problem *p, int64_t b, int64_t r0, int R, int64_t t0, int64_t n)
{
    if (p->window <= 0 || t0 < p->window_keep) return false;
    for (int r = 0; r < R; r++)
        if (row_low(p, b, r0 + r) < t0 + n) return false;
    return true;
}

/* Rows [r0, r0 + R): the first token no row of the tile may see. */
static int64_t tile_limit(const vq_attn_problem *p, int64_t b, int64_t r0, int64_t R)
{
    const int64_t Sq = p->dims.Sq;
    if (!p->causal) return row_skv(p, b);
    /* the largest query index i among the rows; a tile that wraps past Sq - 1 has them all */
    const int64_t last = r0 % Sq + R - 1;
    return row_limit(p, b, last >= Sq ? Sq - 1 : last);
}

/* Rows [r0, r0 + R): the first token some row of the tile may not see
 * (the smallest row limit: the smallest query index among the rows). */
static int64_t tile_min_limit(const vq_attn_problem *p, int64_t b, int64_t r0, int64_t R)
{
    const int64_t Sq = p->dims.Sq;
    if (!p->causal) return row_skv(p, b);
    return row_limit(p, b, r0 % Sq + R - 1 >= Sq ? 0 : r0);
}

/* Blocks of batch row b below token T. */
static int64_t count_blocks(const vq_attn_problem *p, int64_t b, int64_t T)
{
    int64_t nb = 0, t = 0;
    for (int64_t i = 0, ns = n_segments(p, b); i < ns && t < T; i++) {
        const int64_t n = segment(p, b, i).n, seen = T - t < n ? T - t : n;
        nb += (seen + VQ_ATTN_BN - 1) / VQ_ATTN_BN;
        t += n;
    }
    return nb;
}

/* Adds the mask and applies the causal limit to s [R][BN] of one block at
 * global token t0 of batch row b. */
static void mask_block(const plan *pl, int64_t b, int64_t hk, int64_t r0, int R, int64_t t0, int n, float *s)
{
    const vq_attn_problem *p = pl->p;
    const int64_t Sq = p->dims.Sq;
    for (int r = 0; r < R; r++) {
        float *row = s + (int64_t)r * VQ_ATTN_BN;
        const int64_t rr = r0 + r;
        if (p->mask) {
            const int64_t h = hk * pl->G + rr / Sq, i = rr % Sq;
            const int64_t base = b * p->mask_sb + h * p->mask_sh + i * p->mask_si + t0;
            for (int j = 0; j < n; j++) row[j] += vq_load_f(p->mask, p->mask_dt, base + j);
        }
        const int64_t lim = row_limit(p, b, rr) - t0;
        for (int j = lim < 0 ? 0 : (int)(lim < n ? lim : n); j < n; j++) row[j] = -INFINITY;
        if (p->window <= 0) continue;
        const int64_t lo = row_low(p, b, rr) - t0, keep = p->window_keep - t0;
        for (int j = keep < 0 ? 0 : (int)(keep < n ? keep : n); j < n && j < lo; j++) row[j] = -INFINITY;
    }
}

/* Accumulates the values of one block into every row, each row only up to
 * its own causal limit (rows of a prefill tile see different prefixes of a
 * block on the diagonal; the tokens past the limit are never read). */
static void accumulate_block(const plan *pl, const vq_attn_segment *sg, thread_mem *tm, const vq_attn_block *blk,
                             int64_t b, int64_t r0, int R, int64_t t0)
{
    const vq_attn_problem *p = pl->p;
    bool whole = window_whole(p, b, r0, R, t0, blk->n);
    for (int r = 0; r < R && whole && p->causal; r++) whole = row_limit(p, b, r0 + r) - t0 >= blk->n;
    if (whole) {
        sg->values->ops->accumulate(sg->values->desc, &tm->th, blk, tm->s, R, tm->o);
        return;
    }
    for (int r = 0; r < R; r++) {
        const int64_t lim = row_limit(p, b, r0 + r) - t0, hi = lim < blk->n ? lim : blk->n;
        float *o = tm->o + (int64_t)r * p->dims.D;
        const float *s = tm->s + (int64_t)r * VQ_ATTN_BN;
        /* the row's tokens of the block: the sinks [0, keep) and [lo, hi) */
        int64_t keep = 0, lo = 0;
        if (p->window > 0) {
            keep = p->window_keep - t0, lo = row_low(p, b, r0 + r) - t0;
            keep = keep < 0 ? 0 : (keep > hi ? hi : keep);
            lo = lo < keep ? keep : lo;
        }
        if (hi <= 0) continue;
        vq_attn_block one = *blk;
        one.n = (int)(lo > keep ? keep : hi); /* the whole row when no token inside it is cut off */
        if (one.n > 0) sg->values->ops->accumulate(sg->values->desc, &tm->th, &one, s, 1, o);
        if (lo > keep && hi > lo) {
            /* a part that starts inside the block: its probabilities copied to
             * the start of an aligned row, as the kernels read a block's */
            _Alignas(64) float part[VQ_ATTN_BN];
            memcpy(part, s + lo, sizeof(float) * (size_t)(hi - lo));
            one.t0 = blk->t0 + lo, one.n = (int)(hi - lo);
            sg->values->ops->accumulate(sg->values->desc, &tm->th, &one, part, 1, o);
        }
    }
}

/* Writes row rr of kv head hk in batch b: out = B^-1(o) / d (0 when d == 0),
 * lse = m + log d (-inf when d == 0); a poisoned row (m NaN) gets NaN. */
static void store_row(const plan *pl, int64_t b, int64_t hk, int64_t rr, float *o, float m, float d, float *tmp)
{
    const vq_attn_problem *p = pl->p;
    const int64_t D = p->dims.D, h = hk * pl->G + rr / p->dims.Sq, i = rr % p->dims.Sq;
    if (isnan(m)) {
        for (int64_t c = 0; c < D; c++) tmp[c] = NAN;
        vq_row_from_f32(tmp, D, p->out_dt, (void *)vq_attn_at(&p->out, b, h, i));
        if (p->lse.base) *(float *)vq_attn_at(&p->lse, b, h, i) = NAN;
        return;
    }
    if (pl->finish_ops && d > 0.0f) pl->finish_ops->finish(pl->finish_desc, o);
    /* d == 0: no token took part; 0 even where o holds 0 * NaN from a value */
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    for (int64_t c = 0; c < D; c++) tmp[c] = d > 0.0f ? o[c] * inv : 0.0f;
    vq_row_from_f32(tmp, D, p->out_dt, (void *)vq_attn_at(&p->out, b, h, i));
    if (p->lse.base) *(float *)vq_attn_at(&p->lse, b, h, i) = d > 0.0f ? m + logf(d) : -INFINITY;
}

/* Runs blocks [blo, bhi) of batch row b (counted over its segments, below
 * token T) for the tile's R rows. */
static void stream_blocks(const plan *pl, thread_mem *tm, int64_t b, int64_t hk, int64_t r0, int R, int64_t T,
                          int64_t blo, int64_t bhi)
{
    const vq_attn_problem *p = pl->p;
    const int64_t D = p->dims.D, min_lim = tile_min_limit(p, b, r0, R);
    int64_t blk_i = 0, t = 0;
    for (int64_t si = 0, ns = n_segments(p, b); si < ns && t < T && blk_i < bhi; si++) {
        const vq_attn_segment sg = segment(p, b, si);
        const int64_t seen = T - t < sg.n ? T - t : sg.n, nb = (seen + VQ_ATTN_BN - 1) / VQ_ATTN_BN;
        if (blk_i + nb <= blo) {
            blk_i += nb;
            t += sg.n;
            continue;
        }
        const float *qp = tm->qp + (int64_t)sg.kind * pl->RT * pl->kq;
        const int64_t k1 = nb < bhi - blk_i ? nb : bhi - blk_i;
        /* blocks below `whole` are full and every row sees all their tokens */
        int64_t whole = seen / VQ_ATTN_BN;
        if (min_lim - t < whole * VQ_ATTN_BN) whole = min_lim - t < 0 ? 0 : (min_lim - t) / VQ_ATTN_BN;
        if (whole > k1) whole = k1;
        for (int64_t k = blo > blk_i ? blo - blk_i : 0; k < k1; k++) {
            const int64_t lt0 = k * VQ_ATTN_BN;
            const vq_attn_block blk = {sg.b, hk, lt0, (int)(seen - lt0 < VQ_ATTN_BN ? seen - lt0 : VQ_ATTN_BN)};
            /* a block the sliding window hides from every row changes no state */
            if (window_none(p, b, r0, R, t + lt0, blk.n)) continue;
            /* the blocks from k on that the sliding window leaves whole to every row */
            int64_t run = !p->mask && sg.values->ops->block ? whole - k : 0;
            if (p->window > 0 && run > 0)
                for (run = 0; k + run < whole && window_whole(p, b, r0, R, t + (k + run) * VQ_ATTN_BN, VQ_ATTN_BN);)
                    run++;
            /* no mask, every row sees every token: the format pair may run the whole blocks at once */
            const int64_t ran = run > 0
                                    ? sg.values->ops->block(sg.values->desc, sg.keys, &tm->th, &blk,
                                                            pl->one_block ? 1 : run, qp, R,
                                                            tm->o, tm->m, tm->d, tm->bad)
                                    : 0;
            if (ran > 0) {
                k += ran - 1;
                continue;
            }
            sg.keys->ops->score(sg.keys->desc, &tm->th, &blk, qp, R, tm->s);
            if (p->mask || min_lim < t + lt0 + blk.n || !window_whole(p, b, r0, R, t + lt0, blk.n))
                /* else the block changes no score */
                mask_block(pl, b, hk, r0, R, t + lt0, blk.n, tm->s);
            /* the non-finite rule (top of file): NaN / +inf scores poison their row */
            pl->kern->poison(R, blk.n, tm->s, VQ_ATTN_BN, tm->bad);
            pl->kern->softmax(R, blk.n, tm->s, VQ_ATTN_BN, tm->m, tm->d, tm->alpha);
            pl->kern->rescale(R, D, tm->o, D, tm->alpha);
            accumulate_block(pl, &sg, tm, &blk, b, r0, R, t + lt0);
        }
        blk_i += nb;
        t += sg.n;
    }
}

static void run_task(void *arg, int64_t task, int thread)
{
    const plan *pl = arg;
    const vq_attn_problem *p = pl->p;
    const int64_t D = p->dims.D, Hkv = p->dims.Hkv;
    const int64_t u = task / pl->S, sp = task % pl->S;
    const int64_t rt = u % pl->n_rt, hk = (u / pl->n_rt) % Hkv, b = u / (pl->n_rt * Hkv);
    const int64_t r0 = rt * pl->RT;
    const int R = (int)(pl->R_total - r0 < pl->RT ? pl->R_total - r0 : pl->RT);
    const int64_t grow0 = (b * Hkv + hk) * pl->R_total + r0;
    thread_mem tm;
    thread_layout(pl, pl->threads + (int64_t)thread * pl->stride, &tm);

    for (int r = 0; r < R; r++) {
        const int64_t rr = r0 + r, h = hk * pl->G + rr / p->dims.Sq, i = rr % p->dims.Sq;
        vq_row_to_f32(vq_attn_at(&p->q, b, h, i), p->q_dt, D, tm.qrow);
        tm.bad[r] = false;
        for (int64_t c = 0; c < D; c++) tm.bad[r] |= !isfinite(tm.qrow[c]);
        for (int k = 0; k < pl->n_kinds; k++) {
            const vq_attn_keys *kk = pl->kinds[k].keys;
            kk->ops->prep_q(kk->desc, tm.qrow, grow0 + r, tm.qp + (int64_t)k * pl->RT * pl->kq + r * kk->qp_floats);
        }
        tm.m[r] = -INFINITY;
        tm.d[r] = 0.0f;
    }
    memset(tm.o, 0, sizeof(float) * (size_t)(R * D));
    tm.th.memo->desc = NULL; /* new rows: nothing prepared for them yet */

    const int64_t T = tile_limit(p, b, r0, R), nb = count_blocks(p, b, T);
    stream_blocks(pl, &tm, b, hk, r0, R, T, sp * nb / pl->S, (sp + 1) * nb / pl->S);

    for (int r = 0; r < R; r++)
        if (tm.bad[r]) tm.m[r] = NAN;  /* the poison travels as m = NaN (store_row, merge) */
    if (pl->S == 1) {
        for (int r = 0; r < R; r++) store_row(pl, b, hk, r0 + r, tm.o + r * D, tm.m[r], tm.d[r], tm.qrow);
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
    if (isnan(a->m) || isnan(b->m)) {  /* a poisoned part poisons the union */
        a->m = NAN;
        return;
    }
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
        if (acc.m == -INFINITY) memset(acc.o, 0, sizeof(float) * (size_t)D);
        store_row(pl, b, hk, r0 + r, acc.o, acc.m, acc.d, tm.qrow);
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
        /* a whole number of tasks per thread where a split or two more gives
         * it (3 kv heads on 2 threads: 12 tasks, 6 each, not 9 as 5 + 4) */
        for (int64_t s2 = S; S > 1 && s2 <= S + 2 && s2 <= cap; s2++)
            if (units * s2 % threads == 0) {
                S = s2;
                break;
            }
        if (S > cap) S = cap;
    }
    const int64_t mem_cap = ((int64_t)64 << 20) / (int64_t)sizeof(float) / (units * state_floats);
    if (S > mem_cap) S = mem_cap;
    if (S > n_blocks) S = n_blocks;
    return S < 1 ? 1 : S;
}

/* The kinds of a problem (a plain call: one), their prepared-row size, and
 * the one finish() they share. */
static void plan_kinds(plan *pl)
{
    const vq_attn_problem *p = pl->p;
    if (p->segs) {
        pl->n_kinds = p->n_kinds;
        for (int k = 0; k < p->n_kinds; k++) pl->kinds[k] = p->kinds[k];
    } else {
        pl->n_kinds = 1;
        pl->kinds[0] = (vq_attn_kind){p->keys, p->values};
    }
    pl->kq = 0;
    for (int k = 0; k < pl->n_kinds; k++) {
        pl->kq = max64(pl->kq, pl->kinds[k].keys->qp_floats);
        if (pl->kinds[k].values->ops->finish) {
            pl->finish_ops = pl->kinds[k].values->ops;
            pl->finish_desc = pl->kinds[k].values->desc;
        }
    }
}

/* Largest block count of any batch row (for the split choice). */
static int64_t max_blocks(const vq_attn_problem *p)
{
    if (!p->segs) return (p->dims.Skv + VQ_ATTN_BN - 1) / VQ_ATTN_BN;
    int64_t nb = 1;
    for (int64_t b = 0; b < p->dims.B; b++) nb = max64(nb, count_blocks(p, b, p->skv[b]));
    return nb;
}

vq_status vq_attn_run(vq_ctx *ctx, const vq_attn_problem *p)
{
    plan pl = {.p = p, .kern = vq_attn_kernels_for(ctx->isa), .one_block = vq_attn_env_on("VQ_ATTN_ONE_BLOCK")};
    plan_kinds(&pl);
    const vq_attn_dims *dm = &p->dims;
    pl.G = dm->Hq / dm->Hkv;
    pl.R_total = pl.G * dm->Sq;
    pl.RT = pl.R_total < VQ_ATTN_MAX_ROWS ? pl.R_total : VQ_ATTN_MAX_ROWS;
    pl.n_rt = (pl.R_total + pl.RT - 1) / pl.RT;
    pl.units = dm->B * dm->Hkv * pl.n_rt;
    const int threads = vq_ctx_num_threads(ctx);
    pl.S = choose_splits(p->num_splits, pl.units, threads, max_blocks(p), pl.RT * (dm->D + 2));
    pl.stride = thread_layout(&pl, NULL, NULL);
    const int64_t part_floats = pl.S > 1 ? pl.units * pl.S * pl.RT * (dm->D + 2) : 0;
    const int64_t total = pl.stride * threads + part_floats;
    VQ_RETURN_IF(ctx, total > INT64_MAX / 8, VQ_ERR_OUT_OF_MEMORY, "scratch size overflows");
    float *mem = vq_ctx_scratch(ctx, sizeof(float) * (size_t)total);
    VQ_RETURN_IF(ctx, mem == NULL, VQ_ERR_OUT_OF_MEMORY, "attention needs %lld bytes of scratch: %s",
                 (long long)(sizeof(float) * (size_t)total), vq_ctx_scratch_why(ctx));
    pl.threads = mem;
    pl.partials = pl.S > 1 ? mem + pl.stride * threads : NULL;
    vq_parallel_for(ctx, pl.units * pl.S, run_task, &pl);
    if (pl.S > 1) vq_parallel_for(ctx, pl.units, merge_unit, &pl);
    return VQ_OK;
}

bool vq_attn_env_on(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

vq_attn_view vq_attn_view_of(const DLTensor *t)
{
    const int64_t esz = (int64_t)vq_dtype_size(vq_dtype_of(t));
    return (vq_attn_view){(const char *)vq_data(t), vq_stride(t, 0) * esz, vq_stride(t, 1) * esz,
                          vq_stride(t, 2) * esz};
}
