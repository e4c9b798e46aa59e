/* codec_rows.cu — the per-token quantity of the cache's encoders that no
 * public codec produces, on CUDA, byte for byte as the host code that makes
 * it on a CPU ctx (src/cache/cache_encode.c): a row's RMS (QJL key norms,
 * CODEBOOK value scales) with the row divided by it. */
#include "cuda/codec_common.cuh"

/* One thread per row, summing in the host's order and precision (double,
 * channel order), so the RMS is the host's to the bit; rows are short
 * (D <= 256) and this runs once per appended token, not per attended one. */
static __global__ void row_rms_kernel(const uint16_t *x, int64_t rows, int d, float *s, float *xn)
{
    VQ_CU_GRID_STRIDE(r, rows)
    {
        const uint16_t *row = x + r * d;
        double ss = 0.0;
        for (int j = 0; j < d; j++) {
            const double v = (double)vq_cu_half_bits_to_float(row[j]);
            ss = __dadd_rn(ss, __dmul_rn(v, v));
        }
        const float rms = (float)__dsqrt_rn(__ddiv_rn(ss, (double)d));
        s[r] = rms;
        if (xn == nullptr) continue;
        const float inv = rms > 0.0f ? __frcp_rn(rms) : 0.0f;
        for (int j = 0; j < d; j++) xn[r * d + j] = __fmul_rn(vq_cu_half_bits_to_float(row[j]), inv);
    }
}

extern "C" int vq_cu_row_rms(const uint16_t *x, int64_t rows, int d, float *s, float *xn, void *stream)
{
    row_rms_kernel<<<vq_cu_blocks(rows, 128), 128, 0, (cudaStream_t)stream>>>(x, rows, d, s, xn);
    return vq_cu_launched();
}
