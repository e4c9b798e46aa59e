/* rabitq_block.c — the RaBitQ decode kernels of one ISA, per block of 32
 * tokens at D = 128 and R query rows, in cache (64 blocks), one thread: TSC
 * ticks per block, least of 30 passes (robust to other work on the cores),
 * of each step: the keys (hamming + the score formula, as the format runs
 * them where hamming_score is NULL; hamming_score), the softmax step
 * (poison, softmax, rescale), the values (codebook_pv8, the f32
 * codebook_pv), the separate sequence and the fused rabitq_block where the
 * ISA has them. Internal headers; link the static library:
 *
 *   ninja -C build veloxquant_static   (the target `veloxquant` is the shared
 *                                      library only: a stale .a times old kernels)
 *   gcc -O2 -Isrc -Iinclude contrib/rabitq_block.c build/libveloxquant.a -lm -lpthread -o rabitq_block
 *   ./rabitq_block [R (1-4, default 4)] [isa (default: best)] [once [N]]
 *
 * With "once" it runs one fused call on a run of N blocks (default 1; or,
 * without rabitq_block, one block of the separate sequence) and exits: a
 * call for callgrind / insn_hist.py (a block's count: the difference of
 * N = 3 and N = 1, halved). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "attention/attn_kernels.h"

enum { NBLK = 64, BN = 32, D = 128, QPF = 5 };

static uint64_t rng = 99;
static uint64_t next(void) /* splitmix64 */
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float unif(void) { return (float)(next() >> 40) / (float)(1 << 24); }

static uint8_t kb[NBLK][BN * 16], vi[NBLK][BN * 64];
static float mag[NBLK][BN], qp[4 * QPF], o[4 * D], m[4], d[4], s[4 * BN], alpha[4], cents[16];
static int32_t ham[4 * BN];
static bool bad[4];
static int8_t cq[16];
static float cstep;

typedef void (*step_fn)(const vq_attn_kernels *k, int R, int b);

static void keys_ham(const vq_attn_kernels *k, int R, int b)
{
    k->hamming(R, BN, 16, (const uint8_t *)(qp + 1), QPF * 4, kb[b], ham, BN);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < BN; j++) s[r * BN + j] = (float)(D - 2 * ham[r * BN + j]) * qp[r * QPF] * mag[b][j];
}
static void keys_fused(const vq_attn_kernels *k, int R, int b)
{
    k->hamming_score(R, BN, D, (const uint8_t *)(qp + 1), QPF * 4, qp, QPF, kb[b], mag[b], NULL, s, BN);
}
static float s0[4 * BN];
static void smax(const vq_attn_kernels *k, int R, int b)
{
    (void)b;
    memcpy(s, s0, sizeof(float) * (size_t)(R * BN)); /* fresh finite scores below m: alpha 1 */
    k->poison(R, BN, s, BN, bad);
    k->softmax(R, BN, s, BN, m, d, alpha);
    k->rescale(R, D, o, D, alpha);
}
static void vals8(const vq_attn_kernels *k, int R, int b) { k->codebook_pv8(R, BN, vi[b], 64, cq, cstep, s, BN, o, D); }
static void vals32(const vq_attn_kernels *k, int R, int b) { k->codebook_pv(R, BN, D, true, vi[b], cents, 16, s, BN, o, D); }
static void seq(const vq_attn_kernels *k, int R, int b)
{
    if (k->hamming_score) keys_fused(k, R, b);
    else keys_ham(k, R, b);
    k->poison(R, BN, s, BN, bad);
    k->softmax(R, BN, s, BN, m, d, alpha);
    k->rescale(R, D, o, D, alpha);
    vals8(k, R, b);
}

static double ticks(const vq_attn_kernels *k, int R, step_fn f)
{
    double best = 1e30;
    for (int pass = 0; pass < 30; pass++) {
        const uint64_t t0 = __rdtsc();
        for (int b = 0; b < NBLK; b++) f(k, R, b);
        const double t = (double)(__rdtsc() - t0) / NBLK;
        best = t < best ? t : best;
    }
    return best;
}

static double ticks_fused(const vq_attn_kernels *k, int R)
{
    vq_attn_rabitq_block blk = {kb[0], mag[0], NULL, vi[0], cq, cstep, {NULL, NULL, NULL}, {0, 0, 0}, NBLK, 0,
                                {BN * 16, BN * 4, BN * 4, BN * 64}};
    double best = 1e30;
    for (int pass = 0; pass < 30; pass++) {
        const uint64_t t0 = __rdtsc();
        k->rabitq_block(R, &blk, (const uint8_t *)(qp + 1), QPF * 4, qp, QPF, o, D, m, d, bad);
        const double t = (double)(__rdtsc() - t0) / NBLK;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    const int R = argc > 1 ? atoi(argv[1]) : 4;
    vq_isa isa = vq_cpu_best_isa();
    if (argc > 2)
        for (int i = 0; i < VQ_ISA_COUNT; i++)
            if (strcmp(argv[2], vq_isa_name((vq_isa)i)) == 0) isa = (vq_isa)i;
    const vq_attn_kernels *k = vq_attn_kernels_for(isa);
    for (int b = 0; b < NBLK; b++)
        for (int j = 0; j < BN; j++) mag[b][j] = 0.5f + unif();
    for (size_t i = 0; i < sizeof kb; i++) ((uint8_t *)kb)[i] = (uint8_t)next();
    for (size_t i = 0; i < sizeof vi; i++) ((uint8_t *)vi)[i] = (uint8_t)next();
    for (int r = 0; r < 4; r++) {
        qp[r * QPF] = 0.01f;
        for (int c = 0; c < 16; c++) ((uint8_t *)(qp + r * QPF + 1))[c] = (uint8_t)next();
        m[r] = 1.0f; /* at or above every score (in [0, 1)): alpha stays 1, p normal (no denormal assists) */
        d[r] = 1.0f;
    }
    for (int i = 0; i < 16; i++) cents[i] = (i - 7.5f) / 8;
    vq_attn_cb8_round(cents, 16, cq, &cstep);
    for (int i = 0; i < 4 * BN; i++) s[i] = s0[i] = unif();
    if (argc > 3) {
        if (k->rabitq_block) {
            const int64_t nb = argc > 4 ? atoi(argv[4]) : 1;
            if (nb < 1 || nb > NBLK) return 1;
            vq_attn_rabitq_block blk = {kb[0], mag[0], NULL, vi[0], cq, cstep, {NULL, NULL, NULL}, {0, 0, 0}, nb, 0,
                                        {BN * 16, BN * 4, BN * 4, BN * 64}};
            k->rabitq_block(R, &blk, (const uint8_t *)(qp + 1), QPF * 4, qp, QPF, o, D, m, d, bad);
        } else {
            seq(k, R, 0);
        }
        return 0;
    }
    printf("isa %s R %d, TSC ticks per block of 32 tokens (least of 30 passes over %d blocks in cache)\n",
           vq_isa_name(isa), R, NBLK);
    printf("  keys: hamming + formula   %8.1f\n", ticks(k, R, keys_ham));
    if (k->hamming_score) printf("  keys: hamming_score       %8.1f\n", ticks(k, R, keys_fused));
    printf("  poison + softmax + rescale%8.1f\n", ticks(k, R, smax));
    for (int i = 0; i < 4 * BN; i++) s[i] = unif();
    printf("  values: codebook_pv8      %8.1f\n", ticks(k, R, vals8));
    printf("  values: codebook_pv (f32) %8.1f\n", ticks(k, R, vals32));
    printf("  sequence (int8 values)    %8.1f\n", ticks(k, R, seq));
    if (k->rabitq_block) printf("  rabitq_block (fused)      %8.1f\n", ticks_fused(k, R));
    return 0;
}
