/* hadamard_avx512.c — the rotation kernel with 16-lane butterflies.
 * Stages h = 1, 2, 4, 8 happen inside one register; stages h >= 16 combine
 * registers; the last stage carries 1/sqrt(d) (and diag for the inverse). */
#include <immintrin.h>

#include "codecs/hadamard.h"

/* In-register stages of 16 consecutive elements: partner + sign * self, with
 * sign -1 on the upper lane of each (l, l + h) pair. */
static inline __m512 butterfly16(__m512 v)
{
    const __m512 s1 = _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
    const __m512 s2 = _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1);
    const __m512 s4 = _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1);
    const __m512 s8 = _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
    v = _mm512_fmadd_ps(v, s1, _mm512_permute_ps(v, 0xB1));
    v = _mm512_fmadd_ps(v, s2, _mm512_permute_ps(v, 0x4E));
    v = _mm512_fmadd_ps(v, s4, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_fmadd_ps(v, s8, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    return v;
}

/* 16 outputs at j times the final factor: s, or s * diag[j] (inverse). */
static inline __m512 finish16(__m512 v, __m512 s, const float *diag, int64_t j)
{
    return diag != NULL ? _mm512_mul_ps(v, _mm512_mul_ps(s, _mm512_loadu_ps(diag + j))) : _mm512_mul_ps(v, s);
}

/* row [d] in place; d < 16 goes to the AVX2 kernel. */
void vq_rotate_row_avx512(float *row, int64_t d, const float *diag, bool inverse)
{
    if (d < 16) {
        vq_rotate_row_avx2(row, d, diag, inverse);
        return;
    }
    const __m512 s = _mm512_set1_ps(vq_hadamard_norm(d));
    const float *out_diag = inverse ? diag : NULL;
    for (int64_t j = 0; j < d; j += 16) {
        __m512 v = _mm512_loadu_ps(row + j);
        if (!inverse && diag != NULL) v = _mm512_mul_ps(v, _mm512_loadu_ps(diag + j));
        v = butterfly16(v);
        if (d == 16) v = finish16(v, s, out_diag, j);
        _mm512_storeu_ps(row + j, v);
    }
    for (int64_t h = 16; h < d; h <<= 1) {
        const bool last = 2 * h == d;
        for (int64_t i = 0; i < d; i += 2 * h) {
            for (int64_t j = i; j < i + h; j += 16) {
                const __m512 a = _mm512_loadu_ps(row + j), b = _mm512_loadu_ps(row + j + h);
                __m512 lo = _mm512_add_ps(a, b), hi = _mm512_sub_ps(a, b);
                if (last) {
                    lo = finish16(lo, s, out_diag, j);
                    hi = finish16(hi, s, out_diag, j + h);
                }
                _mm512_storeu_ps(row + j, lo);
                _mm512_storeu_ps(row + j + h, hi);
            }
        }
    }
}
