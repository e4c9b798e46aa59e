/* cache_cuda.c — vq_cache_attend on a CUDA ctx, until the CUDA decode
 * kernels read pages through a page table: per sequence, its pages are
 * gathered (device to device, on the ctx's stream) into one contiguous run
 * per stream, attended with vq_fused_sdpa (the CUDA kernels), and the
 * residual window, attended as plain f16 keys and values, is merged in
 * through the log-sum-exp (vq_attention_merge); the window's rows are copied
 * into a compact buffer first (the CUDA kernels take compact tensors). Everything is enqueued on
 * the ctx's stream; nothing synchronises. Combinations the CUDA kernels do
 * not take yet come back from them as VQ_ERR_UNSUPPORTED, naming the
 * argument. */
#ifdef VQ_WITH_CUDA
#include <string.h>

#include "cache/cache_cuda.h"

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

/* Bytes of one sequence's gathered streams (each region 256-aligned). */
static size_t gather_bytes(const vq_cache *c, const vq_cache_layer *L, int64_t n_enc)
{
    size_t b = 0;
    for (int s = 0; s < L->n_streams; s++)
        b += ((size_t)(L->streams[s].page_bytes * n_enc / c->P) + 255) & ~(size_t)255;
    return b;
}

/* Tokens [0, n_enc) of a sequence's pages -> contiguous streams at dst. */
static vq_status gather(vq_cache *c, const vq_cache_layer *L, const vq_cache_seq_layer *sl, unsigned char *dst,
                        DLTensor *sv, int64_t (*shapes)[4])
{
    const int64_t P = c->P;
    for (int s = 0; s < L->n_streams; s++) {
        const vq_cache_stream *st = &L->streams[s];
        const int64_t gs = P / st->rows, rb = st->last * (int64_t)vq_dtype_size(st->dtype), rows = sl->n_enc / gs;
        for (int64_t pi = 0; pi < sl->n_pages; pi++) {
            const int64_t a = pi * P, b = sl->n_enc < (pi + 1) * P ? sl->n_enc : (pi + 1) * P;
            VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, dst + a / gs * rb, (size_t)(rows * rb),
                                                    vq_cache_page_stream(L, sl->pages[pi], s), (size_t)(st->rows * rb),
                                                    (size_t)((b - a) / gs * rb), st->per_head ? (size_t)c->Hkv : 1));
        }
        int64_t *sh = shapes[s];
        if (st->ndim == 2) sh[0] = 1, sh[1] = rows;
        else sh[0] = 1, sh[1] = c->Hkv, sh[2] = rows, sh[3] = st->last;
        vq_cache_view(c, &sv[s], sh, st->ndim, st->dtype, dst);
        dst += ((size_t)(st->page_bytes * sl->n_enc / P) + 255) & ~(size_t)255;
    }
    return VQ_OK;
}

vq_status vq_cache_attend_cuda(vq_cache *c, int layer, int n_seq, vq_cache_seq_layer *const *sls, const DLTensor *q,
                               DLTensor *out, DLTensor *lse, float scale, bool causal, int64_t Sq)
{
    vq_ctx *ctx = c->ctx;
    vq_cache_layer *L = &c->layers[layer];
    VQ_RETURN_IF(ctx, L->cfg.keys.method == VQ_KEY_RABITQ && L->cfg.keys.rabitq_score == VQ_RABITQ_SCORE_HAMMING,
                 VQ_ERR_UNSUPPORTED,
                 "layer %d: RaBitQ Hamming scoring is not run by the CUDA cache yet (rabitq_score = EXACT is)", layer);
    size_t most = 0;
    for (int i = 0; i < n_seq; i++) {
        const vq_cache_seq_layer *sl = sls[i];
        VQ_RETURN_IF(ctx, sl->n == 0, VQ_ERR_UNSUPPORTED,
                     "argument 'seq_ids[%d]': a sequence with no token of layer %d is not attended by the CUDA cache "
                     "yet",
                     i, layer);
        VQ_RETURN_IF(ctx, causal && Sq > 1 && sl->n > sl->n_enc && sl->n_enc > 0, VQ_ERR_UNSUPPORTED,
                     "causal prefill over pages and a residual window is not run by the CUDA cache yet (seq_ids[%d])",
                     i);
        const size_t b = gather_bytes(c, L, sl->n_enc);
        if (b > most) most = b;
    }
    const size_t ow = ((size_t)(c->Hq * Sq * c->D * 4) + 255) & ~(size_t)255, lw = ((size_t)(c->Hq * Sq * 4) + 255) & ~(size_t)255;
    const size_t wb = ((size_t)(c->Hkv * L->res_cap * c->D * 2) + 255) & ~(size_t)255;
    unsigned char *stage = vq_cache_stage(c, most + ow + 2 * lw + 2 * wb);
    if (stage == NULL) return VQ_ERR_OUT_OF_MEMORY;
    unsigned char *o_win = stage + most, *l_pages = o_win + ow, *l_win = l_pages + lw;
    unsigned char *k_win = l_win + lw, *v_win = k_win + wb;
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
        const int64_t n_win = sl->n - sl->n_enc;
        if (sl->n_enc > 0) {
            DLTensor sv[VQ_CACHE_MAX_STREAMS];
            int64_t ss[VQ_CACHE_MAX_STREAMS][4];
            VQ_FORWARD_IF_ERROR(gather(c, L, sl, stage, sv, ss));
            vq_encoded_keys ek;
            vq_encoded_values ev;
            vq_cache_describe(c, L, sv, tb, &ek, &ev);
            const vq_attend_opts o = {.causal = causal, .lse_out = n_win > 0 ? &lp_t : li};
            VQ_FORWARD_IF_ERROR(vq_cache_forward(ctx, vq_fused_sdpa(ctx, qi, &ek, &ev, ks, NULL, oi, &o), "vq_cache_attend"));
        }
        if (n_win > 0) {
            /* the window's rows of each head, made compact (the CUDA kernels take compact tensors) */
            const size_t row = (size_t)c->D * 2, half = (size_t)(c->Hkv * L->res_cap) * row;
            VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, k_win, (size_t)n_win * row, sl->res, (size_t)L->res_cap * row,
                                                    (size_t)n_win * row, (size_t)c->Hkv));
            VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, v_win, (size_t)n_win * row, (const char *)sl->res + half,
                                                    (size_t)L->res_cap * row, (size_t)n_win * row, (size_t)c->Hkv));
            int64_t wsh[4] = {1, c->Hkv, n_win, c->D};
            DLTensor kw, vw;
            vq_cache_view(c, &kw, wsh, 4, VQ_DT_F16, k_win);
            vq_cache_view(c, &vw, wsh, 4, VQ_DT_F16, v_win);
            const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .plain = {&kw}};
            const vq_encoded_values ev = vq_plain_values(&vw);
            const bool alone = sl->n_enc == 0;
            const vq_attend_opts o = {.causal = causal, .lse_out = alone ? li : &lw_t};
            VQ_FORWARD_IF_ERROR(vq_cache_forward(
                ctx, vq_fused_sdpa(ctx, qi, &ek, &ev, scale, NULL, alone ? oi : &ow_t, &o), "vq_cache_attend"));
            if (!alone)
                VQ_FORWARD_IF_ERROR(vq_cache_forward(ctx, vq_attention_merge(ctx, oi, &lp_t, &ow_t, &lw_t, oi, li),
                                                     "vq_cache_attend"));
        }
    }
    return VQ_OK;
}
#endif /* VQ_WITH_CUDA */
