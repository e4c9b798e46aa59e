/* make_corpus.c — writes the seed corpus of the fuzz targets (valid files
 * of every shape the loaders accept), committed under tests/fuzz/corpus/.
 *   fuzz_make_corpus <corpus dir>   (creates <dir>/<target>/seed-*)
 * Deterministic: the same library writes the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "npy.h"
#include "veloxquant.h"

static void die(vq_ctx *ctx, const char *what)
{
    fprintf(stderr, "make_corpus: %s: %s\n", what, ctx ? vq_ctx_last_error(ctx) : "");
    exit(1);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) die(NULL, path);
}

static void cal_seed(vq_ctx *ctx, const char *dir, int idx, int L, int H, int N, int D,
                     const vq_calibration_config *cfg)
{
    const size_t n = (size_t)L * H * N * D;
    float *k = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));
    vq_rng rng;
    vq_rng_seed(&rng, 100 + (uint64_t)idx);
    for (size_t i = 0; i < n; i++) {
        k[i] = (float)vq_rng_normal(&rng) * ((i % (size_t)D) == 3 ? 5.0f : 1.0f);
        v[i] = (float)vq_rng_normal(&rng);
    }
    int64_t shape[4] = {L, H, N, D};
    DLTensor kt = {.data = k, .device = {kDLCPU, 0}, .ndim = 4, .dtype = {kDLFloat, 32, 1}, .shape = shape};
    DLTensor vt = kt;
    vt.data = v;
    vq_calibration *cal;
    if (vq_calibration_fit(ctx, cfg, &kt, &vt, &cal) != VQ_OK) die(ctx, "fit");
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz_calibration/seed-%d.vqcal", dir, idx);
    if (vq_calibration_save(ctx, cal, path) != VQ_OK) die(ctx, "save");
    vq_calibration_free(cal);
    free(k);
    free(v);
}

static void npy_seed(const char *dir, int idx, int elem, int ndim, const int64_t *shape)
{
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    uint8_t *data = calloc((size_t)(numel ? numel : 1), (size_t)elem);
    for (int64_t i = 0; i < numel * elem; i++) data[i] = (uint8_t)(i * 37 + 11);
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/fuzz_npy/seed-%d.npy", dir, idx);
    if (vq_npy_save(path, elem, ndim, shape, data, err, sizeof err) != 0) die(NULL, err);
    free(data);
}

/* Sliding windows of the next cache_seed (NULL: none): its layers then get
 * their last token in an append of its own, so that pages are evicted. */
static const int *seed_windows;

/* A cache of layers lc[0..L) with sequences of the given lengths, saved
 * (window storage: f16, or window_bits > 0: VQ_WINDOW_TURBO of that many;
 * sinks sink tokens and transforms xf[L] or NULL, smooth with given scales). */
static void cache_seed(vq_ctx *ctx, const char *dir, int idx, int L, int hkv, int hq, int d, int page, int res,
                       const vq_cache_layer_config *lc, int n_seqs, const int *lens, int window_bits, int sinks,
                       const vq_cache_transforms *xf)
{
    const vq_cache_config cfg = {.n_layers = L, .n_kv_heads = hkv, .n_q_heads = hq, .head_dim = d,
                                 .page_size = page, .capacity_pages = 4, .grow_pages = 1, .max_sequences = 4,
                                 .residual_tokens = res, .layers = lc,
                                 .window = window_bits ? VQ_WINDOW_TURBO : VQ_WINDOW_F16, .window_bits = window_bits,
                                 .sink_tokens = sinks, .transforms = xf,
                                 .sliding_windows = seed_windows};
    vq_cache *c;
    if (vq_cache_create(ctx, &cfg, &c) != VQ_OK) die(ctx, "cache create");
    vq_rng rng;
    vq_rng_seed(&rng, 500 + (uint64_t)idx);
    for (int s = 0; s < n_seqs; s++) {
        int64_t id;
        if (vq_cache_seq_add(c, &id) != VQ_OK) die(ctx, "seq add");
        const int64_t n = lens[s];
        if (n == 0) continue;
        int64_t shape[4] = {1, hkv, n, d};
        uint16_t *k = malloc(sizeof(uint16_t) * (size_t)(hkv * n * d)), *v = malloc(sizeof(uint16_t) * (size_t)(hkv * n * d));
        DLTensor kt = {.data = k, .device = {kDLCPU, 0}, .ndim = 4, .dtype = {kDLFloat, 16, 1}, .shape = shape};
        DLTensor vt = kt;
        vt.data = v;
        for (int l = 0; l < L; l++) {
            for (int64_t i = 0; i < hkv * n * d; i++) {
                k[i] = vq_f32_to_f16((float)vq_rng_normal(&rng));
                v[i] = vq_f32_to_f16((float)vq_rng_normal(&rng));
            }
            if (seed_windows && n > 1) { /* tokens [0, n - 1), then the last one */
                int64_t sh[4] = {1, hkv, n - 1, d}, st[4] = {hkv * n * d, n * d, d, 1};
                DLTensor a = kt, b = vt;
                a.shape = b.shape = sh, a.strides = b.strides = st;
                if (vq_cache_append(c, l, 1, &id, &a, &b, NULL) != VQ_OK) die(ctx, "append");
                sh[2] = 1;
                a.byte_offset = b.byte_offset = (uint64_t)(n - 1) * (uint64_t)d * 2;
                if (vq_cache_append(c, l, 1, &id, &a, &b, NULL) != VQ_OK) die(ctx, "append");
                continue;
            }
            if (vq_cache_append(c, l, 1, &id, &kt, &vt, NULL) != VQ_OK) die(ctx, "append");
        }
        free(k);
        free(v);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz_cache/seed-%d.vqcache", dir, idx);
    if (vq_cache_save(c, -1, path) != VQ_OK) die(ctx, "cache save");
    vq_cache_free(c);
}

static void cache_seeds(vq_ctx *ctx, const char *dir)
{
    static const char *const presets[] = {"f16", "kivi2", "turbo3", "rvq22", "rabitq", "rabitq-exact", "qjl"};
    vq_cache_layer_config lc[2];
    for (int i = 0; i < 7; i++) {
        for (int l = 0; l < 2; l++)
            if (vq_cache_preset_layer_config(presets[i], 16, &lc[l]) != VQ_OK) die(NULL, presets[i]);
        const int lens[2] = {3 + i, 40};
        cache_seed(ctx, dir, i, i % 2 + 1, 1, 2, 16, 32, i % 3 == 0 ? 0 : 4, lc, 2, lens, 0, 0, NULL);
    }
    /* tables in the file: VECINFER (2 subspaces of 4) and CommVQ (one stage of 4, RoPE of 64 positions) */
    float pq[2 * 4 * 4], smooth[8], cv[1 * 4 * 8], cs[64 * 4], sn[64 * 4];
    for (int i = 0; i < 32; i++) pq[i] = (float)(i % 5) - 2.0f, cv[i] = (float)(i % 3) - 1.0f;
    for (int i = 0; i < 8; i++) smooth[i] = 1.0f + 0.25f * (float)i;
    for (int i = 0; i < 256; i++) cs[i] = 1.0f, sn[i] = 0.0f;
    int64_t vecinfer_shape[3] = {2, 4, 4}, sm_shape[1] = {8}, cv_shape[3] = {1, 4, 8}, rope_shape[2] = {64, 4};
    DLTensor tpq = {.data = pq, .device = {kDLCPU, 0}, .ndim = 3, .dtype = {kDLFloat, 32, 1}, .shape = vecinfer_shape};
    DLTensor tsm = tpq, tcv = tpq, tcs = tpq, tsn = tpq;
    tsm.data = smooth, tsm.ndim = 1, tsm.shape = sm_shape;
    tcv.data = cv, tcv.shape = cv_shape;
    tcs.data = cs, tcs.ndim = 2, tcs.shape = rope_shape;
    tsn.data = sn, tsn.ndim = 2, tsn.shape = rope_shape;
    lc[0] = (vq_cache_layer_config){{.method = VQ_KEY_VECINFER, .codebook = &tpq, .smooth = &tsm},
                                    {.method = VQ_VALUE_CODEBOOK}};
    lc[1] = (vq_cache_layer_config){{.method = VQ_KEY_COMMVQ, .codebook = &tcv, .cos_freqs = &tcs, .sin_freqs = &tsn},
                                    {.method = VQ_VALUE_TURBO, .bits = 2}};
    const int lens[2] = {5, 33};
    cache_seed(ctx, dir, 7, 2, 1, 1, 8, 32, 2, lc, 2, lens, 0, 0, NULL);
    /* version 3: KIVI_MIX keys with 6 of 16 wide channels, f16 TurboQuant value scales, a 3-bit window */
    lc[0] = (vq_cache_layer_config){{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 8,
                                     .wide_channels = 6},
                                    {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true}};
    const int lens8[2] = {7, 37};
    cache_seed(ctx, dir, 8, 1, 1, 2, 16, 32, 4, lc, 2, lens8, 3, 0, NULL);
    /* version 4: 3 sink tokens (one sequence inside them), fitted means in
     * layer 0, a given key mean and key scales in layer 1 */
    for (int l = 0; l < 2; l++)
        if (vq_cache_preset_layer_config("kivi2", 16, &lc[l]) != VQ_OK) die(NULL, "kivi2");
    float mean[16], scale[16];
    for (int i = 0; i < 16; i++) mean[i] = 0.125f * (float)i, scale[i] = 0.5f + 0.0625f * (float)i;
    int64_t table_shape[2] = {1, 16};
    DLTensor tmean = {.data = mean, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = table_shape};
    DLTensor tscale = tmean;
    tscale.data = scale;
    const vq_cache_transforms xf[2] = {{.center_keys = true, .center_values = true},
                                       {.center_keys = true, .smooth = true, .key_mean = &tmean, .key_scale = &tscale}};
    const int lens9[2] = {2, 41};
    cache_seed(ctx, dir, 9, 2, 1, 2, 16, 32, 4, lc, 2, lens9, 0, 3, xf);
    /* version 5: a sliding window of 20 tokens on layer 0 (pages evicted), full attention on layer 1 */
    static const int wins[2] = {20, 0};
    for (int l = 0; l < 2; l++)
        if (vq_cache_preset_layer_config("kivi2", 16, &lc[l]) != VQ_OK) die(NULL, "kivi2");
    const int lens10[2] = {100, 9};
    seed_windows = wins;
    cache_seed(ctx, dir, 10, 2, 1, 2, 16, 32, 4, lc, 2, lens10, 0, 0, NULL);
    seed_windows = NULL;
}

/* Profiles, in the calibration target's corpus (fuzz_calibration.c loads
 * both): every key and value method, sliding windows, each window storage,
 * sink tokens and transforms with and without tables (version 2; the
 * version 1 seeds seed-profile-v1-*.vqprof are kept as files). */
static void profile_seeds(vq_ctx *ctx, const char *dir)
{
    vq_cache_layer_config lc[4];
    static float tab[3][2 * 64];
    for (int j = 0; j < 2 * 64; j++) tab[0][j] = 0.01f * (float)j, tab[1][j] = -0.5f, tab[2][j] = 1.0f + 0.125f * (float)(j % 8);
    int64_t shape[2] = {2, 64};
    DLTensor t[3];
    for (int j = 0; j < 3; j++)
        t[j] = (DLTensor){.data = tab[j], .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = shape};
    const vq_cache_transforms xf[4] = {{.center_keys = true, .center_values = true, .smooth = true},
                                       {.center_keys = true, .key_mean = &t[0]},
                                       {.center_keys = true, .center_values = true, .smooth = true,
                                        .key_mean = &t[0], .value_mean = &t[1], .key_scale = &t[2]},
                                       {0}};
    static const char *const presets[][4] = {{"kivi4-turbo3", "kivimix-turbo2", "rabitq", "qjl"},
                                             {"turbo3", "rvq22", "kivi2", "f16"}};
    static const int wins[4] = {0, 512, 0, 37};
    for (int i = 0; i < 2; i++) {
        for (int l = 0; l < 4; l++)
            if (vq_cache_preset_layer_config(presets[i][l], 64, &lc[l]) != VQ_OK) die(NULL, presets[i][l]);
        if (i == 1) lc[3].values = (vq_value_config){.method = VQ_VALUE_CODEBOOK};
        const vq_profile_config pc = {.n_layers = 4, .n_kv_heads = 2, .head_dim = 64, .layers = lc,
                                      .sliding_windows = i ? wins : NULL, .residual_tokens = 16 * i,
                                      .window = i ? VQ_WINDOW_TURBO : VQ_WINDOW_F16, .window_bits = i ? 5 : 0,
                                      .sink_tokens = 4 * i, .transforms = i ? xf : NULL};
        vq_profile *p;
        if (vq_profile_create(ctx, &pc, &p) != VQ_OK) die(ctx, "profile");
        char path[512];
        snprintf(path, sizeof path, "%s/fuzz_calibration/seed-profile-%d.vqprof", dir, i);
        if (vq_profile_save(ctx, p, path) != VQ_OK) die(ctx, "profile save");
        vq_profile_free(p);
    }
}

/* A version 2.0 / 3.0 header, as NumPy writes for large headers. */
static void npy_v2_seed(const char *dir, int idx, int major)
{
    const char *h = "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }";
    uint8_t buf[256];
    size_t hl = strlen(h), n = 12;
    const size_t total = (12 + hl + 1 + 63) / 64 * 64;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    memcpy(buf + 12, h, hl);
    n += hl;
    while (n + 1 < total) buf[n++] = ' ';
    buf[n++] = '\n';
    const uint32_t len = (uint32_t)(n - 12);
    for (int i = 0; i < 4; i++) buf[8 + i] = (uint8_t)(len >> (8 * i));
    for (int i = 0; i < 12; i++) buf[n++] = (uint8_t)i;
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz_npy/seed-%d.npy", dir, idx);
    write_file(path, buf, n);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_make_corpus <corpus dir>\n");
        return 2;
    }
    const char *dir = argv[1];
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz_calibration", dir);
    mkdir(dir, 0755);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/fuzz_npy", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/fuzz_cache", dir);
    mkdir(path, 0755);
    vq_ctx *ctx;
    if (vq_ctx_create(&(vq_ctx_config){.num_threads = 1}, &ctx) != VQ_OK) die(NULL, "ctx");
    cal_seed(ctx, dir, 0, 1, 1, 8, 8, &(vq_calibration_config){.value_centroids = 4, .iters = 2});
    cal_seed(ctx, dir, 1, 2, 2, 16, 8,
             &(vq_calibration_config){.vecinfer_subspaces = 2, .vecinfer_centroids = 4, .iters = 2, .seed = 1});
    cal_seed(ctx, dir, 2, 1, 2, 16, 8,
             &(vq_calibration_config){.vecinfer_subspaces = 4, .vecinfer_centroids = 3, .vecinfer_shared = true, .commvq_stages = 2,
                                      .commvq_centroids = 2, .value_centroids = 3, .iters = 2, .seed = 2});
    cal_seed(ctx, dir, 3, 3, 1, 8, 4,
             &(vq_calibration_config){.commvq_stages = 1, .commvq_centroids = 2, .iters = 1, .seed = 3});
    cache_seeds(ctx, dir);
    profile_seeds(ctx, dir);
    npy_seed(dir, 0, 4, 4, (const int64_t[]){1, 2, 3, 8});
    npy_seed(dir, 1, 2, 4, (const int64_t[]){2, 1, 4, 8});
    npy_seed(dir, 2, 4, 1, (const int64_t[]){5});
    npy_seed(dir, 3, 2, 0, NULL);
    npy_seed(dir, 4, 4, 2, (const int64_t[]){0, 3});
    npy_v2_seed(dir, 5, 2);
    npy_v2_seed(dir, 6, 3);
    vq_ctx_free(ctx);
    return 0;
}
