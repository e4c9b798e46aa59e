/* sdpa_params.h — launch parameters of the CUDA vq_fused_sdpa kernels
 * (sdpa_prep.cu, keys_*.cu), filled by the host glue (cuda_sdpa.c and the
 * key formats' keys_<name>.cu). Read by the C compiler and by nvcc. Plain
 * data: device pointers with byte_offset applied, shapes as ints, element
 * offsets as int64. */
#ifndef VQ_CUDA_SDPA_PARAMS_H
#define VQ_CUDA_SDPA_PARAMS_H

#include <stdint.h>

#include "cuda/attend_params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Key formats. The values equal the public vq_keys_format's (VQ_KEYS_F16 = 1
 * ... VQ_KEYS_COMMVQ = 8; 0 is no format), because the host glue stores
 * keys->format in vq_cu_sdpa_params.fmt unchanged; cuda_sdpa.c asserts the
 * equality at compile time (this header cannot include veloxquant.h). */
enum {
    VQ_CU_SDPA_F16 = 1,
    VQ_CU_SDPA_TURBO = 2,
    VQ_CU_SDPA_TURBO_RVQ = 3,
    VQ_CU_SDPA_KIVI = 4,
    VQ_CU_SDPA_RABITQ = 5,
    VQ_CU_SDPA_QJL = 6,
    VQ_CU_SDPA_VECINFER = 7,
    VQ_CU_SDPA_COMMVQ = 8,
    VQ_CU_SDPA_KIVI_MIX = 9,        /* no public format: VQ_CUDA_KEYS_KIVI_MIX (attention/attn_cuda.h) */
    VQ_CU_SDPA_RABITQ_HAMMING = 10  /* the same: VQ_CUDA_KEYS_RABITQ_HAMMING */
};

/* The query preparation of a key format (sdpa_prep.cu): scaled, rotated
 * first (H (diag ⊙ q)/sqrt(D)), or projected (q_proj q, q_proj_m floats). */
enum { VQ_CU_QPREP_SCALE = 0, VQ_CU_QPREP_ROTATE = 1, VQ_CU_QPREP_PROJECT = 2 };

/* Element types of float tensors. */
enum { VQ_CU_F32 = 0, VQ_CU_F16 = 1, VQ_CU_BF16 = 2 };

/* Largest QJL sketch (rows of the projection) the kernel holds in shared memory. */
#define VQ_CU_SDPA_MAX_QJL_M 1024

/* One TurboQuant stage: y += scale[tok] * cents[code(tok, c)]. */
typedef struct vq_cu_sdpa_stage {
    const void *idx;      /* [B,Hkv,Skv,ld]: u8 codes (ld = D) or u32 words (ld = ceil(D*bits/32)) */
    const void *scale;    /* [B,Hkv,Skv] f32, or f16 (scale_f16) */
    int ld, bits, packed, scale_f16;
    float cents[256];     /* the 2^bits Lloyd-Max centroids */
} vq_cu_sdpa_stage;

/* Bytes of the per-format key fields (vq_cu_sdpa_params.kp) and value
 * fields (.vp): TurboQuant's two key stages, its one value stage. */
#define VQ_CU_KEY_PARAM_BYTES (8 + 2 * sizeof(vq_cu_sdpa_stage))
#define VQ_CU_VALUE_PARAM_BYTES sizeof(vq_cu_sdpa_stage)

typedef struct vq_cu_sdpa_params {
    vq_cu_attend_common c;  /* shapes, causal, split plan, partial states (merge kernel) */
    int fmt;                /* VQ_CU_SDPA_*, the vq_keys_format */
    int qpf;                /* floats per prepared query row: D, or m for QJL */
    float *qp;              /* [B*Hq*Sq, qpf] prepared queries (scratch) */
    float qmul;             /* what multiplies the query: scale * log2(e) (QJL: times sqrt(pi/2)/m) */

    /* additive mask [Sq, Skv] rows at mask + b*mask_sb + hq*mask_sh, or NULL */
    const void *mask;
    int mask_f16;
    int64_t mask_sb, mask_sh;

    int v_fmt;              /* the vq_values_format (values_registry.h) */
    /* Plain values (values_f16.cuh) and KIVI values (values_kivi.cuh): named
     * fields, as the tensor-core skeleton (decode_mma*.cuh) reads them too */
    const void *v;          /* [B,Hkv,Skv,D] f16 (v_f16) or f32 */
    int v_f16;
    const uint8_t *va_codes;       /* [B,Hkv,Skv,va_ldc]: v_hat = code * scale[t, c/g] + zero[t, c/g] */
    const void *va_scale, *va_zero; /* [B,Hkv,Skv,va_GV] f16 (va_sz_f16) or f32 */
    int va_bits, va_ldc, va_g, va_GV, va_sz_f16;
    /* The other value formats' fields: the struct of their values_<name>.cuh,
     * filled by its fill and read by its policy (value_params in kv_fields.cuh). */
    union {
        unsigned char bytes[VQ_CU_VALUE_PARAM_BYTES];
        int64_t align_i;
        const void *align_p;
    } vp;

    /* VQ_CU_SDPA_F16 (also read by the tensor-core skeleton, decode_mma.cuh) */
    const void *k;          /* [B,Hkv,Skv,D] */
    int k_elt;              /* VQ_CU_F32 / F16 / BF16 */

    /* KIVI (also read by the tensor-core skeleton, decode_mma_kivi.cuh) */
    const uint8_t *a_codes;    /* [B,Hkv,Skv,ldc] */
    const void *a_scale, *a_zero;  /* [B,Hkv,GK,D] */
    int a_bits;                /* 2, 4 (packed) or 8 (one code per byte) */
    int a_ldc, a_g, a_GK, a_sz_f16;

    /* How the prep kernel turns a query row into qp (VQ_CU_QPREP_*): the
     * rotation's diagonal (or NULL), the projection [q_proj_m, D] */
    int q_prep;
    const float *q_diag;
    const float *q_proj;
    int q_proj_m;

    /* The other key formats' fields: the struct of their keys_<name>.cu,
     * filled by its host side and read by its policy (key_params in
     * kv_fields.cuh), no larger than TurboQuant's two stages. */
    union {
        unsigned char bytes[VQ_CU_KEY_PARAM_BYTES];
        int64_t align_i;
        const void *align_p;
    } kp;
} vq_cu_sdpa_params;

/* Prepares every query row into p->qp (rotation, projection, scale). */
int vq_cu_launch_sdpa_prep(const vq_cu_sdpa_params *p, void *stream);
/* The decode skeleton (kv_decode.cuh) instances of one key format over
 * every value format of one set, width and row count (the launchers of a
 * key format's descriptor, keys_registry.h). With occupancy != NULL they
 * launch nothing and store how many CTAs fit on one SM (p needs the
 * formats' fields, c.D, c.rows and qpf). */
typedef int (*vq_cu_sdpa_launcher)(const vq_cu_sdpa_params *p, void *stream, int *occupancy);
/* The tensor-core decode skeleton (decode_mma.cuh), D = 128, no mask, no
 * causal limit inside the kv axis: f16 keys and values (decode_mma_f16.cu),
 * KIVI 2/4-bit keys and values (decode_mma_kivi.cu). */
int vq_cu_launch_mma_kivi(const vq_cu_sdpa_params *p, void *stream, int *occupancy);
int vq_cu_launch_mma_f16(const vq_cu_sdpa_params *p, void *stream, int *occupancy);

#ifdef __cplusplus
}
#endif

#endif
