/* fma_chains.h — the clock probes' loop: 12 independent vfmadd231ps zmm
 * chains run `iters` times (12 * iters FMAs, two per cycle on the Xeons with
 * two 512-bit FMA units, as bench/port_throughput.c measures), on zeroed
 * operands (garbage could be subnormal: microcode assists). Used by
 * vq bench attention's clock line (bench_clock.c) and bench/kivi8_block.c.
 * x86-64 GCC / Clang only; the caller checks for AVX-512F. */
#ifndef VQ_FMA_CHAINS_H
#define VQ_FMA_CHAINS_H

static inline void vq_fma_chains(int iters)
{
    __asm__ volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
                     "vmovaps %%zmm0, %%zmm1\n\tvmovaps %%zmm0, %%zmm2\n\tvmovaps %%zmm0, %%zmm3\n\t"
                     "vmovaps %%zmm0, %%zmm4\n\tvmovaps %%zmm0, %%zmm5\n\tvmovaps %%zmm0, %%zmm6\n\t"
                     "vmovaps %%zmm0, %%zmm7\n\tvmovaps %%zmm0, %%zmm8\n\tvmovaps %%zmm0, %%zmm9\n\t"
                     "vmovaps %%zmm0, %%zmm10\n\tvmovaps %%zmm0, %%zmm11\n\tvmovaps %%zmm0, %%zmm12\n\t"
                     "vmovaps %%zmm0, %%zmm13\n\t"
                     "mov %0, %%ecx\n"
                     "1:\n\t"
                     "vfmadd231ps %%zmm12, %%zmm13, %%zmm0\n\tvfmadd231ps %%zmm12, %%zmm13, %%zmm1\n\t"
                     "vfmadd231ps %%zmm12, %%zmm13, %%zmm2\n\tvfmadd231ps %%zmm12, %%zmm13, %%zmm3\n\t"
                     "vfmadd231ps %%zmm12, %%zmm13, %%zmm4\n\tvfmadd231ps %%zmm12, %%zmm13, %%zmm5\n\t"
                     "vfmadd231ps %%zmm12, %%zmm13, %%zmm6\n\tvfmadd231ps %%zmm12, %%zmm13, %%zmm7\n\t"
                     "vfmadd231ps %%zmm12, %%zmm13, %%zmm8\n\tvfmadd231ps %%zmm12, %%zmm13, %%zmm9\n\t"
                     "vfmadd231ps %%zmm12, %%zmm13, %%zmm10\n\tvfmadd231ps %%zmm12, %%zmm13, %%zmm11\n\t"
                     "dec %%ecx\n\tjnz 1b\n\t"
                     "vzeroupper"
                     :
                     : "r"(iters)
                     : "rcx", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                       "xmm10", "xmm11", "xmm12", "xmm13", "cc");
}

#endif /* VQ_FMA_CHAINS_H */
