/* cache_formats.h — the cache's own attention formats (cache_formats.c).
 * Internal. Their descriptors live in the cache's bindings, not in
 * vq_attn_desc_storage. */
#ifndef VQ_CACHE_FORMATS_H
#define VQ_CACHE_FORMATS_H

#include "attention/attn_formats.h"
#include "codecs/hadamard.h"

typedef struct vq_cache_hamming_keys {
    const vq_attn_keys *inner;  /* the library's Hamming RaBitQ binding (q_scale overwritten per row) */
    vq_rotate_row_fn rotate;
    const float *diag;          /* [D] key signs */
    int64_t D;
    float scale;                /* softmax scale */
} vq_cache_hamming_keys;

typedef struct vq_cache_rotated_values {
    vq_attn_view v;             /* [B,Hkv,Skv,D] f16 */
    vq_rotate_row_fn rotate;
    const float *diag;          /* [D] value signs of the TurboQuant pages */
    int64_t D;
} vq_cache_rotated_values;

typedef struct vq_cache_unrotated_values {
    const vq_attn_values *inner; /* values bound in a rotated basis (TurboQuant), finish() not run */
    vq_rotate_row_fn rotate;
    const float *diag;           /* [D] their signs */
    int64_t D;
} vq_cache_unrotated_values;

/* RaBitQ Hamming keys on raw queries: bits [B,Hkv,Skv,D/8] u8, mag
 * [B,Hkv,Skv] f32 (validated as vq_attn_bind_keys_rabitq does), diag [D]
 * host. inner and desc must outlive *out. */
vq_status vq_cache_bind_hamming(vq_ctx *ctx, const DLTensor *bits, const DLTensor *mag, const float *diag,
                                float scale, const vq_attn_dims *dims, vq_cache_hamming_keys *desc,
                                vq_attn_keys *inner, vq_attn_keys *out);

/* f16 values v [B,Hkv,Skv,D] (a view the cache built itself) accumulated as
 * rot(v) with the signs diag. */
void vq_cache_bind_rotated_values(vq_ctx *ctx, const DLTensor *v, const float *diag, vq_cache_rotated_values *desc,
                                  vq_attn_values *out);

/* Values bound in a rotated basis (inner: TurboQuant, signs diag [D] host)
 * accumulated in the plain basis, for a window coded as TurboQuant next to
 * pages whose values are not: each block's rows are accumulated rotated
 * into scratch and rotated back (R rotations per block). inner and desc must
 * outlive *out. */
void vq_cache_bind_unrotated_values(vq_ctx *ctx, const vq_attn_values *inner, const float *diag, int64_t D,
                                    vq_cache_unrotated_values *desc, vq_attn_values *out);

#endif
