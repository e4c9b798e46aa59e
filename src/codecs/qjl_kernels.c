/* qjl_kernels.c — scalar kernels of the QJL codec and the per-ISA kernel
 * tables (see qjl_kernels.h). */
#include <pthread.h>

#include "codecs/qjl_kernels.h"
#include "formats/format_common.h"

static void project_scalar(const float *S, int64_t m, int64_t d, const float *x, int64_t n, float *out)
{
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < m; j++) {
            float acc = 0.0f;
            for (int64_t c = 0; c < d; c++) acc += S[j * d + c] * x[r * d + c];
            out[r * m + j] = acc;
        }
}

static void project_t_scalar(const float *St, int64_t m_pad, int64_t d, const float *x, int64_t n, float *out)
{
    for (int64_t r = 0; r < n; r++) {
        float *o = out + r * m_pad;
        for (int64_t j = 0; j < m_pad; j++) o[j] = 0.0f;
        for (int64_t c = 0; c < d; c++) {
            const float xv = x[r * d + c];
            for (int64_t j = 0; j < m_pad; j++) o[j] += xv * St[c * m_pad + j];
        }
    }
}

static void signs_to_bits_scalar(const float *p, int64_t m, uint32_t *words)
{
    for (int64_t w = 0; w < (m + 31) / 32; w++) {
        uint32_t word = 0;
        for (int64_t j = w * 32; j < m && j < w * 32 + 32; j++) word |= (uint32_t)(p[j] >= 0.0f) << (j & 31);
        words[w] = word;
    }
}

static float signed_sum_scalar(const float *v, const uint32_t *words, int64_t m)
{
    float acc = 0.0f;
    for (int64_t j = 0; j < m; j++) acc += vq_bit_u32(words, j) ? v[j] : -v[j];
    return acc;
}

static vq_qjl_kernels tables[VQ_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++) {
        vq_qjl_kernels *k = &tables[isa];
        k->project = project_scalar;
        k->project_t = project_t_scalar;
        k->signs_to_bits = signs_to_bits_scalar;
        k->signed_sum = signed_sum_scalar;
#ifdef VQ_HAVE_AVX2
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX2)) vq_qjl_kernels_init_avx2(k);
#endif
#ifdef VQ_HAVE_AVX512
        if (vq_isa_includes((vq_isa)isa, VQ_ISA_AVX512)) vq_qjl_kernels_init_avx512(k);
#endif
    }
}

const vq_qjl_kernels *vq_qjl_kernels_for(vq_isa isa)
{
    pthread_once(&tables_once, init_tables);
    return &tables[isa < VQ_ISA_COUNT ? isa : VQ_ISA_SCALAR];
}
