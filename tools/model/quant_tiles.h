/* quant_tiles.h — the SIMD tile kernels on the packed layout (quant.h),
 * written once over a vector `vr` of VQM_TILE = 16 f32 lanes, a lane per
 * row of the tile, that each SIMD file defines (one zmm; two ymm) with:
 *   vr vr_zero(void), vr_set1(float), vr_add(vr, vr), vr_mul(vr, vr), vr_fma(a, b, c) = a b + c
 *   void vr_store(float *out, vr)                      16 floats
 *   vr vr_f16(p), vr_bf16(p), vr_f32(p)                16 such values at p
 *   vr vr_q8(p)                                        16 int8 at p
 *   void vr_q4(p, vr *lo, vr *hi)                      16 bytes at p: low, high nibbles
 *   vr vr_bits(p, shift, mask, sub)                    ((16 u32 at p) >> shift & mask) - sub
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

/* The 16 byte positions of a sub-block of 32 at qs (byte e: element e in
 * the low nibble, e + 16 in the high one) into the chains of nx rows of x
 * (xb: the sub-block's first element of row 0): even chains get elements
 * 0..15, odd ones 16..31. High bits (hb): 0 none; 1 Q5_0's (bit e and
 * e + 16 of the u32 at qh, the code q = nibble + 16 bit); 2 Q6_K's (2 bits
 * at 2e of the words at qh and qh + 64 bytes, q - 32 = nibble + 16 (bits - 2)). */
static inline void nib_block(const uint8_t *qs, const uint8_t *qh, const int hb, const int nx, const float *xb,
                             size_t xs, vr s[4][VR_CHAINS])
{
    for (int j = 0; j < nx; j++)
        for (int c = 0; c < VR_CHAINS; c++) s[j][c] = vr_zero();
    /* unrolled by the chain count: the accumulators' indices are constants (registers) */
    for (int e0 = 0; e0 < VQM_QK / 2; e0 += VR_CHAINS / 2)
        for (int u = 0; u < VR_CHAINS / 2; u++) {
            const int e = e0 + u;
            vr lo, hi;
            vr_q4(qs + e * VQM_TILE, &lo, &hi);
            if (hb == 1) {
                lo = vr_fma(vr_bits(qh, e, 1, 0), vr_set1(16.0f), lo);
                hi = vr_fma(vr_bits(qh, e + 16, 1, 0), vr_set1(16.0f), hi);
            } else if (hb == 2) {
                lo = vr_fma(vr_bits(qh, 2 * e, 3, 2), vr_set1(16.0f), lo);
                hi = vr_fma(vr_bits(qh + 4 * VQM_TILE, 2 * e, 3, 2), vr_set1(16.0f), hi);
            }
            for (int j = 0; j < nx; j++) {
                s[j][2 * u] = vr_fma(lo, vr_set1(xb[j * xs + e]), s[j][2 * u]);
                s[j][2 * u + 1] = vr_fma(hi, vr_set1(xb[j * xs + e + 16]), s[j][2 * u + 1]);
            }
        }
}

/* The 4-bit affine types: d q + m (Q4_1), d (q - 8) (Q4_0); Q5_0 (type 2):
 * d (q - 16) with the fifth bit from the row's qh word. */
static inline void tile_q4(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs,
                           const float *xsum, float *out, const int has_m)
{
    const int q5 = has_m == 2;
    const int64_t nb = cols / VQM_QK;
    const size_t bb = vqm_packed_block_bytes(q5 ? VQM_W_Q5_0 : has_m ? VQM_W_Q4_1 : VQM_W_Q4_0);
    vr acc[4];
    for (int j = 0; j < nx; j++) acc[j] = vr_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = tile + (size_t)b * bb;
        prefetch_ahead(p, bb);
        const vr vd = vr_f16(p);
        const vr vm = has_m == 1 ? vr_f16(p + 2 * VQM_TILE) : vr_fma(vd, vr_set1(q5 ? -16.0f : -8.0f), vr_zero());
        const uint8_t *qs = p + (q5 ? 6 : has_m ? 4 : 2) * VQM_TILE;
        vr s[4][VR_CHAINS];
        nib_block(qs, p + 2 * VQM_TILE, q5, nx, x + b * VQM_QK, xs, s);
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

/* Q4_K: per sub-block j of 32, (d sc_j) sum q x - (dmin m_j) sum x (the
 * block sums of x come precomputed). */
static inline void tile_q4_k(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs,
                             const float *xsum, float *out)
{
    const int64_t nsb = cols / VQM_QK_K, nb = cols / VQM_QK;
    const size_t bb = VQM_Q4K_BYTES / 8;
    vr acc[4];
    for (int j = 0; j < nx; j++) acc[j] = vr_zero();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p = tile + (size_t)sb * VQM_Q4K_BYTES;
        const vr vd = vr_f16(p), vdm = vr_f16(p + 2 * VQM_TILE);
        for (int sj = 0; sj < 8; sj++) {
            prefetch_ahead(p + sj * bb, bb);
            const vr sc = vr_mul(vd, vr_q8(p + VQM_Q4K_SC + sj * VQM_TILE));
            const vr mn = vr_mul(vdm, vr_q8(p + VQM_Q4K_M + sj * VQM_TILE));
            const uint8_t *qs = p + VQM_Q4K_QS + sj * 16 * VQM_TILE;
            vr s[4][VR_CHAINS];
            nib_block(qs, NULL, 0, nx, x + sb * VQM_QK_K + sj * VQM_QK, xs, s);
            for (int j = 0; j < nx; j++) {
                acc[j] = vr_fma(chains_sum(s[j]), sc, acc[j]);
                acc[j] = vr_fma(mn, vr_set1(-xsum[j * nb + sb * 8 + sj]), acc[j]);
            }
        }
    }
    for (int j = 0; j < nx; j++) vr_store(out + j * VQM_TILE, acc[j]);
}

/* Q6_K: per sub-block of 16, (d sc) sum (q - 32) x; q - 32 = low nibble +
 * 16 (high bits - 2). Even chains hold the sub-block's first 16 elements,
 * odd ones the next 16 (their scales differ). */
static inline void tile_q6_k(int64_t cols, const uint8_t *tile, const int nx, const float *x, size_t xs, float *out)
{
    const int64_t nsb = cols / VQM_QK_K;
    const size_t bb = VQM_Q6K_BYTES / 8;
    vr acc[4];
    for (int j = 0; j < nx; j++) acc[j] = vr_zero();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p = tile + (size_t)sb * VQM_Q6K_BYTES;
        const vr vd = vr_f16(p);
        for (int sj = 0; sj < 8; sj++) {
            prefetch_ahead(p + sj * bb, bb);
            const vr sc0 = vr_mul(vd, vr_q8(p + VQM_Q6K_SC + 2 * sj * VQM_TILE));
            const vr sc1 = vr_mul(vd, vr_q8(p + VQM_Q6K_SC + (2 * sj + 1) * VQM_TILE));
            const uint8_t *ql = p + VQM_Q6K_QL + sj * 16 * VQM_TILE;
            const uint8_t *qh = p + VQM_Q6K_QH + sj * 2 * VQM_TILE * 4;
            vr s[4][VR_CHAINS];
            nib_block(ql, qh, 2, nx, x + sb * VQM_QK_K + sj * VQM_QK, xs, s);
            for (int j = 0; j < nx; j++) {
                vr s0 = s[j][0], s1 = s[j][1];
                for (int c = 2; c < VR_CHAINS; c += 2) {
                    s0 = vr_add(s0, s[j][c]);
                    s1 = vr_add(s1, s[j][c + 1]);
                }
                acc[j] = vr_fma(s0, sc0, acc[j]);
                acc[j] = vr_fma(s1, sc1, acc[j]);
            }
        }
    }
    for (int j = 0; j < nx; j++) vr_store(out + j * VQM_TILE, acc[j]);
}
