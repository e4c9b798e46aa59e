/* quant_tiles.h — the SIMD tile kernels on the packed layout (quant.h),
 * written once over a vector `vr` of VQM_TILE = 16 f32 lanes, a lane per
 * row of the tile, that each SIMD file defines (one zmm; two ymm) with:
 *   vr vr_zero(void), vr_set1(float), vr_add(vr, vr), vr_fma(a, b, c) = a b + c
 *   void vr_store(float *out, vr)                      16 floats
 *   vr vr_f16(p), vr_bf16(p), vr_f32(p)                16 such values at p
 *   vr vr_q8(p)                                        16 int8 at p
 *   void vr_q4(p, vr *lo, vr *hi)                      16 bytes at p: low, high nibbles
 * and VR_CHAINS, the independent accumulators per activation row that hide
 * the FMA latency. One byte (element) position of the tile-block is one
 * load for all 16 rows, times one broadcast activation; the block's scales
 * are one vector each, so there is no per-row reduction and no per-block
 * broadcast. Included by the SIMD files after those definitions, before
 * quant_entries.h. */

/* The tile-block VQM_PF_BLOCKS ahead into L1 (the next tile follows in
 * memory): without it decode waited on every cache line (about 21 -> 14
 * CPU-ms per token on the shared Xeon VM). */
static inline void prefetch_ahead(const uint8_t *p, size_t bb)
{
    for (size_t o = 0; o < bb; o += 64) _mm_prefetch((const char *)(p + VQM_PF_BLOCKS * bb + o), _MM_HINT_T0);
}

static inline vr chains_sum(const vr s[VR_CHAINS])
{
    vr t = s[0];
    for (int c = 1; c < VR_CHAINS; c++) t = vr_add(t, s[c]);
    return t;
}

/* The 4-bit affine types: d q + m (Q4_1), d (q - 8) (Q4_0). */
static inline void tile_q4(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs,
                           const float *xsum, float *out, const int has_m)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bb = vqm_packed_block_bytes(has_m ? VQM_W_Q4_1 : VQM_W_Q4_0);
    vr acc[4];
    for (int j = 0; j < nx; j++) acc[j] = vr_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = tile + (size_t)b * bb;
        prefetch_ahead(p, bb);
        const vr vd = vr_f16(p);
        const vr vm = has_m ? vr_f16(p + 2 * VQM_TILE) : vr_fma(vd, vr_set1(-8.0f), vr_zero());
        const uint8_t *qs = p + (has_m ? 4 : 2) * VQM_TILE;
        vr s[4][VR_CHAINS];
        for (int j = 0; j < nx; j++)
            for (int c = 0; c < VR_CHAINS; c++) s[j][c] = vr_zero();
        /* unrolled by the chain count: the accumulators' indices are constants (registers) */
        for (int e0 = 0; e0 < VQM_QK / 2; e0 += VR_CHAINS / 2)
            for (int u = 0; u < VR_CHAINS / 2; u++) {
                const int e = e0 + u;
                vr lo, hi;
                vr_q4(qs + e * VQM_TILE, &lo, &hi);
                for (int j = 0; j < nx; j++) {
                    const float *xb = x + j * xs + b * VQM_QK;
                    s[j][2 * u] = vr_fma(lo, vr_set1(xb[e]), s[j][2 * u]);
                    s[j][2 * u + 1] = vr_fma(hi, vr_set1(xb[e + 16]), s[j][2 * u + 1]);
                }
            }
        for (int j = 0; j < nx; j++) {
            acc[j] = vr_fma(chains_sum(s[j]), vd, acc[j]);
            acc[j] = vr_fma(vm, vr_set1(xsum[j * nb + b]), acc[j]);
        }
    }
    for (int j = 0; j < nx; j++) vr_store(out + j * VQM_TILE, acc[j]);
}

/* Q8_0 (d q) and the float types (F32, F16, BF16: d = 1): 32 elements of
 * es bytes per row and tile-block after the scales. */
static inline void tile_linear(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs,
                               float *out, const int type)
{
    const int64_t nb = cols / VQM_QK;
    const size_t bb = vqm_packed_block_bytes((uint32_t)type);
    const size_t es = type == VQM_W_Q8_0 ? 1 : type == VQM_W_F32 ? 4 : 2;
    vr acc[4];
    for (int j = 0; j < nx; j++) acc[j] = vr_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = tile + (size_t)b * bb;
        prefetch_ahead(p, bb);
        const uint8_t *qs = type == VQM_W_Q8_0 ? p + 2 * VQM_TILE : p;
        vr s[4][VR_CHAINS];
        for (int j = 0; j < nx; j++)
            for (int c = 0; c < VR_CHAINS; c++) s[j][c] = vr_zero();
        for (int e0 = 0; e0 < VQM_QK; e0 += VR_CHAINS)
            for (int u = 0; u < VR_CHAINS; u++) {
                const uint8_t *q = qs + (size_t)(e0 + u) * VQM_TILE * es;
                const vr w = type == VQM_W_Q8_0 ? vr_q8(q) : type == VQM_W_F32 ? vr_f32(q)
                             : type == VQM_W_F16 ? vr_f16(q) : vr_bf16(q);
                for (int j = 0; j < nx; j++) s[j][u] = vr_fma(w, vr_set1(x[j * xs + b * VQM_QK + e0 + u]), s[j][u]);
            }
        for (int j = 0; j < nx; j++)
            acc[j] = type == VQM_W_Q8_0 ? vr_fma(chains_sum(s[j]), vr_f16(p), acc[j]) : vr_add(acc[j], chains_sum(s[j]));
    }
    for (int j = 0; j < nx; j++) vr_store(out + j * VQM_TILE, acc[j]);
}
