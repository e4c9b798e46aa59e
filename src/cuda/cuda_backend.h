/* cuda_backend.h — the CUDA backend as seen from the C host code. Every
 * function returns a vq_status; CUDA errors become VQ_ERR_DEVICE with the
 * CUDA error's name in the ctx message. */
#ifndef VQ_CUDA_BACKEND_H
#define VQ_CUDA_BACKEND_H

#include "core/core.h"

bool vq_cuda_available(void);
vq_status vq_cuda_ctx_init(vq_ctx *ctx);     /* selects the device, creates per-ctx state */
void vq_cuda_ctx_release(vq_ctx *ctx);
vq_status vq_cuda_synchronize(vq_ctx *ctx);  /* waits for the ctx's stream */

#endif
