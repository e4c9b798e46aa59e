/* test_attention_codebook_tile.c — the codebook look-up of every ISA
 * (attn_kernels.h, codebook_tile: the tile of codebook values, TurboQuant
 * keys and values decoded to floats, the 8-bit window's among them) against
 * a plain loop over the header's rule: out[j][c] = cents[min(idx, n_cents -
 * 1)] * vscale[j], bit for bit. Codebooks of 1 to 256 centroids (past 16 the
 * AVX-512 VBMI kernel's byte-plane look-ups, 8-bit codes that index past the
 * table clamped), nibble-packed and byte codes, head dims that are not a
 * multiple of 64, with and without scales, 1 to 40 tokens a call; the codes
 * end their buffer (ASan sees a read past it) and the output past the tile
 * stays untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "harness.h"

static void tile_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa);
    vq_rng rng;
    vq_rng_seed(&rng, 4242);
    static const int64_t dims[] = {8, 16, 24, 64, 72, 128, 200, 256};
    static const int ncs[] = {1, 3, 16, 17, 100, 255, 256};
    float cents[256], vs[40];
    for (int it = 0; it < 600; it++) {
        const int64_t D = dims[it % 8];
        const int nc = ncs[(it / 8) % 7], n = 1 + (int)(vq_rng_next(&rng) % 40);
        const bool packed = (it / 56) % 2 == 1, scaled = it % 3 != 0;
        const int64_t row = packed ? D / 2 : D, bytes = (int64_t)n * row;
        uint8_t *idx = malloc((size_t)bytes);
        float *out = malloc(sizeof(float) * (size_t)(n * D + 16)), *want = malloc(sizeof(float) * (size_t)(n * D));
        for (int i = 0; i < nc; i++) {
            /* the centroids' bit patterns matter, not their sizes: every byte of them varies */
            const uint32_t u = (uint32_t)vq_rng_next(&rng);
            memcpy(&cents[i], &u, 4);
            if (isnan(cents[i]) || i % 5 == 0) cents[i] = (float)vq_rng_normal(&rng);
        }
        for (int j = 0; j < n; j++) vs[j] = it % 7 == 3 && j == 1 ? -0.0f : (float)vq_rng_normal(&rng);
        for (int64_t i = 0; i < bytes; i++) idx[i] = (uint8_t)vq_rng_next(&rng);
        for (int64_t i = 0; i < n * D + 16; i++) out[i] = NAN;
        for (int j = 0; j < n; j++)
            for (int64_t c = 0; c < D; c++)
                want[j * D + c] = cents[vq_attn_cb_index(idx, packed, D, j, c, nc)] * (scaled ? vs[j] : 1.0f);
        k->codebook_tile(n, D, packed, idx, cents, nc, scaled ? vs : NULL, out);
        int64_t bad = 0;
        for (int64_t i = 0; i < n * D; i++) bad += memcmp(&out[i], &want[i], 4) != 0;
        for (int64_t i = n * D; i < n * D + 16; i++) bad += !isnan(out[i]);
        VT_CHECK(bad == 0, "%s codebook_tile n %d D %lld %s %d centroids%s: %lld floats differ", isa, n, (long long)D,
                 packed ? "packed" : "bytes", nc, scaled ? " scaled" : "", (long long)bad);
        free(idx), free(out), free(want);
    }
}

static void test_codebook_tile(void) { vt_for_each_isa(1, tile_on); }

int main(void)
{
    VT_RUN(test_codebook_tile);
    return vt_finish();
}
