/* kv_sdpa_vecinfer_enc.cu — the pq key instances over the encoded value formats
 * (affine, codebook, turbo): kv_sdpa_vecinfer.cu with VQ_KV_VSET 1, its own translation unit
 * so that it compiles in parallel. */
#define VQ_KV_VSET 1
#define VQ_KV_NAME(n) n##_enc
#include "cuda/kv_sdpa_vecinfer.cu"
