/* f16_rows.c — scalar f16 row conversion and the per-ISA tables (see
 * f16_rows.h). */
#include <pthread.h>

#include "codecs/f16_rows.h"

static void to_f32_scalar(const uint16_t *src, int64_t n, float *dst) { vq_row_to_f32(src, VQ_DT_F16, n, dst); }

static void from_f32_scalar(const float *src, int64_t n, uint16_t *dst) { vq_row_from_f32(src, n, VQ_DT_F16, dst); }

static vq_f16_kernels tables[VQ_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++) {
        vq_f16_kernels *k = &tables[isa];
        k->to_f32 = to_f32_scalar;
        k->from_f32 = from_f32_scalar;
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX2)) vq_f16_kernels_init_avx2(k);
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX512)) vq_f16_kernels_init_avx512(k);
#endif
    }
}

const vq_f16_kernels *vq_f16_kernels_for(vq_isa isa)
{
    pthread_once(&tables_once, init_tables);
    return &tables[isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}
