/* copy_jobs.h — many pitched device-to-device copies in one launch
 * (copy_jobs.cu). The KV cache gathers a sequence's pages into contiguous
 * streams with it: one job per page and stream, where one cudaMemcpy2DAsync
 * each made a long context's gather cost a host call per page. */
#ifndef VQ_CUDA_COPY_JOBS_H
#define VQ_CUDA_COPY_JOBS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* height rows of width bytes: row r from src + r * spitch to dst + r * dpitch. */
typedef struct vq_cu_copy_job {
    const unsigned char *src;
    unsigned char *dst;
    int64_t spitch, dpitch, width, height;
} vq_cu_copy_job;

/* Runs jobs[0, n) (device memory) on the stream; max_height >= every job's
 * height. Jobs must not overlap each other's destinations or read another's
 * destination. Returns a cudaError_t. */
int vq_cu_launch_copy_jobs(const vq_cu_copy_job *jobs, int n, int64_t max_height, void *stream);

#ifdef __cplusplus
}
#endif

#endif
