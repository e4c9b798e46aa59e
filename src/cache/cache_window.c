/* cache_window.c — the residual window's storage (vq_cache_window): its
 * streams, copies of window rows between windows and staging blocks, and the
 * 8-bit codec of VQ_WINDOW_TURBO8 (the public TurboQuant codec with 8 bits
 * and the layer's key / value signs).
 *
 * A block "in the window layout with capacity N" holds stream w as
 * [Hkv][N][row_bytes_w] at byte offset Hkv * N * (row bytes of the streams
 * before w): a sequence's window is such a block with N = res_cap, and
 * append stages rows in blocks of other capacities. */
#include "cache/cache_internal.h"

static void add_wstream(const vq_cache *c, vq_cache_layer *L, const char *name, vq_dtype dt, int64_t last,
                        bool is_key, int64_t *row_total)
{
    vq_cache_wstream *w = &L->wstreams[L->n_wstreams++];
    *w = (vq_cache_wstream){name, dt, last, last * (int64_t)vq_dtype_size(dt), 0, is_key};
    w->off = (int64_t)c->Hkv * L->res_cap * *row_total;
    *row_total += w->row_bytes;
}

void vq_cache_window_layout(const vq_cache *c, vq_cache_layer *L)
{
    L->n_wstreams = 0;
    L->win_token_bytes = 0;
    if (L->res_cap == 0) return;
    int64_t *t = &L->win_token_bytes;
    if (c->window == VQ_WINDOW_TURBO8) {
        add_wstream(c, L, "k_idx", VQ_DT_U8, c->D, true, t);
        add_wstream(c, L, "k_scale", VQ_DT_F32, 1, true, t);
        add_wstream(c, L, "v_idx", VQ_DT_U8, c->D, false, t);
        add_wstream(c, L, "v_scale", VQ_DT_F32, 1, false, t);
    } else {
        add_wstream(c, L, "k", VQ_DT_F16, c->D, true, t);
        add_wstream(c, L, "v", VQ_DT_F16, c->D, false, t);
    }
}

size_t vq_cache_window_bytes(const vq_cache *c, const vq_cache_layer *L)
{
    return (size_t)((int64_t)c->Hkv * L->res_cap * L->win_token_bytes);
}

/* Offset of stream w in a block of capacity N. */
static int64_t block_off(const vq_cache *c, const vq_cache_layer *L, int w, int64_t N)
{
    int64_t before = 0;
    for (int i = 0; i < w; i++) before += L->wstreams[i].row_bytes;
    return (int64_t)c->Hkv * N * before;
}

vq_status vq_cache_window_copy(vq_cache *c, const vq_cache_layer *L, unsigned char *dst, int64_t dst_cap,
                               int64_t dst_row, const unsigned char *src, int64_t src_cap, int64_t src_row,
                               int64_t count)
{
    if (count <= 0) return VQ_OK;
    for (int w = 0; w < L->n_wstreams; w++) {
        const int64_t rb = L->wstreams[w].row_bytes;
        VQ_FORWARD_IF_ERROR(vq_cache_mem_copy2d(c, dst + block_off(c, L, w, dst_cap) + dst_row * rb,
                                                (size_t)(dst_cap * rb), src + block_off(c, L, w, src_cap) + src_row * rb,
                                                (size_t)(src_cap * rb), (size_t)(count * rb), (size_t)c->Hkv));
    }
    return VQ_OK;
}

/* Views of one half (0 keys, 1 values) of a TURBO8 block of capacity N:
 * codes [1,Hkv,N,D] u8, scales [1,Hkv,N] f32, the half's signs [D]. */
typedef struct half_views {
    DLTensor idx, scale, diag;
    int64_t ish[4], ssh[3], dsh[1];
} half_views;

static void turbo8_views(const vq_cache *c, const vq_cache_layer *L, const unsigned char *w, int64_t N, int half,
                         half_views *hv)
{
    hv->ish[0] = 1, hv->ish[1] = c->Hkv, hv->ish[2] = N, hv->ish[3] = c->D;
    hv->ssh[0] = 1, hv->ssh[1] = c->Hkv, hv->ssh[2] = N;
    hv->dsh[0] = c->D;
    vq_cache_view(c, &hv->idx, hv->ish, 4, VQ_DT_U8, (void *)(w + block_off(c, L, 2 * half, N)));
    vq_cache_view(c, &hv->scale, hv->ssh, 3, VQ_DT_F32, (void *)(w + block_off(c, L, 2 * half + 1, N)));
    vq_cache_view(c, &hv->diag, hv->dsh, 1, VQ_DT_F32, L->tables[half ? VQ_CT_VDIAG : VQ_CT_KDIAG].dev);
}

/* x [2][Hkv][N][D] f16 <-> the TURBO8 block w of capacity N (decode: w -> x). */
static vq_status turbo8_code(vq_cache *c, const vq_cache_layer *L, unsigned char *w, int64_t N, uint16_t *xk,
                             uint16_t *xv, bool decode)
{
    if (N <= 0) return VQ_OK;
    for (int half = 0; half < 2; half++) {
        half_views hv;
        turbo8_views(c, L, w, N, half, &hv);
        int64_t xsh[4] = {1, c->Hkv, N, c->D};
        DLTensor xt;
        vq_cache_view(c, &xt, xsh, 4, VQ_DT_F16, half ? xv : xk);
        VQ_FORWARD_IF_ERROR(decode ? vq_turboquant_hadamard_dequantize(c->ctx, &hv.idx, &hv.scale, &hv.diag, 8, &xt)
                                   : vq_turboquant_hadamard_quantize(c->ctx, &xt, &hv.diag, 8, &hv.idx, &hv.scale, NULL));
    }
    return VQ_OK;
}

vq_status vq_cache_window_encode(vq_cache *c, const vq_cache_layer *L, const uint16_t *x, int64_t N, unsigned char *w)
{
    /* the codec only reads x */
    return turbo8_code(c, L, w, N, (uint16_t *)(uintptr_t)x, (uint16_t *)(uintptr_t)(x + (int64_t)c->Hkv * N * c->D),
                       false);
}

vq_status vq_cache_window_decode(vq_cache *c, const vq_cache_layer *L, const unsigned char *w, int64_t N,
                                 uint16_t *ek, uint16_t *ev)
{
    /* the codec only reads w */
    return turbo8_code(c, L, (unsigned char *)(uintptr_t)w, N, ek, ev, true);
}
