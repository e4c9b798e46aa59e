/* prefill_rabitq.cu — vq_rabitq_prefill_attend on CUDA: FlashAttention-2
 * style tiles on the tensor cores (mma.sync m16n8k16, f16 inputs, f32
 * accumulation), the RaBitQ cache decoded per tile into shared memory and
 * never written to global memory.
 *
 * CTA: 8 warps over consecutive query rows of one kv head (with GQA the rows
 * may span query heads, which then share every decoded tile): 32 rows per
 * warp (two m16 blocks sharing each K/V fragment loaded) for D <= 128, 16 for
 * D = 256 (the output accumulator takes the registers).
 * Per kv tile of 64 tokens:
 *   K: sign bits -> exact f16 +-1 in shared memory ([token][D], rows padded by
 *      16 bytes so that ldmatrix is free of bank conflicts), each nibble of
 *      bits through a 16-entry table of four f16 (conflict-free: the table
 *      spans the 32 banks once);
 *   V: nibbles -> f16 centroids through a 256-entry byte -> half2 table
 *      (centroids divided by max|cent| so that any f32 codebook fits f16; the
 *      factor is put back at the end);
 *   per token: a_t = k_mag * scale * log2(e), c_t = k_const * log2(e)
 *      (-inf past Skv), w_t = v_scale (1 without).
 *   S = Q K^T (f32), s = S a_t + c_t (log2 domain), online softmax in f32,
 *   P * w_t rounded to f16 and kept in registers as the A operand of O += P V.
 * The O rescale is skipped when no row of the warp raised its max, the
 * v_scale multiply exists only in the instance that has one, the per-token
 * factors are read as float4/float2. The shared K/V tiles are
 * double-buffered: a warp decodes tile j+1 (bytes loaded into registers
 * during tile j-1) and then computes on tile j, so the decode of some warps
 * overlaps the mma of others; one barrier per tile.
 * Q: f16 in shared memory, re-read by ldmatrix per tile (in registers only
 * for D = 64). D is padded to 64, 128 or 256 with zero queries / zero values.
 * Measured variants (bench/NOTES.md): K fragments built from the sign bits in
 * registers (slower: ALU), 4-warp CTAs x 2 per SM (slower), 32-token tiles
 * (slower without v_scale, faster with it: fewer spills), v_scale folded into
 * the V tile (slower: spills). */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "cuda/prefill_params.h"

namespace vqpf {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBN = 64;                    /* tokens per kv tile */
constexpr float kLog2e = 1.4426950408889634f;

template <int DP>
struct Cfg {
    static constexpr int LD = DP + 8;                  /* halves per smem row */
    static constexpr int TILE = kBN * LD;              /* halves per K or V tile */
    static constexpr int UNITS = kBN * DP / 8 / kThreads;  /* 8-element units per thread per tile */
    static constexpr int MB = DP <= 128 ? 2 : 1;         /* m16 row blocks per warp */
    static constexpr int ROWS = kWarps * 16 * MB;        /* query rows per CTA */
    static constexpr bool QREG = DP * MB <= 128;         /* Q fragments in registers */
    static constexpr size_t KV_BYTES = 4u * TILE * sizeof(__half);         /* K, V double-buffered */
    static constexpr size_t Q_BYTES = (size_t)ROWS * LD * sizeof(__half);
    static constexpr size_t TOK_BYTES = 2u * 3u * kBN * sizeof(float);
    static constexpr size_t LUT_BYTES = 256u * sizeof(uint32_t) + 16u * sizeof(uint2);
    static constexpr size_t SMEM = KV_BYTES + Q_BYTES + TOK_BYTES + LUT_BYTES;
    static_assert(UNITS >= 1 && kBN * DP / 8 % kThreads == 0, "tile units must split evenly");
};

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

/* c += a b: A 16x16 row-major f16, B 16x8 col-major f16, C 16x8 f32. */
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t pack_h2(float lo, float hi)
{
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

/* Two sign bits (bit 0 -> low half) -> half2 of +-1: bit 1 is +1 (0x3C00),
 * bit 0 is -1 (0xBC00), the two differing in the sign bit only. Builds the
 * nibble table. */
__device__ __forceinline__ uint32_t signs2(uint32_t x)
{
    return 0xBC00BC00u ^ ((x & 1u) << 15) ^ ((x & 2u) << 30);
}

/* Raw bytes of one kv tile, loaded into registers a tile ahead. */
template <int DP>
struct Raw {
    uint32_t k[Cfg<DP>::UNITS];  /* one k_bits byte each (8 dims) */
    uint32_t v[Cfg<DP>::UNITS];  /* one v_idx word each (8 dims) */
    float a, c, w;               /* token params (threads < kBN) */
};

template <int DP>
struct Ctx {
    const vq_cu_prefill_params &p;
    const uint8_t *kb, *vi;
    const float *kmag, *kconst, *vscale;
    int KB, VW;       /* k_bits bytes, v_idx words per token */
    float amul;       /* scale * log2(e) */

    /* Loads tile `tile` into registers; tokens past Skv and dims past D get
     * neutral bytes (a = 0, c = -inf gives p = 0). */
    __device__ __forceinline__ void load(int tile, Raw<DP> &r) const
    {
        const int t0 = tile * kBN, n = min(kBN, p.Skv - t0);
#pragma unroll
        for (int u = 0; u < Cfg<DP>::UNITS; u++) {
            const int e = threadIdx.x + u * kThreads, t = e / (DP / 8), i = e % (DP / 8);
            const bool ok = t < n && i < KB;
            r.k[u] = ok ? (uint32_t)__ldg(kb + (int64_t)(t0 + t) * KB + i) : 0u;
            r.v[u] = ok ? __ldg(reinterpret_cast<const uint32_t *>(vi + (int64_t)(t0 + t) * VW * 4) + i) : 0u;
        }
        if (threadIdx.x < kBN) {
            const int t = threadIdx.x;
            if (t < n) {
                const float mag = __ldg(kmag + t0 + t);
                /* q . (+-mag) mixes +inf and -inf: NaN, as the CPU's exact scores */
                r.a = isfinite(mag) ? mag * amul : NAN;
                r.c = kconst ? __ldg(kconst + t0 + t) * kLog2e : 0.0f;
                r.w = vscale ? __ldg(vscale + t0 + t) : 1.0f;
            } else {
                r.a = 0.0f;
                r.c = -INFINITY;
                r.w = 0.0f;
            }
        }
    }
};

/* Registers -> shared tile: K signs, V centroids, token params:
 * tok[0 .. 2 kBN) = {a0, a1, c0, c1} per token pair, tok[2 kBN .. 3 kBN) = w,
 * so that a lane reads its two columns with one load. */
template <int DP>
__device__ __forceinline__ void decode(const Raw<DP> &r, __half *ks, __half *vs, float *tok, const uint32_t *lut,
                                       const uint2 *slut)
{
    using C = Cfg<DP>;
#pragma unroll
    for (int u = 0; u < C::UNITS; u++) {
        const int e = threadIdx.x + u * kThreads, t = e / (DP / 8), i = e % (DP / 8);
        const uint32_t kx = r.k[u];
        const uint2 k0 = slut[kx & 15u], k1 = slut[kx >> 4];
        const uint4 kq = make_uint4(k0.x, k0.y, k1.x, k1.y);
        *reinterpret_cast<uint4 *>(ks + t * C::LD + i * 8) = kq;
        const uint32_t vx = r.v[u];
        const uint4 vq = make_uint4(lut[vx & 255u], lut[(vx >> 8) & 255u], lut[(vx >> 16) & 255u], lut[vx >> 24]);
        *reinterpret_cast<uint4 *>(vs + t * C::LD + i * 8) = vq;
    }
    if (threadIdx.x < kBN) {
        const int t = threadIdx.x, pr = t >> 1, odd = t & 1;
        tok[4 * pr + odd] = r.a;
        tok[4 * pr + 2 + odd] = r.c;
        tok[2 * kBN + t] = r.w;
    }
}

template <int DP, bool VS>
__global__ void __launch_bounds__(kThreads, 1) prefill_kernel(const vq_cu_prefill_params p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap(); /* mma m16n8k16 / ldmatrix need sm_80; the launcher refuses such builds */
#else
    using C = Cfg<DP>;
    constexpr int KC = DP / 16;  /* k chunks of the QK^T product, n8 block pairs of PV */
    constexpr int MB = C::MB, ROWS = C::ROWS;
    extern __shared__ __align__(16) unsigned char smem[];
    __half *kbuf = reinterpret_cast<__half *>(smem);         /* [2][TILE] */
    __half *vbuf = kbuf + 2 * C::TILE;                        /* [2][TILE] */
    __half *qs = vbuf + 2 * C::TILE;                          /* [ROWS][LD] */
    float *tokbuf = reinterpret_cast<float *>(qs + ROWS * C::LD); /* [2][3][kBN] */
    uint32_t *lut = reinterpret_cast<uint32_t *>(tokbuf + 2 * 3 * kBN);
    uint2 *slut = reinterpret_cast<uint2 *>(lut + 256);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
    const int hkv = blockIdx.y, b = blockIdx.z, row0 = blockIdx.x * ROWS;
    const int D = p.D;
    const int64_t kvbase = ((int64_t)b * p.Hkv + hkv) * p.Skv;
    const Ctx<DP> cx{p, p.k_bits + kvbase * (D / 8), p.v_idx + kvbase * (D / 2), p.k_mag + kvbase,
                     p.k_const ? p.k_const + kvbase : nullptr, p.v_scale ? p.v_scale + kvbase : nullptr, D / 8,
                     D / 8, __ldg(p.scale) * kLog2e};
    const int ntiles = (p.Skv + kBN - 1) / kBN;

    Raw<DP> raw;
    cx.load(0, raw);

    /* centroid table: byte -> (cent[lo], cent[hi]) / cmax as half2 */
    float cmax = 0.0f;
    for (int i = 0; i < p.n_cents; i++) cmax = fmaxf(cmax, fabsf(__ldg(p.v_cents + i)));
    const float cinv = cmax > 0.0f ? 1.0f / cmax : 1.0f, cback = cmax > 0.0f ? cmax : 1.0f;
    for (int i = tid; i < 256; i += kThreads) {
        const int lo = min(i & 15, p.n_cents - 1), hi = min(i >> 4, p.n_cents - 1);
        lut[i] = pack_h2(__ldg(p.v_cents + lo) * cinv, __ldg(p.v_cents + hi) * cinv);
    }
    if (tid < 16) slut[tid] = make_uint2(signs2(tid), signs2(tid >> 2));

    /* queries -> f16 shared, zero past D and past the last row */
    for (int e = tid; e < ROWS * (DP / 8); e += kThreads) {
        const int rr = e / (DP / 8), c8 = e % (DP / 8), r = row0 + rr;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < p.rows && c8 * 8 < D) {
            const int64_t off = (((int64_t)b * p.Hq + hkv * p.G + r / p.Sq) * p.Sq + r % p.Sq) * D + c8 * 8;
            if (p.q_f16) {
                v = __ldg(reinterpret_cast<const uint4 *>(static_cast<const __half *>(p.q) + off));
            } else {
                const float4 *src = reinterpret_cast<const float4 *>(static_cast<const float *>(p.q) + off);
                const float4 x0 = __ldg(src), x1 = __ldg(src + 1);
                v = make_uint4(pack_h2(x0.x, x0.y), pack_h2(x0.z, x0.w), pack_h2(x1.x, x1.y), pack_h2(x1.z, x1.w));
            }
        }
        *reinterpret_cast<uint4 *>(qs + rr * C::LD + c8 * 8) = v;
    }
    __syncthreads();  /* lut ready */
    decode<DP>(raw, kbuf, vbuf, tokbuf, lut, slut);
    if (ntiles > 1) cx.load(1, raw);
    __syncthreads();  /* tile 0 and queries ready */

    /* ldmatrix lane addresses (in halves): A rows (lane & 15), col (lane >> 4) * 8;
     * K (non-trans B): token (lane & 7) + (lane >> 4) * 8, dim ((lane >> 3) & 1) * 8;
     * V (trans B): token (lane & 7) + ((lane >> 3) & 1) * 8, dim (lane >> 4) * 8.
     * Warp w owns rows [w 16 MB, (w + 1) 16 MB): MB m16 blocks that share every
     * K and V fragment it loads. */
    const int qoff = (warp * 16 * MB + (lane & 15)) * C::LD + (lane >> 4) * 8;
    const int koff = ((lane & 7) + (lane >> 4) * 8) * C::LD + ((lane >> 3) & 1) * 8;
    const int voff = ((lane & 7) + ((lane >> 3) & 1) * 8) * C::LD + (lane >> 4) * 8;

    uint32_t qf[C::QREG ? MB : 1][C::QREG ? KC : 1][4];
    if constexpr (C::QREG) {
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
#pragma unroll
            for (int kc = 0; kc < KC; kc++)
                ldsm_x4(smem_addr(qs + qoff + mb * 16 * C::LD + kc * 16), qf[mb][kc][0], qf[mb][kc][1],
                        qf[mb][kc][2], qf[mb][kc][3]);
    }

    float o[MB][2 * KC][4];
    float m[MB][2], l[MB][2];
#pragma unroll
    for (int mb = 0; mb < MB; mb++) {
#pragma unroll
        for (int i = 0; i < 2 * KC; i++) o[mb][i][0] = o[mb][i][1] = o[mb][i][2] = o[mb][i][3] = 0.0f;
        m[mb][0] = m[mb][1] = -INFINITY;
        l[mb][0] = l[mb][1] = 0.0f;
    }

    for (int j = 0; j < ntiles; j++) {
        const int cur = j & 1, nxt = cur ^ 1;
        if (j + 1 < ntiles) {
            decode<DP>(raw, kbuf + nxt * C::TILE, vbuf + nxt * C::TILE, tokbuf + nxt * 3 * kBN, lut, slut);
            if (j + 2 < ntiles) cx.load(j + 2, raw);
        }
        const __half *ks = kbuf + cur * C::TILE, *vs = vbuf + cur * C::TILE;
        const float *tok = tokbuf + cur * 3 * kBN;

        /* S = Q K^T over 8 n8 blocks of tokens */
        float s[MB][8][4];
#pragma unroll
        for (int mb = 0; mb < MB; mb++)
#pragma unroll
            for (int i = 0; i < 8; i++) s[mb][i][0] = s[mb][i][1] = s[mb][i][2] = s[mb][i][3] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
            uint32_t a[MB][4];
#pragma unroll
            for (int mb = 0; mb < MB; mb++) {
                if constexpr (C::QREG) {
                    a[mb][0] = qf[mb][kc][0]; a[mb][1] = qf[mb][kc][1];
                    a[mb][2] = qf[mb][kc][2]; a[mb][3] = qf[mb][kc][3];
                } else {
                    ldsm_x4(smem_addr(qs + qoff + mb * 16 * C::LD + kc * 16), a[mb][0], a[mb][1], a[mb][2], a[mb][3]);
                }
            }
#pragma unroll
            for (int nb2 = 0; nb2 < 4; nb2++) {
                uint32_t b0, b1, b2, b3;
                ldsm_x4(smem_addr(ks + koff + nb2 * 16 * C::LD + kc * 16), b0, b1, b2, b3);
#pragma unroll
                for (int mb = 0; mb < MB; mb++) {
                    mma16816(s[mb][2 * nb2], a[mb], b0, b1);
                    mma16816(s[mb][2 * nb2 + 1], a[mb], b2, b3);
                }
            }
        }

        /* scores in the log2 domain, running max over the quad's row */
        float mu[MB][2];
#pragma unroll
        for (int mb = 0; mb < MB; mb++) {
            float tm0 = -INFINITY, tm1 = -INFINITY;
#pragma unroll
            for (int nb = 0; nb < 8; nb++) {
                const float4 ac = *reinterpret_cast<const float4 *>(tok + 4 * (nb * 4 + tq));
                float *x = s[mb][nb];
                x[0] = fmaf(x[0], ac.x, ac.z);
                x[1] = fmaf(x[1], ac.y, ac.w);
                x[2] = fmaf(x[2], ac.x, ac.z);
                x[3] = fmaf(x[3], ac.y, ac.w);
                tm0 = fmaxf(tm0, fmaxf(x[0], x[1]));
                tm1 = fmaxf(tm1, fmaxf(x[2], x[3]));
            }
            tm0 = fmaxf(tm0, __shfl_xor_sync(0xffffffffu, tm0, 1));
            tm0 = fmaxf(tm0, __shfl_xor_sync(0xffffffffu, tm0, 2));
            tm1 = fmaxf(tm1, __shfl_xor_sync(0xffffffffu, tm1, 1));
            tm1 = fmaxf(tm1, __shfl_xor_sync(0xffffffffu, tm1, 2));
            const float nm0 = fmaxf(m[mb][0], tm0), nm1 = fmaxf(m[mb][1], tm1);
            /* a row with no finite score yet subtracts 0: its p are exp2(-inf) = 0 */
            mu[mb][0] = nm0 == -INFINITY ? 0.0f : nm0;
            mu[mb][1] = nm1 == -INFINITY ? 0.0f : nm1;
            const float al0 = ex2(m[mb][0] - mu[mb][0]), al1 = ex2(m[mb][1] - mu[mb][1]);
            m[mb][0] = nm0;
            m[mb][1] = nm1;
            l[mb][0] *= al0;
            l[mb][1] *= al1;
            if (__any_sync(0xffffffffu, al0 != 1.0f || al1 != 1.0f)) {
#pragma unroll
                for (int i = 0; i < 2 * KC; i++) {
                    o[mb][i][0] *= al0; o[mb][i][1] *= al0;
                    o[mb][i][2] *= al1; o[mb][i][3] *= al1;
                }
            }
        }

        /* P (times v_scale) as f16 A fragments, then O += P V */
#pragma unroll
        for (int kc2 = 0; kc2 < 4; kc2++) {
            uint32_t a[MB][4];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int nb = 2 * kc2 + h;
                float2 w = make_float2(1.0f, 1.0f);
                if constexpr (VS) w = *reinterpret_cast<const float2 *>(tok + 2 * kBN + 2 * (nb * 4 + tq));
#pragma unroll
                for (int mb = 0; mb < MB; mb++) {
                    const float *x = s[mb][nb];
                    const float p00 = ex2(x[0] - mu[mb][0]), p01 = ex2(x[1] - mu[mb][0]);
                    const float p10 = ex2(x[2] - mu[mb][1]), p11 = ex2(x[3] - mu[mb][1]);
                    l[mb][0] += p00 + p01;
                    l[mb][1] += p10 + p11;
                    if constexpr (VS) {
                        a[mb][2 * h] = pack_h2(p00 * w.x, p01 * w.y);
                        a[mb][2 * h + 1] = pack_h2(p10 * w.x, p11 * w.y);
                    } else {
                        a[mb][2 * h] = pack_h2(p00, p01);
                        a[mb][2 * h + 1] = pack_h2(p10, p11);
                    }
                }
            }
#pragma unroll
            for (int nd2 = 0; nd2 < KC; nd2++) {
                uint32_t b0, b1, b2, b3;
                ldsm_x4_t(smem_addr(vs + voff + kc2 * 16 * C::LD + nd2 * 16), b0, b1, b2, b3);
#pragma unroll
                for (int mb = 0; mb < MB; mb++) {
                    mma16816(o[mb][2 * nd2], a[mb], b0, b1);
                    mma16816(o[mb][2 * nd2 + 1], a[mb], b2, b3);
                }
            }
        }
        __syncthreads();  /* tile j read by all, tile j+1 written by all */
    }

#pragma unroll
    for (int mb = 0; mb < MB; mb++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float lh = l[mb][h];
            lh += __shfl_xor_sync(0xffffffffu, lh, 1);
            lh += __shfl_xor_sync(0xffffffffu, lh, 2);
            /* lh == 0: every score -inf, the row is 0 (whatever 0 * NaN left in o);
             * lh NaN (a NaN or +inf score): the row is NaN */
            const bool zero = lh == 0.0f;
            const float inv = lh > 0.0f ? cback / lh : NAN;
            const int r = row0 + warp * 16 * MB + mb * 16 + g + h * 8;
            if (r >= p.rows) continue;
            const int64_t off = (((int64_t)b * p.Hq + hkv * p.G + r / p.Sq) * p.Sq + r % p.Sq) * D;
#pragma unroll
            for (int nb = 0; nb < 2 * KC; nb++) {
                const int col = nb * 8 + 2 * tq;
                if (col >= D) continue;
                const float x = zero ? 0.0f : o[mb][nb][2 * h] * inv, y = zero ? 0.0f : o[mb][nb][2 * h + 1] * inv;
                if (p.out_f16)
                    *reinterpret_cast<__half2 *>(static_cast<__half *>(p.out) + off + col) = __floats2half2_rn(x, y);
                else
                    *reinterpret_cast<float2 *>(static_cast<float *>(p.out) + off + col) = make_float2(x, y);
            }
        }
    }
#endif
}

template <int DP, bool VS>
int launch(const vq_cu_prefill_params *p, cudaStream_t st)
{
    const size_t smem = Cfg<DP>::SMEM;
    /* a build for sm < 80 only (the body is empty there) cannot run this */
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, prefill_kernel<DP, VS>);
    if (e != cudaSuccess) return (int)e;
    if (fa.binaryVersion < 80) return (int)cudaErrorNoKernelImageForDevice;
    e = cudaFuncSetAttribute(prefill_kernel<DP, VS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
    static_assert(Cfg<DP>::ROWS <= VQ_CU_PREFILL_ROWS, "the host's row limit assumes at most VQ_CU_PREFILL_ROWS");
    const dim3 grid((unsigned)((p->rows + Cfg<DP>::ROWS - 1) / Cfg<DP>::ROWS), (unsigned)p->Hkv, (unsigned)p->B);
    prefill_kernel<DP, VS><<<grid, kThreads, smem, st>>>(*p);
    return (int)cudaGetLastError();
}

}  // namespace vqpf

extern "C" int vq_cu_launch_rabitq_prefill(const vq_cu_prefill_params *p, void *stream)
{
    const cudaStream_t st = static_cast<cudaStream_t>(stream);
    const bool vs = p->v_scale != nullptr;
    if (p->D <= 64) return vs ? vqpf::launch<64, true>(p, st) : vqpf::launch<64, false>(p, st);
    if (p->D <= 128) return vs ? vqpf::launch<128, true>(p, st) : vqpf::launch<128, false>(p, st);
    return vs ? vqpf::launch<256, true>(p, st) : vqpf::launch<256, false>(p, st);
}
