/* cuda_test_util.h — device tensors for the CUDA tests: a CPU tensor from the
 * harness mirrored on the GPU, poisoned outputs, copies back. Header-only so
 * that each tests/test_cuda_*.c stays one executable. */
#ifndef VQ_CUDA_TEST_UTIL_H
#define VQ_CUDA_TEST_UTIL_H

#include <cuda_runtime_api.h>
#include <time.h>

#include "harness.h"

/* A device copy of a host tensor: same shape and dtype, kDLCUDA device 0. */
static inline DLTensor *ct_upload(const DLTensor *h)
{
    DLTensor *d = calloc(1, sizeof *d);
    *d = *h;
    int64_t *sh = calloc((size_t)h->ndim, sizeof *sh);
    memcpy(sh, h->shape, (size_t)h->ndim * sizeof *sh);
    d->shape = sh;
    d->device.device_type = kDLCUDA;
    d->device.device_id = 0;
    d->byte_offset = 0;
    void *p = NULL;
    if (cudaMalloc(&p, vt_bytes(h) + 256) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(1);
    }
    /* the 256 bytes past the data are zeroed: the staged kernels' last 16-byte
     * cp.async of a stream asks for fewer source bytes where the stream ends
     * inside the chunk, and compute-sanitizer's initcheck counts the whole
     * chunk as read */
    cudaMemset((char *)p + vt_bytes(h), 0, 256);
    cudaMemcpy(p, vq_data(h), vt_bytes(h), cudaMemcpyHostToDevice);
    d->data = p;
    return d;
}

/* Fills the device tensor with 0xFF bytes: NaN for f32 and f16. */
static inline void ct_poison(DLTensor *d) { cudaMemset(d->data, 0xFF, vt_bytes(d)); }

static inline void ct_download(const DLTensor *d, DLTensor *h)
{
    cudaDeviceSynchronize();
    cudaMemcpy(vq_data(h), d->data, vt_bytes(d), cudaMemcpyDeviceToHost);
}

static inline void ct_free(DLTensor *d)
{
    if (!d) return;
    cudaFree(d->data);
    free(d->shape);
    free(d);
}

/* Elements of a float tensor that are NaN (the poison left unwritten). */
static inline int64_t ct_count_nan(const DLTensor *h)
{
    int64_t n = 0;
    for (int64_t i = 0; i < vt_numel(h); i++) n += isnan(vt_get(h, i));
    return n;
}

/* Relative L2 distance of a from b over every element (absolute when b is 0). */
static inline double ct_rel_l2(const DLTensor *a, const DLTensor *b)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < vt_numel(a); i++) {
        const double x = vt_get(a, i), y = vt_get(b, i);
        num += (x - y) * (x - y), den += y * y;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static inline vq_ctx *ct_ctx(void)
{
    vq_ctx_config cfg = {0};
    cfg.backend = VQ_BACKEND_CUDA;
    vq_ctx *ctx = NULL;
    if (vq_ctx_create(&cfg, &ctx) != VQ_OK) return NULL;
    return ctx;
}

/* Seeds from the clock (printed, so a failure can be replayed with
 * VQ_TEST_SEED=<seed>). */
static inline uint64_t ct_seed(void)
{
    const char *env = getenv("VQ_TEST_SEED");
    const uint64_t s = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)s);
    return s;
}

/* Exits 77 (ctest: skipped) when no CUDA device is present. */
static inline void ct_require_device(void)
{
    if (!vq_backend_available(VQ_BACKEND_CUDA)) {
        printf("SKIP: no CUDA device\n");
        exit(77);
    }
}

#endif
