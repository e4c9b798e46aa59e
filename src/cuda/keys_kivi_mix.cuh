/* keys_kivi_mix.cuh — what the two key policies of mixed-width KIVI keys
 * share (keys_kivi_mix.cu: the encoder, the general policy, the fill and
 * the descriptor; keys_kivi_mix_runs.cu: the run form): the format's fields
 * of vq_cu_sdpa_params and the run form's launchers. */
#ifndef VQ_CUDA_KEYS_KIVI_MIX_CUH
#define VQ_CUDA_KEYS_KIVI_MIX_CUH

#include "cuda/kv_keys.cuh"

namespace vqkv {

/* The format's fields of p.kp. */
struct MixParams {
    const uint8_t *codes;       /* token rows of rb bytes */
    const __half *scale, *zero; /* [groups, D] */
    const uint8_t *mask;        /* [groups, D/8] */
    int rb, g, nw, bits, bits2;
    int GK;    /* contiguous: groups per (b, kv head) */
    int paged; /* group of flattened token tok: tok / g (pages hold whole groups) */
    int unit;  /* 0: the general policy; 2 or 4: the run form, its rows
                  read in loads of that many bytes (their alignment) */
};

/* The run form's instances (keys_kivi_mix_runs.cu), as kv_launch_f16 and
 * kv_launch_enc. */
int mix_runs_launch_f16(const vq_cu_sdpa_params *p, void *stream, int *occupancy);
int mix_runs_launch_enc(const vq_cu_sdpa_params *p, void *stream, int *occupancy);

} /* namespace vqkv */

#endif
