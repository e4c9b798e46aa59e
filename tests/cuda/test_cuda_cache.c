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
 * sequences than one paged launch serves (VQ_CU_PAGED_MAX_B).
 *
 * Tolerance. The codecs on both backends give the same codes except where a
 * value sits within f32 rounding of a decision boundary (docs/FORMATS.md §1), so a few
 * codes may differ by one level; the attention kernels differ in the order
 * of f32 additions. A code one level off moves a score by at most the
 * level spacing times |q_c| scale, on one token in thousands: the output
 * moves by far less than 1e-3 relative, while a wrong page, token order,
 * window or merge moves it by O(0.1). */
#include <stdlib.h>

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
    vq_cache *a = ct_cache_seqs(cpu, lc, 1, HKV, HQ, DIM, PAGE, R, bt->capacity, bt->grow, NMANY + 1);
    vq_cache *b = ct_cache_seqs(gpu, lc, 1, HKV, HQ, DIM, PAGE, R, bt->capacity, bt->grow, NMANY + 1);
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
        {"pq", {{.method = VQ_KEY_VECINFER, .codebook = cb}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}}},
        {"commvq", {{.method = VQ_KEY_COMMVQ, .codebook = cv, .cos_freqs = cs, .sin_freqs = sn}, {.method = VQ_VALUE_F16}}},
    };
    int64_t lens_many[NMANY];
    for (int s = 0; s < NMANY; s++) lens_many[s] = 1 + (53 * s + 11) % NMAX; /* across pages and groups */
    const batch one_chunk = {NSEQ, lens4, 32, 8}, chunks = {NSEQ, lens4, 2, 3}, many = {NMANY, lens_many, 128, 8};
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
    for (size_t i = 3; i < 6; i++) compare(cpu, gpu, cases[i].name, &cases[i].lc, 0, &many, &st, dk, dv);

    /* what the CUDA cache does not run yet says so */
    vq_cache *c = NULL;
    const vq_cache_config c3 = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM, .preset = "kivi4",
                                .window = VQ_WINDOW_TURBO8}; /* the 8-bit window is CPU-only */
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "cfg->window", vq_cache_create(gpu, &c3, &c));
    /* sink tokens and transforms are CPU-only */
    const vq_cache_config c6 = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM, .preset = "kivi4",
                                .sink_tokens = 4};
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "cfg->sink_tokens", vq_cache_create(gpu, &c6, &c));
    const vq_cache_transforms xf = {.center_keys = true};
    const vq_cache_config c7 = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM, .preset = "kivi4",
                                .transforms = &xf};
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "cfg->transforms[0]", vq_cache_create(gpu, &c7, &c));
    const int window[1] = {64}; /* sliding windows are CPU-only: no lower bound in the CUDA attention */
    const vq_cache_config c8 = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM, .preset = "kivi2",
                                .sliding_windows = window};
    VT_FAILS(gpu, VQ_ERR_UNSUPPORTED, "cfg->sliding_windows[0]", vq_cache_create(gpu, &c8, &c));
    VT_CHECK(c == NULL, "a refused create returned a cache");
    const vq_cache_layer_config f16 = {{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
    c = ct_cache(gpu, &f16, 1, HKV, HQ, DIM, PAGE, 0, 4, 0);
    int64_t id;
    VT_OK(gpu, vq_cache_seq_add(c, &id));
    DLTensor *k32 = vt_new(VT_F32, VT_DIMS(1, HKV, 3, DIM));
    vt_fill_normal(k32, &rng, 0, 1);
    DLTensor *dk32 = ct_upload(k32);
    VT_FAILS(gpu, VQ_ERR_INVALID_ARGUMENT, "'k'", vq_cache_append(c, 0, 1, &id, dk32, dk32, NULL)); /* f16 only */
    VT_FAILS(gpu, VQ_ERR_INVALID_ARGUMENT, "'k'", vq_cache_append(c, 0, 1, &id, k32, k32, NULL)); /* host memory */
    VT_CHECK(vq_cache_seq_length(c, id, 0) == 0, "a failed append changed the sequence");
    vq_cache_free(c);
    ct_free(dk32), vt_free(k32);
    ct_free(dk), ct_free(dv);
    vt_free(cb), vt_free(cv), vt_free(cs), vt_free(sn);
    ct_store_free(&st);
    vq_ctx_free(cpu), vq_ctx_free(gpu);
}

int main(void)
{
    ct_require_device();
    VT_RUN(test_cuda_vs_cpu);
    return vt_finish();
}
#endif
