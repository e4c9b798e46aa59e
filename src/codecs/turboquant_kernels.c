/* turboquant_kernels.c — the kernel table of the scalar quantizers and the
 * boundary table they search. */
#include <math.h>
#include <pthread.h>

#include "turboquant_kernels.h"

/* fine[t * w + g] = b[g * G + t] for the w groups of G = 2^L / w levels. */
static void transpose_groups(const vq_boundaries *q, int w, float *fine)
{
    const int G = (1 << q->log2_levels) / w;
    for (int t = 0; t + 1 < G; t++)
        for (int g = 0; g < w; g++) fine[t * w + g] = q->b[g * G + t];
}

void vq_boundaries_init(vq_boundaries *q, const float *bounds, int n)
{
    q->n = n;
    q->log2_levels = 0;
    while ((1 << q->log2_levels) < n + 1) q->log2_levels++;
    for (int k = 0; k < 256; k++) q->b[k] = k < n ? bounds[k] : INFINITY;
    transpose_groups(q, 8, q->fine8);
    transpose_groups(q, 16, q->fine16);
}

static vq_turbo_kernels g_tables[VQ_ISA_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++) {
        vq_turbo_kernels *k = &g_tables[isa];
        *k = (vq_turbo_kernels){vq_quantize_row_scalar, vq_gather_row_scalar, vq_sumsq_scalar};
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX2)) vq_turbo_kernels_init_avx2(k);
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX512)) vq_turbo_kernels_init_avx512(k);
#endif
#ifdef VQ_HAVE_NEON
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_NEON)) vq_turbo_kernels_init_neon(k);
#endif
    }
}

const vq_turbo_kernels *vq_turbo_kernels_for(vq_isa isa)
{
    pthread_once(&g_once, init_tables);
    return &g_tables[(unsigned)isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}
