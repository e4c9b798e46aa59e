/* format_bitpack.h — the u32 bit stream of vq_bit_pack, read and written by
 * the C library and by CUDA kernels alike (plain C, no libc beyond stdint).
 *
 * Layout (docs/FORMATS.md §2): element i occupies stream bits [i*bits, (i+1)*bits);
 * stream bit s is bit s % 32 of word s / 32, least significant first, so an
 * element may straddle two words; unused high bits of the last word are 0.
 * A row of n elements takes vq_bitpack_words(n, bits) words. */
#ifndef VQ_FORMAT_BITPACK_H
#define VQ_FORMAT_BITPACK_H

#include <stdint.h>

/* Functions in src/formats/ are callable from host and device code. */
#ifndef VQ_HOST_DEVICE
#ifdef __CUDACC__
#define VQ_HOST_DEVICE __host__ __device__
#else
#define VQ_HOST_DEVICE
#endif
#endif

/* Words holding n elements of `bits` bits: ceil(n * bits / 32). */
static inline VQ_HOST_DEVICE int64_t vq_bitpack_words(int64_t n, int bits)
{
    return (n * (int64_t)bits + 31) / 32;
}

/* The low `bits` bits set; bits in 1..32. */
static inline VQ_HOST_DEVICE uint32_t vq_bitpack_mask(int bits)
{
    return (uint32_t)((UINT64_C(1) << bits) - 1u);
}

/* Element i of the stream `words` of `bits`-bit elements (bits 1..32).
 * Reads the second word only when the element straddles it, so it never
 * reads past the last word of a stream that holds element i. */
static inline VQ_HOST_DEVICE uint32_t vq_bitpack_get(const uint32_t *words, int64_t i, int bits)
{
    const uint64_t s = (uint64_t)i * (uint64_t)bits;
    const uint64_t w = s >> 5;
    const unsigned off = (unsigned)(s & 31u);
    uint64_t v = words[w] >> off;
    if (off + (unsigned)bits > 32u) v |= (uint64_t)words[w + 1] << (32u - off);
    return (uint32_t)v & vq_bitpack_mask(bits);
}

/* ORs element i (value masked to `bits`) into a stream that starts zeroed.
 * Sequential writers are faster with a 64-bit accumulator (see bitpack.c);
 * this is the random-access form. */
static inline VQ_HOST_DEVICE void vq_bitpack_or(uint32_t *words, int64_t i, int bits, uint32_t value)
{
    const uint64_t s = (uint64_t)i * (uint64_t)bits;
    const uint64_t w = s >> 5;
    const unsigned off = (unsigned)(s & 31u);
    const uint64_t v = (uint64_t)(value & vq_bitpack_mask(bits)) << off;
    words[w] |= (uint32_t)v;
    if (off + (unsigned)bits > 32u) words[w + 1] |= (uint32_t)(v >> 32);
}

/* A stream of 2-bit codes (nbytes bytes, 4 codes each, code i at stream
 * bits 2i) -> the same codes as nibbles (2 * nbytes bytes: code 2k in the
 * low nibble of byte k, 2k + 1 in its high one): byte b's four codes become
 * the 16-bit word of output bytes 2b, 2b + 1, shifts and masks that a
 * compiler vectorises on 16-bit lanes. The KIVI integer scores and the
 * codebook p.V read 4-bit nibbles; 2-bit codes reach them through this. */
static inline VQ_HOST_DEVICE void vq_bitpack_spread2_nibbles(const uint8_t *src, int64_t nbytes, uint8_t *dst)
{
    for (int64_t b = 0; b < nbytes; b++) {
        const uint16_t x = src[b];
        const uint16_t y = (uint16_t)((x & 0x3u) | ((x << 2) & 0x30u) | ((x << 4) & 0x300u) | ((x << 6) & 0x3000u));
        dst[2 * b] = (uint8_t)y;
        dst[2 * b + 1] = (uint8_t)(y >> 8);
    }
}

/* A stream of 3-bit codes (D codes, D a multiple of 16: 3 D / 8 bytes,
 * code i at stream bits 3i) -> the same codes as nibbles (D / 2 bytes, as
 * vq_bitpack_spread2_nibbles): per 16 codes (6 bytes), the fields move
 * apart in four halving steps (eight, four, two, one code). */
static inline VQ_HOST_DEVICE void vq_bitpack_spread3_nibbles(const uint8_t *src, int64_t D, uint8_t *dst)
{
    for (int64_t g = 0; g < D / 16; g++) {
        uint64_t x = 0, y;
        for (int i = 0; i < 6; i++) x |= (uint64_t)src[6 * g + i] << (8 * i);
        x = (x & 0x0000000000ffffffull) | (x & 0x0000ffffff000000ull) << 8;
        x = (x & 0x00000fff00000fffull) | (x & 0x00fff00000fff000ull) << 4;
        x = (x & 0x003f003f003f003full) | (x & 0x0fc00fc00fc00fc0ull) << 2;
        y = (x & 0x0707070707070707ull) | (x & 0x3838383838383838ull) << 1;
        for (int i = 0; i < 8; i++) dst[8 * g + i] = (uint8_t)(y >> (8 * i));
    }
}

#endif /* VQ_FORMAT_BITPACK_H */
