/* test_cuda_cache_persist.c — cache files across backends: a cache filled on
 * the CPU, saved, loaded on a CUDA ctx, saved again there and loaded back on
 * the CPU gives the same file bytes and bit-identical CPU attention; the
 * CUDA-loaded cache attends within the CUDA kernels' tolerance of the CPU
 * cache, and goes on appending (device tokens) as a cache filled on the GPU
 * does. The method presets the CUDA cache runs at this shape.
 * Needs a GPU (skips without one). */
#include "skip_without_cuda.h"
#ifdef VQ_TEST_HAVE_CUDA
#include "cuda_test_util.h"

enum { L = 2, HKV = 2, HQ = 4, D = 64, P = 32, R = 8, PMAX = 512, SQ = 2 };

static DLTensor *rope_cos, *rope_sin;
static vq_calibration *cal;

static vq_cache *make_cache(vq_ctx *ctx, const char *preset)
{
    vq_cache_layer_config lc[L];
    for (int l = 0; l < L; l++) {
        VT_CHECK(vq_cache_preset_layer_config(preset, D, &lc[l]) == VQ_OK, "preset %s", preset);
        lc[l].keys.cos_freqs = rope_cos;
        lc[l].keys.sin_freqs = rope_sin;
    }
    const vq_cache_config cfg = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D, .page_size = P,
                                 .capacity_pages = 8, .grow_pages = 4, .max_sequences = 4, .residual_tokens = R,
                                 .layers = lc, .calibration = cal};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    return c;
}

/* Tokens [from, to) of sequence s into every layer (host tensors on a CPU
 * cache, device copies on a CUDA one). */
static void append(vq_ctx *ctx, vq_cache *c, bool gpu, int64_t id, int s, int64_t from, int64_t to)
{
    const int64_t n = to - from;
    DLTensor *k = vt_new(VT_F16, VT_DIMS(1, HKV, n, D)), *v = vt_new(VT_F16, VT_DIMS(1, HKV, n, D));
    for (int l = 0; l < L; l++) {
        vq_rng rng;
        vq_rng_seed(&rng, (uint64_t)(1000 * s + 100000 * l) + (uint64_t)from);
        vt_fill_keys(k, &rng, 2, 4.0);
        vt_fill_normal(v, &rng, 0.0, 1.0);
        if (gpu) {
            DLTensor *dk = ct_upload(k), *dv = ct_upload(v);
            VT_OK(ctx, vq_cache_append(c, l, 1, &id, dk, dv, NULL));
            vq_ctx_synchronize(ctx);
            ct_free(dk);
            ct_free(dv);
        } else {
            VT_OK(ctx, vq_cache_append(c, l, 1, &id, k, v, NULL));
        }
    }
    vt_free(k);
    vt_free(v);
}

/* [L][n][HQ][SQ][D] f32 attention outputs (downloaded on CUDA). */
static DLTensor *attend_all(vq_ctx *ctx, vq_cache *c, bool gpu, const int64_t *ids, int n)
{
    DLTensor *all = vt_new(VT_F32, VT_DIMS(L, n, HQ, SQ, D));
    DLTensor *q = vt_new(VT_F32, VT_DIMS(n, HQ, SQ, D)), *o = vt_new(VT_F32, VT_DIMS(n, HQ, SQ, D));
    for (int l = 0; l < L; l++) {
        vq_rng rng;
        vq_rng_seed(&rng, 77 + (uint64_t)l);
        vt_fill_normal(q, &rng, 0.0, 1.0);
        if (gpu) {
            DLTensor *dq = ct_upload(q), *dout = ct_upload(o);
            VT_OK(ctx, vq_cache_attend(c, l, n, ids, dq, dout, NULL));
            ct_download(dout, o);
            ct_free(dq);
            ct_free(dout);
        } else {
            /* f32 arithmetic, as the CUDA kernels: the CPU's integer paths
             * quantize the query to int8 (relative error near 1e-3) */
            const vq_cache_attend_opts f32 = {.key_scores = VQ_KEY_SCORES_F32, .value_accum = VQ_VALUE_ACCUM_F32};
            VT_OK(ctx, vq_cache_attend(c, l, n, ids, q, o, &f32));
        }
        memcpy((float *)all->data + l * vt_numel(o), o->data, vt_bytes(o));
    }
    vt_free(q);
    vt_free(o);
    return all;
}

static uint8_t *save(vq_ctx *ctx, const vq_cache *c, size_t *size)
{
    VT_OK(ctx, vq_cache_save_buffer(c, -1, NULL, 0, size));
    uint8_t *b = malloc(*size);
    VT_OK(ctx, vq_cache_save_buffer(c, -1, b, *size, size));
    return b;
}

static void across(vq_ctx *cpu, vq_ctx *gpu, const char *preset)
{
    vq_cache *c = make_cache(cpu, preset);
    if (!c) return;
    int64_t ids[2];
    const int64_t len[2] = {37, 97};
    for (int s = 0; s < 2; s++) {
        VT_OK(cpu, vq_cache_seq_add(c, &ids[s]));
        append(cpu, c, false, ids[s], s, 0, len[s]);
    }
    size_t n0, n1, n2, n3;
    uint8_t *f0 = save(cpu, c, &n0);
    vq_cache *g = NULL, *back = NULL, *again = NULL;
    VT_OK(gpu, vq_cache_load_buffer(gpu, f0, n0, &g));
    if (!g) goto done;
    uint8_t *f1 = save(gpu, g, &n1);
    VT_OK(cpu, vq_cache_load_buffer(cpu, f1, n1, &back));
    /* CPU file -> CPU load -> save is the reference of one load's capacity */
    VT_OK(cpu, vq_cache_load_buffer(cpu, f0, n0, &again));
    uint8_t *f2 = save(cpu, back, &n2), *f3 = save(cpu, again, &n3);
    VT_CHECK(n1 == n2 && n2 == n3 && memcmp(f1, f2, n1) == 0 && memcmp(f2, f3, n2) == 0,
             "%s: bytes changed on the way CPU -> CUDA -> CPU", preset);
    DLTensor *ref = attend_all(cpu, c, false, ids, 2), *b = attend_all(cpu, back, false, ids, 2);
    VT_CHECK(memcmp(ref->data, b->data, vt_bytes(ref)) == 0, "%s: CPU attention after the CUDA trip differs", preset);
    DLTensor *dg = attend_all(gpu, g, true, ids, 2);
    double num = 0, den = 0;
    for (int64_t i = 0; i < vt_numel(ref); i++) {
        const double e = vt_get(dg, i) - vt_get(ref, i);
        num += e * e;
        den += vt_get(ref, i) * vt_get(ref, i);
    }
    VT_CHECK(sqrt(num / den) < 2e-3, "%s: CUDA-loaded cache attends %.3g (rel L2) from the CPU cache", preset,
             sqrt(num / den));
    /* the CUDA-loaded cache goes on like a cache filled on the GPU */
    vq_cache *native = make_cache(gpu, preset);
    int64_t nid[2];
    for (int s = 0; s < 2 && native; s++) {
        VT_OK(gpu, vq_cache_seq_add(native, &nid[s]));
        append(gpu, native, true, nid[s], s, 0, len[s]);
    }
    if (native) {
        append(gpu, g, true, ids[0], 0, len[0], len[0] + 9);
        append(gpu, native, true, nid[0], 0, len[0], len[0] + 9);
        DLTensor *x = attend_all(gpu, g, true, ids, 2), *y = attend_all(gpu, native, true, nid, 2);
        num = den = 0;
        for (int64_t i = 0; i < vt_numel(x); i++) {
            const double e = vt_get(x, i) - vt_get(y, i);
            num += e * e;
            den += vt_get(y, i) * vt_get(y, i);
        }
        VT_CHECK(sqrt(num / den) < 2e-3, "%s: loaded+appended vs GPU-filled: %.3g rel L2", preset, sqrt(num / den));
        vt_free(x);
        vt_free(y);
        vq_cache_free(native);
    }
    vt_free(ref);
    vt_free(b);
    vt_free(dg);
    free(f1);
    free(f2);
    free(f3);
done:
    free(f0);
    vq_cache_free(g);
    vq_cache_free(back);
    vq_cache_free(again);
    vq_cache_free(c);
}

int main(void)
{
    ct_require_device();
    vq_ctx *cpu = vt_ctx(2), *gpu = ct_ctx();
    VT_CHECK(gpu != NULL, "CUDA ctx");
    if (!gpu) return vt_finish();
    vq_rng rng;
    vq_rng_seed(&rng, 31);
    DLTensor *k = vt_new(VT_F32, VT_DIMS(L, HKV, 300, D)), *v = vt_new(VT_F32, VT_DIMS(L, HKV, 300, D));
    vt_fill_keys(k, &rng, 2, 4.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);
    const vq_calibration_config cc = {.vecinfer_subspaces = D / 4, .commvq_stages = D / 4, .iters = 2, .seed = 9};
    VT_OK(cpu, vq_calibration_fit(cpu, &cc, k, v, &cal));
    rope_cos = vt_new(VT_F32, VT_DIMS(PMAX, D / 2));
    rope_sin = vt_new(VT_F32, VT_DIMS(PMAX, D / 2));
    for (int64_t p = 0; p < PMAX; p++)
        for (int64_t i = 0; i < D / 2; i++) {
            const double th = (double)p * pow(10000.0, -2.0 * (double)i / D);
            vt_set(rope_cos, p * (D / 2) + i, cos(th));
            vt_set(rope_sin, p * (D / 2) + i, sin(th));
        }
    /* the presets whose methods the CUDA cache runs */
    static const char *const presets[] = {"f16", "kivi2", "kivi4", "turbo2", "turbo3", "turbo4", "rvq22",
                                          "qjl", "vecinfer2", "commvq"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        printf("  %s\n", presets[i]);
        across(cpu, gpu, presets[i]);
    }
    vq_calibration_free(cal);
    vt_free(k), vt_free(v), vt_free(rope_cos), vt_free(rope_sin);
    vq_ctx_free(gpu);
    vq_ctx_free(cpu);
    return vt_finish();
}
#endif
