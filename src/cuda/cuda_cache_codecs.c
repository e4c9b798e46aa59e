/* cuda_cache_codecs.c — host glue of the quantity the cache methods' encoders
 * share and no public codec produces (row RMS; cache/cache_cuda.h), launched
 * on the ctx's stream. (f16 scales: vq_cache_cuda_convert, cuda_recipe.c; a
 * key format's own device encoder: its keys_<name>.cu.) */
#include "cache/cache_cuda.h"
#include "cuda/codec_launch.h"
#include "cuda/cuda_backend.h"

vq_status vq_cuda_cache_row_rms(vq_ctx *ctx, const uint16_t *x, int64_t rows, int64_t D, float *s, float *xn)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    return vq_cuda_check(ctx, vq_cu_row_rms(x, rows, (int)D, s, xn, ctx->stream), "row RMS kernel launch");
}
