/* attn_kernels.c — the per-ISA attention kernel tables, built once each. */
#include <pthread.h>

#include "attention/attn_kernels.h"

static vq_attn_kernels tables[VQ_ISA_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    for (int i = 0; i < VQ_ISA_COUNT; i++) {
        vq_attn_kernels *k = &tables[i];
        vq_attn_kernels_init_scalar(k);
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)i, VQ_ISA_AVX2)) {
            vq_attn_kernels_init_avx2(k);
            vq_attn_kernels_init_avx2_decode(k);
            vq_attn_kernels_init_avx2_direct(k);
            vq_attn_kernels_init_avx2_int8(k);
            vq_attn_kernels_init_avx2_cb8(k);
            vq_attn_kernels_init_avx2_cbqk8(k);
            vq_attn_kernels_init_avx2_ham(k);
            vq_attn_kernels_init_avx2_pv8(k);
            vq_attn_kernels_init_avx2_rabitq(k);
            vq_attn_kernels_init_avx2_kivi_int8(k);
        }
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)i, VQ_ISA_AVX512)) {
            vq_attn_kernels_init_avx512(k);
            k->rabitq_block = NULL; /* the AVX2 one runs the AVX2 bodies, not the AVX-512 scores and softmax */
            k->kivi_int8_block = NULL;  /* the same */
            vq_attn_kernels_init_avx512_values(k);
            vq_attn_kernels_init_avx512_softmax(k);
            if (vq_cpu_has_avx512_vnni()) {
                vq_attn_kernels_init_avx512_vnni(k);
                vq_attn_kernels_init_avx512_cbqk8(k);
            }
            if (vq_cpu_has_avx512_vbmi()) {
                vq_attn_kernels_init_avx512_vbmi(k);
                vq_attn_kernels_init_avx512_codebook(k);
            }
            if (vq_cpu_has_avx512_vnni() && vq_cpu_has_avx512_vbmi()) {
                vq_attn_kernels_init_avx512_pv8(k);
                vq_attn_kernels_init_avx512_cb8(k);
                vq_attn_kernels_init_avx512_kivi_int8(k);
                vq_attn_kernels_init_avx512_rabitq(k);
                vq_attn_kernels_init_avx512_kivi_turbo(k);
            }
        }
#endif
#ifdef VQ_HAVE_AMX
        if (vq_isa_includes((vq_isa)i, VQ_ISA_AMX)) vq_attn_kernels_init_avx512_kivi_int8_amx(k);
#endif
#ifdef VQ_HAVE_NEON
        if (vq_isa_includes((vq_isa)i, VQ_ISA_NEON)) {
            vq_attn_kernels_init_neon(k);
            vq_attn_kernels_init_neon_popcnt(k);
            vq_attn_kernels_init_neon_int8(k);
            vq_attn_kernels_init_neon_pv8(k);
#ifdef VQ_HAVE_NEON_DOTPROD
            if (vq_cpu_has_neon_dotprod()) {
                vq_attn_kernels_init_neon_dotprod(k);
                vq_attn_kernels_init_neon_cbqk8_dotprod(k);
            }
#endif
        }
#endif
    }
}

const vq_attn_kernels *vq_attn_kernels_for(vq_isa isa)
{
    pthread_once(&once, build_tables);
    return &tables[(unsigned)isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}
