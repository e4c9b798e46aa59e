/* attn_int8_dotprod.c — the integer key scores (kivi_qk8) with the ARMv8.2
 * dot product: one sdot takes 16 code bytes against 16 query bytes into four
 * i32 lanes. Built with -march=armv8.2-a+dotprod (CMakeLists.txt) and
 * installed only where the CPU reports it (vq_cpu_has_neon_dotprod); the
 * same integers as attn_int8_neon.c's smull path. */
#include "cpu/neon/attn_int8_neon.h"

static inline int32x4_t dot16_sdot(int32x4_t acc, uint8x16_t e, int8x16_t qv)
{
    return vdotq_s32(acc, vreinterpretq_s8_u8(e), qv);
}

static void kivi_qk8_dotprod(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                               const float *dz, float *s, int64_t lds)
{
    vq_neon_kivi_qk8(R, n, D, bits, codes, ldc, xq, dz, s, lds, dot16_sdot);
}

void vq_attn_kernels_init_neon_dotprod(vq_attn_kernels *k) { k->kivi_qk8 = kivi_qk8_dotprod; }
