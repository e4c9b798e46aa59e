/* prng.c — the portable PRNG: SplitMix64 expands the seed into the state of
 * xoshiro256** (Blackman & Vigna). Integer-only, so identical everywhere. */
#include <math.h>

#include "core.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void vq_rng_seed(vq_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

uint64_t vq_rng_next(vq_rng *rng)
{
    uint64_t *s = rng->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double vq_rng_uniform(vq_rng *rng) { return (double)(vq_rng_next(rng) >> 11) * 0x1.0p-53; }

double vq_rng_normal(vq_rng *rng)
{
    /* 1 - u lies in (0, 1], so the log is finite. */
    const double u1 = 1.0 - vq_rng_uniform(rng);
    const double u2 = vq_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

vq_status vq_random_signs(uint64_t seed, int64_t d, float *out)
{
    if (out == NULL || d < 1) return VQ_ERR_INVALID_ARGUMENT;
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    for (int64_t i = 0; i < d; i++) out[i] = (vq_rng_next(&rng) >> 63) ? -1.0f : 1.0f;
    return VQ_OK;
}
