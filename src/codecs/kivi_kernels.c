/* kivi_kernels.c — scalar kernels of the group-affine codec and the
 * per-ISA kernel tables (see kivi_kernels.h). */
#include <math.h>
#include <pthread.h>

#include "codecs/kivi_kernels.h"

static void minmax_update_scalar(const float *x, int64_t d, float *mn, float *mx)
{
    for (int64_t c = 0; c < d; c++) {
        mn[c] = x[c] < mn[c] ? x[c] : mn[c];
        mx[c] = x[c] > mx[c] ? x[c] : mx[c];
    }
}

static void encode_row_scalar(const float *x, const float *scale, const float *zero, int64_t d, float maxq,
                              uint8_t *codes)
{
    for (int64_t c = 0; c < d; c++) {
        float q = (x[c] - zero[c]) / scale[c];
        q = q > 0.0f ? q : 0.0f;   /* also maps NaN (0/0, inf/inf) to 0 */
        q = q < maxq ? q : maxq;
        codes[c] = scale[c] != 0.0f ? (uint8_t)nearbyintf(q) : 0;
    }
}

static void decode_row_scalar(const uint8_t *codes, const float *scale, const float *zero, int64_t d, float *out)
{
    for (int64_t c = 0; c < d; c++) out[c] = (float)codes[c] * scale[c] + zero[c];
}

static vq_kivi_kernels tables[VQ_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++) {
        vq_kivi_kernels *k = &tables[isa];
        k->minmax_update = minmax_update_scalar;
        k->encode_row = encode_row_scalar;
        k->decode_row = decode_row_scalar;
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX2)) vq_kivi_kernels_init_avx2(k);
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX512)) vq_kivi_kernels_init_avx512(k);
#endif
    }
}

const vq_kivi_kernels *vq_kivi_kernels_for(vq_isa isa)
{
    pthread_once(&tables_once, init_tables);
    return &tables[isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}
