/* attn_kivi_int8_amx.c — the fused KIVI 2-bit block kernel (kivi_int8_block) with
 * its key scores on AMX tiles: at four query rows per kv head the 256
 * vpdpbusd of a block's scores (an eighth of its vector uops, on the two
 * ports the block is bound by) become four TDPBSUD on the tile unit, which
 * runs beside the vector ports. The amx kernel set: installed where the CPU
 * has AMX-TILE and AMX-INT8 and the OS grants the tile state (arch_prctl),
 * over the AVX-512 VNNI + VBMI kernel (attn_kivi_int8_vnnivbmi.c), which still
 * runs fewer than four rows and the whole p.V.
 *
 * Bit for bit the VNNI kernel's results: the same query rounding and code
 * extraction, and the integer dots are exact in both (|sum| <= 128 * 127 * 3
 * fits int32), only summed by another unit. The tiles:
 *   tmm0, tmm1  A: the rounded query rows, channels 0-63 / 64-127 in the
 *               plane order of kivi_q8 (4 rows x 64 bytes, stride 128)
 *   tmm2, tmm3  B: tokens 0-15 (then 16-31), the code planes of those
 *               channels in the layout TDPBSUD reads (16 rows of 16 tokens x
 *               4 codes)
 *   tmm4, tmm5  C: the integer scores of tokens 0-15 / 16-31 (4 x 16 int32)
 * Row kk of B (channels 64 kh + 4 kk .. + 3) is the register that kivi_qk8
 * multiplies by the query dword at 64 kh + 4 kk: plane m = 2 kh + kk / 8 of
 * code dword w = kk % 8, masked.
 *
 * The p.V stays on the vector ports: the same on tiles (one group's weights
 * as A, its codes gathered per plane pair as B, eight TDPBSUD per block, bit
 * for bit the same o) was slower in cache, 891 against 812 TSC ticks per
 * block (contrib/kivi_int8_block.c), and 922 against 768 with its dots added to o
 * a block later as the scores are pipelined below: the eight tile loads of
 * operands the block has just stored, and eight tile stores, cost more than
 * the 256 vpdpbusd they replace. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "attention/attn_kernels.h"
#define VQ_UNROLL
#include "cpu/avx512/attn_avx512_inline.h"
#include "cpu/avx512/attn_kivi_int8_avx512.h"

/* The palette-1 tile configuration of the table above (64 bytes, ldtilecfg). */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static tile_config tiles;

static void build_tile_config(void)
{
    memset(&tiles, 0, sizeof tiles);
    tiles.palette = 1;
    const int rows[6] = {4, 4, 16, 16, 4, 4};
    for (int t = 0; t < 6; t++) {
        tiles.rows[t] = (uint8_t)rows[t];
        tiles.colsb[t] = 64;
    }
}

/* The B rows of tokens 16 h .. 16 h + 15 (n valid) into eb [2 kh][16][64]:
 * the transposed code dwords of kivi_qk8 (qk8_transpose16), each plane
 * masked. */
VQ_INLINE void code_planes16(int n, const uint8_t *codes, uint8_t (*eb)[16][64])
{
    __m512i x[8];
    qk8_transpose16(n, codes, 32, 0, x, false);
    const __m512i mask = _mm512_set1_epi8(3);
    for (int w = 0; w < 8; w++)
        for (int m = 0; m < 4; m++) {
            const __m512i e = _mm512_and_si512(m ? _mm512_srli_epi32(x[w], 2 * m) : x[w], mask);
            _mm512_store_si512(eb[m / 2][(m % 2) * 8 + w], e);
        }
}

/* Block b's integer scores on the tiles, issued: the query rows rounded
 * against its key group (xq, dz), its code planes, the four TDPBSUD, the
 * dots stored to c [2 halves][4 rows][16]. Nothing here depends on the
 * softmax state, so the run issues block i + 1's while the vector ports
 * still work on block i (kivi_int8_run_amx). */
VQ_INLINE void scores_issue(const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, int8_t *xq, float *dz,
                            int32_t (*c)[4][16])
{
    _Alignas(64) uint8_t eb[2][2][16][64];
    kivi_int8_round_query(4, b, q, ldq, xq, dz);
    code_planes16(16, b->kcodes, eb[0]);
    code_planes16(16, b->kcodes + 16 * 32, eb[1]);
    _tile_loadd(0, xq, 128);
    _tile_loadd(1, xq + 64, 128);
    _tile_loadd(2, eb[0][0], 64);
    _tile_loadd(3, eb[0][1], 64);
    _tile_zero(4);
    _tile_dpbsud(4, 0, 2);
    _tile_dpbsud(4, 1, 3);
    _tile_loadd(2, eb[1][0], 64);
    _tile_loadd(3, eb[1][1], 64);
    _tile_zero(5);
    _tile_dpbsud(5, 0, 2);
    _tile_dpbsud(5, 1, 3);
    _tile_stored(4, c[0], 64);
    _tile_stored(5, c[1], 64);
}

/* The scores of tokens 0-15 / 16-31 from the stored dots, as kivi_qk8's. */
VQ_INLINE void scores_finish(int32_t (*c)[4][16], const float *dz, __m512 *x0, __m512 *x1)
{
    for (int r = 0; r < 4; r++) {
        x0[r] = qk8_finish(_mm512_load_si512(c[0][r]), dz + 2 * r);
        x1[r] = qk8_finish(_mm512_load_si512(c[1][r]), dz + 2 * r);
    }
}

/* A run at four rows, software-pipelined: block i + 1's scores go to the
 * tile unit before block i's softmax and p.V, so the trip of its operands
 * through memory (vector stores, tile loads, tile stores, vector loads)
 * overlaps block i's vector work instead of stalling it. The same
 * operations on the same operands as one block after the other. */
static void kivi_int8_run_amx(const vq_attn_kivi_int8_block *run, const float *q, int64_t ldq, float *o, int64_t ldo,
                          float *m, float *d, bool *bad)
{
    _Alignas(64) int8_t xq[4 * 128];
    _Alignas(64) int32_t c[2][2][4][16]; /* [block i % 2]: its dots */
    float dz[2][8];
    vq_attn_kivi_int8_block b = *run, next = *run; /* the block of the step, the block whose scores are issued */
    if (run->pf_nb == 0) vq_attn_kivi_int8_no_prefetch(&next);
    scores_issue(&next, q, ldq, xq, dz[0], c[0]);
    for (int64_t i = 0; i < run->nb; i++) {
        if (i == run->pf_nb) vq_attn_kivi_int8_no_prefetch(&b);
        pv8_block vb;
        kivi_int8_value_scales(&b, &vb);
        if (i + 1 < run->nb) {
            vq_attn_kivi_int8_next(&next);
            if (i + 1 == run->pf_nb) vq_attn_kivi_int8_no_prefetch(&next);
            scores_issue(&next, q, ldq, xq, dz[(i + 1) % 2], c[(i + 1) % 2]);
        }
        __m512 x0[4], x1[4];
        scores_finish(c[i % 2], dz[i % 2], x0, x1);
        kivi_int8_step(4, &b, &vb, x0, x1, o, ldo, m, d, bad);
        vq_attn_kivi_int8_next(&b);
    }
}

/* The VNNI kernel, for fewer than four rows. */
static void (*kivi_int8_block_vnni)(int R, const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, float *o,
                                int64_t ldo, float *m, float *d, bool *bad);

static void kivi_int8_block_amx(int R, const vq_attn_kivi_int8_block *b, const float *q, int64_t ldq, float *o, int64_t ldo,
                            float *m, float *d, bool *bad)
{
    if (R < 4) {
        kivi_int8_block_vnni(R, b, q, ldq, o, ldo, m, d, bad);
        return;
    }
    _tile_loadconfig(&tiles);
    kivi_int8_run_amx(b, q, ldq, o, ldo, m, d, bad);
    _tile_release(); /* the tile state back to init: nothing for the OS to save */
}

void vq_attn_kernels_init_avx512_kivi_int8_amx(vq_attn_kernels *k)
{
    if (!k->kivi_int8_block) return; /* the VNNI one: always there on the amx set (VNNI + VBMI) */
    build_perms(); /* this file's copies of the bodies' tables */
    build_tables();
    build_tile_config();
    kivi_int8_block_vnni = k->kivi_int8_block;
    k->kivi_int8_block = kivi_int8_block_amx;
}
