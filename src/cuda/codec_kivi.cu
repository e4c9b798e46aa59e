/* codec_kivi.cu — the KIVI group-affine quantizers and dequantizers on CUDA
 * (layout: formats/format_kivi.h). Quantizing takes two launches on the
 * stream: one thread per group finds its range and stores scale and zero in
 * their dtype; then one thread per code byte reads those stored parameters
 * back (f16-rounded when they are f16, as the CPU path codes against) and
 * writes whole bytes, packed or not, so no byte is written twice.
 * Arithmetic is the CPU kernels' (IEEE division, round-half-to-even, no FMA). */
#include "cuda/codec_common.cuh"
#include "formats/format_kivi.h"

/* Geometry of a call: BH slices of S tokens by D channels, group size g. */
struct kivi_geom {
    int64_t bh, s, d, g;
    int64_t gs, gd;   /* parameter plane per slice: keys [ceil(S/g), D], values [S, ceil(D/g)] */
    int64_t cd;       /* code bytes per token row: D, or D*bits/8 when packed */
    int bits;
    bool keys, packed;
};

static kivi_geom geom_of(bool keys, const DLTensor *x, const DLTensor *codes, int bits, int g)
{
    kivi_geom a;
    a.bh = x->shape[0] * x->shape[1];
    a.s = x->shape[2];
    a.d = x->shape[3];
    a.g = g;
    a.gs = keys ? (a.s + g - 1) / g : a.s;
    a.gd = keys ? a.d : (a.d + g - 1) / g;
    a.cd = codes->shape[3];
    a.bits = bits;
    a.keys = keys;
    a.packed = a.cd != a.d;
    return a;
}

/* Index of the parameter of element (row = bh*S + t, channel c). */
static __device__ __forceinline__ int64_t param_index(const kivi_geom &a, int64_t row, int64_t c)
{
    if (a.keys) return (row / a.s) * a.gs * a.d + vq_kivi_key_param_index(row % a.s, c, a.g, a.d);
    return vq_kivi_value_param_index(row, c, a.g, a.gd);
}

/* One thread per group (= per parameter element k): min and max over the
 * group's elements, then scale = (max - min) / (2^bits - 1) (0 when flat) and
 * zero = min, stored in the parameter dtype. */
static __global__ void kivi_params_kernel(kivi_geom a, const void *x, bool x_f16, void *scale, void *zero,
                                            bool p_f16)
{
    const float maxq = (float)((1 << a.bits) - 1);
    VQ_CU_GRID_STRIDE(k, a.bh * a.gs * a.gd) {
        int64_t base, stride, cnt;
        if (a.keys) {  /* k = (bh, group, channel): g tokens down one channel */
            const int64_t bh = k / (a.gs * a.d), gi = (k / a.d) % a.gs, c = k % a.d, t0 = gi * a.g;
            base = (bh * a.s + t0) * a.d + c;
            stride = a.d;
            cnt = t0 + a.g < a.s ? a.g : a.s - t0;
        } else {       /* k = (row, group): g channels along one token */
            const int64_t row = k / a.gd, c0 = (k % a.gd) * a.g;
            base = row * a.d + c0;
            stride = 1;
            cnt = c0 + a.g < a.d ? a.g : a.d - c0;
        }
        float mn = vq_cu_load(x, x_f16, base), mx = mn;
        for (int64_t i = 1; i < cnt; i++) {
            const float v = vq_cu_load(x, x_f16, base + i * stride);
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        vq_cu_store(scale, p_f16, k, mx > mn ? (mx - mn) / maxq : 0.0f);
        vq_cu_store(zero, p_f16, k, mn);
    }
}

/* One thread per code byte: its 8/bits codes (packed) or its one code, each
 * against the stored parameters of its element. */
static __global__ void kivi_codes_kernel(kivi_geom a, const void *x, bool x_f16, const void *scale,
                                           const void *zero, bool p_f16, uint8_t *codes)
{
    const float maxq = (float)((1 << a.bits) - 1);
    const int per = a.packed ? 8 / a.bits : 1;
    VQ_CU_GRID_STRIDE(k, a.bh * a.s * a.cd) {
        const int64_t row = k / a.cd, c0 = (k % a.cd) * per;
        uint32_t byte = 0;
        for (int i = 0; i < per; i++) {
            const int64_t c = c0 + i, p = param_index(a, row, c);
            const float sc = vq_cu_load(scale, p_f16, p), z = vq_cu_load(zero, p_f16, p);
            float q = (vq_cu_load(x, x_f16, row * a.d + c) - z) / sc;
            q = q > 0.0f ? q : 0.0f;   /* also maps NaN to 0 */
            q = q < maxq ? q : maxq;
            const uint32_t code = sc != 0.0f ? (uint32_t)rintf(q) : 0u;
            byte |= code << (i * a.bits);
        }
        codes[k] = (uint8_t)byte;
    }
}

/* One thread per element: code * scale + zero. */
static __global__ void kivi_decode_kernel(kivi_geom a, const uint8_t *codes, const void *scale, const void *zero,
                                            bool p_f16, void *out, bool out_f16)
{
    VQ_CU_GRID_STRIDE(k, a.bh * a.s * a.d) {
        const int64_t row = k / a.d, c = k % a.d, p = param_index(a, row, c);
        const uint32_t code = vq_kivi_code(codes + row * a.cd, c, a.bits, a.packed);
        const float v = __fadd_rn(__fmul_rn((float)code, vq_cu_load(scale, p_f16, p)), vq_cu_load(zero, p_f16, p));
        vq_cu_store(out, out_f16, k, v);
    }
}

extern "C" int vq_cu_kivi_quantize(bool keys, const DLTensor *x, int bits, int g, DLTensor *codes, DLTensor *scale,
                                     DLTensor *zero, void *stream)
{
    const kivi_geom a = geom_of(keys, x, codes, bits, g);
    cudaStream_t st = (cudaStream_t)stream;
    const bool xf = vq_cu_is_f16(x), pf = vq_cu_is_f16(scale);
    kivi_params_kernel<<<vq_cu_blocks(a.bh * a.gs * a.gd, 256), 256, 0, st>>>(
        a, vq_cu_ptr<const void>(x), xf, vq_cu_ptr<void>(scale), vq_cu_ptr<void>(zero), pf);
    const int e = vq_cu_launched();
    if (e != 0) return e;
    kivi_codes_kernel<<<vq_cu_blocks(a.bh * a.s * a.cd, 256), 256, 0, st>>>(
        a, vq_cu_ptr<const void>(x), xf, vq_cu_ptr<const void>(scale), vq_cu_ptr<const void>(zero), pf,
        vq_cu_ptr<uint8_t>(codes));
    return vq_cu_launched();
}

extern "C" int vq_cu_kivi_dequantize(bool keys, const DLTensor *codes, const DLTensor *scale, const DLTensor *zero,
                                       int bits, int g, DLTensor *out, void *stream)
{
    const kivi_geom a = geom_of(keys, out, codes, bits, g);
    kivi_decode_kernel<<<vq_cu_blocks(a.bh * a.s * a.d, 256), 256, 0, (cudaStream_t)stream>>>(
        a, vq_cu_ptr<const uint8_t>(codes), vq_cu_ptr<const void>(scale), vq_cu_ptr<const void>(zero),
        vq_cu_is_f16(scale), vq_cu_ptr<void>(out), vq_cu_is_f16(out));
    return vq_cu_launched();
}
