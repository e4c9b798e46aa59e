/* hadamard_avx2.c — the rotation kernel with 8-lane butterflies.
 * Stages h = 1, 2, 4 happen inside one register (a lane permute and a signed
 * FMA each); stages h >= 8 combine whole registers. The last stage carries
 * the 1/sqrt(d) factor (and diag for the inverse), saving a pass. */
#include <immintrin.h>

#include "codecs/hadamard.h"

/* In-register stages h = 1, 2, 4 of 8 consecutive elements: for lane l of a
 * pair (l, l + h) the result is partner + sign * self, sign -1 on the upper
 * lane (so upper = lower - upper, lower = lower + upper). */
static inline __m256 butterfly8(__m256 v)
{
    const __m256 s1 = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
    const __m256 s2 = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
    const __m256 s4 = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
    v = _mm256_fmadd_ps(v, s1, _mm256_permute_ps(v, 0xB1));
    v = _mm256_fmadd_ps(v, s2, _mm256_permute_ps(v, 0x4E));
    v = _mm256_fmadd_ps(v, s4, _mm256_permute2f128_ps(v, v, 0x01));
    return v;
}

/* Multiplies 8 outputs at j by the final factor: s, or s * diag[j] (inverse). */
static inline __m256 finish8(__m256 v, __m256 s, const float *diag, int64_t j)
{
    return diag != NULL ? _mm256_mul_ps(v, _mm256_mul_ps(s, _mm256_loadu_ps(diag + j))) : _mm256_mul_ps(v, s);
}

/* row [d] in place; d < 8 goes to the scalar kernel. */
void vq_rotate_row_avx2(float *row, int64_t d, const float *diag, bool inverse)
{
    if (d < 8) {
        vq_rotate_row_scalar(row, d, diag, inverse);
        return;
    }
    const __m256 s = _mm256_set1_ps(vq_hadamard_norm(d));
    const float *out_diag = inverse ? diag : NULL;
    for (int64_t j = 0; j < d; j += 8) {
        __m256 v = _mm256_loadu_ps(row + j);
        if (!inverse && diag != NULL) v = _mm256_mul_ps(v, _mm256_loadu_ps(diag + j));
        v = butterfly8(v);
        if (d == 8) v = finish8(v, s, out_diag, j);
        _mm256_storeu_ps(row + j, v);
    }
    for (int64_t h = 8; h < d; h <<= 1) {
        const bool last = 2 * h == d;
        for (int64_t i = 0; i < d; i += 2 * h) {
            for (int64_t j = i; j < i + h; j += 8) {
                const __m256 a = _mm256_loadu_ps(row + j), b = _mm256_loadu_ps(row + j + h);
                __m256 lo = _mm256_add_ps(a, b), hi = _mm256_sub_ps(a, b);
                if (last) {
                    lo = finish8(lo, s, out_diag, j);
                    hi = finish8(hi, s, out_diag, j + h);
                }
                _mm256_storeu_ps(row + j, lo);
                _mm256_storeu_ps(row + j + h, hi);
            }
        }
    }
}
