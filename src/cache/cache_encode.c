/* cache_encode.c — T tokens of one layer, f16 keys and values [1,Hkv,T,D],
 * encoded by the layer's methods (cache_method.h: the public codecs, and the
 * quantities no codec produces, such as the QJL key norm and the CODEBOOK
 * value scale) into staging views of the layer's streams (append then
 * scatters them into pages); and the helpers the method encoders share. */
#include <math.h>
#include <string.h>

#include "cache/cache_method.h"
#ifdef VQ_WITH_CUDA
#include "cache/cache_cuda.h"
#endif

/* Key scratch first, value scratch after it. */
static size_t key_scratch(const vq_cache *c, const vq_cache_layer *L, int64_t T)
{
    const vq_cache_method *km = vq_cache_key_method(L->cfg.keys.method);
    return km->scratch ? km->scratch(c, L, T) : 0;
}

size_t vq_cache_encode_scratch(const vq_cache *c, const vq_cache_layer *L, int64_t T)
{
    const vq_cache_method *vm = vq_cache_value_method(L->cfg.values.method);
    const size_t b = key_scratch(c, L, T) + (vm->scratch ? vm->scratch(c, L, T) : 0);
    return (b + 63) & ~(size_t)63;
}

/* The key method's encoder, or on a CUDA cache its format's device encoder
 * where it has one. */
static vq_status encode_keys(vq_cache *c, vq_cache_layer *L, const DLTensor *k, DLTensor *const *outs,
                             unsigned char *scratch, int64_t T)
{
#ifdef VQ_WITH_CUDA
    const vq_cache_device_encoder dev = c->cuda ? vq_cache_cuda_key_encoder(L->cfg.keys.method) : NULL;
    if (dev != NULL) return dev(c->ctx, &L->cfg.keys, k, outs);
#endif
    return vq_cache_key_method(L->cfg.keys.method)->encode(c, L, k, outs, scratch, T);
}

vq_status vq_cache_encode(vq_cache *c, vq_cache_layer *L, const DLTensor *k, const DLTensor *v,
                          DLTensor *const *outs, int n_key_streams, unsigned char *scratch, int64_t T)
{
    VQ_FORWARD_IF_ERROR(encode_keys(c, L, k, outs, scratch, T));
    return vq_cache_value_method(L->cfg.values.method)
        ->encode(c, L, v, outs + n_key_streams, scratch + key_scratch(c, L, T), T);
}

void vq_cache_table_view(const vq_cache *c, const vq_cache_layer *L, int id, DLTensor *t, int64_t *shape)
{
    const vq_cache_table *tb = &L->tables[id];
    memcpy(shape, tb->shape, sizeof(int64_t) * (size_t)tb->ndim);
    vq_cache_view(c, t, shape, tb->ndim, VQ_DT_F32, tb->dev);
}

vq_status vq_cache_pack_codes(vq_cache *c, DLTensor *idx, int bits, DLTensor *out)
{
    if (bits == 8) return VQ_OK; /* the codec wrote out directly */
    return vq_bit_pack(c->ctx, idx, bits, out);
}

void vq_cache_row_rms(const uint16_t *x, int64_t rows, int64_t D, float *s, float *xn)
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

vq_status vq_cache_rms_rows(vq_cache *c, const uint16_t *x, int64_t rows, float *s, float *xn)
{
#ifdef VQ_WITH_CUDA
    if (c->cuda) return vq_cuda_cache_row_rms(c->ctx, x, rows, c->D, s, xn);
#endif
    vq_cache_row_rms(x, rows, c->D, s, xn);
    return VQ_OK;
}

vq_status vq_cache_round_scales(vq_cache *c, const float *from, uint16_t *to, int64_t n)
{
#ifdef VQ_WITH_CUDA
    if (c->cuda) return vq_cache_cuda_convert(c, from, VQ_DT_F32, to, VQ_DT_F16, n);
#endif
    vq_cache_scales_to_f16(from, to, n);
    return VQ_OK;
}
