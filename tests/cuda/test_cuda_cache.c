/* test_cuda_cache.c — the KV cache on a CUDA ctx against the same cache on
 * the CPU (itself tested against float64 references in test_cache.c): the
 * same tokens appended the same way (a batch call, then per sequence in
 * uneven chunks, sequences of 1, 7, 97 and 300 tokens across pages and KIVI
 * groups, with and without a residual window), then decode attends of all
 * sequences in one call, with the log-sum-exp. Every method the CUDA cache
 * runs; the ones it does not run yet must say so (VQ_ERR_UNSUPPORTED).
 * Both CUDA decode paths (cache_cuda.c): the paged kernels (the default for
 * a pool of one chunk), the gathered path (forced by VQ_CACHE_CUDA_GATHER=1,
 * and taken by a pool grown past its first chunk); and a batch of more
 * sequences than one paged launch serves (VQ_CU_PAGED_MAX_B). The quality
 * recipe (test_cuda_recipe, below): sink tokens, the exact transforms and
 * the TurboQuant residual windows, alone and together, and the presets
 * named by what they buy. Sliding windows (test_cuda_sliding, at the end).
 *
 * Tolerance. The codecs on both backends give the same codes except where a
 * value sits within f32 rounding of a decision boundary (docs/FORMATS.md §1), so a few
 * codes may differ by one level; the attention kernels differ in the order
 * of f32 additions. A code one level off moves a score by at most the
 * level spacing times |q_c| scale, on one token in thousands: the output
 * moves by far less than 1e-3 relative, while a wrong page, token order,
 * window or merge moves it by O(0.1). */
#include <stdlib.h>
#include <string.h>

#include "skip_without_cuda.h"
#ifdef VQ_TEST_HAVE_CUDA
#include "cache_test_util.h"
#include "cuda_test_util.h"

enum { HKV = 2, HQ = 8, DIM = 128, PAGE = 64, NSEQ = 4, NMAX = 300, NMANY = 21 };

/* A batch of sequences and the pool that holds them. */
typedef struct batch {
    int n;
    const int64_t *lens;
    int64_t capacity, grow; /* pages */
    int page;               /* tokens per page */
} batch;

static const int64_t lens4[NSEQ] = {1, 7, 97, 300};

/* Appends the store's tokens to layer 0 of c: one token per sequence in one
 * call, then the rest per sequence in chunks of 1, 5, 16, 41, ... The store
 * is host memory; dev (when not NULL) is its device copy, sliced the same. */
static void fill(vq_ctx *ctx, vq_cache *c, const int64_t *ids, const batch *bt, const ct_store *st,
                 const DLTensor *dk, const DLTensor *dv)
{
    ct_store ds = *st;
    if (dk) ds.k = (DLTensor *)dk, ds.v = (DLTensor *)dv;
    VT_OK(ctx, ct_append(c, 0, &ds, ids, 0, bt->n, 0, 1));
    for (int s = 0; s < bt->n; s++)
        for (int64_t t = 1, m = 1; t < bt->lens[s]; t += m, m = m * 3 + 2) {
            if (t + m > bt->lens[s]) m = bt->lens[s] - t;
            VT_OK(ctx, ct_append(c, 0, &ds, ids, s, 1, t, m));
        }
}

static void compare(vq_ctx *cpu, vq_ctx *gpu, const char *name, const vq_cache_layer_config *lc, int R,
                    const batch *bt, const ct_store *st, const DLTensor *dk, const DLTensor *dv)
{
    vq_cache *a = ct_cache_seqs(cpu, lc, 1, HKV, HQ, DIM, bt->page, R, bt->capacity, bt->grow, NMANY + 1);
    vq_cache *b = ct_cache_seqs(gpu, lc, 1, HKV, HQ, DIM, bt->page, R, bt->capacity, bt->grow, NMANY + 1);
    if (a == NULL || b == NULL) {
        vq_cache_free(a), vq_cache_free(b);
        return;
    }
    const int n = bt->n;
    int64_t ia[NMANY], ib[NMANY];
    for (int s = 0; s < n; s++) {
        VT_OK(cpu, vq_cache_seq_add(a, &ia[s]));
        VT_OK(gpu, vq_cache_seq_add(b, &ib[s]));
    }
    fill(cpu, a, ia, bt, st, NULL, NULL);
    fill(gpu, b, ib, bt, st, dk, dv);
    vq_rng rng;
    vq_rng_seed(&rng, 31);
    DLTensor *q = vt_new(VT_F16, VT_DIMS(n, HQ, 1, DIM)), *oa = vt_new(VT_F32, VT_DIMS(n, HQ, 1, DIM));
    DLTensor *la = vt_new(VT_F32, VT_DIMS(n, HQ, 1)), *ob = vt_like(oa, VT_F32), *lb = vt_like(la, VT_F32);
    vt_fill_normal(q, &rng, 0, 1);
    DLTensor *dq = ct_upload(q), *dob = ct_upload(ob), *dlb = ct_upload(lb);
    ct_poison(dob), ct_poison(dlb);
    /* The CPU side in f32 arithmetic: its integer KIVI/TurboQuant paths
     * (AUTO) quantize the query to int8, a relative error near 1e-3 that the
     * CUDA kernels, f32 throughout, do not have. */
    const vq_cache_attend_opts oa_opts = {.lse_out = la, .key_scores = VQ_KEY_SCORES_F32,
                                          .value_accum = VQ_VALUE_ACCUM_F32},
                               oa1_opts = {.key_scores = VQ_KEY_SCORES_F32, .value_accum = VQ_VALUE_ACCUM_F32},
                               ob_opts = {.lse_out = dlb};
    VT_OK(cpu, vq_cache_attend(a, 0, n, ia, q, oa, &oa_opts));
    VT_OK(gpu, vq_cache_attend(b, 0, n, ib, dq, dob, &ob_opts));
    ct_download(dob, ob), ct_download(dlb, lb);
    const double eo = ct_rel_l2(ob, oa), el = ct_rel_l2(lb, la);
    VT_CHECK(eo <= 1e-3 && el <= 1e-5 && ct_count_nan(ob) == 0,
             "%s R%d, %d sequences, pool %lld+%lld pages%s: CUDA vs CPU out %.3g, lse %.3g", name, R, n,
             (long long)bt->capacity, (long long)bt->grow, getenv("VQ_CACHE_CUDA_GATHER") ? " (gathered)" : "", eo,
             el);
    vq_cache_memory_report ma, mb;
    VT_OK(cpu, vq_cache_memory(a, &ma));
    VT_OK(gpu, vq_cache_memory(b, &mb));
    VT_CHECK(ma.code_bytes == mb.code_bytes && ma.param_bytes == mb.param_bytes && ma.tokens == mb.tokens,
             "%s: memory reports differ", name);
    /* fork + truncate on the device, then the same on the host */
    int64_t fa, fb;
    VT_OK(cpu, vq_cache_seq_fork(a, ia[n - 1], &fa));
    VT_OK(gpu, vq_cache_seq_fork(b, ib[n - 1], &fb));
    VT_CHECK(vq_cache_seq_truncate(a, fa, 256) == vq_cache_seq_truncate(b, fb, 256), "%s: truncate", name);
    /* one sequence: views of the first rows of the batch's q and outputs */
    DLTensor *hq1 = vt_view(q, VT_DIMS(1, HQ, 1, DIM)), *ho1 = vt_view(oa, VT_DIMS(1, HQ, 1, DIM));
    VT_OK(cpu, vq_cache_attend(a, 0, 1, &fa, hq1, ho1, &oa1_opts));
    DLTensor *q1 = vt_view(dq, VT_DIMS(1, HQ, 1, DIM)), *o1 = vt_view(dob, VT_DIMS(1, HQ, 1, DIM));
    VT_OK(gpu, vq_cache_attend(b, 0, 1, &fb, q1, o1, NULL));
    ct_download(dob, ob);
    double num = 0, den = 0;
    for (int64_t i = 0; i < HQ * DIM; i++) {
        const double x = vt_get(ob, i), y = vt_get(oa, i);
        num += (x - y) * (x - y), den += y * y;
    }
    VT_CHECK(sqrt(num / den) <= 1e-3, "%s: forked and truncated sequence: CUDA vs CPU %.3g", name, sqrt(num / den));
    vt_free_view(q1), vt_free_view(o1), vt_free_view(hq1), vt_free_view(ho1);
    ct_free(dq), ct_free(dob), ct_free(dlb);
    vt_free(q), vt_free(oa), vt_free(la), vt_free(ob), vt_free(lb);
    vq_cache_free(a), vq_cache_free(b);
}

static void test_cuda_vs_cpu(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    vq_rng rng;
    vq_rng_seed(&rng, ct_seed());
    ct_store st = ct_store_new(NMANY, HKV, NMAX, DIM, &rng);
    DLTensor *dk = ct_upload(st.k), *dv = ct_upload(st.v);
    DLTensor *cb = vt_new(VT_F32, VT_DIMS(DIM / 4, 16, 4)), *cv = vt_new(VT_F32, VT_DIMS(4, 16, DIM));
    DLTensor *cs = vt_new(VT_F32, VT_DIMS(NMAX, DIM / 2)), *sn = vt_new(VT_F32, VT_DIMS(NMAX, DIM / 2));
    vt_fill_normal(cb, &rng, 0, 1), vt_fill_normal(cv, &rng, 0, 0.5);
    for (int64_t p = 0; p < NMAX; p++)
        for (int64_t i = 0; i < DIM / 2; i++) {
            const double th = (double)p * pow(10000.0, -2.0 * (double)i / DIM);
            vt_set(cs, p * (DIM / 2) + i, cos(th)), vt_set(sn, p * (DIM / 2) + i, sin(th));
        }
    const struct {
        const char *name;
        vq_cache_layer_config lc;
    } cases[] = {
        {"f16", {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}}},
        {"kivi2", {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 32}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}}},
        {"kivi4/turbo4", {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 16}, {.method = VQ_VALUE_TURBO, .bits = 4}}},
        {"turbo3", {{.method = VQ_KEY_TURBO, .bits = 3, .norm_correct = true}, {.method = VQ_VALUE_TURBO, .bits = 3}}},
        {"rvq22", {{.method = VQ_KEY_TURBO_RVQ, .bits = 2, .bits2 = 2}, {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 32}}},
        {"rabitq-exact", {{.method = VQ_KEY_RABITQ, .rabitq_score = VQ_RABITQ_SCORE_EXACT}, {.method = VQ_VALUE_F16}}},
        {"rabitq", {{.method = VQ_KEY_RABITQ, .rabitq_score = VQ_RABITQ_SCORE_HAMMING, .rabitq_mag = VQ_RABITQ_MAG_L1},
                    {.method = VQ_VALUE_CODEBOOK, .bits = 4}}},
        {"pq", {{.method = VQ_KEY_VECINFER, .codebook = cb}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}}},
        {"commvq", {{.method = VQ_KEY_COMMVQ, .codebook = cv, .cos_freqs = cs, .sin_freqs = sn}, {.method = VQ_VALUE_F16}}},
    };
    int64_t lens_many[NMANY];
    for (int s = 0; s < NMANY; s++) lens_many[s] = 1 + (53 * s + 11) % NMAX; /* across pages and groups */
    const batch one_chunk = {NSEQ, lens4, 32, 8, PAGE}, chunks = {NSEQ, lens4, 2, 3, PAGE},
                many = {NMANY, lens_many, 128, 8, PAGE};
    for (int gathered = 0; gathered < 2; gathered++) {
        if (gathered) setenv("VQ_CACHE_CUDA_GATHER", "1", 1);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int R = 0; R <= 8; R += 8) compare(cpu, gpu, cases[i].name, &cases[i].lc, R, &one_chunk, &st, dk, dv);
        unsetenv("VQ_CACHE_CUDA_GATHER");
    }
    for (size_t i = 0; i < 2; i++) { /* f16 and kivi2: the two paged kernels */
        compare(cpu, gpu, cases[i].name, &cases[i].lc, 8, &chunks, &st, dk, dv);
        compare(cpu, gpu, cases[i].name, &cases[i].lc, 8, &many, &st, dk, dv);
    }
    /* the per-format skeleton's pages, KIVI's scale groups and the Hamming keys among them */
    for (size_t i = 2; i < 7; i++) compare(cpu, gpu, cases[i].name, &cases[i].lc, 0, &many, &st, dk, dv);
    /* every method preset by its name (the configurations above are
     * variants of them): with a window, and paged over many sequences; a
     * preset whose key groups span two of the pages above gets pages of
     * 2 * PAGE tokens */
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        if (p->recipe || p->needs_tables) continue;
        vq_cache_layer_config lc;
        VT_OK(cpu, vq_cache_preset_layer_config(p->name, DIM, &lc));
        const int page = lc.keys.group_size > PAGE ? 2 * PAGE : PAGE;
        const batch one = {NSEQ, lens4, 32, 8, page}, all = {NMANY, lens_many, 128, 8, page};
        compare(cpu, gpu, p->name, &lc, 8, &one, &st, dk, dv);
        compare(cpu, gpu, p->name, &lc, 0, &all, &st, dk, dv);
    }

    /* host memory on a CUDA cache says so and changes nothing */
    const vq_cache_layer_config f16 = {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
    vq_cache *c = ct_cache(gpu, &f16, 1, HKV, HQ, DIM, PAGE, 0, 4, 0);
    int64_t id;
    VT_OK(gpu, vq_cache_seq_add(c, &id));
    DLTensor *k32 = vt_new(VT_F32, VT_DIMS(1, HKV, 3, DIM));
    vt_fill_normal(k32, &rng, 0, 1);
    VT_FAILS(gpu, VQ_ERR_INVALID_ARGUMENT, "'k'", vq_cache_append(c, 0, 1, &id, k32, k32, NULL));
    VT_CHECK(vq_cache_seq_length(c, id, 0) == 0, "a failed append changed the sequence");
    vq_cache_free(c);
    vt_free(k32);
    ct_free(dk), ct_free(dv);
    vt_free(cb), vt_free(cv), vt_free(cs), vt_free(sn);
    ct_store_free(&st);
    vq_ctx_free(cpu), vq_ctx_free(gpu);
}

/* ---- the quality recipe: sink tokens, transforms, TurboQuant windows ----
 *
 * The same tokens into a CPU and a CUDA cache of one recipe (fitted tables:
 * from the first append, or from vq_cache_fit_transforms with queries;
 * sinks filled by a batch call and across per-sequence chunks that straddle
 * the sink boundary), then: a decode attend of all sequences with the lse, a
 * causal attend of a fresh sequence whose leading rows sit at sink positions
 * (f16 out), forks truncated inside the pages and inside the sinks and
 * appended to, one truncated to 0 and refitted, a file saved on the CUDA
 * cache loaded on the CPU and the reverse; the fitted tables equal bit for
 * bit. Tolerances as above; a TurboQuant window is
 * attended from its codes in f32 on the CPU and decoded to f16 on CUDA
 * (cache_cuda.c), a rounding of 2^-11 of each window key that moves the
 * lse by ~1e-5 relative, so its lse bound is 1e-4. The sinks and fitted
 * tables are computed on the host on both backends, and transformed rows
 * round to the same f16 bits. */

enum { RSEQ = 4, FIT = 16 };

/* A [1, HQ, T, D] view of rows [0, T) of sequence s of q [RSEQ, HQ, FIT, D]. */
static DLTensor *q_rows(ct_view *hold, const DLTensor *q, int s, int64_t T)
{
    hold->t = *q;
    hold->shape[0] = 1, hold->shape[1] = HQ, hold->shape[2] = T, hold->shape[3] = DIM;
    hold->strides[0] = (int64_t)HQ * FIT * DIM, hold->strides[1] = (int64_t)FIT * DIM, hold->strides[2] = DIM;
    hold->strides[3] = 1;
    hold->t.shape = hold->shape;
    hold->t.strides = hold->strides;
    hold->t.byte_offset = (uint64_t)((int64_t)s * HQ * FIT * DIM * 2);
    return &hold->t;
}

/* The layers of the recipe and sliding-window cases. */
static const vq_cache_layer_config kivi2 = {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 32},
                                            {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}};
static const vq_cache_layer_config turbo3 = {{.method = VQ_KEY_TURBO, .bits = 3, .norm_correct = true},
                                             {.method = VQ_VALUE_TURBO, .bits = 3}};
static const vq_cache_layer_config kivi4 = {{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 32},
                                            {.method = VQ_VALUE_TURBO, .bits = 4}};
static const vq_cache_layer_config f16_layer = {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};

typedef struct recipe {
    const char *name;
    const char *preset;   /* a preset named by what it buys (its sink, transforms, window), or NULL: */
    vq_cache_layer_config lc;
    int sink, R, window_bits;
    vq_cache_window window;
    vq_cache_transforms xf;
    bool fit_q;           /* tables fitted by vq_cache_fit_transforms with queries */
} recipe;

static vq_cache *recipe_cache(vq_ctx *ctx, const recipe *r)
{
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                 .page_size = r->preset ? 2 * PAGE : PAGE, .capacity_pages = 32,
                                 .max_sequences = RSEQ + 6, /* the presets' key groups are 128 tokens */
                                 .residual_tokens = r->R, .layers = r->preset ? NULL : &r->lc, .preset = r->preset,
                                 .window = r->window, .window_bits = r->window_bits, .sink_tokens = r->sink,
                                 .transforms = r->preset ? NULL : &r->xf};
    vq_cache *c = NULL;
    const vq_status s = vq_cache_create(ctx, &cfg, &c);
    VT_CHECK(s == VQ_OK, "%s: create -> %s: %s", r->name, vq_status_string(s), vq_ctx_last_error(ctx));
    return c;
}

/* Both caches' outputs of one attend (CPU f32 arithmetic), compared. */
static void attend_both(vq_ctx *cpu, vq_ctx *gpu, vq_cache *a, vq_cache *b, const recipe *r, const char *what, int n,
                        const int64_t *ia, const int64_t *ib, int64_t Sq, bool causal, DLDataType odt, uint64_t seed)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    DLTensor *q = vt_new(VT_F16, VT_DIMS(n, HQ, Sq, DIM)), *oa = vt_new(odt, VT_DIMS(n, HQ, Sq, DIM));
    DLTensor *la = vt_new(VT_F32, VT_DIMS(n, HQ, Sq)), *ob = vt_like(oa, odt), *lb = vt_like(la, VT_F32);
    vt_fill_normal(q, &rng, 0, 1);
    DLTensor *dq = ct_upload(q), *dob = ct_upload(ob), *dlb = ct_upload(lb);
    ct_poison(dob), ct_poison(dlb);
    const vq_cache_attend_opts ao = {.causal = causal, .lse_out = la, .key_scores = VQ_KEY_SCORES_F32,
                                     .value_accum = VQ_VALUE_ACCUM_F32},
                               bo = {.causal = causal, .lse_out = dlb};
    VT_OK(cpu, vq_cache_attend(a, 0, n, ia, q, oa, &ao));
    VT_OK(gpu, vq_cache_attend(b, 0, n, ib, dq, dob, &bo));
    ct_download(dob, ob), ct_download(dlb, lb);
    const double eo = ct_rel_l2(ob, oa), el = ct_rel_l2(lb, la);
    /* A TurboQuant window reaches the CUDA kernels decoded to f16 (cuda_cache.c's
     * f16_windows), the CPU scores its codes in f32: a causal row that sees one
     * or two window tokens has an lse of one score, which carries that f16
     * rounding unaveraged, up to the unit roundoff 2^-11 relative. */
    const double to = odt.bits == 16 ? 2e-3 : 1e-3, tl = r->window != VQ_WINDOW_F16 || r->preset ? 0x1p-11 : 1e-5;
    VT_CHECK(eo <= to && el <= tl && ct_count_nan(ob) == 0, "%s, %s: CUDA vs CPU out %.3g, lse %.3g", r->name, what, eo,
             el);
    /* without the lse: the same outputs */
    DLTensor *ob2 = vt_like(oa, odt);
    const vq_cache_attend_opts bo2 = {.causal = causal};
    ct_poison(dob);
    VT_OK(gpu, vq_cache_attend(b, 0, n, ib, dq, dob, &bo2));
    ct_download(dob, ob2);
    const double e2 = ct_rel_l2(ob2, ob);
    VT_CHECK(e2 <= 1e-6 && ct_count_nan(ob2) == 0, "%s, %s: out without the lse differs by %.3g", r->name, what, e2);
    vt_free(ob2);
    ct_free(dq), ct_free(dob), ct_free(dlb);
    vt_free(q), vt_free(oa), vt_free(la), vt_free(ob), vt_free(lb);
}

/* The store's tokens [t0, t0 + m) of store sequence s appended to sequence id. */
static void append_rows(vq_ctx *ctx, vq_cache *c, int64_t id, const ct_store *st, const DLTensor *dk,
                        const DLTensor *dv, int s, int64_t t0, int64_t m)
{
    ct_store ds = *st;
    if (dk) ds.k = (DLTensor *)dk, ds.v = (DLTensor *)dv;
    int64_t ids[RSEQ];
    ids[s] = id;
    VT_OK(ctx, ct_append(c, 0, &ds, ids, s, 1, t0, m));
}

/* Tables of sequences ida (CPU) and idb (CUDA) fitted from tokens [0, T)
 * of store sequence s and its queries. */
static void fit_both(vq_ctx *cpu, vq_ctx *gpu, vq_cache *a, vq_cache *b, int64_t ida, int64_t idb, const ct_store *st,
                     const DLTensor *dk, const DLTensor *dv, const DLTensor *qfit, const DLTensor *dqfit, int s,
                     int64_t T)
{
    ct_view hk, hv, hq;
    VT_OK(cpu, vq_cache_fit_transforms(a, 0, 1, &ida, ct_slice(&hk, st, st->k, s, 1, 0, T),
                                       ct_slice(&hv, st, st->v, s, 1, 0, T), q_rows(&hq, qfit, s, T)));
    VT_OK(gpu, vq_cache_fit_transforms(b, 0, 1, &idb, ct_slice(&hk, st, dk, s, 1, 0, T),
                                       ct_slice(&hv, st, dv, s, 1, 0, T), q_rows(&hq, dqfit, s, T)));
}

/* The whole cache c (of ctx from) saved and loaded on ctx to, or NULL. */
static vq_cache *save_load(vq_ctx *from, const vq_cache *c, vq_ctx *to)
{
    size_t size = 0;
    VT_OK(from, vq_cache_save_buffer(c, -1, NULL, 0, &size));
    void *buf = malloc(size);
    VT_OK(from, vq_cache_save_buffer(c, -1, buf, size, &size));
    vq_cache *l = NULL;
    VT_OK(to, vq_cache_load_buffer(to, buf, size, &l));
    free(buf);
    return l;
}

/* The memory reports of the CPU cache a and the CUDA cache b agree. */
static void same_memory(vq_ctx *cpu, vq_ctx *gpu, const vq_cache *a, const vq_cache *b, const char *name)
{
    vq_cache_memory_report ma, mb;
    VT_OK(cpu, vq_cache_memory(a, &ma));
    VT_OK(gpu, vq_cache_memory(b, &mb));
    VT_CHECK(ma.code_bytes == mb.code_bytes && ma.param_bytes == mb.param_bytes && ma.tokens == mb.tokens &&
                 ma.residual_bytes == mb.residual_bytes,
             "%s: memory reports differ (tokens %lld vs %lld)", name, (long long)ma.tokens, (long long)mb.tokens);
}

static void compare_recipe(vq_ctx *cpu, vq_ctx *gpu, const recipe *r, const ct_store *st, const DLTensor *dk,
                           const DLTensor *dv, const DLTensor *qfit, const DLTensor *dqfit)
{
    vq_cache *a = recipe_cache(cpu, r), *b = recipe_cache(gpu, r);
    if (a == NULL || b == NULL) {
        vq_cache_free(a), vq_cache_free(b);
        return;
    }
    int64_t ia[RSEQ + 2], ib[RSEQ + 2];
    for (int s = 0; s < RSEQ; s++) {
        VT_OK(cpu, vq_cache_seq_add(a, &ia[s]));
        VT_OK(gpu, vq_cache_seq_add(b, &ib[s]));
    }
    for (int s = 0; r->fit_q && s < RSEQ; s++)
        fit_both(cpu, gpu, a, b, ia[s], ib[s], st, dk, dv, qfit, dqfit, s, lens4[s] < FIT ? lens4[s] : FIT);
    const batch bt = {RSEQ, lens4, 32, 0, r->preset ? 2 * PAGE : PAGE}; /* the pool made above */
    fill(cpu, a, ia, &bt, st, NULL, NULL);
    fill(gpu, b, ib, &bt, st, dk, dv);
    /* fitted on the host from the same rows on both backends: the same tables, bit for bit */
    DLTensor *ta[3], *tb[3];
    for (int i = 0; i < 3; i++) ta[i] = vt_new(VT_F32, VT_DIMS(HKV, DIM)), tb[i] = vt_like(ta[i], VT_F32);
    for (int s = 0; s < RSEQ; s++) {
        VT_OK(cpu, vq_cache_get_transforms(a, ia[s], 0, NULL, ta[0], ta[1], ta[2]));
        VT_OK(gpu, vq_cache_get_transforms(b, ib[s], 0, NULL, tb[0], tb[1], tb[2]));
        for (int i = 0; i < 3; i++)
            VT_CHECK(memcmp(vq_data(ta[i]), vq_data(tb[i]), vt_bytes(ta[i])) == 0,
                     "%s: sequence %d's table %d differs between the backends", r->name, s, i);
    }
    for (int i = 0; i < 3; i++) vt_free(ta[i]), vt_free(tb[i]);
    for (int gathered = 0; gathered < 2; gathered++) {
        if (gathered) setenv("VQ_CACHE_CUDA_GATHER", "1", 1);
        attend_both(cpu, gpu, a, b, r, gathered ? "decode (gathered)" : "decode", RSEQ, ia, ib, 1, false, VT_F32, 7);
        unsetenv("VQ_CACHE_CUDA_GATHER");
    }
    same_memory(cpu, gpu, a, b, r->name);
    /* fresh sequences of 7 and (with sinks) S + 5 tokens attended causally
     * by 7 rows each in one call: with sinks their leading S and 2 rows see
     * only sinks (two groups of the page path) */
    const int n_fresh = r->sink > 0 ? 2 : 1;
    for (int f = 0; f < n_fresh; f++) {
        const int64_t len = f ? r->sink + 5 : 7;
        VT_OK(cpu, vq_cache_seq_add(a, &ia[RSEQ + f]));
        VT_OK(gpu, vq_cache_seq_add(b, &ib[RSEQ + f]));
        if (r->fit_q) fit_both(cpu, gpu, a, b, ia[RSEQ + f], ib[RSEQ + f], st, dk, dv, qfit, dqfit, 1 + f, 7);
        append_rows(cpu, a, ia[RSEQ + f], st, NULL, NULL, 1 + f, 0, len);
        append_rows(gpu, b, ib[RSEQ + f], st, dk, dv, 1 + f, 0, len);
    }
    attend_both(cpu, gpu, a, b, r, "causal prefill", n_fresh, &ia[RSEQ], &ib[RSEQ], 7, true, VT_F16, 8);
    /* a causal chunk of 40 rows at the end of a 97-token sequence: its rows
     * straddle the pages and the window (the CUDA gathered path splits them) */
    attend_both(cpu, gpu, a, b, r, "causal chunk over pages and window", 1, &ia[2], &ib[2], 40, true, VT_F32, 12);
    /* forks: truncated inside the pages, inside the sinks, to nothing; then appended to */
    int64_t fa[3], fb[3];
    const int64_t cut[3] = {r->sink + 256, r->sink > 0 ? 2 : 64, 0};
    for (int f = 0; f < 3; f++) {
        VT_OK(cpu, vq_cache_seq_fork(a, ia[RSEQ - 1], &fa[f]));
        VT_OK(gpu, vq_cache_seq_fork(b, ib[RSEQ - 1], &fb[f]));
        VT_OK(cpu, vq_cache_seq_truncate(a, fa[f], cut[f]));
        VT_OK(gpu, vq_cache_seq_truncate(b, fb[f], cut[f]));
        if (cut[f] == 0 && r->fit_q) fit_both(cpu, gpu, a, b, fa[f], fb[f], st, dk, dv, qfit, dqfit, 2, FIT);
        /* other tokens than the ones cut (fitted again from them after a cut to 0) */
        append_rows(cpu, a, fa[f], st, NULL, NULL, 2, 0, 40);
        append_rows(gpu, b, fb[f], st, dk, dv, 2, 0, 40);
    }
    attend_both(cpu, gpu, a, b, r, "forked, truncated, appended", 3, fa, fb, 1, false, VT_F32, 9);
    /* a file saved on the CUDA cache, loaded on the CPU: the CPU cache's
     * attention within the tolerance (the bytes are the device's) */
    vq_cache *lc = save_load(gpu, b, cpu);
    if (lc) {
        DLTensor *q = vt_new(VT_F32, VT_DIMS(RSEQ, HQ, 1, DIM)), *oa = vt_like(q, VT_F32), *ol = vt_like(q, VT_F32);
        vq_rng rng;
        vq_rng_seed(&rng, 10);
        vt_fill_normal(q, &rng, 0, 1);
        const vq_cache_attend_opts f32 = {.key_scores = VQ_KEY_SCORES_F32, .value_accum = VQ_VALUE_ACCUM_F32};
        VT_OK(cpu, vq_cache_attend(a, 0, RSEQ, ia, q, oa, &f32));
        VT_OK(cpu, vq_cache_attend(lc, 0, RSEQ, ib, q, ol, &f32)); /* the saved ids */
        const double e = ct_rel_l2(ol, oa);
        VT_CHECK(e <= 1e-3, "%s: saved on CUDA, loaded on the CPU: vs the CPU cache %.3g", r->name, e);
        vt_free(q), vt_free(oa), vt_free(ol);
        vq_cache_free(lc);
    }
    /* and the reverse: a file saved on the CPU cache, loaded on CUDA (its
     * sinks and tables reach the device when first attended) */
    vq_cache *lg = save_load(cpu, a, gpu);
    if (lg) attend_both(cpu, gpu, a, lg, r, "saved on the CPU, loaded on CUDA", RSEQ, ia, ia, 1, false, VT_F32, 11);
    vq_cache_free(lg);
    vq_cache_free(a), vq_cache_free(b);
}

static void test_cuda_recipe(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    vq_rng rng;
    vq_rng_seed(&rng, ct_seed());
    ct_store st = ct_store_new(RSEQ, HKV, NMAX, DIM, &rng);
    DLTensor *dk = ct_upload(st.k), *dv = ct_upload(st.v);
    DLTensor *qfit = vt_new(VT_F16, VT_DIMS(RSEQ, HQ, FIT, DIM));
    vt_fill_normal(qfit, &rng, 0, 1);
    DLTensor *dqfit = ct_upload(qfit);
    DLTensor *ks = vt_new(VT_F32, VT_DIMS(HKV, DIM));
    for (int64_t i = 0; i < HKV * DIM; i++) vt_set(ks, i, 0.5 + (double)((i * 37) % 11) / 8.0);
    const recipe cases[] = {
        {"kivi2 + 4 sinks", NULL, kivi2, 4, 8, 0, VQ_WINDOW_F16, {0}, false},
        {"f16 + 3 sinks", NULL, f16_layer, 3, 0, 0, VQ_WINDOW_F16, {0}, false},
        {"kivi2 centered (fitted on append)", NULL, kivi2, 0, 8, 0, VQ_WINDOW_F16,
         {.center_keys = true, .center_values = true}, false},
        {"turbo3 smoothed (key scales given)", NULL, turbo3, 0, 8, 0, VQ_WINDOW_F16, {.smooth = true, .key_scale = ks},
         false},
        {"kivi4/turbo4 smoothed and centered (fitted with queries) + 4 sinks", NULL, kivi4, 4, 8, 0, VQ_WINDOW_F16,
         {.center_keys = true, .center_values = true, .smooth = true}, true},
        {"kivi4/turbo4, 8-bit window", NULL, kivi4, 0, 16, 0, VQ_WINDOW_TURBO8, {0}, false},
        {"turbo3, 5-bit window", NULL, turbo3, 0, 16, 5, VQ_WINDOW_TURBO, {0}, false},
        {"kivi2, everything: 4 sinks, fitted transforms, 6-bit window", NULL, kivi2, 4, 16, 6, VQ_WINDOW_TURBO,
         {.center_keys = true, .center_values = true, .smooth = true}, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        compare_recipe(cpu, gpu, &cases[i], &st, dk, dv, qfit, dqfit);
    /* the presets named by what they buy (mixed-width KIVI keys, f16 value
     * scales, both windows; their smoothing fits from queries): each must run */
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        if (!p->recipe) continue;
        /* its own sink count, which the fresh sequences and the cuts below count on (a cut
         * inside the pages must keep whole 128-token key groups) */
        const recipe r = {p->name, p->name, {{0}, {0}}, p->sink_tokens, 0, 0, VQ_WINDOW_F16, {0}, true};
        compare_recipe(cpu, gpu, &r, &st, dk, dv, qfit, dqfit);
    }
    ct_free(dk), ct_free(dv), ct_free(dqfit);
    vt_free(qfit), vt_free(ks);
    ct_store_free(&st);
    vq_ctx_free(cpu), vq_ctx_free(gpu);
}

/* ---- f32 appends ----
 *
 * Tokens appended as f32 (the CUDA cache rounds them to f16 on the device,
 * the CPU cache on the host; the transforms run on the f32 rows first, on
 * both): a prefill, a strided chunk (every other token of the store, so
 * each head's rows are no single run) and decode steps, against the CPU
 * cache given the same f32 rows. Without transforms the rounding comes
 * first, so the same cache given the f16 rounding of those rows must hold
 * the same bytes: its attention equal bit for bit. */

enum { F32N = 440 };

/* Tokens [t0, t0 + m) of sequences [s0, s0 + n) of x [2][HKV][F32N][DIM]
 * (f32), every step-th token. */
static const DLTensor *f32_slice(ct_view *hold, const DLTensor *x, int64_t s0, int64_t n, int64_t t0, int64_t m,
                                 int64_t step)
{
    hold->t = *x;
    hold->shape[0] = n, hold->shape[1] = HKV, hold->shape[2] = m, hold->shape[3] = DIM;
    hold->strides[0] = (int64_t)HKV * F32N * DIM, hold->strides[1] = (int64_t)F32N * DIM, hold->strides[2] = step * DIM;
    hold->strides[3] = 1;
    hold->t.shape = hold->shape;
    hold->t.strides = hold->strides;
    hold->t.byte_offset = (uint64_t)(((s0 * HKV) * F32N + t0) * DIM) * (uint64_t)(x->dtype.bits / 8);
    return &hold->t;
}

/* The same appends to c from k, v (either dtype): both sequences' first 37
 * tokens in one call, then 200 more each (sequence 0 every other token of
 * 400, past a preset's 128-token key group and window), then 5 decode
 * steps of both. */
static void f32_fill(vq_ctx *ctx, vq_cache *c, const int64_t *ids, const DLTensor *k, const DLTensor *v)
{
    ct_view hk, hv;
    VT_OK(ctx, vq_cache_append(c, 0, 2, ids, f32_slice(&hk, k, 0, 2, 0, 37, 1), f32_slice(&hv, v, 0, 2, 0, 37, 1),
                               NULL));
    VT_OK(ctx, vq_cache_append(c, 0, 1, ids, f32_slice(&hk, k, 0, 1, 37, 200, 2),
                               f32_slice(&hv, v, 0, 1, 37, 200, 2), NULL));
    VT_OK(ctx, vq_cache_append(c, 0, 1, ids + 1, f32_slice(&hk, k, 1, 1, 37, 200, 1),
                               f32_slice(&hv, v, 1, 1, 37, 200, 1), NULL));
    for (int64_t t = 430; t < 435; t++)
        VT_OK(ctx, vq_cache_append(c, 0, 2, ids, f32_slice(&hk, k, 0, 2, t, 1, 1), f32_slice(&hv, v, 0, 2, t, 1, 1),
                                   NULL));
}

static void compare_f32(vq_ctx *cpu, vq_ctx *gpu, const recipe *r, const DLTensor *k, const DLTensor *v,
                        const DLTensor *q, DLTensor *dq)
{
    DLTensor *k16 = vt_like(k, VT_F16), *v16 = vt_like(v, VT_F16);
    for (int64_t i = 0; i < vt_numel(k); i++) vt_set(k16, i, vt_get(k, i)), vt_set(v16, i, vt_get(v, i));
    DLTensor *dk = ct_upload(k), *dv = ct_upload(v), *dk16 = ct_upload(k16), *dv16 = ct_upload(v16);
    vq_cache *a = recipe_cache(cpu, r), *b = recipe_cache(gpu, r), *h = recipe_cache(gpu, r);
    int64_t ia[2], ib[2], ih[2];
    for (int s = 0; s < 2 && a && b && h; s++) {
        VT_OK(cpu, vq_cache_seq_add(a, &ia[s]));
        VT_OK(gpu, vq_cache_seq_add(b, &ib[s]));
        VT_OK(gpu, vq_cache_seq_add(h, &ih[s]));
        if (!r->fit_q) continue;
        ct_view hk, hv, hq, hdq;
        const DLTensor *qs = q_rows(&hq, q, s, FIT), *dqs = q_rows(&hdq, dq, s, FIT);
        VT_OK(cpu, vq_cache_fit_transforms(a, 0, 1, &ia[s], f32_slice(&hk, k, s, 1, 0, FIT, 1),
                                           f32_slice(&hv, v, s, 1, 0, FIT, 1), qs));
        VT_OK(gpu, vq_cache_fit_transforms(b, 0, 1, &ib[s], f32_slice(&hk, dk, s, 1, 0, FIT, 1),
                                           f32_slice(&hv, dv, s, 1, 0, FIT, 1), dqs));
        VT_OK(gpu, vq_cache_fit_transforms(h, 0, 1, &ih[s], f32_slice(&hk, dk16, s, 1, 0, FIT, 1),
                                           f32_slice(&hv, dv16, s, 1, 0, FIT, 1), dqs));
    }
    if (a && b && h) {
        f32_fill(cpu, a, ia, k, v);
        f32_fill(gpu, b, ib, dk, dv);
        f32_fill(gpu, h, ih, dk16, dv16);
        same_memory(cpu, gpu, a, b, r->name);
        attend_both(cpu, gpu, a, b, r, "f32 appends", 2, ia, ib, 1, false, VT_F32, 21);
        const bool xf = r->preset || r->xf.center_keys || r->xf.center_values || r->xf.smooth;
        if (!xf) {
            DLTensor *ob = vt_new(VT_F32, VT_DIMS(2, HQ, 1, DIM)), *oh = vt_like(ob, VT_F32);
            DLTensor *dob = ct_upload(ob), *q1 = vt_view(dq, VT_DIMS(2, HQ, 1, DIM));
            VT_OK(gpu, vq_cache_attend(b, 0, 2, ib, q1, dob, NULL));
            ct_download(dob, ob);
            VT_OK(gpu, vq_cache_attend(h, 0, 2, ih, q1, dob, NULL));
            ct_download(dob, oh);
            VT_CHECK(memcmp(vq_data(ob), vq_data(oh), vt_bytes(ob)) == 0,
                     "%s: f32 appends and their f16 rounding appended attend differently", r->name);
            vt_free_view(q1), ct_free(dob), vt_free(ob), vt_free(oh);
        }
    }
    vq_cache_free(a), vq_cache_free(b), vq_cache_free(h);
    ct_free(dk), ct_free(dv), ct_free(dk16), ct_free(dv16);
    vt_free(k16), vt_free(v16);
}

static void test_cuda_f32_appends(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    vq_rng rng;
    vq_rng_seed(&rng, ct_seed());
    DLTensor *k = vt_new(VT_F32, VT_DIMS(2, HKV, F32N, DIM)), *v = vt_like(k, VT_F32);
    vt_fill_keys(k, &rng, 2, 4.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);
    DLTensor *q = vt_new(VT_F16, VT_DIMS(RSEQ, HQ, FIT, DIM));
    vt_fill_normal(q, &rng, 0, 1);
    DLTensor *dq = ct_upload(q);
    const recipe cases[] = {
        {"f16", NULL, f16_layer, 0, 8, 0, VQ_WINDOW_F16, {0}, false},
        {"kivi2 + 4 sinks", NULL, kivi2, 4, 8, 0, VQ_WINDOW_F16, {0}, false},
        {"kivi4/turbo4, 8-bit window", NULL, kivi4, 0, 16, 0, VQ_WINDOW_TURBO8, {0}, false},
        {"kivi2 centered (fitted on append)", NULL, kivi2, 0, 8, 0, VQ_WINDOW_F16,
         {.center_keys = true, .center_values = true}, false},
        {"quality-4bit", "quality-4bit", {{0}, {0}}, 4, 0, 0, VQ_WINDOW_F16, {0}, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) compare_f32(cpu, gpu, &cases[i], k, v, q, dq);
    ct_free(dq);
    vt_free(q), vt_free(k), vt_free(v);
    vq_ctx_free(cpu), vq_ctx_free(gpu);
}

/* ---- sliding windows ----
 *
 * The same operations on a CPU and a CUDA cache with a sliding-window layer
 * (W not a multiple of the page size, smaller and larger than a page,
 * smaller than the residual window and than the sinks): prefills attended
 * causally by all their rows (Sq > 1, each row its own window bound, the
 * first ones reaching below the last append), decode steps of two sequences
 * in one call on both CUDA paths while pages are evicted, a causal chunk
 * over pages and window after eviction, a non-causal Sq > 1 attend, forks
 * truncated (a short rollback and one below the window, refused on both) and
 * appended to, the memory reports (the evicted pages), and files saved on
 * one backend loaded on the other. Tolerances as in the recipe test.
 * VQ_TEST_QUICK=1 (compute-sanitizer) runs fewer steps and shorter prefills. */

enum { SLEN = 700 };

static vq_cache *sliding_cache(vq_ctx *ctx, const recipe *r, int W)
{
    const int window[1] = {W};
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                 .page_size = r->preset ? 2 * PAGE : PAGE, .capacity_pages = 48,
                                 .max_sequences = 6, .residual_tokens = r->R, .layers = r->preset ? NULL : &r->lc,
                                 .preset = r->preset, .window = r->window, .window_bits = r->window_bits,
                                 .sink_tokens = r->sink, .transforms = r->preset ? NULL : &r->xf,
                                 .sliding_windows = window};
    vq_cache *c = NULL;
    const vq_status s = vq_cache_create(ctx, &cfg, &c);
    VT_CHECK(s == VQ_OK, "%s, W %d: create -> %s: %s", r->name, W, vq_status_string(s), vq_ctx_last_error(ctx));
    return c;
}

/* Store tokens [t0, t0 + m) of store sequences 0 and 1 appended to ids (both
 * sequences when both is set, else sequence s only), on both caches. */
static void append_both(vq_ctx *cpu, vq_ctx *gpu, vq_cache *a, vq_cache *b, const int64_t *ia, const int64_t *ib,
                        const ct_store *st, const DLTensor *dk, const DLTensor *dv, int s, bool both, int64_t t0,
                        int64_t m)
{
    ct_store ds = *st;
    ds.k = (DLTensor *)dk, ds.v = (DLTensor *)dv;
    VT_OK(cpu, ct_append(a, 0, st, ia, both ? 0 : s, both ? 2 : 1, t0, m));
    VT_OK(gpu, ct_append(b, 0, &ds, ib, both ? 0 : s, both ? 2 : 1, t0, m));
}

static void compare_sliding(vq_ctx *cpu, vq_ctx *gpu, const recipe *r, int W, const ct_store *st, const DLTensor *dk,
                            const DLTensor *dv, const DLTensor *qfit, const DLTensor *dqfit)
{
    vq_cache *a = sliding_cache(cpu, r, W), *b = sliding_cache(gpu, r, W);
    if (a == NULL || b == NULL) {
        vq_cache_free(a), vq_cache_free(b);
        return;
    }
    const bool quick = getenv("VQ_TEST_QUICK") != NULL;
    char what[160];
    int64_t ia[3], ib[3];
    for (int s = 0; s < 2; s++) {
        VT_OK(cpu, vq_cache_seq_add(a, &ia[s]));
        VT_OK(gpu, vq_cache_seq_add(b, &ib[s]));
        if (r->fit_q) fit_both(cpu, gpu, a, b, ia[s], ib[s], st, dk, dv, qfit, dqfit, s, FIT);
    }
    /* prefills, each attended causally by all its rows */
    const int64_t pre[2] = {quick ? 150 : 200, quick ? 40 : 90};
    int64_t len[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        append_both(cpu, gpu, a, b, ia, ib, st, dk, dv, s, false, 0, pre[s]);
        len[s] = pre[s];
        snprintf(what, sizeof what, "W %d, prefill of %lld, causal", W, (long long)pre[s]);
        attend_both(cpu, gpu, a, b, r, what, 1, &ia[s], &ib[s], pre[s], true, VT_F16, 30 + (uint64_t)s);
    }
    /* decode steps of both sequences, pages evicted on the way; both CUDA paths */
    const int steps = quick ? 6 : 70;
    for (int i = 0; i < steps; i++) {
        append_both(cpu, gpu, a, b, ia, ib, st, dk, dv, 0, true, len[0], 1);
        /* ct_append takes one t0 for the batch: sequence 1 gets store rows len[0] on, whatever they are */
        len[0]++, len[1]++;
        if (i % 5 != 0 && i != steps - 1) continue;
        const bool gathered = i % 10 == 5;
        if (gathered) setenv("VQ_CACHE_CUDA_GATHER", "1", 1);
        snprintf(what, sizeof what, "W %d, decode at %lld/%lld tokens%s", W, (long long)len[0], (long long)len[1],
                 gathered ? " (gathered)" : "");
        attend_both(cpu, gpu, a, b, r, what, 2, ia, ib, 1, false, VT_F32, 40 + (uint64_t)i);
        unsetenv("VQ_CACHE_CUDA_GATHER");
    }
    /* a causal chunk of 40 rows over pages and window, after eviction */
    append_both(cpu, gpu, a, b, ia, ib, st, dk, dv, 0, false, len[0], 40);
    len[0] += 40;
    snprintf(what, sizeof what, "W %d, causal chunk of 40 at %lld tokens", W, (long long)len[0]);
    attend_both(cpu, gpu, a, b, r, what, 1, &ia[0], &ib[0], 40, true, VT_F32, 50);
    snprintf(what, sizeof what, "W %d, 4 non-causal rows at %lld tokens", W, (long long)len[0]);
    attend_both(cpu, gpu, a, b, r, what, 1, &ia[0], &ib[0], 4, false, VT_F32, 51);
    /* a prefill chunk longer than the window and a page: rows whose windows end pages apart */
    const int64_t big = quick ? 130 : 300;
    append_both(cpu, gpu, a, b, ia, ib, st, dk, dv, 1, false, len[1], big);
    len[1] += big;
    snprintf(what, sizeof what, "W %d, causal chunk of %lld at %lld tokens", W, (long long)big, (long long)len[1]);
    attend_both(cpu, gpu, a, b, r, what, 1, &ia[1], &ib[1], big, true, VT_F16, 52);
    snprintf(what, sizeof what, "%s, W %d", r->name, W);
    same_memory(cpu, gpu, a, b, what);
    vq_cache_memory_report ma;
    VT_OK(cpu, vq_cache_memory(a, &ma));
    /* len counts the sinks too, as the report does */
    VT_CHECK(quick || ma.tokens < len[0] + len[1], "%s, W %d: no page was evicted", r->name, W);
    /* forks of sequence 0: a rollback of 2 tokens and one below the window
     * (refused where pages were evicted), the same status on both backends;
     * then appended to and attended */
    int64_t fa, fb;
    const int64_t cut[2] = {r->sink + len[0] - 2, r->sink + 10};
    for (int f = 0; f < 2; f++) {
        VT_OK(cpu, vq_cache_seq_fork(a, ia[0], &fa));
        VT_OK(gpu, vq_cache_seq_fork(b, ib[0], &fb));
        const vq_status sa = vq_cache_seq_truncate(a, fa, cut[f]), sb = vq_cache_seq_truncate(b, fb, cut[f]);
        VT_CHECK(sa == sb, "%s, W %d: truncate to %lld: CPU %s, CUDA %s", r->name, W, (long long)cut[f],
                 vq_status_string(sa), vq_status_string(sb));
        VT_CHECK(vq_cache_seq_length(a, fa, 0) == vq_cache_seq_length(b, fb, 0), "%s, W %d: forked lengths differ",
                 r->name, W);
        const int64_t at = vq_cache_seq_length(a, fa, 0) - r->sink;
        int64_t ja[2] = {fa, fa}, jb[2] = {fb, fb};
        append_both(cpu, gpu, a, b, ja, jb, st, dk, dv, 0, false, at, 3);
        snprintf(what, sizeof what, "W %d, fork truncated to %lld, appended 3, causal", W, (long long)cut[f]);
        attend_both(cpu, gpu, a, b, r, what, 1, &fa, &fb, 3, true, VT_F32, 60 + (uint64_t)f);
        VT_OK(cpu, vq_cache_seq_remove(a, fa));
        VT_OK(gpu, vq_cache_seq_remove(b, fb));
    }
    /* each cache saved and loaded on the other backend, attended there against the one that stayed */
    vq_cache *lc = save_load(gpu, b, cpu), *lg = save_load(cpu, a, gpu);
    if (lc) attend_both(cpu, gpu, lc, b, r, "saved on CUDA, loaded on the CPU", 2, ib, ib, 1, false, VT_F32, 21);
    if (lg) attend_both(cpu, gpu, a, lg, r, "saved on the CPU, loaded on CUDA", 2, ia, ia, 1, false, VT_F32, 22);
    vq_cache_free(lc), vq_cache_free(lg);
    vq_cache_free(a), vq_cache_free(b);
}

static void test_cuda_sliding(void)
{
    vq_ctx *cpu = vt_ctx(0), *gpu = ct_ctx();
    vq_rng rng;
    vq_rng_seed(&rng, ct_seed());
    ct_store st = ct_store_new(2, HKV, SLEN, DIM, &rng);
    DLTensor *dk = ct_upload(st.k), *dv = ct_upload(st.v);
    DLTensor *qfit = vt_new(VT_F16, VT_DIMS(RSEQ, HQ, FIT, DIM));
    vt_fill_normal(qfit, &rng, 0, 1);
    DLTensor *dqfit = ct_upload(qfit);
    const struct {
        recipe r;
        int W;
    } cases[] = {
        /* W larger than a page, no residual window: the mask cuts the first page only */
        {{"f16", NULL, f16_layer, 0, 0, 0, VQ_WINDOW_F16, {0}, false}, 100},
        /* W smaller than a page: the paged KIVI kernel */
        {{"kivi2", NULL, kivi2, 0, 8, 0, VQ_WINDOW_F16, {0}, false}, 37},
        /* W smaller than the residual window: the mask reaches into it */
        {{"turbo3", NULL, turbo3, 0, 16, 0, VQ_WINDOW_F16, {0}, false}, 5},
        /* W smaller than the sinks: rows at sink positions see some of them */
        {{"kivi4/turbo4 + 3 sinks", NULL, kivi4, 3, 8, 0, VQ_WINDOW_F16, {0}, false}, 2},
        /* sinks, transforms and the 8-bit window of a preset; W just above its 128-token page */
        {{"quality-4bit", "quality-4bit", {{0}, {0}}, 4, 0, 0, VQ_WINDOW_F16, {0}, true}, 130},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        compare_sliding(cpu, gpu, &cases[i].r, cases[i].W, &st, dk, dv, qfit, dqfit);
    ct_free(dk), ct_free(dv), ct_free(dqfit);
    vt_free(qfit);
    ct_store_free(&st);
    vq_ctx_free(cpu), vq_ctx_free(gpu);
}

int main(void)
{
    ct_require_device();
    VT_RUN(test_cuda_vs_cpu);
    VT_RUN(test_cuda_recipe);
    VT_RUN(test_cuda_f32_appends);
    VT_RUN(test_cuda_sliding);
    return vt_finish();
}
#endif
