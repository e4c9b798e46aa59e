/* rabitq_kernels.c — scalar kernels of the RaBitQ codec and the per-ISA
 * kernel tables (see rabitq_kernels.h). */
#include <math.h>
#include <pthread.h>

#include "codecs/rabitq_kernels.h"
#include "formats/format_rabitq.h"

static void sign_norms_scalar(const float *y, int64_t d, uint8_t *bits, double *l1, double *l2)
{
    double a = 0, s = 0;
    for (int64_t byte = 0; byte < d / 8; byte++) {
        unsigned b = 0;
        for (int k = 0; k < 8; k++) {
            const float v = y[byte * 8 + k];
            b |= (unsigned)(v >= 0.0f) << k;
            a += fabs((double)v);
            s += (double)v * (double)v;
        }
        bits[byte] = (uint8_t)b;
    }
    *l1 = a;
    *l2 = s;
}

static int64_t hamming_scalar(const uint8_t *a, const uint8_t *b, int64_t n) { return vq_rabitq_hamming(a, b, n); }

static vq_rabitq_kernels tables[VQ_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++) {
        vq_rabitq_kernels *k = &tables[isa];
        k->sign_norms = sign_norms_scalar;
        k->hamming = hamming_scalar;
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX2)) vq_rabitq_kernels_init_avx2(k);
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX512)) vq_rabitq_kernels_init_avx512(k);
#endif
    }
}

const vq_rabitq_kernels *vq_rabitq_kernels_for(vq_isa isa)
{
    pthread_once(&tables_once, init_tables);
    return &tables[isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}
