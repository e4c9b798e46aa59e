/* fma_chains.h — the clock probes' loop: 12 independent vfmadd231ps zmm
 * chains run `iters` times (12 * iters FMAs, two per cycle on the Xeons with
 * two 512-bit FMA units, as contrib/port_throughput.c measures), on zeroed
 * operands (garbage could be subnormal: microcode assists). Used by
 * vq bench attention's clock line (bench_clock.c) and contrib/kivi_int8_block.c.
 * x86-64 GCC / Clang only; the caller checks for AVX-512F (vq_fma_chains) or
 * AVX2 with FMA (vq_fma_chains_ymm). */
#ifndef VQ_FMA_CHAINS_H
#define VQ_FMA_CHAINS_H

/* The loop for registers named R ("zmm" or "ymm"; zero idiom Z). */
#define VQ_FMA_CHAINS_ASM(Z, R)                                                                            \
    __asm__ volatile(Z " %%" R "0, %%" R "0, %%" R "0\n\t"                                                   \
                     "vmovaps %%" R "0, %%" R "1\n\tvmovaps %%" R "0, %%" R "2\n\tvmovaps %%" R "0, %%" R "3\n\t"     \
                     "vmovaps %%" R "0, %%" R "4\n\tvmovaps %%" R "0, %%" R "5\n\tvmovaps %%" R "0, %%" R "6\n\t"     \
                     "vmovaps %%" R "0, %%" R "7\n\tvmovaps %%" R "0, %%" R "8\n\tvmovaps %%" R "0, %%" R "9\n\t"     \
                     "vmovaps %%" R "0, %%" R "10\n\tvmovaps %%" R "0, %%" R "11\n\tvmovaps %%" R "0, %%" R "12\n\t"  \
                     "vmovaps %%" R "0, %%" R "13\n\t"                                                          \
                     "mov %0, %%ecx\n"                                                                        \
                     "1:\n\t"                                                                                \
                     "vfmadd231ps %%" R "12, %%" R "13, %%" R "0\n\tvfmadd231ps %%" R "12, %%" R "13, %%" R "1\n\t"   \
                     "vfmadd231ps %%" R "12, %%" R "13, %%" R "2\n\tvfmadd231ps %%" R "12, %%" R "13, %%" R "3\n\t"   \
                     "vfmadd231ps %%" R "12, %%" R "13, %%" R "4\n\tvfmadd231ps %%" R "12, %%" R "13, %%" R "5\n\t"   \
                     "vfmadd231ps %%" R "12, %%" R "13, %%" R "6\n\tvfmadd231ps %%" R "12, %%" R "13, %%" R "7\n\t"   \
                     "vfmadd231ps %%" R "12, %%" R "13, %%" R "8\n\tvfmadd231ps %%" R "12, %%" R "13, %%" R "9\n\t"   \
                     "vfmadd231ps %%" R "12, %%" R "13, %%" R "10\n\tvfmadd231ps %%" R "12, %%" R "13, %%" R "11\n\t" \
                     "dec %%ecx\n\tjnz 1b\n\t"                                                               \
                     "vzeroupper"                                                                              \
                     :                                                                                         \
                     : "r"(iters)                                                                              \
                     : "rcx", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",   \
                       "xmm10", "xmm11", "xmm12", "xmm13", "cc")

static inline void vq_fma_chains(int iters) { VQ_FMA_CHAINS_ASM("vpxord", "zmm"); }

/* The same with 256-bit registers (vfmadd231ps ymm: two per cycle on Zen 3,
 * FP0 and FP1), for CPUs without AVX-512 (contrib/kivi_int8_block.c). */
static inline void vq_fma_chains_ymm(int iters) { VQ_FMA_CHAINS_ASM("vxorps", "ymm"); }

#endif /* VQ_FMA_CHAINS_H */
