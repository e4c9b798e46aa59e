/* keys_kivi_mix_runs.cu — the run form of the mixed-width KIVI key policy
 * (VQ_KEY_KIVI_MIX, layout formats/format_kivi_mix.h) on the decode
 * skeleton, and its template instances over the cache's value formats. It
 * runs where kivi_mix_runs.h allows (every preset); the general policy and
 * the descriptor that picks between the two are in keys_kivi_mix.cu.
 *
 * A token's row is two fixed-width code runs: the group's wide channels at 4
 * bits, then its narrow ones at 2, each in channel order. The general policy
 * pops the width mask per 8-channel chunk and selects every code from one
 * of two 64-bit windows; here a 32-token tile lies in one group, so the warp
 * puts the group's query rows, scales and zeros into the group's stream
 * order once per tile (in shared memory), and a lane then scores its token
 * as the dot of the two runs with those rows: 8 codes are one aligned 4-byte
 * (wide; two 2-byte loads where rows are not a multiple of 4 bytes) or
 * 2-byte (narrow) load at a fixed place in the row, and no per-channel
 * select or mask is left on the token's path. As the fast KIVI
 * kernels do (attend_decode_kivi.cuh), the scale goes into the query:
 *   q.k_hat = sum_i (q_i s_i 2^w_i) (1 + code_i / 2^w_i) + sum_i q_i (z_i - s_i 2^w_i)
 * over stream positions i (w_i the code's width), a code becoming
 * 1 + code / 2^w by a shift and a LOP3 (code_1p), the second sum one
 * constant per row and tile. The arithmetic stays f32 (scale, zero and
 * query as the general policy reads them), so a NaN or inf scale or zero
 * reaches the scores as it does there. */
#include <climits>

#include "cuda/keys_kivi_mix.cuh"

namespace vqkv {

/* The key group of flattened token tok (sequence position t) of the CTA's
 * (b, kv head): tok / g when paged (pages hold whole groups), else from the
 * (b, kv head)'s group 0. Once per tile, from the launch's indices rather
 * than registers kept across the tile loop. */
__device__ __forceinline__ int64_t mix_group(const vq_cu_sdpa_params &pp, const MixParams &p, int64_t tok, int t)
{
    if (p.paged) return tok <= INT_MAX ? (int64_t)((int)tok / p.g) : tok / p.g; /* 32-bit division where it fits */
    const int bh = (int)blockIdx.z * pp.c.Hkv + (int)blockIdx.y / pp.c.row_chunks;
    return (int64_t)bh * p.GK + t / p.g;
}

struct MixRunKeys {
    template <int W, int R>
    struct P {
        /* per warp [R][W], the tile's group's q * scale * 2^width in stream
         * order; then per warp [R], each row's sum of q * (zero - scale * 2^width) */
        static constexpr int kTileFloats = kWarps * R * (W + 1);
        const vq_cu_sdpa_params &pp;
        const MixParams &p;
        int D;

        __device__ P(const vq_cu_sdpa_params &params, int, int)
            : pp(params), p(key_params<MixParams>(params)), D(params.c.D)
        {
        }
        __device__ void prepare(float *, int, const Rows<R> &) {}

        /* Group grp's rows into the warp's qr [R][W] in stream order and
         * their constants into zr [R]. Lane l holds mask byte l (D/8 <= 32
         * bytes): an exclusive scan of their popcounts gives the wide
         * channels before each byte, so channel c's place in the stream is
         * the count of wide channels below it (wide) or nw plus the count of
         * narrow ones below it. */
        __device__ void order(int64_t grp, const float *qs, int qw, float *qr, float *zr) const
        {
            const int lane = threadIdx.x & 31;
            const uint8_t *m = p.mask + grp * (D / 8);
            const __half *sc = p.scale + grp * D, *ze = p.zero + grp * D;
            const uint32_t mb = lane < D / 8 ? __ldg(m + lane) : 0u;
            int below = __popc(mb);
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const int v = __shfl_up_sync(0xffffffffu, below, o);
                if (lane >= o) below += v;
            }
            below -= __popc(mb);
            float part[R];
            zero(part);
            for (int c0 = 0; c0 < D; c0 += 32) { /* warp-uniform trips: the shuffles need every lane */
                const int c = c0 + lane;
                const uint32_t b = __shfl_sync(0xffffffffu, mb, c >> 3);
                const int n = __shfl_sync(0xffffffffu, below, c >> 3) + __popc(b & ((1u << (c & 7)) - 1u));
                if (c >= D) continue;
                const bool wide = (b >> (c & 7)) & 1u;
                const int pos = wide ? n : p.nw + c - n;
                const float s = __half2float(__ldg(sc + c)) * (wide ? 16.0f : 4.0f);
                const float z = __half2float(__ldg(ze + c));
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float qv = qs[r * qw + c];
                    qr[r * W + pos] = qv * s;
                    part[r] = fmaf(qv, z - s, part[r]);
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float sum = warp_sum(part[r]);
                if (lane == 0) zr[r] = sum;
            }
        }

        /* The 8 wide codes at stream position c (byte c / 2), as 1 + code / 16. */
        __device__ void wide8(const uint8_t *row, int c, float (&kf)[8]) const
        {
            const uint8_t *b = row + c / 2;
            const uint16_t *h = (const uint16_t *)b;
            const uint32_t v = p.unit == 4 ? __ldg((const uint32_t *)b)
                                           : (uint32_t)__ldg(h) | (uint32_t)__ldg(h + 1) << 16;
#pragma unroll
            for (int j = 0; j < 8; j++) kf[j] = code_1p<4>(v, 4 * j);
        }
        /* The 8 narrow codes at stream position c >= nw (byte nw / 2 + (c - nw) / 4), as 1 + code / 4. */
        __device__ void narrow8(const uint8_t *row, int c, float (&kf)[8]) const
        {
            const uint32_t v = __ldg((const uint16_t *)(row + p.nw / 2 + (c - p.nw) / 4));
#pragma unroll
            for (int j = 0; j < 8; j++) kf[j] = code_1p<2>(v, 2 * j);
        }

        /* qs: the skeleton's shared floats, the queries then kTileFloats of this policy's */
        __device__ void score(int64_t tok, int t, float *qs, int qw, float (&s)[R]) const
        {
            const int warp = threadIdx.x >> 5;
            float *qr = qs + R * qw + warp * R * W, *zr = qs + R * qw + kWarps * R * W + warp * R;
            /* the skeleton calls this once per tile with the whole warp, and
             * every token of the tile is in one group */
            __syncwarp(); /* every lane is done with the previous tile's rows */
            order(mix_group(pp, p, tok, t), qs, qw, qr, zr);
            __syncwarp();
            const uint8_t *row = p.codes + tok * p.rb;
            /* each run in runtime loops of two chunks, not unrolled over W:
             * the skeleton's accumulators and the values loaded ahead
             * already hold most registers. One row alternates two
             * accumulators to overlap its FMA chain; several rows are
             * chains enough, and keep one each. */
            float s0[R], s1[R], kf[8];
            float(&sb)[R] = R == 1 ? s1 : s0;
            zero(s0);
            zero(s1);
            int c = 0;
#pragma unroll 1
            for (; c + 16 <= p.nw; c += 16) {
                wide8(row, c, kf);
                dot8(qr, W, c, kf, s0);
                wide8(row, c + 8, kf);
                dot8(qr, W, c + 8, kf, sb);
            }
            if (c < p.nw) {
                wide8(row, c, kf);
                dot8(qr, W, c, kf, s0);
                c += 8;
            }
#pragma unroll 1
            for (; c + 16 <= D; c += 16) {
                narrow8(row, c, kf);
                dot8(qr, W, c, kf, sb);
                narrow8(row, c + 8, kf);
                dot8(qr, W, c + 8, kf, s0);
            }
            if (c < D) {
                narrow8(row, c, kf);
                dot8(qr, W, c, kf, sb);
            }
#pragma unroll
            for (int r = 0; r < R; r++) s[r] = (R == 1 ? s0[r] + s1[r] : s0[r]) + zr[r];
        }
    };
};

int mix_runs_launch_f16(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return kv_launch_f16<MixRunKeys::P>(p, stream, occupancy);
}

int mix_runs_launch_enc(const vq_cu_sdpa_params *p, void *stream, int *occupancy)
{
    return kv_launch_enc<MixRunKeys::P>(p, stream, occupancy);
}

} /* namespace vqkv */
