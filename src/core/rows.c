/* rows.c — the per-ISA row conversion tables (see core.h): portable entries,
 * overwritten by the ISA files in src/cpu/ where the CPU runs them. */
#include <pthread.h>

#include "core.h"

static vq_row_kernels tables[VQ_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++) {
        vq_row_kernels *k = &tables[isa];
        k->to_f32 = vq_row_to_f32;
        k->from_f32 = vq_row_from_f32;
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX2)) vq_row_kernels_init_avx2(k);
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX512)) vq_row_kernels_init_avx512(k);
#endif
    }
}

const vq_row_kernels *vq_row_kernels_for(vq_isa isa)
{
    pthread_once(&tables_once, init_tables);
    return &tables[isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}
