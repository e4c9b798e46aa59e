/* cuda_cache_codecs.c — host glue of the cache methods' device encoders
 * (cache/cache_cuda.h): the quantity no public codec produces (row RMS) and
 * the mixed-width KIVI key encoder, launched on the ctx's stream through the
 * backend's plumbing. (f16 scales: vq_cache_cuda_convert, cuda_recipe.c.) */
#include "cache/cache_cuda.h"
#include "cuda/codec_launch.h"
#include "cuda/cuda_backend.h"

vq_status vq_cuda_cache_row_rms(vq_ctx *ctx, const uint16_t *x, int64_t rows, int64_t D, float *s, float *xn)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    return vq_cuda_check(ctx, vq_cu_row_rms(x, rows, (int)D, s, xn, ctx->stream), "row RMS kernel launch");
}

vq_status vq_cuda_kivi_mix_encode(vq_ctx *ctx, const vq_key_config *kc, int64_t Hkv, int64_t D, const DLTensor *k,
                                  DLTensor *codes, DLTensor *scale, DLTensor *zero, DLTensor *mask)
{
    const int64_t T = vq_dim(k, 2), nw = vq_cache_kivi_mix_wide(kc, D);
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    return vq_cuda_check(ctx,
                         vq_cu_kivi_mix_encode(vq_data(k), Hkv, T, (int)D, kc->group_size, (int)nw, kc->bits,
                                               kc->bits2, vq_data(codes), vq_data(scale), vq_data(zero),
                                               vq_data(mask), ctx->stream),
                         "KIVI_MIX encoder launch");
}
