/* format_common.h — what every format header shares: the host/device marker,
 * static asserts, and bit-stream readers in the library's bit order.
 *
 * Read by the C compiler and by nvcc, so: plain C99 `static inline`, nothing
 * beyond <stdint.h>, no libc calls. Bit order (docs/FORMATS.md §1): element j of a sign
 * stream is bit j % 8 of byte j / 8 (u8 streams) or bit j % 32 of word j / 32
 * (u32 streams), least significant bit first; bit 1 means +1 (value >= 0). */
#ifndef VQ_FORMAT_COMMON_H
#define VQ_FORMAT_COMMON_H

#include <stdint.h>

/* Marks a decoder callable from both host code and CUDA kernels. */
#ifdef __CUDACC__
#define VQ_HOST_DEVICE __host__ __device__
#else
#define VQ_HOST_DEVICE
#endif

#ifdef __cplusplus
#define VQ_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define VQ_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

VQ_STATIC_ASSERT(sizeof(uint8_t) == 1 && sizeof(uint32_t) == 4, "byte and word streams");
VQ_STATIC_ASSERT(sizeof(float) == 4, "f32 scales and magnitudes are IEEE binary32");

/* Bit j of a u8 stream: 0 or 1. */
static inline VQ_HOST_DEVICE uint32_t vq_bit_u8(const uint8_t *stream, int64_t j)
{
    return (uint32_t)(stream[j >> 3] >> (j & 7)) & 1u;
}

/* Bit j of a u32 stream: 0 or 1. */
static inline VQ_HOST_DEVICE uint32_t vq_bit_u32(const uint32_t *stream, int64_t j)
{
    return (stream[j >> 5] >> (j & 31)) & 1u;
}

/* A sign bit as a value: 1 -> +1.0f, 0 -> -1.0f. */
static inline VQ_HOST_DEVICE float vq_sign_of_bit(uint32_t bit) { return bit ? 1.0f : -1.0f; }

/* 4 bytes as a little-endian u32, alignment-free (compilers fuse it into
 * one load on little-endian targets). */
static inline VQ_HOST_DEVICE uint32_t vq_load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Number of set bits of a 32-bit word. */
static inline VQ_HOST_DEVICE int vq_popcount32(uint32_t x)
{
#if defined(__CUDA_ARCH__)
    return __popc(x);
#elif defined(__GNUC__) || defined(__clang__)
    return __builtin_popcount(x);
#else
    x = x - ((x >> 1) & 0x55555555u);
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    return (int)((((x + (x >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24);
#endif
}

#endif /* VQ_FORMAT_COMMON_H */
