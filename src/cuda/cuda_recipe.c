/* cuda_recipe.c — sink tokens and exact transforms on a CUDA cache
 * (cache/cache_cuda.h): the device side of cache_recipe.c, with the same
 * semantics and order of operations.
 *
 * A sequence layer keeps its sinks and tables on the host (what fork,
 * truncate, persistence and vq_cache_get_transforms read) and a device copy
 * of both (sink_dev, xf_dev), uploaded when it is stale: the sinks change
 * only during a sequence's first S tokens and the tables once, so a decode
 * step uploads nothing.
 *
 * Append: the rows past the sinks of all the call's sequences are
 * transformed into f16 staging by one elementwise kernel (the CPU cache
 * transforms in f32 and rounds to f16 in its page path: the same bits), then
 * appended by the page path. The fits and the sink rows (a sequence's first
 * chunk and first S tokens only) are computed on the host from downloaded
 * rows (cache_recipe.c).
 *
 * Attend, per group of sequences with the same leading sink rows (as on the
 * CPU; a decode step is one group): the queries divided by the key scales
 * into f32 staging (one kernel), the page path, then one kernel that merges
 * each row with its sequence's sinks through the log-sum-exp in double (the
 * CPU's merge_rows), adds the value mean, writes out in its dtype and moves
 * the lse back to the untransformed scores: three launches and one small
 * upload (the group's sequence list) beside the page path, whatever the
 * batch. Rows at sink positions (a prefill chunk that starts inside the
 * sinks) attend the sinks alone with vq_fused_sdpa, causally. Every step is
 * enqueued on the ctx's stream. */
#ifdef VQ_WITH_CUDA
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_cuda.h"
#include "cuda/attend_params.h"
#include "cuda/cuda_backend.h"
#include "cuda/recipe_launch.h"

#define LAUNCH(ctx, call)                                                          \
    do {                                                                           \
        VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));                                   \
        VQ_FORWARD_IF_ERROR(vq_cuda_check((ctx), (call), "vq_cache kernel launch")); \
    } while (0)

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

vq_status vq_cache_cuda_convert(vq_cache *c, const void *src, vq_dtype sdt, void *dst, vq_dtype ddt, int64_t n)
{
    return vq_cache_cuda_convert_rows(c, src, sdt, n, dst, ddt, n, n, 1);
}

vq_status vq_cache_cuda_convert_rows(vq_cache *c, const void *src, vq_dtype sdt, int64_t src_pitch, void *dst,
                                     vq_dtype ddt, int64_t dst_pitch, int64_t width, int64_t rows)
{
    LAUNCH(c->ctx, vq_cu_convert(src, sdt == VQ_DT_F16, src_pitch, dst, ddt == VQ_DT_F16, dst_pitch, width, rows,
                                 c->ctx->stream));
    return VQ_OK;
}

/* sl's device copies made equal to its host sinks and tables. */
static vq_status sync_seq(vq_cache *c, int l, vq_cache_seq_layer *sl)
{
    if (!sl->dev_stale) return VQ_OK;
    /* in stream order: work queued before may still read the old copies */
    if (sl->sink_dev)
        VQ_FORWARD_IF_ERROR(vq_cuda_upload_async(c->ctx, sl->sink_dev, sl->sink, vq_cache_sink_bytes(c)));
    if (sl->xf_dev) VQ_FORWARD_IF_ERROR(vq_cuda_upload_async(c->ctx, sl->xf_dev, sl->xf, vq_cache_xf_bytes(c, l)));
    sl->dev_stale = false;
    return VQ_OK;
}

vq_status vq_cache_recipe_append_cuda(vq_cache *c, int layer, int n_seq, vq_cache_seq_layer *const *sls,
                                      const int64_t *ns, const float *const *tab, const vq_cache_tensor *kv, int64_t m,
                                      int n_in, const int64_t *ids)
{
    vq_ctx *ctx = c->ctx;
    const int64_t D = c->D, Hkv = c->Hkv, kvd = Hkv * D;
    int first = 0, n_fit = 0;
    while (ns[first] == m) first++;
    for (int i = 0; i < n_seq; i++) n_fit += ns[i] < m && tab[i] != NULL && tab[i] != sls[i]->xf;
    const int64_t mi = m - ns[first];
    const size_t block = align256((size_t)(n_in * Hkv * mi * D) * 2), tb = align256((size_t)(3 * kvd * n_fit) * 4);
    const size_t lb = sizeof(vq_cu_recipe_seq) * (size_t)n_in;
    unsigned char *st = vq_cache_stage_buf(c, &c->recipe_dev, 2 * block + tb + lb);
    /* the list of the sequences, host scratch 1 (the page path's append uses 0) */
    vq_cu_recipe_seq *hseq = vq_cache_host_scratch(c, 1, lb);
    if (st == NULL || hseq == NULL) return VQ_ERR_OUT_OF_MEMORY;
    uint16_t *E[2] = {(uint16_t *)(void *)st, (uint16_t *)(void *)(st + block)};
    float *fitted = (float *)(void *)(st + 2 * block);
    vq_cu_recipe_seq *dseq = (vq_cu_recipe_seq *)(void *)(st + 2 * block + tb);
    for (int i = 0, b = 0; i < n_seq; i++) {
        if (ns[i] == m) continue;
        const float *t = NULL;
        if (tab[i] != NULL && tab[i] == sls[i]->xf) {
            VQ_FORWARD_IF_ERROR(sync_seq(c, layer, sls[i]));
            t = sls[i]->xf_dev;
        } else if (tab[i] != NULL) {
            VQ_FORWARD_IF_ERROR(vq_cuda_upload_async(ctx, fitted, tab[i], sizeof(float) * (size_t)(3 * kvd)));
            t = fitted;
            fitted += 3 * kvd;
        }
        hseq[b++] = (vq_cu_recipe_seq){.xf = t, .sink = NULL, .b = i, .n_sink = 0};
    }
    VQ_FORWARD_IF_ERROR(vq_cuda_upload_async(ctx, dseq, hseq, lb));
    const vq_cu_recipe_rows rows = {
        .seqs = dseq, .n = n_in, .H = (int)Hkv, .D = (int)D, .ns = ns[first], .T = mi,
        .x = {kv[0].base, kv[1].base}, .f16 = kv[0].dt == VQ_DT_F16,
        .xs = {{kv[0].stride[0], kv[0].stride[1], kv[0].stride[2]}, {kv[1].stride[0], kv[1].stride[1], kv[1].stride[2]}},
        .dst = {E[0], E[1]}};
    LAUNCH(ctx, vq_cu_recipe_group_rows(&rows, ctx->stream));
    int64_t sh[4] = {n_in, Hkv, mi, D};
    DLTensor ks, vs;
    vq_cache_view(c, &ks, sh, 4, VQ_DT_F16, E[0]);
    vq_cache_view(c, &vs, sh, 4, VQ_DT_F16, E[1]);
    return vq_cache_append_tokens(c, layer, n_in, ids, &ks, &vs, NULL);
}

/* ---- attend ---- */

/* Element [b, 0, s, 0] of a rank-4 tensor (or [b, 0, s] of rank 3). */
static char *at(const DLTensor *t, int64_t b, int64_t s)
{
    return (char *)vq_data(t) + (b * vq_stride(t, 0) + s * vq_stride(t, 2)) * (int64_t)vq_dtype_size(vq_dtype_of(t));
}

typedef struct attend_call {
    const vq_cache_layer *L;
    const DLTensor *q, *out, *lse;
    double scale;
    bool causal;
    int64_t Sq;
    /* device staging: sink-only rows' queries [Hq][Sq][D], the sinks'
     * attention out [Hq][Sq][D] and lse [Hq][Sq], compact sinks [2][Hkv][S][D] */
    float *sq, *so, *sl;
    uint16_t *sinkc;
} attend_call;

/* Query rows [t0, t0 + T) of sequence b -> dst [Hq][T][D] f32, divided by
 * the key scales of its tables. */
static vq_status stage_query(vq_cache *c, const attend_call *a, const vq_cache_seq_layer *sl, int64_t b, int64_t t0,
                             int64_t T, float *dst)
{
    const int64_t kvd = (int64_t)c->Hkv * c->D;
    const bool tab = sl->xf != NULL && sl->xf_set;
    const float *scales = tab && a->L->xf.smooth ? sl->xf_dev + 2 * kvd : NULL;
    LAUNCH(c->ctx, vq_cu_recipe_query(at(a->q, b, t0), vq_dtype_of(a->q) == VQ_DT_F16, vq_stride(a->q, 1),
                                      vq_stride(a->q, 2), c->Hq, T, c->D, c->Hq / c->Hkv, scales, dst, c->ctx->stream));
    return VQ_OK;
}

/* o, l ([1,Hq,T,D] and [1,Hq,T] f32) <- attention of the staged queries qs
 * (rows [0, T) of sequence sl, at sink positions) over its sinks, causal as
 * the rows' positions ask; a sliding-window layer's row sees the sinks
 * among its newest W tokens only (merge_rows in cache_recipe.c). */
static vq_status attend_sinks(vq_cache *c, const attend_call *a, const vq_cache_seq_layer *sl, float *qs, int64_t T,
                              bool causal, float *o, float *l)
{
    vq_ctx *ctx = c->ctx;
    const int64_t D = c->D, Hkv = c->Hkv, n = sl->n_sink;
    const uint16_t *K = sl->sink_dev;
    if (n < c->S) { /* the kernels take compact tensors: the sinks held so far, both halves */
        VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, a->sinkc, (size_t)(n * D * 2), sl->sink_dev, (size_t)(c->S * D * 2),
                                                (size_t)(n * D * 2), (size_t)(2 * Hkv)));
        K = a->sinkc;
    }
    int64_t qsh[4] = {1, c->Hq, T, D}, ksh[4] = {1, Hkv, n, D}, lsh[3] = {1, c->Hq, T};
    DLTensor tq, tk, tv, to, tl;
    vq_cache_view(c, &tq, qsh, 4, VQ_DT_F32, qs);
    vq_cache_view(c, &tk, ksh, 4, VQ_DT_F16, (void *)(uintptr_t)K);
    vq_cache_view(c, &tv, ksh, 4, VQ_DT_F16, (void *)(uintptr_t)(K + Hkv * n * D));
    vq_cache_view(c, &to, qsh, 4, VQ_DT_F32, o);
    vq_cache_view(c, &tl, lsh, 3, VQ_DT_F32, l);
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16 = {&tk}};
    const vq_encoded_values ev = vq_f16_values(&tv);
    const vq_attend_opts ao = {.causal = causal, .lse_out = &tl};
    const int64_t W = a->L->sliding;
    if (W <= 0)
        return vq_cache_forward(ctx, vq_fused_sdpa(ctx, &tq, &ek, &ev, (float)a->scale, NULL, &to, &ao),
                                "vq_cache_attend");
    /* row t ends at n - T + t + 1 (causal) or n (the sequence holds its sinks only) */
    vq_cu_bound bd;
    memset(&bd, 0, sizeof bd);
    const int64_t lo = n - W - (causal ? T - 1 : 0);
    bd.on = 1;
    bd.step = causal;
    bd.lo[0] = (int)(lo < -(1 << 30) ? -(1 << 30) : lo);
    return vq_cache_forward(ctx, vq_cuda_fused_sdpa_bounded(ctx, &tq, &ek, &ev, (float)a->scale, &to, &ao, &bd),
                            "vq_cache_attend");
}

/* Rows [t0, t0 + T) of sequence b from the f32 staging o, l (NULL: rows
 * that see no token) into out and lse. */
static vq_status finish(vq_cache *c, const attend_call *a, const vq_cache_seq_layer *sl, int64_t b, int64_t t0,
                        int64_t T, const float *o, const float *l, bool zero_empty)
{
    const int64_t kvd = (int64_t)c->Hkv * c->D;
    const bool tab = sl->xf != NULL && sl->xf_set;
    const float *mv = tab && a->L->xf.center_values ? sl->xf_dev + kvd : NULL;
    const float *mk = tab && a->L->xf.center_keys ? sl->xf_dev : NULL;
    float *lse = a->lse ? (float *)(void *)at(a->lse, b, t0) : NULL;
    LAUNCH(c->ctx, vq_cu_recipe_finish(o, l, zero_empty, at(a->q, b, t0), vq_dtype_of(a->q) == VQ_DT_F16,
                                       vq_stride(a->q, 1), vq_stride(a->q, 2), at(a->out, b, t0),
                                       vq_dtype_of(a->out) == VQ_DT_F16, vq_stride(a->out, 1), vq_stride(a->out, 2),
                                       lse, a->lse ? vq_stride(a->lse, 1) : 0, a->lse ? vq_stride(a->lse, 2) : 0,
                                       c->Hq, T, c->D, c->Hq / c->Hkv, mv, mk, a->scale, c->ctx->stream));
    return VQ_OK;
}

/* Rows [0, T) of sequence b, at sink positions: its sinks only. */
static vq_status sink_rows(vq_cache *c, const attend_call *a, const vq_cache_seq_layer *sl, int64_t b, int64_t T)
{
    if (sl->n_sink == 0) return finish(c, a, sl, b, 0, T, NULL, NULL, true);
    VQ_FORWARD_IF_ERROR(stage_query(c, a, sl, b, 0, T, a->sq));
    /* row t sits at position n_sink - T + t, the causal rule of vq_fused_sdpa over the sinks */
    VQ_FORWARD_IF_ERROR(attend_sinks(c, a, sl, a->sq, T, a->causal, a->so, a->sl));
    return finish(c, a, sl, b, 0, T, a->so, a->sl, true);
}

vq_status vq_cache_recipe_attend_cuda(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *q,
                                      DLTensor *out, const vq_cache_attend_opts *opts)
{
    vq_ctx *ctx = c->ctx;
    attend_call a = {.L = &c->layers[layer], .q = q, .out = out, .lse = opts ? opts->lse_out : NULL};
    vq_attn_view lse_view;
    VQ_FORWARD_IF_ERROR(vq_cache_attend_check_io(c, n_seq, q, out, opts, &a.Sq, &lse_view));
    a.scale = opts && opts->scale > 0 ? (double)opts->scale : 1.0 / sqrt((double)c->D);
    a.causal = opts && opts->causal;
    const int64_t Sq = a.Sq, Hq = c->Hq, D = c->D;
    /* host scratch: sequence layers, leading sink-only rows, done flags, ids of a group, the group's
     * sequences as the device reads them */
    const size_t hbytes = (sizeof(void *) + 3 * sizeof(int64_t) + sizeof(vq_cu_recipe_seq)) * (size_t)n_seq;
    unsigned char *hs = c->recipe.size >= hbytes ? c->recipe.p : NULL;
    if (hs == NULL) {
        void *p = realloc(c->recipe.p, hbytes);
        VQ_RETURN_IF(ctx, p == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate staging");
        c->recipe.p = hs = p;
        c->recipe.size = hbytes;
    }
    vq_cache_seq_layer **sls = (vq_cache_seq_layer **)(void *)hs;
    int64_t *ns = (int64_t *)(void *)(sls + n_seq), *done = ns + n_seq, *ids = done + n_seq;
    vq_cu_recipe_seq *hseq = (vq_cu_recipe_seq *)(void *)(ids + n_seq);
    VQ_FORWARD_IF_ERROR(vq_cache_recipe_rows(c, layer, n_seq, seq_ids, Sq, a.causal, sls, ns, done));
    for (int i = 0; i < n_seq; i++) VQ_FORWARD_IF_ERROR(sync_seq(c, layer, sls[i]));
    /* device staging: a group's queries, out, lse; then attend_call's; then the group's sequences */
    const size_t rows = (size_t)(n_seq * Hq * Sq), block = align256(sizeof(float) * rows * (size_t)D);
    const size_t lb = align256(sizeof(float) * rows), one = align256(sizeof(float) * (size_t)(Hq * Sq * D));
    const size_t onel = align256(sizeof(float) * (size_t)(Hq * Sq)), sk = align256(vq_cache_sink_bytes(c));
    unsigned char *st = vq_cache_stage_buf(c, &c->recipe_dev,
                                           2 * block + lb + 2 * one + onel + sk + sizeof *hseq * (size_t)n_seq);
    if (st == NULL) return VQ_ERR_OUT_OF_MEMORY;
    vq_cu_recipe_seq *dseq = (vq_cu_recipe_seq *)(void *)(st + 2 * block + lb + 2 * one + onel + sk);
    float *gq = (float *)(void *)st, *go = (float *)(void *)(st + block), *gl = (float *)(void *)(st + 2 * block);
    a.sq = (float *)(void *)(st + 2 * block + lb);
    a.so = (float *)(void *)(st + 2 * block + lb + one);
    a.sl = (float *)(void *)(st + 2 * block + lb + 2 * one);
    a.sinkc = (uint16_t *)(void *)(st + 2 * block + lb + 2 * one + onel);
    for (int i = 0; i < n_seq; i++) {
        if (done[i]) continue;
        if (ns[i] == Sq) {
            VQ_FORWARD_IF_ERROR(sink_rows(c, &a, sls[i], i, Sq));
            done[i] = 1;
            continue;
        }
        const int64_t Si = Sq - ns[i];
        int n_g = 0;
        for (int j = i; j < n_seq; j++) {
            if (done[j] || ns[j] != ns[i]) continue;
            const vq_cache_seq_layer *sl = sls[j];
            hseq[n_g] = (vq_cu_recipe_seq){.xf = sl->xf != NULL && sl->xf_set ? sl->xf_dev : NULL,
                                           .sink = sl->sink_dev, .b = j, .n_sink = sl->n_sink,
                                           .n_tok = sl->n_sink + sl->n};
            ids[n_g++] = seq_ids[j];
        }
        /* in stream order: the previous group's kernels read dseq before this overwrites it */
        VQ_FORWARD_IF_ERROR(vq_cuda_upload_async(ctx, dseq, hseq, sizeof *hseq * (size_t)n_g));
        const vq_cu_recipe_group gr = {
            .seqs = dseq, .n_g = n_g, .Hq = (int)Hq, .G = c->Hq / c->Hkv, .D = (int)D, .S = c->S, .ns = ns[i],
            .T = Si, .Sq = Sq, .W = a.L->sliding, .causal = a.causal, .center_keys = a.L->xf.center_keys, .center_values = a.L->xf.center_values,
            .smooth = a.L->xf.smooth, .scale = a.scale, .q = vq_data(q), .q_f16 = vq_dtype_of(q) == VQ_DT_F16,
            .qs = {vq_stride(q, 0), vq_stride(q, 1), vq_stride(q, 2)}, .out = vq_data(out),
            .out_f16 = vq_dtype_of(out) == VQ_DT_F16, .os = {vq_stride(out, 0), vq_stride(out, 1), vq_stride(out, 2)},
            .lse = a.lse ? (float *)vq_data(a.lse) : NULL,
            .ls = {a.lse ? vq_stride(a.lse, 0) : 0, a.lse ? vq_stride(a.lse, 1) : 0, a.lse ? vq_stride(a.lse, 2) : 0}};
        LAUNCH(ctx, vq_cu_recipe_group_query(&gr, gq, ctx->stream));
        VQ_FORWARD_IF_ERROR(vq_cache_recipe_pages(c, layer, n_g, ids, gq, go, gl, Si, opts));
        /* the rows past the sinks see every sink: merged, mean added, written */
        LAUNCH(ctx, vq_cu_recipe_group_merge(&gr, gq, go, gl, ctx->stream));
        for (int j = i; j < n_seq; j++) {
            if (done[j] || ns[j] != ns[i]) continue;
            if (ns[j] > 0) VQ_FORWARD_IF_ERROR(sink_rows(c, &a, sls[j], j, ns[j]));
            done[j] = 1;
        }
    }
    return VQ_OK;
}
#endif /* VQ_WITH_CUDA */
