/* copy_jobs.cu — pitched device-to-device copies, one CTA per (job, row).
 * A row moves in 16-byte words when its two ends and its width allow it,
 * else in 4-byte words, else bytewise: the cache's streams are mostly
 * 16-byte aligned (codes), sometimes only 4 (f32 norms of odd token counts)
 * or 2 (f16 scales). */
#include "cuda/copy_jobs.h"

#include <cuda_runtime.h>

namespace {

template <typename W>
__device__ __forceinline__ void copy_row(const unsigned char *s, unsigned char *d, int64_t width)
{
    const W *sw = reinterpret_cast<const W *>(s);
    W *dw = reinterpret_cast<W *>(d);
    for (int64_t i = threadIdx.x; i < width / (int64_t)sizeof(W); i += blockDim.x) dw[i] = sw[i];
}

__global__ void copy_jobs_kernel(const vq_cu_copy_job *__restrict__ jobs)
{
    const vq_cu_copy_job j = jobs[blockIdx.x];
    const int64_t r = blockIdx.y;
    if (r >= j.height) return;
    const unsigned char *s = j.src + r * j.spitch;
    unsigned char *d = j.dst + r * j.dpitch;
    const uintptr_t a = (uintptr_t)s | (uintptr_t)d | (uintptr_t)j.width;
    if ((a & 15) == 0) copy_row<uint4>(s, d, j.width);
    else if ((a & 3) == 0) copy_row<uint32_t>(s, d, j.width);
    else copy_row<unsigned char>(s, d, j.width);
}

} // namespace

extern "C" int vq_cu_launch_copy_jobs(const vq_cu_copy_job *jobs, int n, int64_t max_height, void *stream)
{
    if (n <= 0 || max_height <= 0) return 0;
    if (max_height > 65535) return (int)cudaErrorInvalidValue;
    copy_jobs_kernel<<<dim3((unsigned)n, (unsigned)max_height), 256, 0, (cudaStream_t)stream>>>(jobs);
    return (int)cudaGetLastError();
}
