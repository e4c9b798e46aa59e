/* port_pairs_avx512.c — throughput of pairs of independent 512-bit
 * instructions (12 chains, no dependencies) on this core, in cycles per
 * pair, with the clock taken from 256-bit vfmadd231ps pairs (two FMA pipes
 * on the cores this was written for: AMD Zen 3 and Zen 4, Intel since
 * Skylake): which 512-bit instructions share pipes, the classes that
 * contrib/zen4_floor.py counts with. On Zen 4 a 512-bit instruction holds a
 * 256-bit pipe for two cycles, so a class of two pipes retires one zmm
 * instruction per cycle (docs/PERFORMANCE.md, Zen 4 floors). CPU
 * time: other work on the machine changes the clock estimate, not the
 * ratios. x86-64 with AVX-512 VNNI / VBMI / VPOPCNTDQ:
 *
 *   gcc -O2 -o port_pairs_avx512 contrib/port_pairs_avx512.c && ./port_pairs_avx512 */
#include <stdio.h>
#include <time.h>
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
#define N 10000000L
#define CL "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11"
/* an instruction with its sources (B2: zmm12 and zmm13, B1: zmm12), writing register k */
#define B2(op) op " %%zmm12, %%zmm13, "
#define B1(op) op " %%zmm12, "
#define I(r, op, k) op "%%" r #k "\n\t"
#define PAIR(r, a, b) \
    I(r, a, 0) I(r, b, 1) I(r, a, 2) I(r, b, 3) I(r, a, 4) I(r, b, 5) I(r, a, 6) I(r, b, 7) I(r, a, 8) I(r, b, 9) I(r, a, 10) I(r, b, 11)
/* ns per pair */
#define T(name, r, a, b)                                                            \
    static double name(void)                                                        \
    {                                                                               \
        const double t0 = cpu_now();                                                \
        for (long i = 0; i < N; i++) __asm__ volatile(PAIR(r, a, b)::: CL);         \
        return (cpu_now() - t0) / (6.0 * N) * 1e9;                                  \
    }
/* memory: loads from / stores to a static 1 KB buffer (L1), zmm k at byte 64 k */
static char buf[1024] __attribute__((aligned(64)));
#define LD(k) "vmovdqu64 " #k "*64(%0), %%zmm" #k "\n\t"
#define ST(k) "vmovdqu64 %%zmm12, " #k "*64(%0)\n\t"
#define DPL(k) "vpdpbusd " #k "*64(%0), %%zmm13, %%zmm" #k "\n\t"
#define BC(k) "vpbroadcastd " #k "*64(%0), %%zmm" #k "\n\t"
#define LDY(k) "vmovdqu " #k "*64(%0), %%ymm" #k "\n\t"
#define DP(k) "vpdpbusd %%zmm12, %%zmm13, %%zmm" #k "\n\t"
#define M12(a, b) a(0) b(1) a(2) b(3) a(4) b(5) a(6) b(7) a(8) b(9) a(10) b(11)
#define TM(name, a, b)                                                              \
    static double name(void)                                                        \
    {                                                                               \
        const double t0 = cpu_now();                                                \
        for (long i = 0; i < N; i++) __asm__ volatile(M12(a, b)::"r"(buf) : CL, "memory"); \
        return (cpu_now() - t0) / (6.0 * N) * 1e9;                                  \
    }
TM(t_ld_ld, LD, LD)
TM(t_st_st, ST, ST)
TM(t_ld_st, LD, ST)
TM(t_dpl_dpl, DPL, DPL)
TM(t_ld_dp, LD, DP)
TM(t_bc_bc, BC, BC)
TM(t_bc_ld, BC, LD)
TM(t_ldy_ldy, LDY, LDY)
T(t_clock, "ymm", "vfmadd231ps %%ymm12, %%ymm13, ", "vfmadd231ps %%ymm12, %%ymm13, ")
T(t_fma_fma, "zmm", B2("vfmadd231ps"), B2("vfmadd231ps"))
T(t_dp_dp, "zmm", B2("vpdpbusd"), B2("vpdpbusd"))
T(t_dp_fma, "zmm", B2("vpdpbusd"), B2("vfmadd231ps"))
T(t_madd_madd, "zmm", B2("vpmaddubsw"), B2("vpmaddwd"))
T(t_dp_shuf, "zmm", B2("vpdpbusd"), B2("vpshufb"))
T(t_dp_permb, "zmm", B2("vpdpbusd"), B2("vpermb"))
T(t_dp_add, "zmm", B2("vpdpbusd"), B2("vpaddd"))
T(t_dp_and, "zmm", B2("vpdpbusd"), B2("vpandd"))
T(t_dp_srl, "zmm", B2("vpdpbusd"), B2("vpsrlvd"))
T(t_fma_shuf, "zmm", B2("vfmadd231ps"), B2("vpshufb"))
T(t_fma_add, "zmm", B2("vfmadd231ps"), B2("vaddps"))
T(t_fma_max, "zmm", B2("vfmadd231ps"), B2("vmaxps"))
T(t_shuf_shuf, "zmm", B2("vpshufb"), B2("vpshufb"))
T(t_shuf_permb, "zmm", B2("vpshufb"), B2("vpermb"))
T(t_permd_permd, "zmm", B2("vpermd"), B2("vpermd"))
T(t_shuf_srl, "zmm", B2("vpshufb"), B2("vpsrlvd"))
T(t_shuf_add, "zmm", B2("vpshufb"), B2("vpaddd"))
T(t_srl_srl, "zmm", B2("vpsrlvd"), B2("vpsrlvd"))
T(t_srl_add, "zmm", B2("vpsrlvd"), B2("vpaddd"))
T(t_add_add, "zmm", B2("vpaddd"), B2("vpaddd"))
T(t_and_and, "zmm", B2("vpandd"), B2("vpandd"))
T(t_add_and, "zmm", B2("vpaddd"), B2("vpandd"))
T(t_addps_addps, "zmm", B2("vaddps"), B2("vaddps"))
T(t_max_max, "zmm", B2("vmaxps"), B2("vmaxps"))
T(t_cvt_cvt, "zmm", B1("vcvtdq2ps"), B1("vcvtdq2ps"))
T(t_cvt_dp, "zmm", B1("vcvtdq2ps"), B2("vpdpbusd"))
T(t_cvt_shuf, "zmm", B1("vcvtdq2ps"), B2("vpshufb"))
T(t_pop_pop, "zmm", B1("vpopcntq"), B1("vpopcntq"))
T(t_pop_shuf, "zmm", B1("vpopcntq"), B2("vpshufb"))
T(t_pop_dp, "zmm", B1("vpopcntq"), B2("vpdpbusd"))
T(t_pop_add, "zmm", B1("vpopcntq"), B2("vpaddd"))
T(t_pxor_pxor, "zmm", B2("vpxord"), B2("vpxord"))
int main(void)
{
    /* finite zero sources (denormal or NaN inputs would take microcode assists) */
    __asm__ volatile("vpxord %%zmm12, %%zmm12, %%zmm12\n\tvpxord %%zmm13, %%zmm13, %%zmm13\n\t" ::: "xmm12", "xmm13");
    const double c = t_clock();
    printf("vfmadd231ps ymm pair %.3f ns: 2 per cycle -> %.2f GHz\n", c, 1.0 / c);
    static const struct {
        const char *name;
        double (*fn)(void);
    } t[] = {{"fma+fma", t_fma_fma},         {"dpbusd+dpbusd", t_dp_dp},     {"dpbusd+fma", t_dp_fma},
             {"maddubsw+maddwd", t_madd_madd}, {"dpbusd+pshufb", t_dp_shuf},   {"dpbusd+permb", t_dp_permb},
             {"dpbusd+paddd", t_dp_add},     {"dpbusd+pandd", t_dp_and},     {"dpbusd+psrlvd", t_dp_srl},
             {"fma+pshufb", t_fma_shuf},     {"fma+addps", t_fma_add},       {"fma+maxps", t_fma_max},
             {"pshufb+pshufb", t_shuf_shuf}, {"pshufb+permb", t_shuf_permb}, {"permd+permd", t_permd_permd},
             {"pshufb+psrlvd", t_shuf_srl},  {"pshufb+paddd", t_shuf_add},   {"psrlvd+psrlvd", t_srl_srl},
             {"psrlvd+paddd", t_srl_add},    {"paddd+paddd", t_add_add},     {"pandd+pandd", t_and_and},
             {"paddd+pandd", t_add_and},     {"addps+addps", t_addps_addps}, {"maxps+maxps", t_max_max},
             {"cvtdq2ps+cvtdq2ps", t_cvt_cvt}, {"cvtdq2ps+dpbusd", t_cvt_dp}, {"cvtdq2ps+pshufb", t_cvt_shuf},
             {"popcntq+popcntq", t_pop_pop}, {"popcntq+pshufb", t_pop_shuf}, {"popcntq+dpbusd", t_pop_dp},
             {"popcntq+paddd", t_pop_add},   {"pxord+pxord", t_pxor_pxor},
             {"load+load", t_ld_ld},         {"store+store", t_st_st},       {"load+store", t_ld_st},
             {"dpbusd.ld+dpbusd.ld", t_dpl_dpl}, {"load+dpbusd", t_ld_dp},
             {"bcastd.ld+bcastd.ld", t_bc_bc}, {"bcastd.ld+load", t_bc_ld}, {"ymm load+load", t_ldy_ldy}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        printf("%-18s %.2f cycles per pair\n", t[i].name, t[i].fn() / c);
    return 0;
}
