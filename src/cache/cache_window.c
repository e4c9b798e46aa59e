/* cache_window.c — the residual window's storage (vq_cache_window): its
 * streams, copies of window rows between windows and staging blocks, and the
 * codec of the TurboQuant windows (the public TurboQuant codec with the
 * layer's key / value signs: 8 bits one per byte with f32 scales for
 * VQ_WINDOW_TURBO8; window_bits bit-packed with f16 scales for
 * VQ_WINDOW_TURBO, through u8 codes and f32 scales in scratch).
 *
 * A block "in the window layout with capacity N" holds stream w as
 * [Hkv][N][row_bytes_w] at byte offset Hkv * N * (row bytes of the streams
 * before w): a sequence's window is such a block with N = res_cap, and
 * append stages rows in blocks of other capacities. */
#include "cache/cache_internal.h"
#include "formats/format_bitpack.h"
#ifdef VQ_WITH_CUDA
#include "cache/cache_cuda.h"
#endif

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
    } else if (c->window == VQ_WINDOW_TURBO) {
        /* the u32 streams first: every stream of a block then starts aligned
         * to its elements whatever Hkv * N is */
        const int64_t words = vq_bitpack_words(c->D, c->window_bits);
        add_wstream(c, L, "k_idx", VQ_DT_U32, words, true, t);
        add_wstream(c, L, "v_idx", VQ_DT_U32, words, false, t);
        add_wstream(c, L, "k_scale", VQ_DT_F16, 1, true, t);
        add_wstream(c, L, "v_scale", VQ_DT_F16, 1, false, t);
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

/* Views of one half (0 keys, 1 values) of a TurboQuant window block of
 * capacity N: codes [1,Hkv,N,D] u8 (TURBO8) or [1,Hkv,N,words] u32, scales
 * [1,Hkv,N] f32 (TURBO8) or f16, the half's signs [D]. */
typedef struct half_views {
    DLTensor idx, scale, diag;
    int64_t ish[4], ssh[3], dsh[1];
} half_views;

int vq_cache_window_idx_stream(const vq_cache *c, int half) { return c->window == VQ_WINDOW_TURBO ? half : 2 * half; }

int vq_cache_window_scale_stream(const vq_cache *c, int half)
{
    return c->window == VQ_WINDOW_TURBO ? 2 + half : 2 * half + 1;
}

static void window_views(const vq_cache *c, const vq_cache_layer *L, const unsigned char *w, int64_t N, int half,
                         half_views *hv)
{
    const int si = vq_cache_window_idx_stream(c, half), ss = vq_cache_window_scale_stream(c, half);
    hv->ish[0] = 1, hv->ish[1] = c->Hkv, hv->ish[2] = N, hv->ish[3] = L->wstreams[si].last;
    hv->ssh[0] = 1, hv->ssh[1] = c->Hkv, hv->ssh[2] = N;
    hv->dsh[0] = c->D;
    vq_cache_view(c, &hv->idx, hv->ish, 4, L->wstreams[si].dtype, (void *)(w + block_off(c, L, si, N)));
    vq_cache_view(c, &hv->scale, hv->ssh, 3, L->wstreams[ss].dtype, (void *)(w + block_off(c, L, ss, N)));
    vq_cache_view(c, &hv->diag, hv->dsh, 1, VQ_DT_F32, L->tables[half ? VQ_CT_VDIAG : VQ_CT_KDIAG].dev);
}

size_t vq_cache_window_scratch(const vq_cache *c, int64_t N)
{
    /* u8 codes [Hkv][N][D], then f32 scales [Hkv][N] */
    return c->window == VQ_WINDOW_TURBO ? (size_t)(c->Hkv * N * (c->D + 4)) : 0;
}

/* n scales f16 <-> f32 (to_f16: f32 -> f16), in cache memory: a device
 * kernel on a CUDA cache, the same rounding (to nearest even). */
static vq_status convert_scales(vq_cache *c, const void *from, void *to, int64_t n, bool to_f16)
{
#ifdef VQ_WITH_CUDA
    if (c->cuda)
        return vq_cache_cuda_convert(c, from, to_f16 ? VQ_DT_F32 : VQ_DT_F16, to, to_f16 ? VQ_DT_F16 : VQ_DT_F32, n);
#endif
    if (to_f16) {
        vq_cache_scales_to_f16(from, to, n);
    } else {
        for (int64_t i = 0; i < n; i++) ((float *)to)[i] = vq_half_to_float(((const uint16_t *)from)[i]);
    }
    return VQ_OK;
}

/* x [2][Hkv][N][D] f16 <-> the window block w of capacity N (decode: w -> x). */
static vq_status window_code(vq_cache *c, const vq_cache_layer *L, unsigned char *w, int64_t N, uint16_t *xk,
                             uint16_t *xv, bool decode, unsigned char *scratch)
{
    if (N <= 0) return VQ_OK;
    const bool packed = c->window == VQ_WINDOW_TURBO;
    const int bits = packed ? c->window_bits : 8;
    const int64_t rows = c->Hkv * N;
    for (int half = 0; half < 2; half++) {
        half_views hv;
        window_views(c, L, w, N, half, &hv);
        int64_t xsh[4] = {1, c->Hkv, N, c->D};
        DLTensor xt, idx = hv.idx, scale = hv.scale;
        vq_cache_view(c, &xt, xsh, 4, VQ_DT_F16, half ? xv : xk);
        if (packed) { /* the codec's u8 codes and f32 scales, in scratch */
            vq_cache_view(c, &idx, xsh, 4, VQ_DT_U8, scratch);
            vq_cache_view(c, &scale, hv.ssh, 3, VQ_DT_F32, scratch + rows * c->D);
        }
        if (decode) {
            if (packed) {
                VQ_FORWARD_IF_ERROR(vq_bit_unpack(c->ctx, &hv.idx, bits, c->D, &idx));
                VQ_FORWARD_IF_ERROR(convert_scales(c, hv.scale.data, scale.data, rows, false));
            }
            VQ_FORWARD_IF_ERROR(vq_turboquant_hadamard_dequantize(c->ctx, &idx, &scale, &hv.diag, bits, &xt));
        } else {
            VQ_FORWARD_IF_ERROR(vq_turboquant_hadamard_quantize(c->ctx, &xt, &hv.diag, bits, &idx, &scale, NULL));
            if (packed) {
                VQ_FORWARD_IF_ERROR(vq_bit_pack(c->ctx, &idx, bits, &hv.idx));
                VQ_FORWARD_IF_ERROR(convert_scales(c, scale.data, hv.scale.data, rows, true));
            }
        }
    }
    return VQ_OK;
}

vq_status vq_cache_window_encode(vq_cache *c, const vq_cache_layer *L, const uint16_t *x, int64_t N, unsigned char *w,
                                 unsigned char *scratch)
{
    /* the codec only reads x */
    return window_code(c, L, w, N, (uint16_t *)(uintptr_t)x, (uint16_t *)(uintptr_t)(x + (int64_t)c->Hkv * N * c->D),
                       false, scratch);
}

vq_status vq_cache_window_decode(vq_cache *c, const vq_cache_layer *L, const unsigned char *w, int64_t N,
                                 uint16_t *ek, uint16_t *ev, unsigned char *scratch)
{
    /* the codec only reads w */
    return window_code(c, L, (unsigned char *)(uintptr_t)w, N, ek, ev, true, scratch);
}
