/* attend_merge.cu — combines the split-KV partial states of every query row:
 * M = max_s m_s, out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s.
 * One CTA per row; a row that saw no key (all masked) gets zeros. */
#include "cuda/attend_skeleton.cuh"

namespace vqcu {

__global__ void __launch_bounds__(128) merge_kernel(const vq_cu_attend_common c, void *out, int out_f16)
{
    const int64_t row = blockIdx.x;
    const int ns = c.nsplit;
    const float *m = c.part_m + row * ns, *l = c.part_l + row * ns;
    float M = -INFINITY;
    for (int s = 0; s < ns; s++) M = fmaxf(M, m[s]);
    float L = 0.0f;
    for (int s = 0; s < ns; s++) L += M == -INFINITY ? 0.0f : exp2f(m[s] - M) * l[s];
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int d = threadIdx.x; d < c.D; d += blockDim.x) {
        float a = 0.0f;
        for (int s = 0; s < ns; s++) {
            const float f = M == -INFINITY ? 0.0f : exp2f(m[s] - M);
            a = fmaf(f, c.part_acc[(row * ns + s) * c.D + d], a);
        }
        const float v = a * inv;
        if (out_f16) ((__half *)out)[row * c.D + d] = __float2half_rn(v);
        else ((float *)out)[row * c.D + d] = v;
    }
}

} /* namespace vqcu */

extern "C" int vq_cu_launch_merge(const vq_cu_attend_common *c, void *out, int out_f16, void *stream)
{
    const unsigned rows = (unsigned)((int64_t)c->B * c->Hq * c->Sq);
    vqcu::merge_kernel<<<rows, 128, 0, (cudaStream_t)stream>>>(*c, out, out_f16);
    return (int)cudaGetLastError();
}
