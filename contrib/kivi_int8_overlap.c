/* kivi_int8_overlap.c — does the AVX2 fused KIVI block (attn_kivi_int8_avx2.c) lose
 * time to latency between its steps? Its operations in another order, bit
 * for bit the fused kernel's results (checked here), timed against the
 * kernel's order, and the p.V step's parts alone: R = 4 rows (Hkv 8), D =
 * 128, f16 scales, runs of 64 blocks in cache, one thread, TSC ticks per
 * 32-token block (least of 60 alternated passes). The numbers of
 * docs/PERFORMANCE.md, finding 4 (Zen 1).
 *
 * "pipelined" puts block i's latency-bound steps beside block i + 1's
 * throughput-bound ones: the softmax step of i, then i's p.V weights row by
 * row, each followed by a quarter of i + 1's score tiles; i's p.V passes
 * with the query rounding of i + 2 between their halves; i's output. Where
 * the kernel waited on chains (a row's 16 dependent FMAs of its zero sum, the
 * divisions, the reductions), the other block's work would fill the wait.
 *
 * Internal headers, built with the library's AVX2 flags; link the static
 * library (vq_f32_to_f16):
 *
 *   ninja -C build veloxquant_static
 *   gcc -O3 -mavx2 -mfma -mf16c -Isrc -Iinclude contrib/kivi_int8_overlap.c build/libveloxquant.a -lm -lpthread -o kivi_int8_overlap
 *   ./kivi_int8_overlap */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <x86intrin.h>

#include "cpu/avx2/attn_pv8_avx2.h"
#include "cpu/avx2/attn_q8_avx2.h"
#include "cpu/avx2/attn_softmax_avx2.h"
#include "veloxquant.h"
#include "kivi_int8_data.h"

enum { NB = NBLK, N = 32, R = 4, D = 128 };

/* The fused kernel's order (kivi_int8_rows_as, R 4, f16 scales). */
__attribute__((noinline)) static void run_fused_order(const float *q, float *o, float *m, float *d, bool *bad)
{
    for (int j = 0; j < NB; j++) {
        _Alignas(32) float s[R][N], alpha[R];
        _Alignas(32) int8_t xq[R * D];
        float dz[2 * R];
        pv8_avx2_block vb;
        pv8_prep_block(N, vc[j], 32, vs[j], vz[j], true, R, &vb);
        q8_rows4_avx2(R, D, 2, q, D, ks[j], kz[j], true, xq, dz);
        qk8_rows(2, R, N, D, kc[j], 32, xq, dz, s[0], N);
        poison_rows_avx2(R, N, s[0], N, bad);
        softmax_rows_avx2(R, N, s[0], N, m, d, alpha);
        rescale_rows_avx2(R, D, o, D, alpha);
        pv8_rows(R, true, N, &vb, s[0], N, o, D);
    }
}

/* Score tiles of tokens j0 .. j1 - 1 (qk8_rows' tiles at R 4: two tokens). */
static inline void score_tiles(const uint8_t *codes, const int8_t *xq, const float *dz, float *s, int j0, int j1)
{
    for (int j = j0; j < j1; j += 2) qk8_tile(2, R, 2, D, codes + j * 32, 32, xq, dz, s + j, N);
}

/* The same operations, blocks overlapped (the file's comment). */
__attribute__((noinline)) static void run_pipelined(const float *q, float *o, float *m, float *d, bool *bad)
{
    _Alignas(32) float s[2][R][N], alpha[R];
    _Alignas(32) int8_t xq[2][R * D];
    float dz[2][2 * R];
    _Alignas(32) uint8_t W[R][8][2][32];
    _Alignas(32) int32_t I[R][4][4][8];
    __m128 step[R], zs[R];
    pv8_avx2_block vb;
    uint8_t (*const Wr[R])[2][32] = {W[0], W[1], W[2], W[3]};
    q8_rows4_avx2(R, D, 2, q, D, ks[0], kz[0], true, xq[0], dz[0]);
    score_tiles(kc[0], xq[0], dz[0], s[0][0], 0, N);
    q8_rows4_avx2(R, D, 2, q, D, ks[1], kz[1], true, xq[1], dz[1]);
    for (int i = 0; i < NB; i++) {
        const int c = i & 1, n = c ^ 1;
        float *p = s[c][0];
        poison_rows_avx2(R, N, p, N, bad);
        softmax_rows_avx2(R, N, p, N, m, d, alpha);
        rescale_rows_avx2(R, D, o, D, alpha);
        pv8_prep_block(N, vc[i], 32, vs[i], vz[i], true, R, &vb);
        for (int r = 0; r < R; r++) {
            pv8_prep_row(true, N, &vb, p + r * N, W[r], &step[r], &zs[r]);
            if (i + 1 < NB) score_tiles(kc[i + 1], xq[n], dz[n], s[n][0], 8 * r, 8 * r + 8);
        }
        for (int x = 0; x < 4; x++) {
            if (x == 2 && i + 2 < NB) q8_rows4_avx2(R, D, 2, q, D, ks[i + 2], kz[i + 2], true, xq[c], dz[c]);
            pv8_pass(R, x, 0, 2, &vb, Wr, I);
            pv8_pass(R, x, 2, 2, &vb, Wr, I);
        }
        for (int r = 0; r < R; r++) pv8_out((const int32_t(*)[4][8])I[r], step[r], zs[r], o + r * D);
    }
}

static pv8_avx2_block part_block;
static uint8_t part_W[R][8][2][32];
static int32_t part_I[R][4][4][8];
static __m128 part_step[R], part_zs[R];
static float part_p[NB][R][N], part_o[R][D];

__attribute__((noinline)) static void part_prep_block(int j)
{
    pv8_prep_block(N, vc[j], 32, vs[j], vz[j], true, R, &part_block);
}
__attribute__((noinline)) static void part_weights(int j)
{
    for (int r = 0; r < R; r++) pv8_prep_row(true, N, &part_block, part_p[j][r], part_W[r], &part_step[r], &part_zs[r]);
}
__attribute__((noinline)) static void part_passes(void)
{
    uint8_t (*const Wr[R])[2][32] = {part_W[0], part_W[1], part_W[2], part_W[3]};
    for (int x = 0; x < 4; x++) {
        pv8_pass(R, x, 0, 2, &part_block, Wr, part_I);
        pv8_pass(R, x, 2, 2, &part_block, Wr, part_I);
    }
}
__attribute__((noinline)) static void part_out(void)
{
    for (int r = 0; r < R; r++) pv8_out((const int32_t(*)[4][8])part_I[r], part_step[r], part_zs[r], part_o[r]);
}

static void reset(float *o, float *m, float *d)
{
    memset(o, 0, sizeof(float) * R * D);
    for (int r = 0; r < R; r++) {
        m[r] = -INFINITY;
        d[r] = 0.0f;
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        printf("usage: kivi_int8_overlap   (no options: the file's comment says what it times)\n");
        return strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ? 0 : 2;
    }
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
        fprintf(stderr, "kivi_int8_overlap: needs AVX2, FMA and F16C\n");
        return 1;
    }
    make_blocks();
    for (int b = 0; b < NB; b++)
        for (int r = 0; r < R; r++)
            for (int t = 0; t < N; t++) part_p[b][r][t] = fabsf(uniform()) / N;
    static float q[R * D], o[2][R * D];
    float m[2][R], d[2][R];
    bool bad[2][R] = {{false}};
    for (int i = 0; i < R * D; i++) q[i] = 0.1f * uniform();
    for (int v = 0; v < 2; v++) reset(o[v], m[v], d[v]);
    run_fused_order(q, o[0], m[0], d[0], bad[0]);
    run_pipelined(q, o[1], m[1], d[1], bad[1]);
    const bool same = !memcmp(o[0], o[1], sizeof o[0]) && !memcmp(m[0], m[1], sizeof m[0]) && !memcmp(d[0], d[1], sizeof d[0]);
    if (!same) {
        fprintf(stderr, "kivi_int8_overlap: the pipelined order changed the results\n");
        return 1;
    }
    enum { NV = 6 };
    static const char *name[NV] = {"fused order", "pipelined", "p.V: code interleave", "p.V: weights, 4 rows",
                                   "p.V: 8 multiply passes", "p.V: output, 4 rows"};
    unsigned long long best[NV];
    for (int v = 0; v < NV; v++) best[v] = ~0ull;
    for (int rep = 0; rep < 60; rep++)
        for (int v = 0; v < NV; v++) {
            reset(o[0], m[0], d[0]);
            const unsigned long long t0 = __rdtsc();
            if (v == 0) run_fused_order(q, o[0], m[0], d[0], bad[0]);
            else if (v == 1) run_pipelined(q, o[0], m[0], d[0], bad[0]);
            else
                for (int j = 0; j < NB; j++) switch (v) {
                    case 2: part_prep_block(j); break;
                    case 3: part_weights(j); break;
                    case 4: part_passes(); break;
                    default: part_out(); break;
                    }
            const unsigned long long t = __rdtsc() - t0;
            best[v] = t < best[v] ? t : best[v];
        }
    printf("AVX2 KIVI block, R %d, D %d, runs of %d blocks in cache: TSC ticks per block (least of 60 passes); "
           "pipelined: bit for bit the fused order's results\n", R, D, NB);
    for (int v = 0; v < NV; v++) printf("  %-32s %7.0f\n", name[v], (double)best[v] / NB);
    return 0;
}
