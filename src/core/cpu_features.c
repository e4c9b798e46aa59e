/* cpu_features.c — which CPU kernel set to run. Detected once with cpuid
 * (and xgetbv: the OS must save the wide registers), capped by VQ_ISA so that
 * every path can be tested on one machine. */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#if defined(__aarch64__) && defined(__linux__) && defined(VQ_HAVE_NEON_DOTPROD)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__) && defined(VQ_HAVE_AMX)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

#ifdef VQ_HAVE_AMX
/* Linux grants the tile data state per process on request (its XFD: without
 * the grant the first tile instruction faults); asked once, the answer kept. */
static bool tile_state_granted(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    static int granted = -1; /* idempotent: a race asks twice, with one answer */
    if (granted < 0) granted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    return granted == 1;
#else
    return false;
#endif
}
#endif

static vq_isa detect_x86(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return VQ_ISA_SCALAR;
    const bool osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1, popcnt = (c >> 23) & 1;
    if (!osxsave) return VQ_ISA_SCALAR;
    const uint64_t xcr0 = xgetbv0();
    const bool ymm_saved = (xcr0 & 0x6) == 0x6;
    const bool zmm_saved = (xcr0 & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return VQ_ISA_SCALAR;
    const bool avx2 = (b >> 5) & 1, bmi2 = (b >> 8) & 1;
    const bool avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1,
               avx512vl = (b >> 31) & 1, vpopcntdq = (c >> 14) & 1, vbmi = (c >> 1) & 1, vnni = (c >> 11) & 1,
               amx = ((d >> 24) & 3) == 3; /* AMX-TILE, AMX-INT8 */
    vq_isa best = VQ_ISA_SCALAR;
#ifdef VQ_HAVE_AVX2
    if (ymm_saved && avx2 && fma && f16c && popcnt && bmi2) best = VQ_ISA_AVX2;
#endif
#ifdef VQ_HAVE_AVX512
    if (best == VQ_ISA_AVX2 && zmm_saved && avx512f && avx512dq && avx512bw && avx512vl && vpopcntdq)
        best = VQ_ISA_AVX512;
#endif
#ifdef VQ_HAVE_AMX
    const bool tiles_saved = (xcr0 & 0x60000) == 0x60000; /* XTILECFG, XTILEDATA */
    if (best == VQ_ISA_AVX512 && vnni && vbmi && amx && tiles_saved && tile_state_granted()) best = VQ_ISA_AMX;
#endif
    (void)vbmi; (void)vnni; (void)amx;
    (void)ymm_saved; (void)zmm_saved; (void)avx2; (void)fma; (void)f16c; (void)popcnt; (void)bmi2;
    (void)avx512f; (void)avx512dq; (void)avx512bw; (void)avx512vl; (void)vpopcntdq;
    return best;
}
#endif

/* Bit `bit` of CPUID.(EAX=7,ECX=0):ECX on a CPU that runs the AVX-512 kernels. */
static bool avx512_leaf7_ecx(int bit)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(VQ_HAVE_AVX512)
    unsigned a, b, c, d;
    if (!vq_isa_includes(detect_x86(), VQ_ISA_AVX512) || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (c >> bit) & 1;
#else
    (void)bit;
    return false;
#endif
}

bool vq_cpu_has_avx512_vnni(void) { return avx512_leaf7_ecx(11); }
bool vq_cpu_has_avx512_vbmi(void) { return avx512_leaf7_ecx(1); }

bool vq_cpu_has_neon_dotprod(void)
{
#if defined(__aarch64__) && defined(__linux__) && defined(VQ_HAVE_NEON_DOTPROD)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
    return false;
#endif
}

vq_isa vq_cpu_best_isa(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return detect_x86();
#elif defined(VQ_HAVE_NEON)
    return VQ_ISA_NEON;
#else
    return VQ_ISA_SCALAR;
#endif
}

const char *vq_isa_name(vq_isa isa)
{
    switch (isa) {
    case VQ_ISA_SCALAR: return "scalar";
    case VQ_ISA_AVX2: return "avx2";
    case VQ_ISA_AVX512: return "avx512";
    case VQ_ISA_AMX: return "amx";
    case VQ_ISA_NEON: return "neon";
    default: return "unknown";
    }
}

bool vq_isa_includes(vq_isa have, vq_isa want)
{
    if (want == VQ_ISA_SCALAR) return true;
    if (want == VQ_ISA_NEON || have == VQ_ISA_NEON) return have == want;
    return (int)have >= (int)want;
}

vq_isa vq_cpu_select_isa(void)
{
    const vq_isa best = vq_cpu_best_isa();
    const char *env = getenv("VQ_ISA");
    if (env == NULL || env[0] == '\0') return best;
    for (int i = 0; i < VQ_ISA_COUNT; i++) {
        if (strcmp(env, vq_isa_name((vq_isa)i)) == 0)
            return vq_isa_includes(best, (vq_isa)i) ? (vq_isa)i : best;
    }
    return best; /* unknown names are ignored */
}
