/* kivi_int8_data.h — the KIVI 2-bit blocks that contrib/kivi_int8_block.c and
 * contrib/kivi_int8_overlap.c time: NBLK blocks of 32 tokens at D = 128, random
 * key and value codes, f16 per-channel key and per-token value scales and
 * zeros (a fixed xorshift seed: both tools, every run, the same data). One
 * translation unit per tool; include after veloxquant.h or attn_kernels.h. */
#ifndef VQ_BENCH_KIVI_INT8_DATA_H
#define VQ_BENCH_KIVI_INT8_DATA_H

#include <math.h>
#include <stdint.h>

enum { NBLK = 64 };

static uint8_t kc[NBLK][1024], vc[NBLK][1024];
static uint16_t ks[NBLK][128], kz[NBLK][128], vs[NBLK][128], vz[NBLK][128];

static uint64_t rng = 99;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
/* uniform in [-1, 1) */
static float uniform(void) { return (float)(next() >> 40) / (float)(1 << 24) * 2.0f - 1.0f; }

static void make_blocks(void)
{
    for (int b = 0; b < NBLK; b++) {
        for (int i = 0; i < 1024; i++) {
            kc[b][i] = (uint8_t)next();
            vc[b][i] = (uint8_t)next();
        }
        for (int i = 0; i < 128; i++) {
            ks[b][i] = vq_f32_to_f16(0.05f + 0.3f * fabsf(uniform()));
            kz[b][i] = vq_f32_to_f16(-0.5f + 0.2f * uniform());
            vs[b][i] = vq_f32_to_f16(0.05f + 0.3f * fabsf(uniform()));
            vz[b][i] = vq_f32_to_f16(-0.5f + 0.2f * uniform());
        }
    }
}

#endif /* VQ_BENCH_KIVI_INT8_DATA_H */
