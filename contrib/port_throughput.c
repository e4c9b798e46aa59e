/* port_throughput.c — throughput of the 512-bit instructions the CPU decode
 * kernels are made of, on this core, against vfmadd231ps (two per cycle on
 * Xeons with two FMA units) in the same run: the per-port rates the uop
 * floors in docs/PERFORMANCE.md are counted with. Twelve independent
 * chains per instruction (no dependencies: throughput, not latency), CPU
 * time, so other work on a shared machine changes the clock estimate but
 * not the ratios. x86-64 with AVX-512 VNNI/VBMI/VPOPCNTDQ only.
 *
 *   gcc -O2 -mavx512f -mavx512bw -mavx512vnni -mavx512vbmi -mavx512vpopcntdq \
 *       -o port_throughput contrib/port_throughput.c && ./port_throughput */
#include <stdio.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define N 20000000L
#define R12(I) I(0) I(1) I(2) I(3) I(4) I(5) I(6) I(7) I(8) I(9) I(10) I(11)
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11"
/* ns per instruction of `name`, zmm12 and zmm13 the (unchanging) sources */
#define LOOP(fn, INS)                                                          \
    static double fn(void)                                                     \
    {                                                                          \
        const double t0 = cpu_now();                                           \
        for (long i = 0; i < N; i++) __asm__ volatile(R12(INS)::: CLOBBER);    \
        return (cpu_now() - t0) / (12.0 * N) * 1e9;                            \
    }
#define FMA(k) "vfmadd231ps %%zmm12, %%zmm13, %%zmm" #k "\n\t"
#define DPBUSD(k) "vpdpbusd %%zmm12, %%zmm13, %%zmm" #k "\n\t"
#define SRLD(k) "vpsrld $2, %%zmm12, %%zmm" #k "\n\t"
#define ANDD(k) "vpandd %%zmm12, %%zmm13, %%zmm" #k "\n\t"
#define PERMD(k) "vpermd %%zmm12, %%zmm13, %%zmm" #k "\n\t"
#define PERMPS(k) "vpermps %%zmm12, %%zmm13, %%zmm" #k "\n\t"
#define PERMT2B(k) "vpermt2b %%zmm12, %%zmm13, %%zmm" #k "\n\t"
#define PSHUFB(k) "vpshufb %%zmm12, %%zmm13, %%zmm" #k "\n\t"
#define ZXBD(k) "vpmovzxbd %%xmm12, %%zmm" #k "\n\t"
#define CVTDQ(k) "vcvtdq2ps %%zmm12, %%zmm" #k "\n\t"
#define POPCNT(k) "vpopcntq %%zmm12, %%zmm" #k "\n\t"
LOOP(t_fma, FMA)
LOOP(t_dpbusd, DPBUSD)
LOOP(t_srld, SRLD)
LOOP(t_andd, ANDD)
LOOP(t_permd, PERMD)
LOOP(t_permps, PERMPS)
LOOP(t_permt2b, PERMT2B)
LOOP(t_pshufb, PSHUFB)
LOOP(t_zxbd, ZXBD)
LOOP(t_cvtdq, CVTDQ)
LOOP(t_popcnt, POPCNT)

int main(void)
{
    /* finite zero sources (denormal or NaN inputs would take microcode assists) */
    __asm__ volatile("vpxord %%zmm12, %%zmm12, %%zmm12\n\tvpxord %%zmm13, %%zmm13, %%zmm13\n\t" ::: "xmm12", "xmm13");
    const double f = t_fma();
    printf("vfmadd231ps %.3f ns: 2 per cycle -> %.2f GHz effective\n", f, 0.5 / f);
    static const struct {
        const char *name;
        double (*fn)(void);
    } ops[] = {{"vpdpbusd", t_dpbusd}, {"vpsrld", t_srld},       {"vpandd", t_andd},   {"vpermd", t_permd},
               {"vpermps", t_permps},  {"vpermt2b", t_permt2b}, {"vpshufb", t_pshufb}, {"vpmovzxbd", t_zxbd},
               {"vcvtdq2ps", t_cvtdq}, {"vpopcntq", t_popcnt}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const double t = ops[i].fn();
        printf("%-11s %.3f ns: %.2f per cycle\n", ops[i].name, t, 2.0 * f / t);
    }
    return 0;
}
