/* test_calibration.c — vq_calibration: fitting (shapes, determinism across
 * thread counts, agreement with the trainers it is made of), table views,
 * save/load round trips (buffer and file, bit-exact), and every corruption
 * class of the calibration file (persist_corrupt.h). */
#include <unistd.h>

#include "persist/crc32c.h"
#include "persist_corrupt.h"

enum { L = 2, H = 2, N = 300, D = 16 };

static DLTensor *keys, *values;

static vq_calibration_config small_cfg(void)
{
    return (vq_calibration_config){.vecinfer_subspaces = 4, .vecinfer_centroids = 16, .commvq_stages = 2,
                                   .commvq_centroids = 8, .value_centroids = 16, .iters = 6, .seed = 7};
}

static vq_calibration *fit(vq_ctx *ctx, const vq_calibration_config *cfg)
{
    vq_calibration *cal = NULL;
    VT_OK(ctx, vq_calibration_fit(ctx, cfg, keys, values, &cal));
    return cal;
}

/* Bytes of every table equal. */
static bool same_tables(vq_ctx *ctx, const vq_calibration *a, const vq_calibration *b)
{
    for (int l = 0; l < L; l++)
        for (int t = VQ_CAL_VECINFER_SMOOTH; t <= VQ_CAL_VALUE_CENTROIDS; t++) {
            DLTensor ta, tb;
            const vq_status sa = vq_calibration_get_table(ctx, a, l, (vq_calibration_table)t, &ta);
            const vq_status sb = vq_calibration_get_table(ctx, b, l, (vq_calibration_table)t, &tb);
            if (sa != sb) return false;
            if (sa != VQ_OK) continue;
            if (ta.ndim != tb.ndim || memcmp(ta.shape, tb.shape, (size_t)ta.ndim * 8) != 0) return false;
            if (memcmp(ta.data, tb.data, (size_t)vt_numel(&ta) * 4) != 0) return false;
        }
    return true;
}

static void test_crc32c_vectors(void)
{
    /* RFC 3720 B.4 and the common check value */
    VT_CHECK(vq_crc32c(0, "123456789", 9) == 0xE3069283u, "check value 0x%08x", vq_crc32c(0, "123456789", 9));
    uint8_t b[32];
    memset(b, 0, 32);
    VT_CHECK(vq_crc32c(0, b, 32) == 0x8A9136AAu, "32 zeros: 0x%08x", vq_crc32c(0, b, 32));
    memset(b, 0xFF, 32);
    VT_CHECK(vq_crc32c(0, b, 32) == 0x62A8AB43u, "32 0xFF: 0x%08x", vq_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    VT_CHECK(vq_crc32c(0, b, 32) == 0x46DD794Eu, "0..31: 0x%08x", vq_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
    VT_CHECK(vq_crc32c(0, b, 32) == 0x113FDB5Cu, "31..0: 0x%08x", vq_crc32c(0, b, 32));
    /* streaming in pieces equals one pass, across the 8-byte steps */
    for (size_t cut = 0; cut <= 32; cut++)
        VT_CHECK(vq_crc32c(vq_crc32c(0, b, cut), b + cut, 32 - cut) == 0x113FDB5Cu, "split at %zu", cut);
}

static void test_fit_shapes_and_views(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_calibration_config cfg = small_cfg();
    vq_calibration *cal = fit(ctx, &cfg);
    vq_calibration_info info;
    VT_OK(ctx, vq_calibration_get_info(ctx, cal, &info));
    VT_CHECK(info.n_layers == L && info.n_kv_heads == H && info.head_dim == D && info.n_samples == N,
             "info %d %d %d %lld", info.n_layers, info.n_kv_heads, info.head_dim, (long long)info.n_samples);
    VT_CHECK(info.config.max_samples == 16384 && info.config.iters == 6, "defaults resolved");
    DLTensor t;
    VT_OK(ctx, vq_calibration_get_table(ctx, cal, 1, VQ_CAL_VECINFER_CODEBOOK, &t));
    VT_CHECK(t.ndim == 4 && t.shape[0] == H && t.shape[1] == 4 && t.shape[2] == 16 && t.shape[3] == D / 4,
             "pq codebook shape");
    VT_OK(ctx, vq_calibration_get_table(ctx, cal, 0, VQ_CAL_VECINFER_SMOOTH, &t));
    VT_CHECK(t.ndim == 2 && t.shape[0] == H && t.shape[1] == D, "smooth shape");
    VT_OK(ctx, vq_calibration_get_table(ctx, cal, 0, VQ_CAL_COMMVQ_CODEBOOK, &t));
    VT_CHECK(t.ndim == 3 && t.shape[0] == 2 && t.shape[1] == 8 && t.shape[2] == D, "commvq shape");
    VT_OK(ctx, vq_calibration_get_table(ctx, cal, 0, VQ_CAL_VALUE_CENTROIDS, &t));
    VT_CHECK(t.ndim == 1 && t.shape[0] == 16, "value shape");
    /* the VECINFER views plug straight into the codec: encode/decode beats a
     * per-channel scale of 1 (the error of coding keys as zero) by far */
    DLTensor cb, sm;
    VT_OK(ctx, vq_calibration_get_table(ctx, cal, 0, VQ_CAL_VECINFER_CODEBOOK, &cb));
    VT_OK(ctx, vq_calibration_get_table(ctx, cal, 0, VQ_CAL_VECINFER_SMOOTH, &sm));
    DLTensor *k0 = vt_view(keys, 4, (const int64_t[]){1, H, N, D});
    DLTensor *idx = vt_new(VT_U8, VT_DIMS(1, H, N, 4)), *kh = vt_new(VT_F32, VT_DIMS(1, H, N, D));
    VT_OK(ctx, vq_vecinfer_encode_decode(ctx, k0, &cb, &sm, 4, idx, kh));
    double err = 0, ref = 0;
    for (int64_t i = 0; i < vt_numel(kh); i++) {
        const double d = vt_get(kh, i) - vt_get(k0, i);
        err += d * d;
        ref += vt_get(k0, i) * vt_get(k0, i);
    }
    VT_CHECK(err < 0.5 * ref, "VECINFER relative squared error %.3f", err / ref);
    vt_free(idx);
    vt_free(kh);
    vt_free_view(k0);
    /* errors */
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "layer", vq_calibration_get_table(ctx, cal, L, VQ_CAL_VECINFER_SMOOTH, &t));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "which", vq_calibration_get_table(ctx, cal, 0, (vq_calibration_table)9, &t));
    vq_calibration_free(cal);
    cfg = (vq_calibration_config){.value_centroids = 4};
    cal = fit(ctx, &cfg);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "not fitted", vq_calibration_get_table(ctx, cal, 0, VQ_CAL_VECINFER_CODEBOOK, &t));
    vq_calibration_free(cal);
    vq_ctx_free(ctx);
}

static void test_fit_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_calibration *cal = (vq_calibration *)&cal;
    vq_calibration_config cfg = small_cfg();
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "cfg", vq_calibration_fit(ctx, NULL, keys, values, &cal));
    VT_CHECK(cal == NULL, "*out cleared on failure");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "values", vq_calibration_fit(ctx, &cfg, keys, NULL, &cal));
    cfg.vecinfer_subspaces = 5;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "vecinfer_subspaces", vq_calibration_fit(ctx, &cfg, keys, values, &cal));
    cfg = small_cfg();
    cfg.vecinfer_centroids = N + 1;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "fewer than cfg->vecinfer_centroids",
             vq_calibration_fit(ctx, &cfg, keys, values, &cal));
    cfg = small_cfg();
    cfg.max_samples = 10;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "vecinfer_centroids", vq_calibration_fit(ctx, &cfg, keys, values, &cal));
    cfg = (vq_calibration_config){0};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "no table", vq_calibration_fit(ctx, &cfg, keys, values, &cal));
    cfg = small_cfg();
    const float saved = ((float *)keys->data)[123];
    ((float *)keys->data)[123] = NAN;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "not finite", vq_calibration_fit(ctx, &cfg, keys, values, &cal));
    ((float *)keys->data)[123] = saved;
    DLTensor *k3 = vt_view(keys, 3, (const int64_t[]){L * H, N, D});
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "keys", vq_calibration_fit(ctx, &cfg, k3, values, &cal));
    vt_free_view(k3);
    vq_ctx_free(ctx);
}

/* Same seed: identical across thread counts (per ISA); another seed differs. */
static void determinism_isa(vq_ctx *ctx1, const char *isa)
{
    (void)ctx1;
    vq_ctx *ctx2 = vt_ctx(2), *ctx3 = vt_ctx(3);
    vq_calibration_config cfg = small_cfg();
    vq_calibration *a = fit(ctx1, &cfg), *b = fit(ctx2, &cfg), *c = fit(ctx3, &cfg);
    VT_CHECK(a && b && c && same_tables(ctx1, a, b) && same_tables(ctx1, a, c), "%s: 1/2/3 threads differ", isa);
    cfg.seed = 8;
    vq_calibration *d = fit(ctx2, &cfg);
    DLTensor ta, td;
    VT_OK(ctx1, vq_calibration_get_table(ctx1, a, 0, VQ_CAL_VECINFER_CODEBOOK, &ta));
    VT_OK(ctx1, vq_calibration_get_table(ctx1, d, 0, VQ_CAL_VECINFER_CODEBOOK, &td));
    VT_CHECK(memcmp(ta.data, td.data, (size_t)vt_numel(&ta) * 4) != 0, "%s: another seed gives the same codebook",
             isa);
    vq_calibration_free(a);
    vq_calibration_free(b);
    vq_calibration_free(c);
    vq_calibration_free(d);
    vq_ctx_free(ctx2);
    vq_ctx_free(ctx3);
}

static void test_determinism(void) { vt_for_each_isa(1, determinism_isa); }

/* The value table is exactly vq_lloyd_max_fit on the RMS-normalised values
 * (all tokens: N * H <= max_samples), and the smooth factors exactly
 * vq_vecinfer_smooth_factors per head. */
static void test_fit_matches_trainers(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_calibration_config cfg = small_cfg();
    vq_calibration *cal = fit(ctx, &cfg);
    for (int l = 0; l < L; l++) {
        DLTensor *s = vt_new(VT_F32, VT_DIMS(H * N * D));
        int64_t kept = 0;
        for (int64_t t = 0; t < H * N; t++) {
            const float *v = (const float *)values->data + ((int64_t)l * H * N + t) * D;
            double ss = 0;
            for (int c = 0; c < D; c++) ss += (double)v[c] * v[c];
            const double inv = 1.0 / sqrt(ss / D);
            for (int c = 0; c < D; c++) ((float *)s->data)[kept++] = (float)(v[c] * inv);
        }
        DLTensor *want = vt_new(VT_F32, VT_DIMS(16)), got;
        VT_OK(ctx, vq_lloyd_max_fit(ctx, s, 16, cfg.iters, want));
        VT_OK(ctx, vq_calibration_get_table(ctx, cal, l, VQ_CAL_VALUE_CENTROIDS, &got));
        VT_CHECK(memcmp(want->data, got.data, 64) == 0, "layer %d value centroids differ from vq_lloyd_max_fit", l);
        for (int h = 0; h < H; h++) {
            DLTensor *kh = vt_view(keys, 2, (const int64_t[]){N, D});
            kh->data = (float *)keys->data + ((int64_t)l * H + h) * N * D;
            DLTensor *sm = vt_new(VT_F32, VT_DIMS(D)), all;
            VT_OK(ctx, vq_vecinfer_smooth_factors(ctx, kh, sm));
            VT_OK(ctx, vq_calibration_get_table(ctx, cal, l, VQ_CAL_VECINFER_SMOOTH, &all));
            VT_CHECK(memcmp(sm->data, (float *)all.data + h * D, D * 4) == 0, "layer %d head %d smooth", l, h);
            vt_free(sm);
            vt_free_view(kh);
        }
        vt_free(want);
        vt_free(s);
    }
    vq_calibration_free(cal);
    /* shared VECINFER: one [M,C,D/M] codebook and a [D] smooth */
    cfg.vecinfer_shared = true;
    cal = fit(ctx, &cfg);
    DLTensor t;
    VT_OK(ctx, vq_calibration_get_table(ctx, cal, 0, VQ_CAL_VECINFER_CODEBOOK, &t));
    VT_CHECK(t.ndim == 3 && t.shape[0] == 4, "shared codebook rank %d", t.ndim);
    VT_OK(ctx, vq_calibration_get_table(ctx, cal, 0, VQ_CAL_VECINFER_SMOOTH, &t));
    VT_CHECK(t.ndim == 1 && t.shape[0] == D, "shared smooth rank %d", t.ndim);
    vq_calibration_free(cal);
    vq_ctx_free(ctx);
}

static vq_status load_cal(vq_ctx *ctx, const uint8_t *buf, size_t size)
{
    vq_calibration *cal = NULL;
    const vq_status s = vq_calibration_load_buffer(ctx, buf, size, &cal);
    if ((s == VQ_OK) != (cal != NULL)) return VQ_ERR_DEVICE; /* a status the checks never expect */
    vq_calibration_free(cal);
    return s;
}

static void test_round_trip_and_corruption(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_calibration_config cfg = small_cfg();
    vq_calibration *cal = fit(ctx, &cfg);
    size_t size = 0;
    VT_OK(ctx, vq_calibration_save_buffer(ctx, cal, NULL, 0, &size));
    uint8_t *buf = malloc(size);
    size_t small = 0;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "cap", vq_calibration_save_buffer(ctx, cal, buf, size - 1, &small));
    VT_CHECK(small == size, "size reported on a short buffer");
    VT_OK(ctx, vq_calibration_save_buffer(ctx, cal, buf, size, &small));
    vq_calibration *back = NULL;
    VT_OK(ctx, vq_calibration_load_buffer(ctx, buf, size, &back));
    VT_CHECK(back && same_tables(ctx, cal, back), "buffer round trip differs");
    vq_calibration_info a, b;
    vq_calibration_get_info(ctx, cal, &a);
    vq_calibration_get_info(ctx, back, &b);
    VT_CHECK(memcmp(&a.config, &b.config, offsetof(vq_calibration_config, progress)) == 0 &&
                 a.n_samples == b.n_samples, "config round trip");
    /* saving the loaded one gives the same bytes */
    uint8_t *again = malloc(size);
    VT_OK(ctx, vq_calibration_save_buffer(ctx, back, again, size, &small));
    VT_CHECK(memcmp(buf, again, size) == 0, "save(load(x)) != x");
    free(again);
    vq_calibration_free(back);
    /* files: atomic save, load, a missing file is VQ_ERR_IO */
    char path[] = "/tmp/vq_test_cal_XXXXXX";
    const int fd = mkstemp(path);
    VT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    VT_OK(ctx, vq_calibration_save(ctx, cal, path));
    back = NULL;
    VT_OK(ctx, vq_calibration_load(ctx, path, &back));
    VT_CHECK(back && same_tables(ctx, cal, back), "file round trip differs");
    vq_calibration_free(back);
    unlink(path);
    VT_FAILS(ctx, VQ_ERR_IO, "cannot open", vq_calibration_load(ctx, path, &back));
    VT_FAILS(ctx, VQ_ERR_IO, "cannot create", vq_calibration_save(ctx, cal, "/nonexistent-dir/x.vqcal"));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "buf", vq_calibration_load_buffer(ctx, NULL, 4, &back));
    /* corruption classes; counts: L, Hkv, D, M, C, R, C, n value centroids */
    size_t counts[10];
    for (int i = 0; i < 10; i++) counts[i] = VQ_FILE_HEADER_BYTES + VQ_FILE_SECTION_HEADER_BYTES + 4 * (size_t)i;
    vt_check_corruption(ctx, buf, size, load_cal, counts, 10, false);
    free(buf);
    vq_calibration_free(cal);
    /* a tiny calibration (one 4-entry value table) gets every byte checked */
    cfg = (vq_calibration_config){.value_centroids = 4, .iters = 3};
    DLTensor *k1 = vt_view(keys, 4, (const int64_t[]){1, 1, 8, D}), *v1 = vt_view(values, 4, (const int64_t[]){1, 1, 8, D});
    cal = NULL;
    VT_OK(ctx, vq_calibration_fit(ctx, &cfg, k1, v1, &cal));
    VT_OK(ctx, vq_calibration_save_buffer(ctx, cal, NULL, 0, &size));
    buf = malloc(size);
    VT_OK(ctx, vq_calibration_save_buffer(ctx, cal, buf, size, &size));
    vt_check_corruption(ctx, buf, size, load_cal, counts, 10, true);
    /* table values that pass the CRC but not the checks: descending centroids */
    const size_t first = VQ_FILE_HEADER_BYTES + 2 * VQ_FILE_SECTION_HEADER_BYTES + 88 + 8;
    float c0;
    memcpy(&c0, buf + first, 4);
    c0 = 1e30f;
    memcpy(buf + first, &c0, 4);
    vq_container_fixup(buf, size);
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "ascending", load_cal(ctx, buf, size));
    c0 = NAN;
    memcpy(buf + first, &c0, 4);
    vq_container_fixup(buf, size);
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "finite", load_cal(ctx, buf, size));
    free(buf);
    vt_free_view(k1);
    vt_free_view(v1);
    vq_calibration_free(cal);
    vq_ctx_free(ctx);
}

int main(void)
{
    vq_rng rng;
    vq_rng_seed(&rng, 12);
    keys = vt_new(VT_F32, VT_DIMS(L, H, N, D));
    values = vt_new(VT_F32, VT_DIMS(L, H, N, D));
    vt_fill_keys(keys, &rng, 2, 6.0);
    vt_fill_normal(values, &rng, 0.0, 1.5);
    VT_RUN(test_crc32c_vectors);
    VT_RUN(test_fit_shapes_and_views);
    VT_RUN(test_fit_errors);
    VT_RUN(test_determinism);
    VT_RUN(test_fit_matches_trainers);
    VT_RUN(test_round_trip_and_corruption);
    vt_free(keys);
    vt_free(values);
    return vt_finish();
}
