/* sdpa_prep.cu — the query preparation of vq_fused_sdpa on CUDA: one CTA per
 * query row writes the prepared row to scratch qp [rows, qpf]: q * scale *
 * log2(e), rotated first (H (diag ⊙ q)/sqrt(D), vq_cu_rotate_row, the CPU's
 * stages) or projected (S q, m floats) as the key format's fill asked
 * (q_prep: TURBO / TURBO_RVQ / RABITQ rotate, QJL projects).
 * The decode skeleton (kv_decode.cuh) then scores in the log2 domain, as the
 * merge kernel expects. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/codec_common.cuh"
#include "cuda/sdpa_params.h"

namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) prep_kernel(const __grid_constant__ vq_cu_sdpa_params p)
{
    extern __shared__ float row[]; /* [D] */
    const int D = p.c.D;
    const int64_t nrows = (int64_t)p.c.B * p.c.Hq * p.c.Sq;
    const bool rotated = p.q_prep == VQ_CU_QPREP_ROTATE;
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        __syncthreads(); /* the previous row is consumed */
        for (int c = threadIdx.x; c < D; c += blockDim.x)
            row[c] = p.c.q_f16 ? __half2float(((const __half *)p.c.q)[r * D + c]) : ((const float *)p.c.q)[r * D + c];
        __syncthreads();
        if (rotated) vq_cu_rotate_row(row, D, p.q_diag, false); /* block-wide, ends with a barrier */
        float *qp = p.qp + r * p.qpf;
        if (p.q_prep == VQ_CU_QPREP_PROJECT) {
            for (int j = threadIdx.x; j < p.q_proj_m; j += blockDim.x) {
                const float *s = p.q_proj + (int64_t)j * D;
                float acc = 0.0f;
                for (int c = 0; c < D; c++) acc = fmaf(s[c], row[c], acc);
                qp[j] = acc * p.qmul;
            }
        } else {
            for (int c = threadIdx.x; c < D; c += blockDim.x) qp[c] = row[c] * p.qmul;
        }
    }
}

} /* namespace */

extern "C" int vq_cu_launch_sdpa_prep(const vq_cu_sdpa_params *p, void *stream)
{
    const int64_t rows = (int64_t)p->c.B * p->c.Hq * p->c.Sq;
    prep_kernel<<<vq_cu_row_blocks(rows), kThreads, sizeof(float) * (size_t)p->c.D, (cudaStream_t)stream>>>(*p);
    return (int)cudaGetLastError();
}
