/* attn_pv8_avx2.c — AVX2 integer p.V for 2-bit KIVI values at D = 128,
 * g = 32 (attn_kernels.h, kivi_pv8; the body: attn_pv8_avx2.h).
 *
 * Per row and block the weights w_j = p_j * vs[j][g] of each channel group
 * are rounded to int8 against step = max_j |w_j| / 127 with the f32
 * operations of the scalar definition, so the integer sums are the scalar
 * kernel's exactly and the outputs agree to f32 rounding (the zero sum
 * sum_j p_j vz[j][g] is kept in f32, in another order).
 *
 * Shared by all rows of a block: the codes of each 4-token quad interleaved
 * by two rounds of unpacks (vpunpck{l,h}bw then {l,h}wd: a dword = one code
 * byte of the 4 tokens), 1 KB in L1. Per row: w = p * vs in the cache's
 * [token][group] order (two tokens per register), the group maxima, the
 * int8 weights packed to [token][group] and, per quad, two weight registers
 * by one vpshufb each (lane 0: group 0 or 1, lane 1: group 2 or 3, the
 * quad's 4 weights in every dword). The product: per quad and code set,
 * planes 0 and 1 masked in place (code and 4 x code), 2 and 3 after one
 * 16-bit shift by 4, one vpmaddubsw per plane and row (u8 code x s8 weight,
 * token pairs summed to i16) and a vpaddw: an i16 lane sums 8 quads' pairs,
 * at most 8 * 2 * 12 * 127 = 24384 (the _Static_assert in the header). Once
 * per block and row: vpmaddwd by ones (the lane's two token pairs: exact
 * i32), planes 1 and 3 shifted right by 2 (exact), then
 * o += step * isum + zs in vq_attn_pv8_pos order (the format's finish()
 * puts channels back once per row). Passes over the code sets keep at most
 * 8 accumulators (16 ymm registers): one code set x 4 planes for 1-2 rows,
 * x 2 planes for 3-4. */
#include <immintrin.h>

#include "attention/attn_kernels.h"
#include "cpu/avx2/attn_pv8_avx2.h"

static void kivi_pv8_avx2(int R, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                            const float *p, int64_t ldp, float *o, int64_t ldo)
{
    if (n == 32) pv8_all(true, R, 32, codes, ldc, vs, vz, p, ldp, o, ldo);
    else pv8_all(false, R, n, codes, ldc, vs, vz, p, ldp, o, ldo);
}

void vq_attn_kernels_init_avx2_pv8(vq_attn_kernels *k)
{
    k->kivi_pv8 = kivi_pv8_avx2;
    k->pv8_fast = true; /* AUTO takes it: faster than the f32 p.V (bench/results/cpu.md, AVX2 section) */
}
