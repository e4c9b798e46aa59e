/* test_attention_kivi_turbo.c — the fused block of KIVI keys (mixed-width
 * of 8 or 24 wide channels, or 4-bit) and 2- or 3-bit TurboQuant values at
 * D = 64 (attn_kernels.h, kivi_turbo_block; the presets balanced-3bit,
 * compact-2.5bit and quality-4bit on SmolLM2-sized heads): on every ISA
 * that has it, the kernel against the
 * same ISA's sequence of separate kernels bit for bit and against a
 * float64 reference of the block in plain loops within the integer p.V's
 * rounding; through the cache, the fused path, one fused call per block
 * and the separate kernels give the same bytes on every ISA for 1-4 rows
 * per kv head, blocks across key groups and partial ones. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_kernels.h"
#include "formats/lloyd_max.h"
#include "harness.h"
#include "veloxquant.h"

enum { BN = 32, D = 64, KROW = 32 };

/* A normal float, or now and then one of the awkward ones (special: also
 * NaN, SNaN and +-inf). */
static float odd_float(vq_rng *rng, bool special)
{
    const uint64_t u = vq_rng_next(rng) % 64;
    const float x = (float)vq_rng_normal(rng);
    if (u == 0) return 0.0f;
    if (u == 1) return x * 1e-38f;
    if (!special || u > 5) return x;
    return u == 2 ? NAN : u == 3 ? __builtin_nansf("") : u == 4 ? INFINITY : -INFINITY;
}

/* Bytes of a mixed-width row of nw wide channels. */
static int mix_row(int nw) { return nw / 2 + (D - nw) / 4; }

/* A random group order: sidx[s] = the kivi_q8 byte of stream code s's
 * channel (nw random wide channels ascending, then the narrow ones). */
static void random_order(vq_rng *rng, int nw, uint8_t *sidx)
{
    bool wide[D] = {false};
    for (int n = 0; n < nw;) {
        const int c = (int)(vq_rng_next(rng) % D);
        if (!wide[c]) wide[c] = true, n++;
    }
    for (int c = 0, w = 0, nn = nw; c < D; c++) sidx[wide[c] ? w++ : nn++] = (uint8_t)vq_attn_q8_pos(c, 4, D);
}

/* Code of stream index s in a mixed-width key row of nw wide channels (nw
 * nibbles, then 2-bit codes), or of channel s in a 4-bit one (nw = 0). */
static int key_code(const uint8_t *row, int nw, int s)
{
    if (!nw || s < nw) return row[s / 2] >> (4 * (s % 2)) & 15;
    const int i = s - nw;
    return row[nw / 2 + i / 4] >> (2 * (i % 4)) & 3;
}

/* Code c of a value row of vbits-bit codes. */
static int value_code(const uint8_t *row, int vbits, int c)
{
    const int bit = vbits * c;
    return ((row[bit / 8] | (bit / 8 + 1 < 8 * vbits ? row[bit / 8 + 1] << 8 : 0)) >> (bit % 8)) & ((1 << vbits) - 1);
}

/* The block in float64 (finite inputs, m = -inf, d = 0, o = 0 before):
 * scores step * sum_s xq(s) code(s) + zero term, their softmax, and o =
 * sum_j p_j scale_j cent(code(j, c)) with the rounded centroids. */
static void reference(int R, const vq_attn_kivi_turbo_block *b, const float *vs, double *o, double *wmax)
{
    const bool mix = b->sidx != NULL;
    const int krow = mix ? mix_row(b->nw) : KROW, vrow = 8 * b->vbits;
    for (int r = 0; r < R; r++) {
        double s[BN], mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < BN; j++) {
            long long dot = 0;
            for (int i = 0; i < D; i++)
                dot += (long long)b->xc[r * D + (mix ? b->sidx[i] : vq_attn_q8_pos(i, 4, D))] *
                       key_code(b->kcodes + j * krow, mix ? b->nw : 0, i);
            s[j] = (double)b->dz[2 * r] * (double)dot + (double)b->dz[2 * r + 1];
            mx = s[j] > mx ? s[j] : mx;
        }
        for (int j = 0; j < BN; j++) sum += s[j] = exp(s[j] - mx);
        wmax[r] = 0.0;
        for (int j = 0; j < BN; j++) { /* not fmax: GCC 12's aarch64 vectoriser fails on that reduction */
            const double w = fabs(s[j] / sum * vs[j]);
            if (w > wmax[r]) wmax[r] = w;
        }
        for (int c = 0; c < D; c++) {
            double acc = 0.0;
            for (int j = 0; j < BN; j++)
                acc += s[j] * vs[j] * b->cq[value_code(b->vidx + j * vrow, b->vbits, c)] * (double)b->cstep;
            o[r * D + c] = acc / sum; /* normalised: the kernel's o / d */
        }
    }
}

static void block_on(vq_ctx *ctx, const char *isa)
{
    const vq_attn_kernels *k = vq_attn_kernels_for(ctx->isa);
    if (k->kivi_turbo_block == NULL) return;
    vq_rng rng;
    vq_rng_seed(&rng, 2718);
    int8_t cq[2][16], xc[4 * D], xq[4 * D];
    float cstep[2] = {0.0f, 0.0f};
    for (int vb = 2; vb <= 3; vb++)
        VT_CHECK(vq_attn_cb8_round(vq_lloyd_max_centroids(vb), 1 << vb, cq[vb - 2], &cstep[vb - 2]), "centroids");
    uint8_t sidx[D], nib[BN * D / 2 + 32], vnib[BN * D / 2 + 32];
    _Alignas(64) int8_t xk[4][128];
    int8_t junk[4 * D];
    memset(junk, 99, sizeof junk);
    uint16_t vs16[BN];
    float dz[8], vs[BN], s[4 * BN], w[4 * BN], alpha[4], o[2][4 * D], m[2][4], d[2][4];
    bool bad[2][4];
    for (int it = 0; it < 800; it++) {
        const int R = 1 + it % 4, vbits = 2 + (it / 4) % 2;
        const bool mix = (it / 8) % 3 != 0, special = it % 5 == 0, plain = it % 3 == 1; /* plain: the float64 check */
        const int nw = (it / 8) % 3 == 1 ? 24 : 8, krow = mix ? mix_row(nw) : KROW, vrow = 8 * vbits;
        /* the rows end their buffers: a read past them is an ASan error */
        uint8_t *kc = malloc((size_t)(BN * krow)), *vc = malloc((size_t)(BN * vrow));
        for (int i = 0; i < BN * krow; i++) kc[i] = (uint8_t)vq_rng_next(&rng);
        for (int i = 0; i < BN * vrow; i++) vc[i] = (uint8_t)vq_rng_next(&rng);
        for (int i = 0; i < R * D; i++) xc[i] = (int8_t)((int)(vq_rng_next(&rng) % 255) - 127);
        if (it < 16 && it % 4 == 2) memset(xc, 127, sizeof xc); /* the extremes */
        random_order(&rng, nw, sidx);
        for (int r = 0; r < R; r++) {
            dz[2 * r] = plain ? 0.01f * (float)(1 + vq_rng_next(&rng) % 8) : odd_float(&rng, special) * 0.01f;
            dz[2 * r + 1] = plain ? (float)vq_rng_normal(&rng) : odd_float(&rng, special);
        }
        for (int j = 0; j < BN; j++) {
            /* TurboQuant scales are norms; a negative one takes the kernels' int8 weights */
            const float x = plain ? fabsf((float)vq_rng_normal(&rng)) : odd_float(&rng, special);
            vs16[j] = vq_f32_to_f16(it % 7 == 3 ? x : fabsf(x));
        }
        k->cvt_f16(BN, vs16, vs);
        vt_init_block_state(&rng, plain ? 0 : it, R, D, bad, m, d, o[0], o[1]);
        if (plain) {
            memset(o, 0, sizeof o);
            for (int r = 0; r < R; r++) bad[0][r] = bad[1][r] = false;
        }
        vq_attn_kivi_turbo_block b = {.kcodes = kc, .nw = mix ? nw : 0, .xc = xc, .sidx = mix ? sidx : NULL, .dz = dz,
                                      .xk = &xk[0][0], .xk_ready = false, .vidx = vc, .vbits = vbits,
                                      .vscale = vs16, .cq = cq[vbits - 2], .cstep = cstep[vbits - 2]};
        if (mix && it % 2 == 1) {
            /* a later block of the group: the rows in the kernel's order from the first block's
             * call (on a copy of the state), then xc unreadable garbage the kernel must not use */
            float o2[4 * D], m2[4], d2[4];
            bool bad2[4];
            memcpy(o2, o[0], sizeof o2), memcpy(m2, m[0], sizeof m2), memcpy(d2, d[0], sizeof d2);
            memcpy(bad2, bad[0], sizeof bad2);
            k->kivi_turbo_block(R, &b, o2, D, m2, d2, bad2);
            b.xc = junk, b.xk_ready = true;
        }
        k->kivi_turbo_block(R, &b, o[0], D, m[0], d[0], bad[0]);
        b.xc = xc;
        /* the sequence: nibble rows of both, kivi_qk8, the softmax step, codebook_pv8_64 */
        const uint8_t *krows = kc;
        memcpy(xq, xc, sizeof xq);
        if (mix) {
            for (int r = 0; r < R; r++)
                for (int i = 0; i < D / 2; i++) {
                    xq[r * D + i] = xc[r * D + sidx[2 * i]];
                    xq[r * D + D / 2 + i] = xc[r * D + sidx[2 * i + 1]];
                }
            k->mix_nibbles(BN, kc, krow, nw / 2, (D - nw) / 4, nib);
            krows = nib;
        }
        k->kivi_qk8(R, BN, D, 4, krows, D / 2, xq, dz, s, BN);
        vt_softmax_step(k, R, BN, s, BN, bad[1], m[1], d[1], alpha, o[1], D);
        for (int r = 0; r < R; r++)
            for (int j = 0; j < BN; j++) w[r * BN + j] = s[r * BN + j] * vs[j];
        if (vbits == 2) k->mix_nibbles(1, vc, BN * vrow, 0, BN * vrow, vnib);
        else k->nibbles3(BN / 2, vc, 2 * vrow, vnib); /* pairs of rows: 48 bytes of 128 codes */
        k->codebook_pv8_64(R, BN, vnib, D / 2, cq[vbits - 2], cstep[vbits - 2], w, BN, o[1], D);
        vt_check_block_state(isa, !mix ? "kivi_turbo 4-bit" : nw == 8 ? "kivi_turbo mix 8" : "kivi_turbo mix 24", it, R, 1, D, bad, m, d, o[0], o[1]);
        if (plain) {
            double ref[4 * D], wmax[4];
            reference(R, &b, vs, ref, wmax);
            for (int r = 0; r < R; r++)
                for (int c = 0; c < D; c++) {
                    /* each weight rounds to within half a step of amax / 127 (of p_j scale_j / d
                     * after normalising), times a centroid of at most 127 cstep; 32 of them, plus f32 */
                    const double got = o[0][r * D + c] / d[0][r];
                    const double tol = BN * 0.5 * wmax[r] / 127.0 * 127.0 * cstep[vbits - 2];
                    VT_CHECK(fabs(got - ref[r * D + c]) <= tol + 1e-5 * (1.0 + fabs(ref[r * D + c])),
                             "%s kivi_turbo it %d R %d o[%d][%d]: %g, float64 %g (bound %g)", isa, it, R, r, c, got,
                             ref[r * D + c], tol);
                }
        }
        free(kc), free(vc);
    }
}

static void test_kivi_turbo_block(void) { vt_for_each_isa(1, block_on); }

/* Through the cache: balanced-3bit and compact-2.5bit (mixed-width keys
 * of 24 and 8 wide channels, 2-bit TurboQuant values) and quality-4bit
 * (4-bit keys, 3-bit values), with their sinks and windows, at D = 64, one decode query per head: the fused path
 * against one fused call per block and the separate kernels, bytes equal;
 * 1-4 query heads per kv head, lengths below a block, across key groups
 * and pages. */
static void cache_paths_on(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 3141);
    static const int shapes[][2] = {{1, 20}, {2, 100}, {3, 300}, {4, 700}, {3, 1000}};
    static const char *presets[3] = {"balanced-3bit", "quality-4bit", "compact-2.5bit"};
    static const char *env[3] = {NULL, "VQ_ATTN_ONE_BLOCK", "VQ_ATTN_UNFUSED"};
    for (size_t si = 0; si < 3 * sizeof shapes / sizeof shapes[0]; si++) {
        const int G = shapes[si / 3][0], T = shapes[si / 3][1], HKV = 2, HQ = HKV * G;
        const char *preset = presets[si % 3];
        const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D,
                                     .preset = preset, .capacity_pages = 16, .grow_pages = 16};
        DLTensor *kk = vt_new(VT_F32, VT_DIMS(1, HKV, T, D)), *vv = vt_new(VT_F32, VT_DIMS(1, HKV, T, D));
        DLTensor *q = vt_new(VT_F32, VT_DIMS(1, HQ, 1, D));
        DLTensor *qfit = vt_new(VT_F32, VT_DIMS(1, HQ, T, D)); /* the smoothing's key scales */
        for (int64_t i = 0; i < vt_numel(kk); i++) {
            vt_set(kk, i, vq_rng_normal(&rng) + 0.3 * (double)(i % D) / D);
            vt_set(vv, i, vq_rng_normal(&rng));
        }
        for (int64_t i = 0; i < vt_numel(qfit); i++) vt_set(qfit, i, vq_rng_normal(&rng));
        for (int64_t i = 0; i < vt_numel(q); i++) vt_set(q, i, vq_rng_normal(&rng));
        DLTensor *out[3];
        for (int e = 0; e < 3; e++) { /* a cache each: the values read VQ_ATTN_UNFUSED when they bind */
            vq_cache *c;
            int64_t seq;
            VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
            VT_OK(ctx, vq_cache_seq_add(c, &seq));
            VT_OK(ctx, vq_cache_fit_transforms(c, 0, 1, &seq, kk, vv, qfit));
            VT_OK(ctx, vq_cache_append(c, 0, 1, &seq, kk, vv, NULL));
            out[e] = vt_new(VT_F32, VT_DIMS(1, HQ, 1, D));
            if (env[e]) setenv(env[e], "1", 1);
            VT_OK(ctx, vq_cache_attend(c, 0, 1, &seq, q, out[e], NULL));
            if (env[e]) unsetenv(env[e]);
            vq_cache_free(c);
        }
        for (int e = 1; e < 3; e++)
            VT_CHECK(memcmp(out[0]->data, out[e]->data, vt_bytes(out[0])) == 0, "%s %s G %d T %d: fused and %s differ",
                     isa, preset, G, T, env[e]);
        for (int e = 0; e < 3; e++) vt_free(out[e]);
        vt_free(kk), vt_free(vv), vt_free(q), vt_free(qfit);
    }
}

static void test_kivi_turbo_cache_paths(void) { vt_for_each_isa(2, cache_paths_on); }

int main(void)
{
    VT_RUN(test_kivi_turbo_block);
    VT_RUN(test_kivi_turbo_cache_paths);
    return vt_finish();
}
