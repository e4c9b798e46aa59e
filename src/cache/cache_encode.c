/* cache_encode.c — T tokens of one layer, f16 keys and values [1,Hkv,T,D],
 * encoded by the public codecs into staging views of the layer's streams
 * (append then scatters them into pages). The two quantities no codec
 * produces — the QJL key norm and the CODEBOOK value scale — are computed
 * here (host only: the CUDA cache does not offer those two methods yet). */
#include <math.h>
#include <string.h>

#include "cache/cache_internal.h"

/* Bytes of the u8 codes before bit packing (TURBO / RVQ stages below 8 bits),
 * or of the f32 normalised values (CODEBOOK): [Hkv,T,D] each; and the f32
 * scales [Hkv,T] that TURBO values with scale_f16 round to f16. */
size_t vq_cache_encode_scratch(const vq_cache *c, const vq_cache_layer *L, int64_t T)
{
    const size_t n = (size_t)((int64_t)c->Hkv * T * c->D);
    size_t b = 0;
    if (L->cfg.keys.method == VQ_KEY_TURBO || L->cfg.keys.method == VQ_KEY_TURBO_RVQ) b += 2 * n;
    if (L->cfg.values.method == VQ_VALUE_TURBO) b += n + (L->cfg.values.scale_f16 ? 4 * n / c->D : 0);
    if (L->cfg.values.method == VQ_VALUE_CODEBOOK) b += 5 * n;
    return (b + 63) & ~(size_t)63;
}

/* A table as a tensor on the cache's device. */
static void table_view(const vq_cache *c, const vq_cache_layer *L, int id, DLTensor *t, int64_t *shape)
{
    const vq_cache_table *tb = &L->tables[id];
    memcpy(shape, tb->shape, sizeof(int64_t) * (size_t)tb->ndim);
    vq_cache_view(c, t, shape, tb->ndim, VQ_DT_F32, tb->dev);
}

/* x [1,Hkv,T,D] -> idx u8 (scratch) -> out: packed u32, or idx itself at 8 bits. */
static vq_status pack_codes(vq_cache *c, DLTensor *idx, int bits, DLTensor *out)
{
    if (bits == 8) return VQ_OK; /* the codec wrote out directly */
    return vq_bit_pack(c->ctx, idx, bits, out);
}

/* The RMS of every row, s = ||x||_2 / sqrt(D) (x f16 [rows][D]), and when
 * xn is not NULL xn = x / s (0 where s = 0). Host. */
static void row_rms(const uint16_t *x, int64_t rows, int64_t D, float *s, float *xn)
{
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *row = x + r * D;
        double ss = 0;
        for (int64_t j = 0; j < D; j++) {
            const double v = vq_half_to_float(row[j]);
            ss += v * v;
        }
        const float rms = (float)sqrt(ss / (double)D);
        s[r] = rms;
        if (xn == NULL) continue;
        const float inv = rms > 0.0f ? 1.0f / rms : 0.0f;
        for (int64_t j = 0; j < D; j++) xn[r * D + j] = vq_half_to_float(row[j]) * inv;
    }
}

static vq_status encode_keys(vq_cache *c, vq_cache_layer *L, const DLTensor *k, DLTensor *const *outs,
                             unsigned char *scratch, int64_t T)
{
    vq_ctx *ctx = c->ctx;
    const vq_key_config *kc = &L->cfg.keys;
    int64_t sh[4] = {1, c->Hkv, T, c->D}, tsh[4], tsh2[4], tsh3[4];
    DLTensor idx, idx2, tab, tab2, tab3;
    vq_cache_view(c, &idx, sh, 4, VQ_DT_U8, scratch);
    vq_cache_view(c, &idx2, sh, 4, VQ_DT_U8, scratch + (size_t)(c->Hkv * T * c->D));
    switch (kc->method) {
    case VQ_KEY_F16: {
        const size_t bytes = (size_t)(c->Hkv * T * c->D * 2);
        return vq_cache_mem_copy2d(c, outs[0]->data, bytes, k->data, bytes, bytes, 1);
    }
    case VQ_KEY_KIVI: return vq_kivi_quantize_keys(ctx, k, kc->bits, kc->group_size, outs[0], outs[1], outs[2]);
    case VQ_KEY_KIVI_MIX: return vq_cache_kivi_mix_encode(c, kc, k, outs[0], outs[1], outs[2], outs[3]);
    case VQ_KEY_TURBO: {
        table_view(c, L, VQ_CT_KDIAG, &tab, tsh);
        const vq_turboquant_opts o = {.norm_correct = kc->norm_correct};
        VQ_FORWARD_IF_ERROR(
            vq_turboquant_hadamard_quantize(ctx, k, &tab, kc->bits, kc->bits == 8 ? outs[0] : &idx, outs[1], &o));
        return pack_codes(c, &idx, kc->bits, outs[0]);
    }
    case VQ_KEY_TURBO_RVQ:
        table_view(c, L, VQ_CT_KDIAG, &tab, tsh);
        VQ_FORWARD_IF_ERROR(vq_turboquant_rvq_encode(ctx, k, &tab, kc->bits, kc->bits2,
                                                     kc->bits == 8 ? outs[0] : &idx, outs[1],
                                                     kc->bits2 == 8 ? outs[2] : &idx2, outs[3]));
        VQ_FORWARD_IF_ERROR(pack_codes(c, &idx, kc->bits, outs[0]));
        return pack_codes(c, &idx2, kc->bits2, outs[2]);
    case VQ_KEY_RABITQ: {
        table_view(c, L, VQ_CT_KDIAG, &tab, tsh);
        const vq_rabitq_encode_opts o = {.mag = kc->rabitq_mag};
        return vq_rabitq_encode(ctx, k, &tab, outs[0], outs[1], &o);
    }
    case VQ_KEY_QJL:
        table_view(c, L, VQ_CT_QJL_PROJ, &tab, tsh);
        /* k_norm holds ||k||_2 / sqrt(D); attention multiplies the scale by sqrt(D) */
        row_rms(k->data, c->Hkv * T, c->D, outs[1]->data, NULL);
        return vq_qjl_encode(ctx, k, &tab, outs[0]);
    case VQ_KEY_VECINFER:
        table_view(c, L, VQ_CT_CODEBOOK, &tab, tsh);
        table_view(c, L, VQ_CT_SMOOTH, &tab2, tsh2);
        return vq_vecinfer_quantize(ctx, k, &tab, &tab2, (int)vq_dim(&tab, -3), outs[0]);
    case VQ_KEY_COMMVQ:
        /* outs[1] (positions) was filled by the caller */
        table_view(c, L, VQ_CT_CODEBOOK, &tab3, tsh3);
        return vq_commvq_encode(ctx, k, &tab3, outs[0]);
    }
    return VQ_ERR_INVALID_ARGUMENT;
}

static vq_status encode_values(vq_cache *c, vq_cache_layer *L, const DLTensor *v, DLTensor *const *outs,
                               unsigned char *scratch, int64_t T)
{
    vq_ctx *ctx = c->ctx;
    const vq_value_config *vc = &L->cfg.values;
    const int64_t n = c->Hkv * T * c->D;
    int64_t sh[4] = {1, c->Hkv, T, c->D}, tsh[4];
    DLTensor idx, xn, tab;
    switch (vc->method) {
    case VQ_VALUE_F16: return vq_cache_mem_copy2d(c, outs[0]->data, (size_t)n * 2, v->data, (size_t)n * 2, (size_t)n * 2, 1);
    case VQ_VALUE_KIVI: return vq_kivi_quantize_values(ctx, v, vc->bits, vc->group_size, outs[0], outs[1], outs[2]);
    case VQ_VALUE_CODEBOOK:
        vq_cache_view(c, &xn, sh, 4, VQ_DT_F32, scratch);
        vq_cache_view(c, &idx, sh, 4, VQ_DT_U8, scratch + 4 * (size_t)n);
        row_rms(v->data, c->Hkv * T, c->D, outs[1]->data, xn.data);
        table_view(c, L, VQ_CT_VCENTS, &tab, tsh);
        VQ_FORWARD_IF_ERROR(vq_codebook_quantize(ctx, &xn, &tab, &idx));
        return vq_rabitq_pack_values(ctx, &idx, outs[0]);
    case VQ_VALUE_TURBO: {
        DLTensor s32;
        vq_cache_view(c, &idx, sh, 4, VQ_DT_U8, scratch);
        vq_cache_view(c, &s32, sh, 3, VQ_DT_F32, scratch + n);
        table_view(c, L, VQ_CT_VDIAG, &tab, tsh);
        VQ_FORWARD_IF_ERROR(vq_turboquant_hadamard_quantize(ctx, v, &tab, vc->bits, vc->bits == 8 ? outs[0] : &idx,
                                                            vc->scale_f16 ? &s32 : outs[1], NULL));
        if (vc->scale_f16) vq_cache_scales_to_f16(s32.data, outs[1]->data, n / c->D); /* host: CPU-only */
        return pack_codes(c, &idx, vc->bits, outs[0]);
    }
    }
    return VQ_ERR_INVALID_ARGUMENT;
}

/* Key scratch first (two u8 planes), value scratch after it. */
vq_status vq_cache_encode(vq_cache *c, vq_cache_layer *L, const DLTensor *k, const DLTensor *v,
                          DLTensor *const *outs, int n_key_streams, unsigned char *scratch, int64_t T)
{
    const bool key_scratch = L->cfg.keys.method == VQ_KEY_TURBO || L->cfg.keys.method == VQ_KEY_TURBO_RVQ;
    VQ_FORWARD_IF_ERROR(encode_keys(c, L, k, outs, scratch, T));
    return encode_values(c, L, v, outs + n_key_streams,
                         scratch + (key_scratch ? 2 * (size_t)(c->Hkv * T * c->D) : 0), T);
}
