/* port_throughput_avx2.c — throughput of pairs of independent 256-bit
 * instructions (12 chains, no dependencies) on this core, in cycles per
 * pair against vfmadd231ps + vfmadd231ps (two FMA pipes: 1 cycle per pair):
 * which instructions share pipes, the classes contrib/zen3_floor.py counts
 * with (AMD Zen 3: M = vpmaddwd / vpmaddubsw / vpsadbw / FMA,
 * 2 per cycle on the FMA pipes; S = vpshufb / unpacks / shifts / permutes,
 * 2 per cycle; vpaddd pairs ~2.6 per cycle). On a 128-bit core (AMD Zen 1:
 * every ymm op is two uops, one ymm FMA per cycle, so a "1.00" pair there is
 * two core cycles) the second table shows the single instructions that
 * matter there: one pipe for vpmaddubsw / vpmaddwd, vpaddsw taking part of
 * it, one for shifts, vphaddd / vperm2i128 / vpermd at 3-4 cycles
 * (docs/PERFORMANCE.md, finding 4). CPU time: other work on the
 * machine changes the clock estimate, not the ratios. x86-64 with AVX2:
 *
 *   gcc -O2 -o port_throughput_avx2 contrib/port_throughput_avx2.c && ./port_throughput_avx2 */
#include <stdio.h>
#include <time.h>
static double cpu_now(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
#define N 10000000L
#define CL "xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9","xmm10","xmm11"
#define I(op,k) op " %%ymm12, %%ymm13, %%ymm" #k "\n\t"
#define PAIR(a,b) I(a,0) I(b,1) I(a,2) I(b,3) I(a,4) I(b,5) I(a,6) I(b,7) I(a,8) I(b,9) I(a,10) I(b,11)
#define T(name,a,b) static double name(void){double t0=cpu_now();for(long i=0;i<N;i++)__asm__ volatile(PAIR(a,b):::CL);return (cpu_now()-t0)/(6.0*N)*1e9;}
T(t_fma_fma,"vfmadd231ps","vfmadd231ps")
T(t_madd_madd,"vpmaddwd","vpmaddwd")
T(t_madd_fma,"vpmaddwd","vfmadd231ps")
T(t_madd_shuf,"vpmaddwd","vpshufb")
T(t_shuf_shuf,"vpshufb","vpshufb")
T(t_shuf_add,"vpshufb","vpaddd")
T(t_add_add,"vpaddd","vpaddd")
T(t_madd_add,"vpmaddwd","vpaddd")
T(t_sad_shuf,"vpsadbw","vpshufb")
T(t_sad_madd,"vpsadbw","vpmaddwd")
T(t_fma_shuf,"vfmadd231ps","vpshufb")
T(t_fma_add,"vfmadd231ps","vpaddd")
T(t_mul_add,"vmulps","vaddps")
T(t_cvt_shuf,"vpmulld","vpshufb")
T(t_perm_shuf,"vpermd","vpshufb")
T(t_madd_mubs,"vpmaddwd","vpmaddubsw")
T(t_mubs_shuf,"vpmaddubsw","vpshufb")
T(t_mubs_addsw,"vpmaddubsw","vpaddsw")
T(t_mubs_addw,"vpmaddubsw","vpaddw")
T(t_addsw_addsw,"vpaddsw","vpaddsw")
T(t_and_and,"vpand","vpand")
T(t_hadd_hadd,"vphaddd","vphaddd")
T(t_p2_p2,"vperm2i128 $0x11,","vperm2i128 $0x11,")
T(t_pd_pd,"vpermd","vpermd")
T(t_pack_pack,"vpacksswb","vpacksswb")
T(t_unpk_unpk,"vpunpcklbw","vpunpcklbw")
/* one-source forms: op %ymm12, %ymmK */
#define I1(op,k) op " %%ymm12, %%ymm" #k "\n\t"
#define ONE(a) I1(a,0) I1(a,1) I1(a,2) I1(a,3) I1(a,4) I1(a,5) I1(a,6) I1(a,7) I1(a,8) I1(a,9) I1(a,10) I1(a,11)
#define T1(name,a) static double name(void){double t0=cpu_now();for(long i=0;i<N;i++)__asm__ volatile(ONE(a):::CL);return (cpu_now()-t0)/(6.0*N)*1e9;}
T1(t_srl_srl,"vpsrlw $2,")
T1(t_cvt_cvt,"vcvtps2dq")
/* the multiply-accumulate of the integer kernels: vpmaddubsw into a
 * temporary, then an add of it into one of 6 accumulators (ymm0-5) */
#define MAC(add,t,a) "vpmaddubsw %%ymm13, %%ymm12, %%ymm" #t "\n\t" add " %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n\t"
#define MAC6(add) MAC(add,6,0) MAC(add,7,1) MAC(add,8,2) MAC(add,9,3) MAC(add,10,4) MAC(add,11,5)
#define TM(name,add) static double name(void){double t0=cpu_now();for(long i=0;i<N;i++)__asm__ volatile(MAC6(add):::CL);return (cpu_now()-t0)/(3.0*N)*1e9;}
TM(t_mac_addsw,"vpaddsw")
TM(t_mac_addw,"vpaddw")
int main(void){
 __asm__ volatile("vpxor %%ymm12,%%ymm12,%%ymm12\n\tvpxor %%ymm13,%%ymm13,%%ymm13":::"xmm12","xmm13");
 const double f = t_fma_fma(); /* ns per FMA pair = 1 cycle */
 printf("vfmadd231ps pair %.3f ns: 2 per cycle -> %.2f GHz effective\n", f, 1.0 / f);
 struct {const char*n; double(*f)(void);} t[]={{"fma+fma",t_fma_fma},{"madd+madd",t_madd_madd},{"madd+fma",t_madd_fma},{"madd+pshufb",t_madd_shuf},{"pshufb+pshufb",t_shuf_shuf},{"pshufb+paddd",t_shuf_add},{"paddd+paddd",t_add_add},{"madd+paddd",t_madd_add},{"psadbw+pshufb",t_sad_shuf},{"psadbw+madd",t_sad_madd},{"fma+pshufb",t_fma_shuf},{"fma+paddd",t_fma_add},{"mulps+addps",t_mul_add},{"pmulld+pshufb",t_cvt_shuf},{"vpermd+pshufb",t_perm_shuf},{"madd+maddubsw",t_madd_mubs},{"maddubsw+pshufb",t_mubs_shuf}};
 for(unsigned i=0;i<sizeof t/sizeof t[0];i++) printf("%-16s %.2f cycles per pair\n",t[i].n,t[i].f()/f);
 struct {const char*n; double(*f)(void);} u[]={{"maddubsw+paddsw",t_mubs_addsw},{"maddubsw+paddw",t_mubs_addw},{"paddsw+paddsw",t_addsw_addsw},{"pand+pand",t_and_and},{"psrlw+psrlw",t_srl_srl},{"phaddd+phaddd",t_hadd_hadd},{"vperm2i128 x2",t_p2_p2},{"vpermd x2",t_pd_pd},{"packsswb x2",t_pack_pack},{"punpcklbw x2",t_unpk_unpk},{"cvtps2dq x2",t_cvt_cvt}};
 printf("accumulating multiplies (vpmaddubsw, then the add into an accumulator; a pair = two of them):\n");
 printf("%-16s %.2f cycles per pair\n", "mac by vpaddsw", t_mac_addsw()/f);
 printf("%-16s %.2f cycles per pair\n", "mac by vpaddw", t_mac_addw()/f);
 printf("more pairs (same unit):\n");
 for(unsigned i=0;i<sizeof u/sizeof u[0];i++) printf("%-16s %.2f cycles per pair\n",u[i].n,u[i].f()/f);
}
