/* cache_cuda.c — vq_cache_attend on a CUDA ctx.
 *
 * Decode (one query token per sequence), the usual case: one paged launch
 * per group of up to VQ_CU_PAGED_MAX_B sequences. The kernels read each
 * sequence's pages in place through a device copy of its page table
 * (vq_cu_paging; the copy is refreshed only where the host table changed,
 * so a decode step uploads nothing until a sequence starts a page), and the
 * merge kernel attends the f16 residual window itself (vq_cu_window): one
 * attention launch and one merge per layer, as for the raw kernel. Taken
 * when the layer's pool is one chunk and its key format's descriptor says
 * its pages are read in place (keys_registry.h: f16, TurboQuant, RVQ,
 * RaBitQ, QJL, VECINFER, KIVI and mixed-width KIVI, whose pages hold whole
 * key groups, over any value method; KIVI keys with KIVI values of the same
 * bits and group on the fast KIVI kernel).
 *
 * Otherwise (prefill, a pool grown past its first chunk, CommVQ): per
 * sequence, its pages are gathered (device to
 * device, on the ctx's stream: one copy launch per sequence over a list of
 * page copies uploaded once per call, copy_jobs.cu; a copy call per page
 * and stream made the host the bottleneck at long contexts) into one
 * contiguous run per stream, attended
 * with vq_fused_sdpa, and the window, attended as plain f16 keys and values,
 * is merged in through the log-sum-exp (vq_attention_merge).
 *
 * A sliding-window layer: every kv axis the kernels see starts at the
 * sequence's first token not evicted (its page table starts there, p0), and
 * the tokens older than each query row's window are masked by a lower bound
 * the kernels take with the launch (vq_cu_bound, vq_cu_window.lo: the
 * paged decode step, the gathered path's pages and window alike). The
 * tensor-core skeleton (VQ_CUDA_MMA=1) takes no bound: such a layer runs on
 * the CUDA-core kernels.
 *
 * VQ_CACHE_CUDA_GATHER=1 in the environment forces the gathered path (to
 * compare the two; tests/cuda/test_cuda_cache.c runs both).
 *
 * A TurboQuant window (VQ_WINDOW_TURBO8, VQ_WINDOW_TURBO) is decoded to f16
 * first (f16_windows), in the f16 window's layout, so both paths attend it
 * as they attend an f16 window.
 *
 * Everything is enqueued on the ctx's stream; nothing synchronises.
 * Combinations the CUDA kernels do not take yet come back from them as
 * VQ_ERR_UNSUPPORTED, naming the argument. */
#ifdef VQ_WITH_CUDA
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_cuda.h"
#include "cuda/attend_params.h"
#include "cuda/copy_jobs.h"
#include "cuda/cuda_backend.h"
#include "cuda/keys_registry.h"
#include "formats/format_kivi_mix.h"

/* Row i of a validated rank-3/4 tensor t as a [1, ...] view (its strides kept). */
typedef struct row_view {
    DLTensor t;
    int64_t shape[4], strides[4];
} row_view;

static DLTensor *row_of(row_view *v, const DLTensor *t, int64_t i)
{
    v->t = *t;
    int64_t st = 1;
    for (int a = t->ndim - 1; a >= 0; a--) {
        v->shape[a] = t->shape[a];
        v->strides[a] = t->strides ? t->strides[a] : st;
        st *= t->shape[a];
    }
    v->shape[0] = 1;
    v->t.shape = v->shape;
    v->t.strides = t->strides ? v->strides : NULL;
    v->t.byte_offset += (uint64_t)(i * v->strides[0] * (int64_t)vq_dtype_size(vq_dtype_of(t)));
    return &v->t;
}

/* The keys the CUDA kernels read for a layer whose streams sv the method
 * described into *ek: *ek itself, or for the key formats without a public
 * vq_keys_format (attention/attn_cuda.h) *mix: mixed-width KIVI keys made
 * from the streams, RaBitQ keys under the Hamming score's format. */
static const vq_encoded_keys *cuda_keys(const vq_cache *c, const vq_cache_layer *L, const DLTensor *sv,
                                        const vq_encoded_keys *ek, vq_cuda_kivi_mix_keys *mix)
{
    const vq_key_config *kc = &L->cfg.keys;
    if (kc->method == VQ_KEY_RABITQ && kc->rabitq_score == VQ_RABITQ_SCORE_HAMMING) {
        mix->base = *ek;
        mix->base.format = (vq_keys_format)VQ_CUDA_KEYS_RABITQ_HAMMING;
        return &mix->base;
    }
    if (kc->method != VQ_KEY_KIVI_MIX) return ek;
    *mix = (vq_cuda_kivi_mix_keys){.base = {.format = (vq_keys_format)VQ_CUDA_KEYS_KIVI_MIX},
                                   .codes = &sv[0], .scale = &sv[1], .zero = &sv[2], .mask = &sv[3],
                                   .bits = kc->bits, .bits2 = kc->bits2, .group_size = kc->group_size,
                                   .wide = (int)vq_kivi_mix_wide_channels(kc->wide_channels, c->D)};
    return &mix->base;
}

/* Encoded tokens a sequence's pages hold: those from its first token not
 * evicted by a sliding window (vq_cache_first_token) to n_enc. Token 0 of
 * every kv axis the kernels see is that first token. */
static int64_t held(const vq_cache *c, const vq_cache_seq_layer *sl) { return sl->n_enc - vq_cache_first_token(c, sl); }

/* Bytes of one sequence's gathered streams of n tokens (each region 256-aligned). */
static size_t gather_bytes(const vq_cache *c, const vq_cache_layer *L, int64_t n)
{
    size_t b = 0;
    for (int s = 0; s < L->n_streams; s++)
        b += ((size_t)(L->streams[s].page_bytes * n / c->P) + 255) & ~(size_t)255;
    return b;
}

/* The copies that move the held tokens of a sequence's pages into
 * contiguous streams at dst: one job per page and stream, written to jobs;
 * returns how many. */
static int gather_jobs(const vq_cache *c, const vq_cache_layer *L, const vq_cache_seq_layer *sl, unsigned char *dst,
                       vq_cu_copy_job *jobs)
{
    const int64_t P = c->P, nh = held(c, sl);
    int n = 0;
    for (int s = 0; s < L->n_streams; s++) {
        const vq_cache_stream *st = &L->streams[s];
        const int64_t gs = P / st->rows, rb = st->last * (int64_t)vq_dtype_size(st->dtype), rows = nh / gs;
        for (int64_t pi = 0; pi < sl->n_pages && pi * P < nh; pi++) {
            const int64_t a = pi * P, b = nh < (pi + 1) * P ? nh : (pi + 1) * P;
            jobs[n++] = (vq_cu_copy_job){.src = vq_cache_page_stream(L, sl->pages[pi], s),
                                         .dst = dst + a / gs * rb,
                                         .spitch = st->rows * rb,
                                         .dpitch = rows * rb,
                                         .width = (b - a) / gs * rb,
                                         .height = st->per_head ? c->Hkv : 1};
        }
        dst += ((size_t)(st->page_bytes * nh / P) + 255) & ~(size_t)255;
    }
    return n;
}

/* The held tokens of a sequence's pages -> contiguous streams at dst, by
 * its n jobs (device copies of what gather_jobs wrote), and their views. */
static vq_status gather(vq_cache *c, const vq_cache_layer *L, const vq_cache_seq_layer *sl, unsigned char *dst,
                        const vq_cu_copy_job *jobs, int n, DLTensor *sv, int64_t (*shapes)[4])
{
    VQ_FORWARD_IF_ERROR(vq_cuda_check(c->ctx, vq_cu_launch_copy_jobs(jobs, n, c->Hkv, c->ctx->stream),
                                      "vq_cache_attend: page gather launch"));
    const int64_t nh = held(c, sl);
    for (int s = 0; s < L->n_streams; s++) {
        const vq_cache_stream *st = &L->streams[s];
        const int64_t rows = nh / (c->P / st->rows);
        int64_t *sh = shapes[s];
        if (st->ndim == 2) sh[0] = 1, sh[1] = rows;
        else sh[0] = 1, sh[1] = c->Hkv, sh[2] = rows, sh[3] = st->last;
        vq_cache_view(c, &sv[s], sh, st->ndim, st->dtype, dst);
        dst += ((size_t)(st->page_bytes * nh / c->P) + 255) & ~(size_t)255;
    }
    return VQ_OK;
}

/* Where the f16 windows of a call's sequences are (f16_windows): their own
 * windows (dec NULL), or sequence i's decoded at dec + i * stride. */
typedef struct f16_wins {
    unsigned char *dec;
    size_t stride;
} f16_wins;

static void *win_of(const f16_wins *w, vq_cache_seq_layer *const *sls, int i)
{
    return w->dec ? w->dec + (size_t)i * w->stride : sls[i]->res;
}

/* The sliding window's bound of sequence sl's Sq query rows on a kv axis
 * whose token 0 is the sequence's token `origin` (counted after the sinks,
 * as n): row sq ends at n - Sq + sq + 1 (causal) or n and sees the newest W
 * tokens before its end, as on the CPU (cache_attend.c). Zeroed for a
 * full-attention layer. */
static vq_cu_bound bound_of(const vq_cache_layer *L, const vq_cache_seq_layer *sl, int64_t Sq, bool causal,
                            int64_t origin)
{
    vq_cu_bound bd;
    memset(&bd, 0, sizeof bd);
    if (L->sliding <= 0) return bd;
    const int64_t lo = sl->n - L->sliding - (causal ? Sq - 1 : 0) - origin;
    bd.on = 1;
    bd.step = causal;
    bd.lo[0] = (int)(lo < -(1 << 30) ? -(1 << 30) : lo); /* below the axis: no bound, and no overflow */
    return bd;
}

/* bd for the rows from r0 on of the rows it bounds (their row 0 is row r0). */
static vq_cu_bound rows_from(const vq_cu_bound *bd, int64_t r0)
{
    vq_cu_bound b = *bd;
    if (b.on) b.lo[0] += (int)(r0 * b.step);
    return b;
}

/* vq_fused_sdpa, or the backend directly for a key format without a public
 * vq_keys_format (cuda_keys: keys != ek) or under a sliding window's bound
 * bd (which no public call takes). */
static vq_status sdpa(vq_ctx *ctx, const DLTensor *q, const vq_encoded_keys *keys, const vq_encoded_keys *ek,
                      const vq_encoded_values *ev, float scale, DLTensor *o, const vq_attend_opts *opts,
                      const vq_cu_bound *bd)
{
    if (bd->on) {
        /* what vq_fused_sdpa would refuse on a CUDA ctx (the cache's own tensors are compact) */
        VQ_RETURN_IF(ctx, !vq_tensor_is_compact(q) || !vq_tensor_is_compact(o) ||
                              (opts->lse_out && !vq_tensor_is_compact(opts->lse_out)),
                     VQ_ERR_UNSUPPORTED,
                     "a sliding-window layer of a CUDA cache takes compact q, out and opts->lse_out");
        return vq_cache_forward(ctx, vq_cuda_fused_sdpa_bounded(ctx, q, keys, ev, scale, o, opts, bd),
                                "vq_cache_attend");
    }
    return vq_cache_forward(ctx,
                            keys == ek ? vq_fused_sdpa(ctx, q, keys, ev, scale, NULL, o, opts)
                                       : vq_cuda_fused_sdpa(ctx, q, keys, ev, scale, NULL, o, opts),
                            "vq_cache_attend");
}

/* Rows [r0, r0 + r) of a compact [1, H, S, X] (or [1, H, S]) tensor t <->
 * a compact [1, H, r, X] block at p (to_p: t -> p). */
static vq_status rows_copy(vq_cache *c, const DLTensor *t, int64_t r0, int64_t r, void *p, bool to_p)
{
    const int64_t X = t->ndim == 4 ? t->shape[3] : 1, esz = (int64_t)vq_dtype_size(vq_dtype_of(t));
    const size_t w = (size_t)(r * X * esz), pitch = (size_t)(t->shape[2] * X * esz);
    char *at = (char *)vq_data(t) + r0 * X * esz;
    return to_p ? vq_cache_mem_copy2d(c, p, w, at, pitch, w, (size_t)t->shape[1])
                : vq_cache_mem_copy2d(c, at, pitch, p, w, w, (size_t)t->shape[1]);
}

/* Bytes of split_rows' staging for Sq query rows. */
static size_t split_bytes(const vq_cache *c, int64_t Sq)
{
    const size_t o = ((size_t)(c->Hq * Sq * c->D * 4) + 255) & ~(size_t)255, l = ((size_t)(c->Hq * Sq * 4) + 255) & ~(size_t)255;
    return 4 * o + 3 * l;
}

/* A causal prefill of one sequence over its pages and its window (qi, oi,
 * li its rows [1, Hq, Sq, ...]): the rows [0, r1) at positions below n_enc
 * attend the pages causally (the last r1 rows' convention over the held
 * tokens) and no window; the rows [r1, Sq) see every page and the window
 * causally (the convention over the window's tokens), merged through the
 * lse. bp and bw bound all Sq rows on the pages and on the window. The rows
 * are staged compact at st (split_bytes). */
static vq_status split_rows(vq_cache *c, const DLTensor *qi, DLTensor *oi, DLTensor *li, const vq_encoded_keys *keys,
                            const vq_encoded_keys *ek, const vq_encoded_values *ev, float ks,
                            const vq_encoded_keys *wk, const vq_encoded_values *wv, float scale, int64_t Sq,
                            int64_t r1, const vq_cu_bound *bp, const vq_cu_bound *bw, unsigned char *st)
{
    vq_ctx *ctx = c->ctx;
    const size_t o = ((size_t)(c->Hq * Sq * c->D * 4) + 255) & ~(size_t)255, l = ((size_t)(c->Hq * Sq * 4) + 255) & ~(size_t)255;
    unsigned char *Q = st, *O = st + o, *P = st + 2 * o, *W = st + 3 * o, *L0 = st + 4 * o, *L1 = L0 + l, *L2 = L1 + l;
    const vq_dtype qdt = vq_dtype_of(qi), odt = vq_dtype_of(oi);
    for (int part = 0; part < 2; part++) {
        const int64_t r0 = part ? r1 : 0, r = part ? Sq - r1 : r1;
        if (r == 0) continue;
        int64_t sh[4] = {1, c->Hq, r, c->D}, lsh[3] = {1, c->Hq, r};
        DLTensor tq, to, tl, tp, tlp, tw, tlw;
        vq_cache_view(c, &tq, sh, 4, qdt, Q);
        vq_cache_view(c, &to, sh, 4, odt, O);
        vq_cache_view(c, &tl, lsh, 3, VQ_DT_F32, L0);
        VQ_FORWARD_IF_ERROR(rows_copy(c, qi, r0, r, Q, true));
        const vq_cu_bound rbp = rows_from(bp, r0), rbw = rows_from(bw, r0);
        if (part == 0) {
            const vq_attend_opts a = {.causal = true, .lse_out = &tl};
            VQ_FORWARD_IF_ERROR(sdpa(ctx, &tq, keys, ek, ev, ks, &to, &a, &rbp));
        } else {
            vq_cache_view(c, &tp, sh, 4, VQ_DT_F32, P);
            vq_cache_view(c, &tlp, lsh, 3, VQ_DT_F32, L1);
            vq_cache_view(c, &tw, sh, 4, VQ_DT_F32, W);
            vq_cache_view(c, &tlw, lsh, 3, VQ_DT_F32, L2);
            const vq_attend_opts ap = {.causal = false, .lse_out = &tlp}, aw = {.causal = true, .lse_out = &tlw};
            VQ_FORWARD_IF_ERROR(sdpa(ctx, &tq, keys, ek, ev, ks, &tp, &ap, &rbp));
            VQ_FORWARD_IF_ERROR(sdpa(ctx, &tq, wk, wk, wv, scale, &tw, &aw, &rbw));
            VQ_FORWARD_IF_ERROR(
                vq_cache_forward(ctx, vq_attention_merge(ctx, &tp, &tlp, &tw, &tlw, &to, &tl), "vq_cache_attend"));
        }
        VQ_FORWARD_IF_ERROR(rows_copy(c, oi, r0, r, O, false));
        if (li) VQ_FORWARD_IF_ERROR(rows_copy(c, li, r0, r, L0, false));
    }
    return VQ_OK;
}

static vq_status attend_gathered(vq_cache *c, int layer, int n_seq, vq_cache_seq_layer *const *sls,
                                 const f16_wins *wins, const DLTensor *q, DLTensor *out, DLTensor *lse, float scale, bool causal,
                                 int64_t Sq)
{
    vq_ctx *ctx = c->ctx;
    vq_cache_layer *L = &c->layers[layer];
    size_t most = 0;
    bool any_split = false; /* a causal prefill over pages and a window (split_rows) */
    for (int i = 0; i < n_seq; i++) {
        const vq_cache_seq_layer *sl = sls[i];
        VQ_RETURN_IF(ctx, sl->n == 0, VQ_ERR_UNSUPPORTED,
                     "argument 'seq_ids[%d]': a sequence with no token of layer %d is not attended by the CUDA cache "
                     "yet",
                     i, layer);
        any_split |= causal && Sq > 1 && sl->n > sl->n_enc && held(c, sl) > 0;
        const size_t b = gather_bytes(c, L, held(c, sl));
        if (b > most) most = b;
    }
    const size_t ow = ((size_t)(c->Hq * Sq * c->D * 4) + 255) & ~(size_t)255, lw = ((size_t)(c->Hq * Sq * 4) + 255) & ~(size_t)255;
    const size_t wb = ((size_t)(c->Hkv * L->res_cap * c->D * 2) + 255) & ~(size_t)255;
    /* every sequence's gather jobs, uploaded at once behind the staging areas */
    int64_t n_jobs = 0;
    for (int i = 0; i < n_seq; i++) n_jobs += sls[i]->n_pages * L->n_streams;
    VQ_RETURN_IF(ctx, n_jobs > INT32_MAX, VQ_ERR_UNSUPPORTED, "vq_cache_attend: %lld page copies in one call",
                 (long long)n_jobs);
    const size_t jb = (size_t)n_jobs * sizeof(vq_cu_copy_job);
    vq_cu_copy_job *host_jobs = vq_cache_host_scratch(c, 0, jb + sizeof(int) * (size_t)n_seq);
    VQ_RETURN_IF(ctx, host_jobs == NULL, VQ_ERR_OUT_OF_MEMORY, "vq_cache_attend: out of host memory for %zu bytes",
                 jb);
    int *n_jobs_of = (int *)(void *)((unsigned char *)host_jobs + jb);
    /* split_rows copies whole rows of q, out and lse */
    VQ_RETURN_IF(ctx, any_split && !(vq_tensor_is_compact(q) && vq_tensor_is_compact(out) && (!lse || vq_tensor_is_compact(lse))),
                 VQ_ERR_UNSUPPORTED,
                 "a causal prefill over pages and a residual window takes compact q, out and opts->lse_out on a CUDA ctx");
    const size_t sb = any_split ? split_bytes(c, Sq) : 0;
    unsigned char *stage = vq_cache_stage(c, most + ow + 2 * lw + 2 * wb + sb + jb);
    if (stage == NULL) return VQ_ERR_OUT_OF_MEMORY;
    unsigned char *o_win = stage + most, *l_pages = o_win + ow, *l_win = l_pages + lw;
    unsigned char *k_win = l_win + lw, *v_win = k_win + wb, *split = v_win + wb;
    vq_cu_copy_job *jobs = (vq_cu_copy_job *)(split + sb);
    int64_t n_up = 0;
    for (int i = 0; i < n_seq; i++) {
        n_jobs_of[i] = held(c, sls[i]) > 0 ? gather_jobs(c, L, sls[i], stage, host_jobs + n_up) : 0;
        n_up += n_jobs_of[i];
    }
    if (n_up > 0)
        VQ_FORWARD_IF_ERROR(vq_cuda_upload_async(ctx, jobs, host_jobs, (size_t)n_up * sizeof *jobs));
    int64_t job0 = 0;
    int64_t osh[4] = {1, c->Hq, Sq, c->D}, lsh[3] = {1, c->Hq, Sq};
    DLTensor ow_t, lp_t, lw_t;
    vq_cache_view(c, &ow_t, osh, 4, VQ_DT_F32, o_win);
    vq_cache_view(c, &lp_t, lsh, 3, VQ_DT_F32, l_pages);
    vq_cache_view(c, &lw_t, lsh, 3, VQ_DT_F32, l_win);
    DLTensor tb[VQ_CT_COUNT];
    int64_t ts[VQ_CT_COUNT][4];
    vq_cache_table_tensors(c, L, tb, ts);
    const float ks = L->cfg.keys.method == VQ_KEY_QJL ? scale * sqrtf((float)c->D) : scale;
    for (int i = 0; i < n_seq; i++) {
        const vq_cache_seq_layer *sl = sls[i];
        row_view qv, ov, lv;
        DLTensor *qi = row_of(&qv, q, i), *oi = row_of(&ov, out, i), *li = lse ? row_of(&lv, lse, i) : NULL;
        const int64_t n_win = sl->n - sl->n_enc, nh = held(c, sl);
        const bool split_i = causal && Sq > 1 && n_win > 0 && nh > 0;
        /* the sliding window's bounds on the pages' and on the window's kv axes */
        const vq_cu_bound bp = bound_of(L, sl, Sq, causal, vq_cache_first_token(c, sl));
        const vq_cu_bound bw = bound_of(L, sl, Sq, causal, sl->n_enc);
        DLTensor sv[VQ_CACHE_MAX_STREAMS];
        int64_t ss[VQ_CACHE_MAX_STREAMS][4];
        vq_encoded_keys ek;
        vq_encoded_values ev;
        vq_cuda_kivi_mix_keys mix;
        const vq_encoded_keys *keys = NULL;
        if (nh > 0) {
            VQ_FORWARD_IF_ERROR(gather(c, L, sl, stage, jobs + job0, n_jobs_of[i], sv, ss));
            job0 += n_jobs_of[i];
            vq_cache_describe(c, L, sv, tb, &ek, &ev);
            keys = cuda_keys(c, L, sv, &ek, &mix);
            const vq_attend_opts o = {.causal = causal, .lse_out = n_win > 0 ? &lp_t : li};
            if (!split_i) VQ_FORWARD_IF_ERROR(sdpa(ctx, qi, keys, &ek, &ev, ks, oi, &o, &bp));
        }
        if (n_win > 0) {
            /* the window's rows of each head, made compact (the CUDA kernels take compact tensors) */
            const size_t row = (size_t)c->D * 2, half = (size_t)(c->Hkv * L->res_cap) * row;
            VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, k_win, (size_t)n_win * row, win_of(wins, sls, i), (size_t)L->res_cap * row,
                                                    (size_t)n_win * row, (size_t)c->Hkv));
            VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, v_win, (size_t)n_win * row, (const char *)win_of(wins, sls, i) + half,
                                                    (size_t)L->res_cap * row, (size_t)n_win * row, (size_t)c->Hkv));
            int64_t wsh[4] = {1, c->Hkv, n_win, c->D};
            DLTensor kw, vw;
            vq_cache_view(c, &kw, wsh, 4, VQ_DT_F16, k_win);
            vq_cache_view(c, &vw, wsh, 4, VQ_DT_F16, v_win);
            const vq_encoded_keys wk = {.format = VQ_KEYS_F16, .f16 = {&kw}};
            const vq_encoded_values wv = vq_f16_values(&vw);
            if (split_i) {
                const int64_t r1 = sl->n_enc - (sl->n - Sq) > 0 ? sl->n_enc - (sl->n - Sq) : 0;
                VQ_FORWARD_IF_ERROR(
                    split_rows(c, qi, oi, li, keys, &ek, &ev, ks, &wk, &wv, scale, Sq, r1, &bp, &bw, split));
                continue;
            }
            const bool alone = nh == 0;
            const vq_attend_opts o = {.causal = causal, .lse_out = alone ? li : &lw_t};
            VQ_FORWARD_IF_ERROR(sdpa(ctx, qi, &wk, &wk, &wv, scale, alone ? oi : &ow_t, &o, &bw));
            if (!alone)
                VQ_FORWARD_IF_ERROR(vq_cache_forward(ctx, vq_attention_merge(ctx, oi, &lp_t, &ow_t, &lw_t, oi, li),
                                                     "vq_cache_attend"));
        }
    }
    return VQ_OK;
}

/* ---- the paged decode step ---- */

/* One layer's device page tables: row `slot` holds the page table of the
 * sequence in that slot (ld = the chunk's pages, the most a sequence can
 * hold); shadow is what the device rows hold, n[slot] how many entries of it
 * are valid (-1: none). */
typedef struct vq_cache_cuda_pages {
    int32_t *dev, *shadow;
    int64_t *n;
    int64_t ld;
} vq_cache_cuda_pages;

void vq_cache_cuda_release(vq_cache *c)
{
    for (int l = 0; c->cuda_pages && l < c->L; l++) {
        vq_cache_mem_free(c, c->cuda_pages[l].dev);
        free(c->cuda_pages[l].shadow);
        free(c->cuda_pages[l].n);
    }
    free(c->cuda_pages);
    c->cuda_pages = NULL;
}

/* The page tables of layer l, made on first use (NULL: out of memory). */
static vq_cache_cuda_pages *layer_pages(vq_cache *c, int l)
{
    if (c->cuda_pages == NULL && (c->cuda_pages = calloc((size_t)c->L, sizeof *c->cuda_pages)) == NULL) {
        vq_fail(c->ctx, VQ_ERR_OUT_OF_MEMORY, "vq_cache_attend: out of host memory for the page tables");
        return NULL;
    }
    vq_cache_cuda_pages *lp = &c->cuda_pages[l];
    if (lp->dev) return lp;
    const int64_t ld = c->layers[l].chunks[0].n_pages, cells = ld * c->max_seqs;
    lp->shadow = malloc(sizeof *lp->shadow * (size_t)cells);
    lp->n = malloc(sizeof *lp->n * (size_t)c->max_seqs);
    if (lp->shadow == NULL || lp->n == NULL) {
        vq_fail(c->ctx, VQ_ERR_OUT_OF_MEMORY, "vq_cache_attend: out of host memory for the page tables");
    } else {
        lp->dev = vq_cache_mem_alloc(c, sizeof(int32_t) * (size_t)cells); /* sets the message on failure */
    }
    if (lp->dev == NULL) {
        free(lp->shadow);
        free(lp->n);
        *lp = (vq_cache_cuda_pages){0};
        return NULL;
    }
    for (int i = 0; i < c->max_seqs; i++) lp->n[i] = -1;
    lp->ld = ld;
    return lp;
}

/* Makes device row `slot` hold sl's page table (uploads only a change). */
static vq_status sync_pages(vq_cache *c, vq_cache_cuda_pages *lp, int slot, const vq_cache_seq_layer *sl)
{
    int32_t *row = lp->shadow + (int64_t)slot * lp->ld;
    const size_t bytes = sizeof(int32_t) * (size_t)sl->n_pages;
    if (lp->n[slot] >= sl->n_pages && memcmp(row, sl->pages, bytes) == 0) return VQ_OK;
    memcpy(row, sl->pages, bytes);
    lp->n[slot] = -1; /* until the upload is enqueued */
    if (bytes > 0) VQ_FORWARD_IF_ERROR(vq_cuda_upload_async(c->ctx, lp->dev + (int64_t)slot * lp->ld, row, bytes));
    lp->n[slot] = sl->n_pages;
    return VQ_OK;
}

/* Rows [i0, i0 + n) of a compact rank-3/4 tensor t as a compact view. */
static DLTensor *rows_of(row_view *v, const DLTensor *t, int64_t i0, int64_t n)
{
    row_of(v, t, i0);
    v->shape[0] = n;
    return &v->t;
}

/* Stream s of a device chunk of N pages as a compact tensor [N,Hkv,rows,last],
 * [N,Hkv,rows] or [N,rows] (device pools are page-major, cache_internal.h). */
static void chunk_view(const vq_cache *c, const vq_cache_layer *L, const vq_cache_chunk *ch, int s, DLTensor *t,
                       int64_t *shape)
{
    const vq_cache_stream *st = &L->streams[s];
    shape[0] = ch->n_pages;
    if (st->ndim == 2) shape[1] = st->rows;
    else shape[1] = c->Hkv, shape[2] = st->rows, shape[3] = st->last;
    vq_cache_view(c, t, shape, st->ndim, st->dtype, ch->base + ch->n_pages * st->page_off);
}

/* The layer's first chunk as the attention's tensors (views only). */
typedef struct chunk_tensors {
    DLTensor sv[VQ_CACHE_MAX_STREAMS], tb[VQ_CT_COUNT];
    int64_t ss[VQ_CACHE_MAX_STREAMS][4], ts[VQ_CT_COUNT][4];
    vq_encoded_keys ek;
    vq_encoded_values ev;
    vq_cuda_kivi_mix_keys mix;
    const vq_encoded_keys *keys; /* cuda_keys */
} chunk_tensors;

static void describe_chunk0(const vq_cache *c, const vq_cache_layer *L, chunk_tensors *t)
{
    for (int s = 0; s < L->n_streams; s++) chunk_view(c, L, &L->chunks[0], s, &t->sv[s], t->ss[s]);
    vq_cache_table_tensors(c, L, t->tb, t->ts);
    vq_cache_describe(c, L, t->sv, t->tb, &t->ek, &t->ev);
    t->keys = cuda_keys(c, L, t->sv, &t->ek, &t->mix);
}

/* Which kernel a paged decode of layer L runs. */
typedef enum paged_kind { PAGED_NONE = 0, PAGED_SDPA, PAGED_KIVI } paged_kind;

static paged_kind paged_kind_of(const vq_cache *c, const vq_cache_layer *L, const DLTensor *q, const DLTensor *out,
                                const DLTensor *lse, int64_t Sq)
{
    if (Sq != 1 || L->n_chunks != 1 || L->head_major || c->P % 32 != 0 || !vq_tensor_is_compact(q) || !vq_tensor_is_compact(out) ||
        (lse && !vq_tensor_is_compact(lse)))
        return PAGED_NONE;
    const vq_key_config *kc = &L->cfg.keys;
    const vq_value_config *vc = &L->cfg.values;
    /* the fast KIVI kernel: one group for keys (tokens) and values (channels); KIVI keys over other
     * values go to the per-format skeleton below */
    if (kc->method == VQ_KEY_KIVI && vc->method == VQ_VALUE_KIVI && vc->bits == kc->bits &&
        vc->group_size == kc->group_size && kc->group_size % 32 == 0 && (c->D == 64 || c->D == 128 || c->D == 256))
        return PAGED_KIVI;
    /* the key format says whether its pages are read in place (keys_registry.h) */
    chunk_tensors t;
    describe_chunk0(c, L, &t);
    const vq_cu_key_format *kf = vq_cu_key_format_of((int)t.keys->format);
    return kf != NULL && kf->paged ? PAGED_SDPA : PAGED_NONE;
}

static vq_status attend_paged(vq_cache *c, int layer, paged_kind kind, int n_seq, vq_cache_seq_layer *const *sls,
                              const int *slots, const f16_wins *wins, const DLTensor *q, DLTensor *out, DLTensor *lse, float scale)
{
    vq_ctx *ctx = c->ctx;
    vq_cache_layer *L = &c->layers[layer];
    vq_cache_cuda_pages *lp = layer_pages(c, layer);
    if (lp == NULL) return VQ_ERR_OUT_OF_MEMORY;
    chunk_tensors t;
    describe_chunk0(c, L, &t);
    const vq_encoded_keys ek = t.ek;
    const vq_encoded_values ev = t.ev;
    const vq_encoded_keys *keys = t.keys;
    /* QJL's norm stream holds ||k|| / sqrt(D) (cache_encode.c) */
    const float ks = L->cfg.keys.method == VQ_KEY_QJL ? scale * sqrtf((float)c->D) : scale;
    for (int i0 = 0; i0 < n_seq; i0 += VQ_CU_PAGED_MAX_B) {
        const int nb = n_seq - i0 < VQ_CU_PAGED_MAX_B ? n_seq - i0 : VQ_CU_PAGED_MAX_B;
        vq_cu_paging pg = {.pages = lp->dev, .ld = (int)lp->ld, .P = (int)c->P};
        vq_cu_window win = {.cap = (int)L->res_cap, .qmul = scale * 1.4426950408889634f};
        vq_cu_bound bd;
        memset(&bd, 0, sizeof bd);
        bool any_win = false;
        for (int b = 0; b < nb; b++) {
            const vq_cache_seq_layer *sl = sls[i0 + b];
            pg.slot[b] = slots[i0 + b];
            VQ_FORWARD_IF_ERROR(sync_pages(c, lp, pg.slot[b], sl));
            pg.n_tok[b] = (int)held(c, sl);
            win.kv[b] = win_of(wins, sls, i0 + b);
            win.n[b] = (int)(sl->n - sl->n_enc);
            any_win |= win.n[b] > 0;
            /* a sliding window: the decode row sees tokens from n - W on, of the pages and of the window */
            const vq_cu_bound one = bound_of(L, sl, 1, false, vq_cache_first_token(c, sl));
            bd.on = one.on;
            bd.lo[b] = one.lo[0];
            const int64_t wlo = sl->n - L->sliding - sl->n_enc;
            win.lo[b] = L->sliding > 0 && wlo > 0 ? (int)wlo : 0;
        }
        row_view qv, ov, lv;
        DLTensor *qi = rows_of(&qv, q, i0, nb), *oi = rows_of(&ov, out, i0, nb);
        DLTensor *li = lse ? rows_of(&lv, lse, i0, nb) : NULL;
        const vq_cu_window *w = any_win ? &win : NULL;
        if (kind == PAGED_KIVI) {
            VQ_FORWARD_IF_ERROR(vq_cache_forward(
                ctx,
                vq_cuda_kivi_attend(ctx, qi, ek.kivi.codes, ek.kivi.scale, ek.kivi.zero, ev.kivi.codes,
                                    ev.kivi.scale, ev.kivi.zero, (int)L->cfg.keys.group_size, L->cfg.keys.bits,
                                    scale, 0, false, &pg, w, &bd, oi, li),
                "vq_cache_attend"));
        } else {
            VQ_FORWARD_IF_ERROR(vq_cache_forward(
                ctx, vq_cuda_fused_sdpa_paged(ctx, qi, keys, &ev, ks, &pg, w, &bd, oi, li), "vq_cache_attend"));
        }
    }
    return VQ_OK;
}

/* The f16 windows the kernels attend, win_of(wins, sls, i) for sequence i
 * in the f16 window layout [2][Hkv][res_cap][D]: its own window
 * (VQ_WINDOW_F16), or its TurboQuant window's rows decoded to f16 into
 * c->wdec (all sequences' rows gathered into one block and decoded by one
 * codec call per half, the codec the append's round trip uses). The CPU
 * cache attends those codes in f32; the f16 rounding of the decoded rows is
 * the difference. */
static vq_status f16_windows(vq_cache *c, const vq_cache_layer *L, int n_seq, vq_cache_seq_layer *const *sls,
                             f16_wins *wins)
{
    int64_t sumN = 0;
    *wins = (f16_wins){NULL, 0};
    for (int i = 0; i < n_seq; i++) sumN += sls[i]->n - sls[i]->n_enc;
    if (!vq_cache_coded_window(c) || L->res_cap == 0 || sumN == 0) return VQ_OK;
    const int64_t Hkv = c->Hkv, D = c->D, cap = L->res_cap;
    const size_t win = (size_t)(2 * Hkv * cap * D * 2), dec = (win * (size_t)n_seq + 255) & ~(size_t)255;
    const size_t wb = ((size_t)(Hkv * sumN * L->win_token_bytes) + 255) & ~(size_t)255;
    const size_t eb = ((size_t)(2 * Hkv * sumN * D * 2) + 255) & ~(size_t)255;
    unsigned char *st = vq_cache_stage_buf(c, &c->wdec, dec + wb + eb + vq_cache_window_scratch(c, sumN));
    if (st == NULL) return VQ_ERR_OUT_OF_MEMORY;
    unsigned char *W = st + dec, *C = st + dec + wb + eb;
    uint16_t *E = (uint16_t *)(void *)(st + dec + wb);
    vq_status s = VQ_OK;
    vq_cache_copies_begin(c); /* a few copies per sequence: one launch each way */
    for (int64_t i = 0, off = 0; i < n_seq && s == VQ_OK; i++) {
        const int64_t n = sls[i]->n - sls[i]->n_enc;
        s = vq_cache_window_copy(c, L, W, sumN, off, sls[i]->res, cap, 0, n);
        off += n;
    }
    VQ_FORWARD_IF_ERROR(vq_cache_copies_end(c, s));
    VQ_FORWARD_IF_ERROR(vq_cache_forward(c->ctx, vq_cache_window_decode(c, L, W, sumN, E, E + Hkv * sumN * D, C),
                                         "vq_cache_attend"));
    vq_cache_copies_begin(c);
    for (int64_t i = 0, off = 0; i < n_seq && s == VQ_OK; i++) {
        const int64_t n = sls[i]->n - sls[i]->n_enc;
        for (int half = 0; half < 2 && n > 0 && s == VQ_OK; half++)
            s = vq_cache_mem_copy2d(c, (uint16_t *)(void *)(st + (size_t)i * win) + half * Hkv * cap * D,
                                    (size_t)(cap * D * 2), E + (half * Hkv * sumN + off) * D, (size_t)(sumN * D * 2),
                                    (size_t)(n * D * 2), (size_t)Hkv);
        off += n;
    }
    VQ_FORWARD_IF_ERROR(vq_cache_copies_end(c, s));
    *wins = (f16_wins){st, win};
    return VQ_OK;
}

vq_status vq_cache_attend_cuda(vq_cache *c, int layer, int n_seq, vq_cache_seq_layer *const *sls, const int *slots,
                               const DLTensor *q, DLTensor *out, DLTensor *lse, float scale, bool causal, int64_t Sq)
{
    vq_cache_layer *L = &c->layers[layer];
    f16_wins wins;
    VQ_FORWARD_IF_ERROR(f16_windows(c, L, n_seq, sls, &wins));
    const char *force = getenv("VQ_CACHE_CUDA_GATHER");
    const paged_kind kind =
        force && strcmp(force, "1") == 0 ? PAGED_NONE : paged_kind_of(c, L, q, out, lse, Sq);
    if (kind != PAGED_NONE) return attend_paged(c, layer, kind, n_seq, sls, slots, &wins, q, out, lse, scale);
    return attend_gathered(c, layer, n_seq, sls, &wins, q, out, lse, scale, causal, Sq);
}
#endif /* VQ_WITH_CUDA */
