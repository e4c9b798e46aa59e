/* cache_append.c — vq_cache_append: validate, plan, reserve, gather into
 * staging, encode, and only then commit (pages, residual windows, lengths),
 * so that a failure before the commit changes no sequence.
 *
 * Per sequence, with n0 tokens of which e0 encoded, appending m gives n1 =
 * n0 + m tokens of which e1 = max(e0, f(n1)) encoded. Tokens [e0, e1) are
 * gathered (from the old window, then from the input) into one staging
 * block [Hkv][sum T][D] f16 for all sequences and encoded by one codec call
 * per stream; tokens [e1, n1) form the new window (old window rows that stay
 * are staged too, so no copy overlaps its source).
 *
 * A TurboQuant window (VQ_WINDOW_TURBO8, VQ_WINDOW_TURBO) first codes all m new tokens of every
 * sequence in the window's format (block Q); the tokens to encode are then
 * gathered in that format too (from the old window and from Q) and decoded
 * to f16 for the page codecs, and the new window rows are copied from Q. So
 * every token reaches the pages through the same window round trip, whether
 * it waited in the window or not (header, vq_cache_window). */
#include <stdlib.h>
#include <string.h>

#include "cache/cache_tensor.h"
#ifdef VQ_WITH_CUDA
#include "cache/cache_cuda.h"
#endif

typedef struct seq_plan {
    vq_cache_seq_layer *sl;
    int64_t n0, e0, n1, e1;
    int64_t t_off;       /* first staging column of its encoded tokens */
    int64_t m_off, m;    /* staged rows of the old window that stay (tokens [e1, n0)) */
    int64_t new_pages;   /* pages to take (incl. one copy-on-write) */
    bool cow;            /* its partly filled last page is shared: copy before writing */
} seq_plan;

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* rows x width elements of x's dtype at src (row pitch sp elements) -> f16
 * at dst (row pitch dp): a copy for f16, rounded on the device for f32. */
static vq_status put_2d(vq_cache *c, uint16_t *dst, int64_t dp, const vq_cache_tensor *x, const void *src, int64_t sp,
                        int64_t width, int64_t rows)
{
    if (x->dt == VQ_DT_F16)
        return vq_cache_mem_copy2d(c, dst, (size_t)(dp * 2), src, (size_t)(sp * 2), (size_t)(width * 2), (size_t)rows);
#ifdef VQ_WITH_CUDA
    VQ_FORWARD_IF_ERROR(vq_cache_copies_flush(c)); /* a kernel: the queued copies go first */
    return vq_cache_cuda_convert_rows(c, src, VQ_DT_F32, sp, dst, VQ_DT_F16, dp, width, rows);
#else
    return vq_fail(c->ctx, VQ_ERR_BACKEND_UNAVAILABLE, "this build has no CUDA backend");
#endif
}

/* Rows [j0, j0 + count) of every head h of sequence i of the input -> dst +
 * h * pitch rows of D f16 (pitch: rows per head in dst, >= count). f32
 * input is rounded here (on the host, or by one kernel on CUDA). Where each
 * head's rows are one run (a decode step's single row, or compact rows) all
 * heads are one 2D copy: on CUDA every copy is an API call of a few
 * microseconds, and one per head per sequence was most of a decode step. */
static vq_status put_rows(vq_cache *c, uint16_t *dst, int64_t pitch, const vq_cache_tensor *x, int64_t i, int64_t j0,
                          int64_t count)
{
    if (count <= 0) return VQ_OK;
    const int64_t D = c->D;
    if (x->dt == VQ_DT_F16 || c->cuda) {
        const bool run = count == 1 || x->stride[2] == D;
        if (run && x->stride[1] >= count * D) /* a pitch below the width is no 2D copy */
            return put_2d(c, dst, pitch * D, x, vq_cache_at(x, i, 0, j0), x->stride[1], count * D, c->Hkv);
        for (int64_t h = 0; h < c->Hkv; h++)
            VQ_FORWARD_IF_ERROR(put_2d(c, dst + h * pitch * D, D, x, vq_cache_at(x, i, h, j0), x->stride[2], D, count));
        return VQ_OK;
    }
    const vq_row_kernels *rk = vq_row_kernels_for(c->ctx->isa);
    for (int64_t h = 0; h < c->Hkv; h++) {
        const char *src = vq_cache_at(x, i, h, j0);
        for (int64_t r = 0; r < count; r++)
            rk->from_f32((const float *)(src + r * x->stride[2] * 4), D, VQ_DT_F16, dst + (h * pitch + r) * D);
    }
    return VQ_OK;
}

/* Window rows [r0, r0 + count) of every head of one of the two halves
 * (0 keys, 1 values) -> dst [Hkv][dst_rows][D] at column col. */
static vq_status get_window(vq_cache *c, const vq_cache_layer *L, const vq_cache_seq_layer *sl, int half,
                            int64_t r0, int64_t count, uint16_t *dst, int64_t dst_rows, int64_t col)
{
    if (count <= 0) return VQ_OK;
    const int64_t D = c->D, row = D * 2;
    const char *src = (const char *)sl->res + L->wstreams[half].off + r0 * row;
    return vq_cache_mem_copy2d(c, dst + col * D, (size_t)(dst_rows * row), src, (size_t)(L->res_cap * row),
                               (size_t)(count * row), (size_t)c->Hkv);
}

static vq_status check_ids(vq_cache *c, int n_seq, const int64_t *ids, seq_plan *plans, int layer)
{
    for (int i = 0; i < n_seq; i++) VQ_FORWARD_IF_ERROR(vq_cache_seq_layer_of(c, layer, ids, i, &plans[i].sl));
    return VQ_OK;
}

/* CommVQ positions of the encoded tokens -> the k_pos staging stream [sum T]
 * i32 (all tokens are encoded at once: T = m). Checks them on the CPU. */
static vq_status stage_positions(vq_cache *c, const vq_cache_layer *L, int n_seq, const seq_plan *plans, int64_t m,
                                 const DLTensor *positions, int32_t *dst, int32_t *host_tmp)
{
    vq_ctx *ctx = c->ctx;
    const int64_t Pmax = L->tables[VQ_CT_COS].shape[0];
    if (positions && c->cuda)
        return vq_cache_mem_copy2d(c, dst, (size_t)m * 4, vq_data(positions), (size_t)m * 4, (size_t)m * 4,
                                   (size_t)n_seq);
    int32_t *out = c->cuda ? host_tmp : dst;
    for (int i = 0; i < n_seq; i++)
        for (int64_t j = 0; j < m; j++) {
            const int64_t p = positions ? ((const int32_t *)vq_data(positions))[i * m + j] : plans[i].n0 + j;
            VQ_RETURN_IF(ctx, p < 0 || p >= Pmax, VQ_ERR_INVALID_ARGUMENT,
                         "argument 'positions': position %lld of sequence %d is outside [0, %lld) (the RoPE table)",
                         (long long)p, i, (long long)Pmax);
            out[i * m + j] = (int32_t)p;
        }
    return c->cuda ? vq_cache_mem_upload(c, dst, host_tmp, (size_t)(n_seq * m) * 4) : VQ_OK;
}

/* Scatters tokens [e0, e1) of one sequence from the staging streams into its
 * pages (taken or copied beforehand). */
static vq_status scatter(vq_cache *c, const vq_cache_layer *L, const seq_plan *pl, unsigned char *const *stage,
                         int64_t sumT)
{
    const int64_t P = c->P;
    for (int64_t pi = pl->e0 / P; pi * P < pl->e1; pi++) {
        const int64_t a = pl->e0 > pi * P ? pl->e0 : pi * P, b = pl->e1 < (pi + 1) * P ? pl->e1 : (pi + 1) * P;
        for (int s = 0; s < L->n_streams; s++) {
            const vq_cache_stream *st = &L->streams[s];
            const int64_t gs = P / st->rows, rb = st->last * (int64_t)vq_dtype_size(st->dtype);
            const int64_t prow = (a - pi * P) / gs, srow = (pl->t_off + a - pl->e0) / gs, count = (b - a) / gs;
            const int32_t page = pl->sl->pages[pi - pl->sl->p0];
            unsigned char *dst = vq_cache_page_stream(L, page, s) + prow * rb;
            VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, dst, (size_t)vq_cache_head_pitch(L, page, s), stage[s] + srow * rb,
                                                    (size_t)(sumT / gs * rb), (size_t)(count * rb),
                                                    st->per_head ? (size_t)c->Hkv : 1));
        }
    }
    return VQ_OK;
}

/* Staged blocks an append reads in its commit: the window rows that stay
 * (window layout, capacity sumM) and, for an 8-bit window, the new tokens
 * in the window's format (capacity sumN = n_seq * m). */
typedef struct staged {
    const unsigned char *moved, *q;
    int64_t sumM, sumN, m;
} staged;

/* The commit of one sequence: pages, scatter, new window, counters. */
static vq_status commit(vq_cache *c, int l, seq_plan *pl, unsigned char *const *stage, int64_t sumT,
                        const staged *sg, const vq_cache_tensor *kv, int i)
{
    vq_cache_layer *L = &c->layers[l];
    vq_cache_seq_layer *sl = pl->sl;
    const int64_t P = c->P, D = c->D;
    if (pl->cow) {
        const int32_t old = sl->pages[sl->n_pages - 1], fresh = vq_cache_pool_take(L);
        VQ_FORWARD_IF_ERROR(vq_cache_pool_copy_page(c, l, fresh, old));
        vq_cache_pool_release(L, old);
        sl->pages[sl->n_pages - 1] = fresh;
    }
    const int64_t want = vq_ceil_div(pl->e1, P) - sl->p0;
    while (sl->n_pages < want) sl->pages[sl->n_pages++] = vq_cache_pool_take(L);
    if (pl->e1 > pl->e0) VQ_FORWARD_IF_ERROR(scatter(c, L, pl, stage, sumT));
    if (L->res_cap > 0) {
        const int64_t first_new = pl->e1 > pl->n0 ? pl->e1 : pl->n0;
        unsigned char *res = sl->res;
        VQ_FORWARD_IF_ERROR(vq_cache_window_copy(c, L, res, L->res_cap, 0, sg->moved, sg->sumM, pl->m_off, pl->m));
        if (vq_cache_coded_window(c)) {
            VQ_FORWARD_IF_ERROR(vq_cache_window_copy(c, L, res, L->res_cap, first_new - pl->e1, sg->q, sg->sumN,
                                                     i * sg->m + first_new - pl->n0, pl->n1 - first_new));
        } else {
            for (int half = 0; half < 2; half++)
                VQ_FORWARD_IF_ERROR(put_rows(c, (uint16_t *)(void *)(res + L->wstreams[half].off) + (first_new - pl->e1) * D,
                                             L->res_cap, &kv[half], i, first_new - pl->n0, pl->n1 - first_new));
        }
    }
    sl->n = pl->n1;
    sl->n_enc = pl->e1;
    /* the first appended token's window starts at n0 + 1 - W: nothing older is read again */
    vq_cache_evict(c, L, sl, pl->n0 + 1 - L->sliding);
    return VQ_OK;
}

/* The new tokens of every sequence, both halves, into X [2][Hkv][sumN][D]
 * f16 (sequence i at column i * m): one batch of copies. */
static vq_status gather_new(vq_cache *c, uint16_t *X, int64_t sumN, const vq_cache_tensor *kv, int n_seq, int64_t m)
{
    const int64_t Hkv = c->Hkv, D = c->D;
    vq_status st = VQ_OK;
    vq_cache_copies_begin(c);
    for (int i = 0; i < n_seq && st == VQ_OK; i++)
        for (int half = 0; half < 2 && st == VQ_OK; half++)
            st = put_rows(c, X + (half * Hkv * sumN + (int64_t)i * m) * D, sumN, &kv[half], i, 0, m);
    return vq_cache_copies_end(c, st);
}

/* One sequence's staging: the tokens it encodes (from its window, then the
 * new ones) into E (f16 window) or W (coded window, whose decode fills E),
 * and the window rows that stay into M. */
static vq_status stage_seq(vq_cache *c, const vq_cache_layer *L, const seq_plan *pl, int i, const vq_cache_tensor *kv,
                           uint16_t *const *E, unsigned char *M, unsigned char *W, const unsigned char *Q,
                           int64_t sumT, int64_t sumM, int64_t sumN, int64_t m, bool w8)
{
    const int64_t D = c->D, from_win = (pl->e1 < pl->n0 ? pl->e1 : pl->n0) - pl->e0;
    if (w8) {
        VQ_FORWARD_IF_ERROR(vq_cache_window_copy(c, L, W, sumT, pl->t_off, pl->sl->res, L->res_cap, 0, from_win));
        if (pl->e1 > pl->n0)
            VQ_FORWARD_IF_ERROR(vq_cache_window_copy(c, L, W, sumT, pl->t_off + pl->n0 - pl->e0, Q, sumN,
                                                     (int64_t)i * m, pl->e1 - pl->n0));
    } else {
        for (int half = 0; half < 2; half++) {
            VQ_FORWARD_IF_ERROR(get_window(c, L, pl->sl, half, 0, from_win, E[half], sumT, pl->t_off));
            if (pl->e1 > pl->n0)
                VQ_FORWARD_IF_ERROR(put_rows(c, E[half] + (pl->t_off + pl->n0 - pl->e0) * D, sumT, &kv[half], i, 0,
                                             pl->e1 - pl->n0));
        }
    }
    if (L->res_cap > 0)
        VQ_FORWARD_IF_ERROR(
            vq_cache_window_copy(c, L, M, sumM, pl->m_off, pl->sl->res, L->res_cap, pl->e1 - pl->e0, pl->m));
    return VQ_OK;
}

/* stage_seq for every sequence: one batch of copies. */
static vq_status stage_all(vq_cache *c, const vq_cache_layer *L, int n_seq, const seq_plan *plans,
                           const vq_cache_tensor *kv, uint16_t *const *E, unsigned char *M, unsigned char *W,
                           const unsigned char *Q, int64_t sumT, int64_t sumM, int64_t sumN, int64_t m, bool w8)
{
    vq_status st = VQ_OK;
    vq_cache_copies_begin(c);
    for (int i = 0; i < n_seq && st == VQ_OK; i++)
        st = stage_seq(c, L, &plans[i], i, kv, E, M, W, Q, sumT, sumM, sumN, m, w8);
    return vq_cache_copies_end(c, st);
}

static vq_status plan_all(vq_cache *c, int l, int n_seq, seq_plan *plans, int64_t m, int64_t *sumT, int64_t *sumM,
                          int64_t *pages)
{
    vq_ctx *ctx = c->ctx;
    const vq_cache_layer *L = &c->layers[l];
    *sumT = *sumM = *pages = 0;
    for (int i = 0; i < n_seq; i++) {
        seq_plan *pl = &plans[i];
        vq_cache_seq_layer *sl = pl->sl;
        pl->n0 = sl->n;
        pl->e0 = sl->n_enc;
        VQ_RETURN_IF(ctx, pl->n0 > ((int64_t)1 << 40) - m, VQ_ERR_INVALID_ARGUMENT, "sequence %d is too long", i);
        pl->n1 = pl->n0 + m;
        const int64_t f = vq_cache_target_enc(c, L, pl->n1);
        pl->e1 = f > pl->e0 ? f : pl->e0;
        pl->t_off = *sumT;
        *sumT += pl->e1 - pl->e0;
        /* window rows that stay but move to its top: none when nothing is
         * encoded (they are in place; a decode step copies only its token) */
        pl->m = pl->e1 > pl->e0 && pl->n0 > pl->e1 ? pl->n0 - pl->e1 : 0;
        pl->m_off = *sumM;
        *sumM += pl->m;
        const int64_t need = vq_ceil_div(pl->e1, c->P) - sl->p0; /* page-table entries */
        pl->cow = pl->e1 > pl->e0 && pl->e0 % c->P != 0 && L->refcount[sl->pages[sl->n_pages - 1]] > 1;
        pl->new_pages = need - sl->n_pages + (pl->cow ? 1 : 0);
        *pages += pl->new_pages;
        if (need > sl->cap_pages) { /* growing a page table is invisible: done before the commit */
            int64_t cap = sl->cap_pages * 2;
            if (cap < need) cap = need;
            int32_t *p = realloc(sl->pages, sizeof *p * (size_t)cap);
            VQ_RETURN_IF(ctx, p == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot grow a page table");
            sl->pages = p;
            sl->cap_pages = cap;
        }
    }
    return VQ_OK;
}

vq_status vq_cache_append(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *k,
                          const DLTensor *v, const DLTensor *positions)
{
    if (c == NULL) return VQ_ERR_INVALID_ARGUMENT;
    vq_ctx *ctx = c->ctx;
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_cache_check_batch(c, layer, n_seq, seq_ids));
    if (vq_cache_recipe_on(c, layer)) return vq_cache_recipe_append(c, layer, n_seq, seq_ids, k, v, positions);
    return vq_cache_append_tokens(c, layer, n_seq, seq_ids, k, v, positions);
}

vq_status vq_cache_append_tokens(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *k,
                                 const DLTensor *v, const DLTensor *positions)
{
    vq_ctx *ctx = c->ctx;
    vq_cache_tensor kv[2];
    VQ_FORWARD_IF_ERROR(vq_cache_check_tensor(c, k, "k", VQ_DTM_F16_F32, 4, (const int64_t[]){n_seq, c->Hkv, -1, c->D}, &kv[0]));
    const int64_t m = kv[0].shape[2];
    VQ_FORWARD_IF_ERROR(vq_cache_check_tensor(c, v, "v", VQ_DTM(kv[0].dt), 4, (const int64_t[]){n_seq, c->Hkv, m, c->D},
                                              &kv[1]));
    vq_cache_layer *L = &c->layers[layer];
    const bool commvq = L->cfg.keys.method == VQ_KEY_COMMVQ;
    if (positions) {
        vq_cache_tensor pt;
        VQ_FORWARD_IF_ERROR(
            vq_cache_check_tensor(c, positions, "positions", VQ_DTM_I32, 2, (const int64_t[]){n_seq, m}, &pt));
        VQ_RETURN_IF(ctx, !vq_tensor_is_compact(positions), VQ_ERR_INVALID_ARGUMENT,
                     "argument 'positions' must be compact (row-major)");
    }

    /* host scratch: the plans, then CommVQ positions for an upload */
    const size_t plan_bytes = align256(sizeof(seq_plan) * (size_t)n_seq);
    unsigned char *hs = vq_cache_host_scratch(c, 0, plan_bytes + (commvq ? (size_t)(n_seq * m) * 4 : 0));
    if (hs == NULL) return VQ_ERR_OUT_OF_MEMORY;
    seq_plan *plans = (seq_plan *)(void *)hs;
    memset(plans, 0, sizeof *plans * (size_t)n_seq);
    VQ_FORWARD_IF_ERROR(check_ids(c, n_seq, seq_ids, plans, layer));
    int64_t sumT, sumM, pages;
    VQ_FORWARD_IF_ERROR(plan_all(c, layer, n_seq, plans, m, &sumT, &sumM, &pages));
    VQ_FORWARD_IF_ERROR(vq_cache_pool_reserve(c, layer, pages));

    /* staging on the device: Ek, Ev, the moved window rows (window layout),
     * for a TurboQuant window the new tokens in f16 (X) and coded (Q), the
     * coded tokens to encode (W) and the window codec's scratch (C), the
     * streams, encode scratch */
    const int64_t Hkv = c->Hkv, D = c->D, sumN = (int64_t)n_seq * m;
    const bool w8 = vq_cache_coded_window(c) && L->res_cap > 0;
    const size_t ekv = align256((size_t)(Hkv * sumT * D * 2)), mv = align256((size_t)(Hkv * sumM * L->win_token_bytes));
    const size_t xb = w8 ? align256((size_t)(2 * Hkv * sumN * D * 2)) : 0;
    const size_t qb = w8 ? align256((size_t)(Hkv * sumN * L->win_token_bytes)) : 0;
    const size_t wb = w8 ? align256((size_t)(Hkv * sumT * L->win_token_bytes)) : 0;
    const size_t cb = w8 ? align256(vq_cache_window_scratch(c, sumN > sumT ? sumN : sumT)) : 0;
    size_t off[VQ_CACHE_MAX_STREAMS], total = 2 * ekv + mv + xb + qb + wb + cb;
    for (int s = 0; s < L->n_streams; s++) {
        const vq_cache_stream *st = &L->streams[s];
        off[s] = total;
        total += align256((size_t)(st->page_bytes * sumT / c->P));
    }
    const size_t scratch_off = total;
    total += vq_cache_encode_scratch(c, L, sumT);
    unsigned char *stage = vq_cache_stage(c, total);
    if (stage == NULL) return VQ_ERR_OUT_OF_MEMORY;
    uint16_t *E[2] = {(uint16_t *)(void *)stage, (uint16_t *)(void *)(stage + ekv)};
    unsigned char *M = stage + 2 * ekv;
    uint16_t *X = (uint16_t *)(void *)(M + mv);
    unsigned char *Q = M + mv + xb, *W = Q + qb, *C = W + wb;
    unsigned char *sp[VQ_CACHE_MAX_STREAMS];
    for (int s = 0; s < L->n_streams; s++) sp[s] = stage + off[s];

    /* gather */
    if (w8) {
        VQ_FORWARD_IF_ERROR(gather_new(c, X, sumN, kv, n_seq, m));
        VQ_FORWARD_IF_ERROR(vq_cache_forward(ctx, vq_cache_window_encode(c, L, X, sumN, Q, C), "vq_cache_append"));
    }
    VQ_FORWARD_IF_ERROR(stage_all(c, L, n_seq, plans, kv, E, M, W, Q, sumT, sumM, sumN, m, w8));
    /* the tokens to encode, as the window decodes them */
    if (w8)
        VQ_FORWARD_IF_ERROR(
            vq_cache_forward(ctx, vq_cache_window_decode(c, L, W, sumT, E[0], E[1], C), "vq_cache_append"));
    /* encode */
    if (sumT > 0) {
        int n_key = 0;
        DLTensor views[VQ_CACHE_MAX_STREAMS], *outs[VQ_CACHE_MAX_STREAMS];
        int64_t shapes[VQ_CACHE_MAX_STREAMS][4];
        for (int s = 0; s < L->n_streams; s++) {
            const vq_cache_stream *st = &L->streams[s];
            const int64_t rows = sumT / (c->P / st->rows);
            int64_t *sh = shapes[s];
            if (st->ndim == 2) {
                sh[0] = rows;
                vq_cache_view(c, &views[s], sh, 1, st->dtype, sp[s]);
            } else {
                sh[0] = 1, sh[1] = Hkv, sh[2] = rows, sh[3] = st->last;
                vq_cache_view(c, &views[s], sh, st->ndim, st->dtype, sp[s]);
            }
            outs[s] = &views[s];
            n_key += st->is_key;
        }
        if (commvq)
            VQ_FORWARD_IF_ERROR(stage_positions(c, L, n_seq, plans, m, positions, (int32_t *)(void *)sp[1],
                                                (int32_t *)(void *)(hs + plan_bytes)));
        int64_t esh[4] = {1, Hkv, sumT, D};
        DLTensor ek, ev;
        vq_cache_view(c, &ek, esh, 4, VQ_DT_F16, E[0]);
        vq_cache_view(c, &ev, esh, 4, VQ_DT_F16, E[1]);
        /* the codecs enter the ctx under their own names */
        VQ_FORWARD_IF_ERROR(vq_cache_forward(
            ctx, vq_cache_encode(c, L, &ek, &ev, outs, n_key, stage + scratch_off, sumT), "vq_cache_append"));
    }
    /* commit: nothing above changed a sequence */
    const staged sg = {M, Q, sumM, sumN, m};
    vq_status st = VQ_OK;
    vq_cache_copies_begin(c);
    for (int i = 0; i < n_seq && st == VQ_OK; i++) st = commit(c, layer, &plans[i], sp, sumT, &sg, kv, i);
    return vq_cache_copies_end(c, st);
}
