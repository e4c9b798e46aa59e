/* keys_registry.h — the key formats of the CUDA vq_fused_sdpa as the host
 * glue (cuda_sdpa.c, cuda_cache.c) sees them: one descriptor per
 * vq_keys_format, defined in the format's keys_<name>.cu (its decode-skeleton
 * policy, its fields of vq_cu_sdpa_params, their host-side fill, its template
 * instances) and listed once in the registry (keys_registry.c). Read by the
 * C compiler and by nvcc (the descriptors are defined in C++ with C linkage). */
#ifndef VQ_CUDA_KEYS_REGISTRY_H
#define VQ_CUDA_KEYS_REGISTRY_H

#include <stdbool.h>

#include "cuda/sdpa_params.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "cuda/cuda_backend.h"

typedef struct vq_cu_key_format {
    int format; /* its vq_keys_format */
    /* Checks what only this backend limits (alignment of the tensors the
     * policy reads 16 bytes at a time, sizes it holds in shared memory) and
     * fills the format's fields of p: fmt, c (shapes) and qpf / qmul / q_prep
     * (set to D, scale * log2(e) and VQ_CU_QPREP_SCALE) are there already,
     * the format changes the last three where its queries are prepared
     * otherwise. The tensors were validated by the format's CPU binder. */
    vq_status (*fill)(vq_ctx *ctx, const vq_encoded_keys *keys, float scale, vq_cu_sdpa_params *p);
    /* The decode-skeleton instances over plain values and over the encoded
     * value formats (KIVI, CODEBOOK, TURBO). */
    vq_cu_sdpa_launcher launch, launch_enc;
    /* The CUDA cache may read the format's pages in place, one token at a
     * time (false: it gathers them into contiguous streams first). */
    bool paged;
    /* For a format the cache writes with an encoder of its own (no public
     * codec writes its bytes): the cache's vq_key_method and that encoder on
     * the device (cache/cache_cuda.h, vq_cache_device_encoder). NULL: the
     * method's encoder runs on the device through the public codecs. */
    int cache_method;
    vq_status (*cache_encode)(vq_ctx *ctx, const vq_key_config *kc, const DLTensor *x, DLTensor *const *outs);
} vq_cu_key_format;

/* The descriptor of vq_keys_format f, or NULL when the CUDA backend has none. */
const vq_cu_key_format *vq_cu_key_format_of(int f);

/* Helpers of the formats' host-side fills (cuda_sdpa.c). */
int vq_cu_elt_of(const DLTensor *t); /* VQ_CU_F32 / F16 / BF16 */
/* One TurboQuant stage (bits 1..8 checked by the binder). */
void vq_cu_fill_stage(const DLTensor *idx, const DLTensor *scale, int bits, int64_t D, vq_cu_sdpa_stage *st);

#ifdef __cplusplus
}
#endif

#endif
