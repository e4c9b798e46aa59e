/* test_cuda_formats.c — the formats the CUDA backend gained over the CPU
 * path: mixed-width KIVI keys (VQ_KEY_KIVI_MIX: device encoder and key
 * policy), QJL keys and CODEBOOK values in the cache (device norms and
 * scales), TurboQuant values with f16 scales (cache and vq_fused_sdpa), and
 * f16 TurboQuant key scales in vq_fused_sdpa.
 *
 * Cache: the same tokens appended the same way (a batch call, then uneven
 * chunks per sequence: 1, 5, 17, 53 ... tokens) to a CPU and a CUDA cache,
 * D 64 and 128, page 32, key groups of 16 / 32 tokens. Checks:
 *   - the saved cache files (every stream's bytes), sequences of whole pages
 *     (a saved page holds its unwritten rows too): identical where the
 *     device encoder is the CPU one's arithmetic step by step (mixed-width
 *     KIVI: min/max, widest-channel choice, f16 scale and zero, codes, the
 *     two row streams; the RMS of QJL norms and CODEBOOK scales), and at
 *     most one byte in 500 apart where a codec reduces in another order on
 *     the device (the QJL projection's signs, the Hadamard rotation);
 *   - sequences of 1, 33, 95 and 160 tokens, with and without a residual
 *     window: decode attends of all of them, paged and gathered, and a pool
 *     grown past its first chunk, against the CPU cache (in f32 arithmetic
 *     there); without a window, a causal prefill of 3 queries over the
 *     longest (the gathered kernels' contiguous group indexing);
 *   - the methods of the presets quality-4bit, balanced-3bit,
 *     compact-2.5bit, kivimix-turbo2 and qjl (groups of 128, pages of 128).
 * Mixed-width KIVI keys have two key policies on the device
 * (kivi_mix_runs.h): the run form (2/4 bits, whole 8-code chunks per width,
 * groups of whole 32-token tiles) and the general one. Each case names the
 * form it must reach, checked against the rule first, so that both forms
 * run: the run form at D 64 and 128, with rows read in 2-byte (D 64, 24 or
 * 8 wide of 64: 22- or 18-byte rows) and 4-byte loads, groups of one tile
 * (g 32, pages of 32) and of several tiles inside a page (g 64 in pages of
 * 64, g 128 in the presets'); the general form for other widths, a group
 * smaller than a tile (the tile straddles groups) and a wide count that
 * splits a chunk between the runs. Every sequence but the longest ends in a
 * group still filling (in the residual window).
 * vq_fused_sdpa: f16 scales against the same call on the CPU (the codes are
 * the same bytes on both sides), Skv 77 and 300, Sq 1 and 4 causal.
 *
 * Tolerance: as test_cuda_cache.c (out relative L2 1e-3, lse 1e-5; the
 * kernels differ in the order of f32 additions, a wrong group, width mask or
 * stream offset moves the output by O(0.1)). */
#include <stdlib.h>

#include "skip_without_cuda.h"
#ifdef VQ_TEST_HAVE_CUDA
#include "cache_test_util.h"
#include "cuda/kivi_mix_runs.h"
#include "cuda_test_util.h"
#include "formats/format_kivi_mix.h"

enum { HKV = 2, HQ = 6, PAGE = 32, NSEQ = 4, NMAX = 160 };

/* the longest is whole key groups, so that with no residual window all its
 * tokens are in pages and a causal prefill over it runs on CUDA */
static const int64_t lens[NSEQ] = {1, 33, 95, 160};
/* whole pages: a saved page holds its unwritten rows too, whatever the
 * allocation held, so the files are compared where every page is full */
static const int64_t lens_full[NSEQ] = {32, 64, 96, 160};

/* Appends every sequence's tokens (n[s] of sequence s): one in a batch
 * call, then chunks. */
static void fill(vq_ctx *ctx, vq_cache *c, const int64_t *ids, const int64_t *n, const ct_store *st,
                 const DLTensor *dk, const DLTensor *dv)
{
    ct_store ds = *st;
    if (dk) ds.k = (DLTensor *)dk, ds.v = (DLTensor *)dv;
    VT_OK(ctx, ct_append(c, 0, &ds, ids, 0, NSEQ, 0, 1));
    for (int s = 0; s < NSEQ; s++)
        for (int64_t t = 1, m = 1; t < n[s]; t += m, m = m * 3 + 2) {
            if (t + m > n[s]) m = n[s] - t;
            VT_OK(ctx, ct_append(c, 0, &ds, ids, s, 1, t, m));
        }
}

/* Bytes in which the files of two caches differ (-1: sizes differ). */
static int64_t file_diff(vq_ctx *cpu, vq_ctx *gpu, const vq_cache *a, const vq_cache *b, int64_t *total)
{
    size_t na = 0, nb = 0;
    VT_OK(cpu, vq_cache_save_buffer(a, -1, NULL, 0, &na));
    VT_OK(gpu, vq_cache_save_buffer(b, -1, NULL, 0, &nb));
    *total = (int64_t)na;
    if (na != nb) return -1;
    unsigned char *fa = malloc(na), *fb = malloc(nb);
    VT_OK(cpu, vq_cache_save_buffer(a, -1, fa, na, &na));
    VT_OK(gpu, vq_cache_save_buffer(b, -1, fb, nb, &nb));
    int64_t d = 0;
    for (size_t i = 0; i < na; i++) d += fa[i] != fb[i];
    free(fa), free(fb);
    return d;
}

/* A CPU and a CUDA cache of one layer config, filled alike. */
typedef struct pair {
    vq_cache *a, *b;
    int64_t ia[NSEQ], ib[NSEQ];
} pair;

/* Decode attends of all sequences (and a causal 3-query prefill over the
 * longest when there is no window), paged and gathered, on both caches;
 * the CPU in f32 arithmetic. */
static void attend(vq_ctx *cpu, vq_ctx *gpu, const pair *pr, int D, bool prefill, const char *what)
{
    vq_rng rng;
    vq_rng_seed(&rng, 77);
    const vq_cache_attend_opts f32 = {.key_scores = VQ_KEY_SCORES_F32, .value_accum = VQ_VALUE_ACCUM_F32};
    for (int gathered = 0; gathered < 2; gathered++) {
        if (gathered) setenv("VQ_CACHE_CUDA_GATHER", "1", 1);
        for (int pass = 0; pass < (prefill ? 2 : 1); pass++) {
            const int n = pass ? 1 : NSEQ, sq = pass ? 3 : 1;
            const int64_t *ja = pass ? &pr->ia[NSEQ - 1] : pr->ia, *jb = pass ? &pr->ib[NSEQ - 1] : pr->ib;
            DLTensor *q = vt_new(VT_F16, VT_DIMS(n, HQ, sq, D)), *oa = vt_new(VT_F32, VT_DIMS(n, HQ, sq, D));
            DLTensor *la = vt_new(VT_F32, VT_DIMS(n, HQ, sq)), *ob = vt_like(oa, VT_F32), *lb = vt_like(la, VT_F32);
            vt_fill_normal(q, &rng, 0, 1);
            DLTensor *dq = ct_upload(q), *dob = ct_upload(ob), *dlb = ct_upload(lb);
            ct_poison(dob), ct_poison(dlb);
            vq_cache_attend_opts oa_opts = f32, ob_opts = {.lse_out = dlb, .causal = pass == 1};
            oa_opts.lse_out = la;
            oa_opts.causal = pass == 1;
            VT_OK(cpu, vq_cache_attend(pr->a, 0, n, ja, q, oa, &oa_opts));
            VT_OK(gpu, vq_cache_attend(pr->b, 0, n, jb, dq, dob, &ob_opts));
            ct_download(dob, ob), ct_download(dlb, lb);
            const double eo = ct_rel_l2(ob, oa), el = ct_rel_l2(lb, la);
            VT_CHECK(eo <= 1e-3 && el <= 1e-5 && ct_count_nan(ob) == 0, "%s%s%s: CUDA vs CPU out %.3g, lse %.3g",
                     what, pass ? ", causal prefill" : "", gathered ? " (gathered)" : "", eo, el);
            ct_free(dq), ct_free(dob), ct_free(dlb);
            vt_free(q), vt_free(oa), vt_free(la), vt_free(ob), vt_free(lb);
        }
        unsetenv("VQ_CACHE_CUDA_GATHER");
    }
}

/* Makes the pair and appends n[s] tokens of sequence s to both (false: no
 * cache, the failure reported). */
static bool pair_fill(pair *pr, vq_ctx *cpu, vq_ctx *gpu, const vq_cache_layer_config *lc, int D, int P, int R,
                      int64_t capacity, const int64_t *n, const ct_store *st, const DLTensor *dk, const DLTensor *dv)
{
    pr->a = ct_cache(cpu, lc, 1, HKV, HQ, D, P, R, capacity, 4);
    pr->b = ct_cache(gpu, lc, 1, HKV, HQ, D, P, R, capacity, 4);
    if (pr->a == NULL || pr->b == NULL) {
        vq_cache_free(pr->a), vq_cache_free(pr->b);
        return false;
    }
    for (int s = 0; s < NSEQ; s++) {
        VT_OK(cpu, vq_cache_seq_add(pr->a, &pr->ia[s]));
        VT_OK(gpu, vq_cache_seq_add(pr->b, &pr->ib[s]));
    }
    fill(cpu, pr->a, pr->ia, n, st, NULL, NULL);
    fill(gpu, pr->b, pr->ib, n, st, dk, dv);
    return true;
}

/* One layer config at one D: the files of full pages without a window
 * (exact: identical; else at most one byte in 500 differs), then attention
 * with and without a window, over sequences of any length. */
static void compare(vq_ctx *cpu, vq_ctx *gpu, const char *name, const vq_cache_layer_config *lc, int D, int P,
                    bool exact, int64_t capacity, const ct_store *st, const DLTensor *dk, const DLTensor *dv)
{
    char what[128];
    pair pr;
    snprintf(what, sizeof what, "%s D%d P%d pool %lld", name, D, P, (long long)capacity);
    if (P == PAGE && pair_fill(&pr, cpu, gpu, lc, D, P, 0, capacity, lens_full, st, dk, dv)) {
        int64_t total = 0;
        const int64_t d = file_diff(cpu, gpu, pr.a, pr.b, &total);
        VT_CHECK(d >= 0 && (exact ? d == 0 : d * 500 <= total), "%s: the cache files differ in %lld of %lld bytes",
                 what, (long long)d, (long long)total);
        vq_cache_free(pr.a), vq_cache_free(pr.b);
    }
    for (int R = 0; R <= 8; R += 8) {
        if (!pair_fill(&pr, cpu, gpu, lc, D, P, R, capacity, lens, st, dk, dv)) continue;
        snprintf(what, sizeof what, "%s D%d P%d R%d pool %lld", name, D, P, R, (long long)capacity);
        attend(cpu, gpu, &pr, D, R == 0, what);
        vq_cache_free(pr.a), vq_cache_free(pr.b);
    }
}

/* Whether layer config lc's mixed-width keys at head dim D reach the form
 * the case names (runs: the run form), as kivi_mix_runs.h decides; true for
 * other key methods. */
static bool mix_form_is(const vq_cache_layer_config *lc, int D, bool runs, const char *name)
{
    const vq_key_config *k = &lc->keys;
    if (k->method != VQ_KEY_KIVI_MIX) return true;
    const bool got = vq_cu_kivi_mix_runs(D, vq_kivi_mix_wide_channels(k->wide_channels, D), k->bits, k->bits2,
                                         k->group_size ? k->group_size : 32);
    VT_CHECK(got == runs, "%s D%d: reaches the %s form of the mixed-width key policy, the case is for the %s one",
             name, D, got ? "run" : "general", runs ? "run" : "general");
    return got == runs;
}

static void test_cache_formats(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    vq_rng rng;
    vq_rng_seed(&rng, ct_seed());
    for (int D = 64; D <= 128; D += 64) {
        ct_store st = ct_store_new(NSEQ, HKV, NMAX, D, &rng);
        DLTensor *dk = ct_upload(st.k), *dv = ct_upload(st.v);
        const struct {
            const char *name;
            vq_cache_layer_config lc;
            bool exact;
            int page;
            bool runs; /* mixed-width keys: the run form of the key policy */
        } cases[] = {
            /* the presets' split: 24 of 64 channels at 4 bits, 2 elsewhere */
            {"kivimix 2/4 x f16",
             {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 32, .wide_channels = 24 * D / 64},
              {.method = VQ_VALUE_F16}},
             true, PAGE, true},
            /* odd widths: codes straddle bytes, rows end inside a byte */
            {"kivimix 3/5 x codebook",
             {{.method = VQ_KEY_KIVI_MIX, .bits = 3, .bits2 = 5, .group_size = 16, .wide_channels = 7},
              {.method = VQ_VALUE_CODEBOOK}},
             true, PAGE, false},
            {"kivimix 1/8 x turbo2 f16",
             {{.method = VQ_KEY_KIVI_MIX, .bits = 1, .bits2 = 8, .group_size = 32},
              {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true}},
             false, PAGE, false},
            {"f16 x turbo3 f16", {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_TURBO, .bits = 3, .scale_f16 = true}},
             false, PAGE, false},
            {"qjl x codebook", {{.method = VQ_KEY_QJL}, {.method = VQ_VALUE_CODEBOOK}}, false, PAGE, false},
            {"qjl m37 x kivi4", {{.method = VQ_KEY_QJL, .qjl_sketch = 37}, {.method = VQ_VALUE_KIVI, .bits = 4}}, false,
             PAGE, false},
            /* the run form over groups of two tiles (pages of one group): the
             * tile in a group's second half reads that group */
            {"kivimix 2/4 g64 x turbo2 f16",
             {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 64, .wide_channels = 32 * D / 64},
              {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true}},
             false, 64, true},
            /* the presets' widths where the run form does not apply: groups
             * of 16 (a tile straddles two groups), 20 wide (a chunk of both widths) */
            {"kivimix 2/4 g16 x turbo2 f16",
             {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 16, .wide_channels = 24 * D / 64},
              {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true}},
             false, PAGE, false},
            {"kivimix 2/4 wide 20 x kivi4",
             {{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 32, .wide_channels = 20},
              {.method = VQ_VALUE_KIVI, .bits = 4}},
             false, PAGE, false},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            if (mix_form_is(&cases[i].lc, D, cases[i].runs, cases[i].name))
                compare(cpu, gpu, cases[i].name, &cases[i].lc, D, cases[i].page, cases[i].exact, 32, &st, dk, dv);
        /* a pool grown past its first chunk: the gathered path (contiguous
         * group indexing), both forms of the mixed-width key policy */
        const int grown[] = {0, 4, 6, 7};
        for (int i = 0; i < 4; i++) {
            const int j = grown[i];
            compare(cpu, gpu, cases[j].name, &cases[j].lc, D, cases[j].page, cases[j].exact, 3, &st, dk, dv);
        }
        ct_free(dk), ct_free(dv);
        ct_store_free(&st);
    }
    /* the named presets' methods (their recipes' sinks, transforms and window
     * aside), key groups of 128 tokens in pages of 128 */
    const char *presets[] = {"quality-4bit", "balanced-3bit", "compact-2.5bit", "kivimix-turbo2", "qjl"};
    for (int i = 0; i < 5; i++) {
        vq_cache_layer_config lc;
        VT_OK(cpu, vq_cache_preset_layer_config(presets[i], 64, &lc));
        if (!mix_form_is(&lc, 64, true, presets[i])) continue;
        ct_store st = ct_store_new(NSEQ, HKV, NMAX, 64, &rng);
        DLTensor *dk = ct_upload(st.k), *dv = ct_upload(st.v);
        compare(cpu, gpu, presets[i], &lc, 64, 128, false, 8, &st, dk, dv);
        ct_free(dk), ct_free(dv);
        ct_store_free(&st);
    }
    vq_ctx_free(cpu), vq_ctx_free(gpu);
}

/* ---- vq_fused_sdpa with f16 TurboQuant scales ---- */

/* f32 scales [n] -> a new f16 tensor of the same shape. */
static DLTensor *to_f16(const DLTensor *s)
{
    DLTensor *h = vt_like(s, VT_F16);
    for (int64_t i = 0; i < vt_numel(s); i++) ((uint16_t *)h->data)[i] = vq_f32_to_f16(((const float *)s->data)[i]);
    return h;
}

static void sdpa_case(vq_ctx *cpu, vq_ctx *gpu, int D, int64_t skv, int64_t sq, int kind, vq_rng *rng)
{
    static const char *const kinds[] = {"f16 keys x turbo3 values, f16 scales", "turbo4 keys (f16 scales) x f16",
                                        "rvq 2+2 keys (f16 scale2) x turbo2 (f16 scales)"};
    DLTensor *q = vt_new(VT_F16, VT_DIMS(1, HQ, sq, D)), *k = vt_new(VT_F16, VT_DIMS(1, HKV, skv, D));
    DLTensor *v = vt_new(VT_F16, VT_DIMS(1, HKV, skv, D)), *out = vt_new(VT_F32, VT_DIMS(1, HQ, sq, D));
    DLTensor *diag = vt_new(VT_F32, VT_DIMS(D));
    vt_fill_normal(q, rng, 0, 1), vt_fill_keys(k, rng, 2, 4.0), vt_fill_normal(v, rng, 0, 1);
    for (int i = 0; i < D; i++) vt_set(diag, i, vq_rng_uniform(rng) < 0.5 ? -1.0 : 1.0);
    DLTensor *ki = vt_new(VT_U8, VT_DIMS(1, HKV, skv, D)), *ks = vt_new(VT_F32, VT_DIMS(1, HKV, skv));
    DLTensor *k2 = vt_new(VT_U8, VT_DIMS(1, HKV, skv, D)), *ks2 = vt_new(VT_F32, VT_DIMS(1, HKV, skv));
    DLTensor *vi = vt_new(VT_U8, VT_DIMS(1, HKV, skv, D)), *vs = vt_new(VT_F32, VT_DIMS(1, HKV, skv));
    vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16 = {k}};
    vq_encoded_values ev = vq_f16_values(v);
    DLTensor *ks16 = NULL, *ks216 = NULL, *vs16 = NULL;
    if (kind == 1) {
        VT_OK(cpu, vq_turboquant_hadamard_quantize(cpu, k, diag, 4, ki, ks, NULL));
        ks16 = to_f16(ks);
        ek = (vq_encoded_keys){.format = VQ_KEYS_TURBO, .turbo = {ki, ks16, diag, 4}};
    }
    if (kind == 2) {
        VT_OK(cpu, vq_turboquant_rvq_encode(cpu, k, diag, 2, 2, ki, ks, k2, ks2));
        ks216 = to_f16(ks2);
        ek = (vq_encoded_keys){.format = VQ_KEYS_TURBO_RVQ, .rvq = {ki, ks, k2, ks216, diag, 2, 2}};
    }
    if (kind != 1) {
        const int vb = kind == 0 ? 3 : 2;
        VT_OK(cpu, vq_turboquant_hadamard_quantize(cpu, v, diag, vb, vi, vs, NULL));
        vs16 = to_f16(vs);
        ev = (vq_encoded_values){.format = VQ_VALUES_TURBO};
        ev.turbo.idx = vi, ev.turbo.scale = vs16, ev.turbo.diag = diag, ev.turbo.bits = vb;
    }
    const float scale = 1.0f / sqrtf((float)D);
    const vq_attend_opts oc = {.causal = sq > 1, .key_scores = VQ_KEY_SCORES_F32, .value_accum = VQ_VALUE_ACCUM_F32};
    VT_OK(cpu, vq_fused_sdpa(cpu, q, &ek, &ev, scale, NULL, out, &oc));
    /* the same encoded tensors on the device */
    DLTensor *dq = ct_upload(q), *dk = ct_upload(k), *dv = ct_upload(v), *ddiag = ct_upload(diag);
    DLTensor *dki = ct_upload(ki), *dks = ct_upload(ks), *dk2 = ct_upload(k2), *dvi = ct_upload(vi);
    DLTensor *dks16 = ks16 ? ct_upload(ks16) : NULL, *dks216 = ks216 ? ct_upload(ks216) : NULL;
    DLTensor *dvs16 = vs16 ? ct_upload(vs16) : NULL, *dout = ct_upload(out), *hout = vt_like(out, VT_F32);
    vq_encoded_keys dek = {.format = VQ_KEYS_F16, .f16 = {dk}};
    vq_encoded_values dev = vq_f16_values(dv);
    if (kind == 1) dek = (vq_encoded_keys){.format = VQ_KEYS_TURBO, .turbo = {dki, dks16, ddiag, 4}};
    if (kind == 2) dek = (vq_encoded_keys){.format = VQ_KEYS_TURBO_RVQ, .rvq = {dki, dks, dk2, dks216, ddiag, 2, 2}};
    if (kind != 1) {
        dev = (vq_encoded_values){.format = VQ_VALUES_TURBO};
        dev.turbo.idx = dvi, dev.turbo.scale = dvs16, dev.turbo.diag = ddiag, dev.turbo.bits = ev.turbo.bits;
    }
    ct_poison(dout);
    const vq_attend_opts og = {.causal = sq > 1};
    VT_OK(gpu, vq_fused_sdpa(gpu, dq, &dek, &dev, scale, NULL, dout, &og));
    ct_download(dout, hout);
    const double e = ct_rel_l2(hout, out);
    VT_CHECK(e <= 1e-4 && ct_count_nan(hout) == 0, "vq_fused_sdpa %s, D %d, Skv %lld, Sq %lld: CUDA vs CPU %.3g",
             kinds[kind], D, (long long)skv, (long long)sq, e);
    ct_free(dq), ct_free(dk), ct_free(dv), ct_free(ddiag), ct_free(dki), ct_free(dks), ct_free(dk2), ct_free(dvi);
    ct_free(dks16), ct_free(dks216), ct_free(dvs16), ct_free(dout);
    vt_free(q), vt_free(k), vt_free(v), vt_free(out), vt_free(diag), vt_free(ki), vt_free(ks), vt_free(k2);
    vt_free(ks2), vt_free(vi), vt_free(vs), vt_free(hout);
    if (ks16) vt_free(ks16);
    if (ks216) vt_free(ks216);
    if (vs16) vt_free(vs16);
}

static void test_sdpa_f16_scales(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    vq_rng rng;
    vq_rng_seed(&rng, ct_seed() + 1);
    for (int D = 64; D <= 128; D += 64)
        for (int kind = 0; kind < 3; kind++) {
            sdpa_case(cpu, gpu, D, 77, 1, kind, &rng);
            sdpa_case(cpu, gpu, D, 300, 4, kind, &rng);
        }
    vq_ctx_free(cpu), vq_ctx_free(gpu);
}

int main(void)
{
    ct_require_device();
    VT_RUN(test_cache_formats);
    VT_RUN(test_sdpa_f16_scales);
    return vt_finish();
}
#endif
