/* kivi_int8_block.c — the fused KIVI block kernel (kivi_int8_block: AVX-512 VNNI +
 * VBMI, or AVX2) against the separate kernels it replaces, and those with
 * the f32 p.V (kivi_pv) instead of the integer one, and the separate
 * parts alone (p.V, keys, softmax step: where a block's time goes), one
 * whole block of 32 tokens at D = 128, R query rows, in cache, one thread,
 * TSC ticks and core cycles per block
 * (least of 50 short passes: robust to other work on the cores): the block timings of
 * docs/PERFORMANCE.md (AVX-512 and AVX2). The kernels of the
 * CPU's best ISA. Internal headers; link the static library:
 *
 *   ninja -C build veloxquant_static   (the target `veloxquant` is the shared
 *                                      library only: a stale .a times old kernels)
 *   gcc -O2 -Isrc -Iinclude -Itools/vq contrib/kivi_int8_block.c build/libveloxquant.a -lm -lpthread -o kivi_int8_block
 *   ./kivi_int8_block [R (1-4, default 4)] [iterations] [once [N]]
 *
 * With a third argument it makes one fused call (on a run of N blocks) and
 * exits: the call that contrib/insn_hist.py counts instruction by instruction
 * under gdb (a block's count: the difference of N = 3 and N = 1, halved). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h> /* x86-64 with AVX2 or AVX-512 */

#include "attention/attn_kernels.h"
#include "fma_chains.h" /* tools/vq */
#include "kivi_int8_data.h"

/* TSC ticks per core cycle, from 12 independent vfmadd231ps chains (two per
 * cycle on these cores: contrib/port_throughput.c; zmm where the CPU has
 * AVX-512, else ymm), least of 50 short passes. */
static bool zmm;
static double ticks_per_cycle(void)
{
    unsigned long long best = ~0ull;
    for (int rep = 0; rep < 50; rep++) {
        const unsigned long long t0 = __rdtsc();
        if (zmm) vq_fma_chains(20000);
        else vq_fma_chains_ymm(20000);
        const unsigned long long t = __rdtsc() - t0;
        best = t < best ? t : best;
    }
    return (double)best / (20000.0 * 12 / 2);
}

int main(int argc, char **argv)
{
    const int R = argc > 1 ? atoi(argv[1]) : 4;
    const long iters = argc > 2 ? atol(argv[2]) : 2000;
    const vq_isa isa = vq_cpu_best_isa();
    zmm = vq_isa_includes(isa, VQ_ISA_AVX512);
    const vq_attn_kernels *k = vq_attn_kernels_for(isa);
    if (!vq_isa_includes(isa, VQ_ISA_AVX2) || R < 1 || R > 4) {
        fprintf(stderr, "not an x86-64 CPU with AVX2, or R not in 1..4\n");
        return 1;
    }
    const bool fused = k->kivi_int8_block != NULL;
    if (!fused && argc > 3) {
        fprintf(stderr, "no fused kernel for %s\n", vq_isa_name(isa));
        return 1;
    }
    make_blocks();
    float q[4 * 128], o[4 * 128], m[4], d[4], s[4 * 32], al[4], dz[8], ksf[128], kzf[128], vsf[128], vzf[128];
    int8_t xq[4 * 128];
    bool bad[4] = {false, false, false, false};
    for (int i = 0; i < 4 * 128; i++) {
        q[i] = 0.1f * uniform();
        o[i] = 0.0f;
    }
    for (int r = 0; r < 4; r++) {
        m[r] = -INFINITY;
        d[r] = 0.0f;
    }
    vq_attn_kivi_int8_block B = {kc[0], vc[0], ks[0], kz[0], vs[0], vz[0], true, {NULL}, {0}, 1, 0, {0}};
    if (argc > 3) { /* "once [N]": one call on a run of N blocks (default 1) */
        B.nb = argc > 4 ? atoi(argv[4]) : 1;
        if (B.nb < 1 || B.nb > NBLK) return 1;
        for (int j = 0; j < 6; j++) B.step[j] = j == 0 || j == 3 ? (int64_t)sizeof kc[0] : (int64_t)sizeof ks[0];
        k->kivi_int8_block(R, &B, q, 128, o, 128, m, d, bad);
        printf("%g\n", (double)o[0]);
        return 0;
    }
    const double tpc = ticks_per_cycle();
    printf("kernels %s; clock: %.3f TSC ticks per core cycle (12 vfmadd231ps %s chains, 2 per cycle)\n", vq_isa_name(isa), tpc,
           zmm ? "zmm" : "ymm");
    /* the same blocks as runs of NBLK in one call each (what the skeleton passes) */
    vq_attn_kivi_int8_block run = {kc[0], vc[0], ks[0], kz[0], vs[0], vz[0], true, {NULL}, {0}, NBLK, 0,
                               {sizeof kc[0], sizeof ks[0], sizeof kz[0], sizeof vc[0], sizeof vs[0], sizeof vz[0]}};
    enum { NV = 8 };
    static const char *name[NV] = {"fused kivi_int8_block", "fused, runs of 64", "separate kernels", "separate, f32 p.V",
                                   "p.V alone, kivi_pv8 (int8)", "p.V alone, kivi_pv (f32)",
                                   "keys alone, kivi_q8 + qk8", "poison + softmax + rescale"};
    unsigned long long best[NV];
    for (int v = 0; v < NV; v++) best[v] = ~0ull;
    const long ran = (iters + NBLK - 1) / NBLK * NBLK;
    /* the variants alternate pass by pass (other work on the cores touches all alike) */
    for (int rep = 0; rep < 50; rep++)
        for (int v = fused ? 0 : 2; v < NV; v++) {
            const unsigned long long t0 = __rdtsc();
            if (v == 1)
                for (long i = 0; i < iters; i += NBLK) k->kivi_int8_block(R, &run, q, 128, o, 128, m, d, bad);
            else
                for (long i = 0; i < iters; i++) {
                    const int b = (int)(i % NBLK);
                    if (v == 0) {
                        B.kcodes = kc[b];
                        B.vcodes = vc[b];
                        B.kscale = ks[b];
                        B.kzero = kz[b];
                        B.vs = vs[b];
                        B.vz = vz[b];
                        k->kivi_int8_block(R, &B, q, 128, o, 128, m, d, bad);
                    } else if (v < 4) {
                        k->cvt_f16(128, ks[b], ksf);
                        k->cvt_f16(128, kz[b], kzf);
                        k->kivi_q8(R, 128, 2, q, 128, ksf, kzf, xq, dz);
                        k->kivi_qk8(R, 32, 128, 2, kc[b], 32, xq, dz, s, 32);
                        k->poison(R, 32, s, 32, bad);
                        k->softmax(R, 32, s, 32, m, d, al);
                        k->rescale(R, 128, o, 128, al);
                        k->cvt_f16(128, vs[b], vsf);
                        k->cvt_f16(128, vz[b], vzf);
                        if (v == 2) k->kivi_pv8(R, 32, vc[b], 32, vsf, vzf, s, 32, o, 128);
                        else k->kivi_pv(R, 32, 128, 2, vc[b], 32, vsf, vzf, 4, 32, s, 32, o, 128);
                    } else if (v == 4)
                        k->kivi_pv8(R, 32, vc[b], 32, vsf, vzf, s, 32, o, 128);
                    else if (v == 5)
                        k->kivi_pv(R, 32, 128, 2, vc[b], 32, vsf, vzf, 4, 32, s, 32, o, 128);
                    else if (v == 6) { /* the key scales as f32 (the separate kernels' input) */
                        k->kivi_q8(R, 128, 2, q, 128, ksf, kzf, xq, dz);
                        k->kivi_qk8(R, 32, 128, 2, kc[b], 32, xq, dz, s, 32);
                    } else {
                        k->poison(R, 32, s, 32, bad);
                        k->softmax(R, 32, s, 32, m, d, al);
                        k->rescale(R, 128, o, 128, al);
                    }
                }
            const unsigned long long t = __rdtsc() - t0;
            best[v] = t < best[v] ? t : best[v];
        }
    for (int v = fused ? 0 : 2; v < NV; v++) {
        const double per = (double)best[v] / (double)(v == 1 ? ran : iters);
        printf("R %d %-30s %6.0f TSC ticks = %6.0f cycles per block\n", R, name[v], per, per / tpc);
    }
    printf("(checksum %g)\n", (double)o[0]);
    return 0;
}
