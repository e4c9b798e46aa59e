/* keys_kivi_mix.cu — mixed-width KIVI keys (VQ_KEY_KIVI_MIX, layout
 * formats/format_kivi_mix.h) on CUDA: the cache method's device encoder (the
 * bytes of the CPU encoder, src/cache/method_kivi_mix.c), the decode skeleton's
 * general key policy (any widths and groups) and its template instances over
 * the cache's value formats, the fill of the format's fields of
 * vq_cu_sdpa_params (keys_kivi_mix.cuh), and the descriptor the registry
 * lists (keys_registry.h), whose launchers run the run form
 * (keys_kivi_mix_runs.cu) where kivi_mix_runs.h allows it. The format has no
 * public vq_keys_format: the cache passes it as vq_cuda_kivi_mix_keys
 * (attention/attn_cuda.h). */
#include "cuda/codec_common.cuh"
#include "cuda/keys_kivi_mix.cuh"
#include "cuda/kivi_mix_runs.h"
#include "formats/format_kivi_mix.h"

namespace vqkv {

/* ---- encoder ---- */

constexpr int kMixMaxD = 256;

/* One block per (group, head), one thread per channel. The steps and the
 * arithmetic are the CPU encoder's, in the same order: min / max over the
 * group's tokens (NaN compares false, as there), the W channels of widest
 * range by that encoder's stable insertion sort (descending, ties to the
 * lower channel; a NaN range stays at its own index and no channel moves
 * past it, so each channel's place is its rank inside the run between the
 * NaN ranges around it), f16 scale and zero, codes against them, packed
 * into the row's two streams. */
static __global__ void __launch_bounds__(kMixMaxD)
    mix_encode_kernel(const uint16_t *x, int64_t T, int d, int g, int nw, int bits, int bits2, int rb,
                      uint8_t *codes, uint16_t *scale, uint16_t *zero, uint8_t *mask)
{
    __shared__ float range[kMixMaxD];
    __shared__ uint8_t is_wide[kMixMaxD];
    __shared__ uint32_t roww[kMixMaxD / 4]; /* a code row: rb <= d bytes */
    const int ch = threadIdx.x;
    const int64_t h = blockIdx.y, G = T / g, gi = h * G + blockIdx.x;
    const uint16_t *xg = x + (h * T + (int64_t)blockIdx.x * g) * d;
    float mn = 0.0f, mx = 0.0f;
    if (ch < d) {
        mn = mx = vq_cu_half_bits_to_float(xg[ch]);
        for (int t = 1; t < g; t++) {
            const float v = vq_cu_half_bits_to_float(xg[(int64_t)t * d + ch]);
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        range[ch] = __fsub_rn(mx, mn);
    }
    __syncthreads();
    bool wide = false;
    if (ch < d) {
        const float r = range[ch];
        int pos = ch;
        if (!isnan(r)) {
            int lo = 0, hi = d;
            for (int c = 0; c < ch; c++)
                if (isnan(range[c])) lo = c + 1;
            for (int c = d - 1; c > ch; c--)
                if (isnan(range[c])) hi = c;
            pos = lo;
            for (int c = lo; c < hi; c++) {
                const float o = range[c];
                pos += o > r || (o == r && c < ch);
            }
        }
        wide = pos < nw;
        is_wide[ch] = wide;
    }
    __syncthreads();
    if (ch < d && ch % 8 == 0) {
        uint32_t b = 0;
        for (int j = 0; j < 8; j++) b |= (uint32_t)is_wide[ch + j] << j;
        mask[gi * (d / 8) + ch / 8] = (uint8_t)b;
    }
    const float maxq = (float)((1 << (wide ? bits2 : bits)) - 1);
    float sc = 0.0f, ze = 0.0f;
    int sbit = 0;
    if (ch < d) {
        /* stored in f16; the codes are computed against what decoding reads */
        const uint16_t s16 = vq_cu_float_to_half_bits(mx > mn ? __fdiv_rn(range[ch], maxq) : 0.0f);
        const uint16_t z16 = vq_cu_float_to_half_bits(mn);
        scale[gi * d + ch] = s16;
        zero[gi * d + ch] = z16;
        sc = vq_cu_half_bits_to_float(s16);
        ze = vq_cu_half_bits_to_float(z16);
        int below = 0; /* wide channels before ch */
        for (int c = 0; c < ch; c++) below += is_wide[c];
        sbit = wide ? below * bits2 : nw * bits2 + (ch - below) * bits;
    }
    const int w = wide ? bits2 : bits, words = (rb + 3) / 4;
    for (int t = 0; t < g; t++) {
        for (int i = ch; i < words; i += blockDim.x) roww[i] = 0;
        __syncthreads();
        if (ch < d) {
            float q = __fdiv_rn(__fsub_rn(vq_cu_half_bits_to_float(xg[(int64_t)t * d + ch]), ze), sc);
            q = q > 0.0f ? q : 0.0f; /* also maps NaN to 0 */
            q = q < maxq ? q : maxq;
            const uint32_t code = sc != 0.0f ? (uint32_t)rintf(q) : 0u;
            const int o = sbit & 31;
            atomicOr(&roww[sbit >> 5], code << o);
            if (o + w > 32) atomicOr(&roww[(sbit >> 5) + 1], code >> (32 - o));
        }
        __syncthreads();
        uint8_t *row = codes + (h * T + (int64_t)blockIdx.x * g + t) * rb;
        for (int i = ch; i < rb; i += blockDim.x) row[i] = (uint8_t)(roww[i >> 2] >> (8 * (i & 3)));
        __syncthreads();
    }
}

/* ---- attention ---- */

/* 64 bits of row (rb bytes) from stream bit `bit` on: three aligned words
 * where they lie inside the row, else the row's bytes one at a time (no
 * byte outside the row is read: neighbouring rows may be unwritten). */
__device__ __forceinline__ uint64_t mix_window(const uint8_t *row, int rb, int bit)
{
    const uint8_t *pa = row + (bit >> 3);
    const uint8_t *a4 = (const uint8_t *)((uintptr_t)pa & ~(uintptr_t)3);
    const int sh = (int)(pa - a4) * 8 + (bit & 7);
    uint32_t w[3] = {0u, 0u, 0u};
    if (a4 >= row && a4 + 12 <= row + rb) {
        const uint32_t *p4 = (const uint32_t *)a4;
        w[0] = __ldg(p4);
        w[1] = __ldg(p4 + 1);
        w[2] = __ldg(p4 + 2);
    } else {
#pragma unroll
        for (int i = 0; i < 12; i++)
            if (a4 + i >= row && a4 + i < row + rb) w[i >> 2] |= (uint32_t)__ldg(a4 + i) << (8 * (i & 3));
    }
    const uint64_t lo = (uint64_t)w[1] << 32 | w[0];
    return sh == 0 ? lo : lo >> sh | (uint64_t)w[2] << (64 - sh);
}

/* ---- KIVI_MIX, the general form (any widths, wide count and group; the
 * run form, keys_kivi_mix_runs.cu, takes the presets' layouts):
 * k_hat[t,c] = code * scale[t/g, c] + zero[t/g, c], the code bits2 wide where
 * the group's mask marks c, else bits. Per 8-channel chunk the mask byte says
 * how many codes come from each stream: one 64-bit window of each
 * (kw * bits2 and (8 - kw) * bits <= 64 bits) ---- */
struct MixKeys {
    template <int W, int R>
    struct P {
        const MixParams &p;
        int D, Skv;
        __device__ P(const vq_cu_sdpa_params &pp, int, int) : p(key_params<MixParams>(pp)), D(pp.c.D), Skv(pp.c.Skv) {}
        __device__ void prepare(float *, int, const Rows<R> &) {}
        __device__ void score(int64_t tok, int t, const float *qs, int qw, float (&s)[R]) const
        {
            const int64_t grp = p.paged ? tok / p.g : (tok - t) / Skv * p.GK + t / p.g;
            const uint8_t *row = p.codes + tok * p.rb, *m = p.mask + grp * (D / 8);
            const __half *sc = p.scale + grp * D, *ze = p.zero + grp * D;
            const int bits = p.bits, bits2 = p.bits2;
            const uint32_t m1 = (1u << bits) - 1u, m2 = (1u << bits2) - 1u;
            int sw = 0, sn = p.nw * bits2; /* next wide / narrow stream bit */
            dot_chunks<W, R>(D, qs, qw, s, [&](int c, float (&kf)[8]) {
                const uint32_t mb = __ldg(m + c / 8);
                const int kw = __popc(mb);
                const uint64_t ww = kw > 0 ? mix_window(row, p.rb, sw) : 0, nn = kw < 8 ? mix_window(row, p.rb, sn) : 0;
                float scf[8], zef[8];
                unpack8<true>(__ldg((const uint4 *)(sc + c)), scf);
                unpack8<true>(__ldg((const uint4 *)(ze + c)), zef);
                int iw = 0, in = 0;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const bool wide = (mb >> j) & 1u;
                    const uint32_t code = wide ? (uint32_t)(ww >> (iw * bits2)) & m2 : (uint32_t)(nn >> (in * bits)) & m1;
                    iw += wide;
                    in += !wide;
                    kf[j] = fmaf((float)code, scf[j], zef[j]);
                }
                sw += kw * bits2;
                sn += (8 - kw) * bits;
            });
        }
    };
};

} /* namespace vqkv */

/* The cache method's encoder on the device (vq_cache_device_encoder): x
 * [1, Hkv, T, D] f16, T a multiple of the group, D <= 256 -> the staging
 * views of the method's streams: per token code rows [1, Hkv, T, rb], per
 * group scale and zero [1, Hkv, T/g, D] f16 and width masks [1, Hkv, T/g, D/8]. */
static vq_status cache_encode(vq_ctx *ctx, const vq_key_config *kc, const DLTensor *x, DLTensor *const *outs)
{
    const int64_t heads = vq_dim(x, 1), T = vq_dim(x, 2), d = vq_dim(x, 3), g = kc->group_size;
    VQ_RETURN_IF(ctx, T % g != 0, VQ_ERR_INVALID_ARGUMENT, "kivi_mix encode: %lld tokens, not whole groups of %lld",
                 (long long)T, (long long)g);
    if (T == 0) return VQ_OK;
    const int64_t nw = vq_kivi_mix_wide_channels(kc->wide_channels, d);
    const int rb = (int)vq_kivi_mix_row_bytes(d, nw, kc->bits, kc->bits2);
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    const dim3 grid((unsigned)(T / g), (unsigned)heads);
    vqkv::mix_encode_kernel<<<grid, (unsigned)((d + 31) / 32 * 32), 0, (cudaStream_t)ctx->stream>>>(
        (const uint16_t *)vq_data(x), T, (int)d, (int)g, (int)nw, kc->bits, kc->bits2, rb,
        (uint8_t *)vq_data(outs[0]), (uint16_t *)vq_data(outs[1]), (uint16_t *)vq_data(outs[2]),
        (uint8_t *)vq_data(outs[3]));
    return vq_cuda_check(ctx, vq_cu_launched(), "KIVI_MIX encoder launch");
}

/* The tensors of vq_cuda_kivi_mix_keys (made by the cache, so only this
 * backend's limits are checked: 16-byte rows of scales). */
static vq_status fill(vq_ctx *ctx, const vq_encoded_keys *keys, float, vq_cu_sdpa_params *p)
{
    const vq_cuda_kivi_mix_keys *k = (const vq_cuda_kivi_mix_keys *)keys; /* base is its first member */
    const DLTensor *vec[] = {k->scale, k->zero};
    static const char *const names[] = {"keys.kivi_mix.scale", "keys.kivi_mix.zero"};
    VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, vec, names, 2));
    vqkv::MixParams &m = vqkv::key_params<vqkv::MixParams>(*p);
    m.codes = (const uint8_t *)vq_data(k->codes);
    m.scale = (const __half *)vq_data(k->scale);
    m.zero = (const __half *)vq_data(k->zero);
    m.mask = (const uint8_t *)vq_data(k->mask);
    m.rb = (int)vq_dim(k->codes, 3);
    m.g = k->group_size;
    m.nw = k->wide;
    m.bits = k->bits;
    m.bits2 = k->bits2;
    m.GK = (int)vq_dim(k->scale, 2);
    m.paged = p->c.pg.pages != NULL;
    /* the run form reads a row in 4-byte loads where every row starts on 4
     * bytes, else in 2-byte ones (its rows have an even byte count) */
    const uintptr_t base = (uintptr_t)m.codes;
    const bool runs = vq_cu_kivi_mix_runs(p->c.D, m.nw, m.bits, m.bits2, m.g) && base % 2 == 0;
    m.unit = !runs ? 0 : m.rb % 4 == 0 && base % 4 == 0 ? 4 : 2;
    return VQ_OK;
}

/* The run form where fill chose it, else the general policy. */
static int launch_f16(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    if (vqkv::key_params<vqkv::MixParams>(*p).unit) return vqkv::mix_runs_launch_f16(p, stream, occupancy);
    return vqkv::kv_launch_f16<vqkv::MixKeys::P>(p, stream, occupancy);
}
static int launch_enc(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    if (vqkv::key_params<vqkv::MixParams>(*p).unit) return vqkv::mix_runs_launch_enc(p, stream, occupancy);
    return vqkv::kv_launch_enc<vqkv::MixKeys::P>(p, stream, occupancy);
}

/* plain values only in f16: the cache's (the format has no public entry) */
extern "C" const vq_cu_key_format vq_cu_keys_kivi_mix = {VQ_CU_SDPA_KIVI_MIX, fill, launch_f16, launch_enc, true,
                                                         VQ_KEY_KIVI_MIX,     cache_encode};
