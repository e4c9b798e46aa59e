/* kv_fields.cuh — what the key and value policies of the decode skeleton
 * (kv_decode.cuh) share besides the skeleton: the code windows of the packed
 * layouts (KIVI rows, TurboQuant stages) and the access to a format's own
 * fields of vq_cu_sdpa_params (p.kp for a key format, p.vp for a value
 * format: the struct its keys_<name>.cu or values_<name>.cuh defines). */
#ifndef VQ_CUDA_KV_FIELDS_CUH
#define VQ_CUDA_KV_FIELDS_CUH

#include "cuda/kv_decode.cuh"

namespace vqkv {

/* Codes of 8 channels c .. c+8 of a row of `bits`-wide codes packed along D
 * (bits 2, 4; 8 = one code per byte) as a 64-bit window, code j at bit j*bits. */
__device__ __forceinline__ uint64_t codes8(const uint8_t *row, int c, int bits)
{
    if (bits == 2) return __ldg((const uint16_t *)(row + c / 4));
    if (bits == 4) return __ldg((const uint32_t *)(row + c / 2));
    return __ldg((const unsigned long long *)(row + c));
}

/* The 8 codes of channels c .. c+8 of one TurboQuant stage row as a 64-bit
 * window: u8 codes (8 bits apart; callers mask to `bits`), or bits
 * [c*bits, (c+8)*bits) of the u32 stream (up to 3 words, never past the row). */
__device__ __forceinline__ uint64_t stage_codes8(const vq_cu_sdpa_stage &st, int64_t tok, int c)
{
    if (!st.packed) return __ldg((const unsigned long long *)((const uint8_t *)st.idx + tok * st.ld + c));
    const uint32_t *w = (const uint32_t *)st.idx + tok * st.ld;
    const int bit = c * st.bits, wi = bit >> 5, off = bit & 31;
    const uint32_t w0 = __ldg(w + wi), w1 = wi + 1 < st.ld ? __ldg(w + wi + 1) : 0u;
    uint64_t v = ((uint64_t)w1 << 32 | w0) >> off;
    if (off != 0 && off + 8 * st.bits > 64) v |= (uint64_t)__ldg(w + wi + 2) << (64 - off);
    return v;
}

/* The scale of token tok of a TurboQuant stage (f32 or f16 storage). */
__device__ __forceinline__ float stage_scale(const vq_cu_sdpa_stage &st, int64_t tok)
{
    return st.scale_f16 ? __half2float(__ldg((const __half *)st.scale + tok)) : __ldg((const float *)st.scale + tok);
}

/* acc[r][8k .. 8k + 8) += a[r] * v[0 .. 8) for every row: a value policy's
 * update of one 8-channel chunk. */
template <int R, int CPL>
__device__ __forceinline__ void axpy8(const float (&a)[R], const float (&v)[8], int k, float (&acc)[R][CPL])
{
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[r][8 * k + j] = fmaf(a[r], v[j], acc[r][8 * k + j]);
}

/* A format's fields in the bytes U of p (p.kp or p.vp) as its struct T. */
template <class T, class U>
__host__ __device__ __forceinline__ const T &format_fields(const U &u)
{
    static_assert(sizeof(T) <= sizeof u.bytes, "a format's fields fit its bytes of vq_cu_sdpa_params");
    static_assert(alignof(T) <= alignof(U), "a format's fields are aligned as their bytes");
    return *reinterpret_cast<const T *>(u.bytes);
}

/* The fields a key format keeps in p.kp: T is the struct of its keys_<name>.cu. */
template <class T>
__host__ __device__ __forceinline__ const T &key_params(const vq_cu_sdpa_params &p)
{
    return format_fields<T>(p.kp);
}
template <class T>
inline T &key_params(vq_cu_sdpa_params &p)
{
    return const_cast<T &>(key_params<T>((const vq_cu_sdpa_params &)p));
}

/* The fields a value format keeps in p.vp: T is the struct of its values_<name>.cuh. */
template <class T>
__host__ __device__ __forceinline__ const T &value_params(const vq_cu_sdpa_params &p)
{
    return format_fields<T>(p.vp);
}
template <class T>
inline T &value_params(vq_cu_sdpa_params &p)
{
    return const_cast<T &>(value_params<T>((const vq_cu_sdpa_params &)p));
}

} /* namespace vqkv */

#endif
