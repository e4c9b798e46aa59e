/* values_registry.h — the value formats of the CUDA vq_fused_sdpa as the
 * host glue (cuda_sdpa.c) sees them: one descriptor per vq_values_format,
 * defined with the format's decode-skeleton policy in its values_<name>.cuh
 * (the policy, its fields of vq_cu_sdpa_params, their host-side fill) and
 * listed once in kv_values.cuh, which the key formats' instances and the
 * registry (values_registry.cu) both read. Read by the C compiler and by
 * nvcc. */
#ifndef VQ_CUDA_VALUES_REGISTRY_H
#define VQ_CUDA_VALUES_REGISTRY_H

#include "cuda/sdpa_params.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "cuda/cuda_backend.h"

typedef struct vq_cu_value_format {
    int format; /* its vq_values_format */
    /* The format's tensor whose leading dims are [B, Hkv, Skv] (the kv axis). */
    const DLTensor *(*lead)(const vq_encoded_values *v);
    /* Checks what only this backend limits (alignment of the tensors the
     * policy reads 8 or 16 bytes at a time) and fills the format's fields of
     * p (p->c.D is set; the format may set c.rot_back and c.rot_diag when
     * its output is rotated). The tensors were validated by the format's
     * CPU binder. */
    vq_status (*fill)(vq_ctx *ctx, const vq_encoded_values *v, vq_cu_sdpa_params *p);
} vq_cu_value_format;

/* The descriptor of vq_values_format f, or NULL when the CUDA backend has none. */
const vq_cu_value_format *vq_cu_value_format_of(int f);

#ifdef __cplusplus
}
#endif

#endif
