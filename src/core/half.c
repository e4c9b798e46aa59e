/* half.c — IEEE binary16 and bfloat16 <-> binary32, round-half-to-even.
 * Bit manipulation only, so results are identical on every platform. */
#include <string.h>

#include "core.h"

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float vq_half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13)); /* inf / nan */
    if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return bits_f32(sign);
    /* subnormal: normalise */
    uint32_t e = 113;
    while ((mant & 0x400u) == 0) { mant <<= 1; e--; }
    return bits_f32(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t vq_float_to_half(float f)
{
    const uint32_t u = f32_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) { /* inf or nan (keep nan quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? (0x200u | ((abs >> 13) & 0x3ffu)) : 0u));
    }
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (abs < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (abs < 0x33000000u) return sign; /* < 2^-25: rounds to zero */
        const uint32_t e = abs >> 23;
        const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = abs - 0x38000000u; /* rebias exponent 127 -> 15 */
    const uint32_t rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

float vq_bf16_to_float(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t vq_float_to_bf16(float f)
{
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet nan */
    const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + rounding) >> 16);
}

uint16_t vq_f32_to_f16(float x) { return vq_float_to_half(x); }
float vq_f16_to_f32(uint16_t h) { return vq_half_to_float(h); }
uint16_t vq_f32_to_bf16(float x) { return vq_float_to_bf16(x); }
float vq_bf16_to_f32(uint16_t h) { return vq_bf16_to_float(h); }

void vq_row_to_f32(const void *src, vq_dtype dt, int64_t n, float *dst)
{
    if (dt == VQ_DT_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = vq_load_f(src, dt, i);
}

void vq_row_from_f32(const float *src, int64_t n, vq_dtype dt, void *dst)
{
    if (dt == VQ_DT_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++) vq_store_f(dst, dt, i, src[i]);
}
