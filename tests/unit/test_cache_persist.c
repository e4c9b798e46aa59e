/* test_cache_persist.c — cache files (vq_cache_save/_load, sequence files):
 * every preset round-trips with bit-identical attention outputs (buffer and
 * file), a loaded cache goes on appending exactly as the saved one does
 * (token by token), one sequence moves into another cache, mismatched caches
 * and multi-sequence files are refused, and every corruption class of the
 * cache file is rejected (persist_corrupt.h), including CommVQ positions
 * that pass the checksums but not the RoPE table. The presets that need
 * tables take them from a vq_calibration fitted here. 8-bit windows
 * (VQ_WINDOW_TURBO8): round trips, file version 2 (f16 windows stay version
 * 1), refused by a cache of the other window, and corruption. Version 3
 * (KIVI_MIX wide_channels, f16 TurboQuant value scales) likewise. */
#include <unistd.h>

#include "cache/cache_internal.h"
#include "persist_corrupt.h"

enum { L = 2, HKV = 2, HQ = 4, D = 64, P = 32, R = 8, PMAX = 512, NSEQ = 3, SQ = 2 };
static const int64_t lengths[NSEQ] = {1, 37, 97};

static vq_calibration *cal;
static vq_cache_window window; /* of the caches make_cache makes */
static int window_bits;        /* theirs, with VQ_WINDOW_TURBO */
static int wide_channels;      /* of their KIVI_MIX layers */
static bool scale_f16;         /* of their TurboQuant-value layers */
static DLTensor *rope_cos, *rope_sin;

static vq_cache *make_cache(vq_ctx *ctx, const char *preset, int residual)
{
    vq_cache_layer_config lc[L];
    for (int l = 0; l < L; l++) {
        VT_CHECK(vq_cache_preset_layer_config(preset, D, &lc[l]) == VQ_OK, "preset %s", preset);
        if (lc[l].keys.method == VQ_KEY_KIVI_MIX && wide_channels) {
            lc[l].keys.wide_channels = wide_channels;
            lc[l].keys.group_size = 16; /* groups that the sequences fill, so pages hold codes */
        }
        if (lc[l].values.method == VQ_VALUE_TURBO) lc[l].values.scale_f16 = scale_f16;
        if (lc[l].keys.method == VQ_KEY_COMMVQ) {
            lc[l].keys.cos_freqs = rope_cos;
            lc[l].keys.sin_freqs = rope_sin;
        }
    }
    /* a page holds whole key groups (kivi4-turbo*: 128 tokens) */
    const bool kivi = lc[0].keys.method == VQ_KEY_KIVI || lc[0].keys.method == VQ_KEY_KIVI_MIX;
    const int64_t page = kivi && lc[0].keys.group_size > P ? lc[0].keys.group_size : P;
    const vq_cache_config cfg = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = D, .page_size = page,
                                 .capacity_pages = 4, .grow_pages = 2, .max_sequences = 8,
                                 .residual_tokens = residual, .layers = lc, .calibration = cal,
                                 .window = window, .window_bits = window_bits};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    return c;
}

/* Appends tokens [from, to) of sequence s (seeded by s and the position) to
 * every layer, one append of them all or one per token. */
static void append(vq_ctx *ctx, vq_cache *c, int64_t id, int s, int64_t from, int64_t to, bool one_by_one)
{
    for (int64_t t = from; t < to;) {
        const int64_t n = one_by_one ? 1 : to - t;
        DLTensor *k = vt_new(VT_F16, VT_DIMS(1, HKV, n, D)), *v = vt_new(VT_F16, VT_DIMS(1, HKV, n, D));
        for (int l = 0; l < L; l++) {
            vq_rng rng;
            vq_rng_seed(&rng, (uint64_t)(1000 * s + 100000 * l) + (uint64_t)t);
            vt_fill_keys(k, &rng, 2, 4.0);
            vt_fill_normal(v, &rng, 0.0, 1.0);
            VT_OK(ctx, vq_cache_append(c, l, 1, &id, k, v, NULL));
        }
        vt_free(k);
        vt_free(v);
        t += n;
    }
}

/* Attention of every sequence in ids over every layer: [L][n][HQ][SQ][D] f32. */
static float *attend_all(vq_ctx *ctx, vq_cache *c, const int64_t *ids, int n)
{
    DLTensor *q = vt_new(VT_F32, VT_DIMS(n, HQ, SQ, D)), *o = vt_new(VT_F32, VT_DIMS(n, HQ, SQ, D));
    float *all = malloc(sizeof(float) * (size_t)(L * vt_numel(o)));
    for (int l = 0; l < L; l++) {
        vq_rng rng;
        vq_rng_seed(&rng, 77 + (uint64_t)l);
        vt_fill_normal(q, &rng, 0.0, 1.0);
        VT_OK(ctx, vq_cache_attend(c, l, n, ids, q, o, NULL));
        memcpy(all + l * vt_numel(o), o->data, sizeof(float) * (size_t)vt_numel(o));
    }
    vt_free(q);
    vt_free(o);
    return all;
}

static bool same_outputs(const float *a, const float *b, int n)
{
    return memcmp(a, b, sizeof(float) * (size_t)(L * n * HQ * SQ * D)) == 0;
}

/* Three sequences of awkward lengths, the last partly token by token. */
static void fill(vq_ctx *ctx, vq_cache *c, int64_t *ids)
{
    for (int s = 0; s < NSEQ; s++) {
        VT_OK(ctx, vq_cache_seq_add(c, &ids[s]));
        const int64_t bulk = s == 2 ? 60 : lengths[s];
        append(ctx, c, ids[s], s, 0, bulk, false);
        append(ctx, c, ids[s], s, bulk, lengths[s], true);
    }
}

static uint8_t *save(vq_ctx *ctx, const vq_cache *c, int64_t seq, size_t *size)
{
    VT_OK(ctx, vq_cache_save_buffer(c, seq, NULL, 0, size));
    uint8_t *buf = malloc(*size);
    VT_OK(ctx, vq_cache_save_buffer(c, seq, buf, *size, size));
    return buf;
}

static void round_trip(vq_ctx *ctx, const char *preset)
{
    vq_cache *c = make_cache(ctx, preset, R);
    if (!c) return;
    int64_t ids[NSEQ];
    fill(ctx, c, ids);
    float *want = attend_all(ctx, c, ids, NSEQ);
    size_t size;
    uint8_t *buf = save(ctx, c, -1, &size);
    vq_cache *back = NULL;
    VT_OK(ctx, vq_cache_load_buffer(ctx, buf, size, &back));
    if (back) {
        float *got = attend_all(ctx, back, ids, NSEQ);
        VT_CHECK(same_outputs(want, got, NSEQ), "%s: loaded cache attends differently", preset);
        free(got);
        for (int s = 0; s < NSEQ; s++)
            VT_CHECK(vq_cache_seq_length(back, ids[s], 1) == lengths[s], "%s: seq %d length", preset, s);
        /* both go on: the same tokens appended one by one give the same outputs */
        append(ctx, c, ids[1], 1, lengths[1], lengths[1] + 11, true);
        append(ctx, back, ids[1], 1, lengths[1], lengths[1] + 11, true);
        float *a = attend_all(ctx, c, ids, NSEQ), *b = attend_all(ctx, back, ids, NSEQ);
        VT_CHECK(same_outputs(a, b, NSEQ), "%s: appending after the load diverges", preset);
        free(a);
        free(b);
        /* new ids continue after the saved ones */
        int64_t fresh = -1;
        VT_OK(ctx, vq_cache_seq_add(back, &fresh));
        VT_CHECK(fresh > ids[NSEQ - 1], "%s: new id %lld after a load", preset, (long long)fresh);
        vq_cache_free(back);
    }
    /* one sequence into another cache of the same config */
    size_t one_size;
    uint8_t *one = save(ctx, c, ids[2], &one_size);
    VT_CHECK(one_size < size, "%s: a sequence file is not smaller than the cache file", preset);
    vq_cache *other = make_cache(ctx, preset, R);
    int64_t pad, got_id = -1;
    VT_OK(ctx, vq_cache_seq_add(other, &pad));
    VT_OK(ctx, vq_cache_seq_load_buffer(other, one, one_size, &got_id));
    float *alone = attend_all(ctx, c, &ids[2], 1), *moved = attend_all(ctx, other, &got_id, 1);
    VT_CHECK(got_id != pad && same_outputs(alone, moved, 1), "%s: moved sequence attends differently", preset);
    free(alone);
    free(moved);
    /* a whole-cache file is not a sequence file */
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "holds 3 sequences", vq_cache_seq_load_buffer(other, buf, size, &got_id));
    vq_cache_free(other);
    free(one);
    free(buf);
    free(want);
    vq_cache_free(c);
}

static void test_presets_round_trip(void)
{
    vq_ctx *ctx = vt_ctx(2);
    for (int i = 0; i < vq_cache_preset_count(); i++) round_trip(ctx, vq_cache_preset(i)->name);
    vq_ctx_free(ctx);
}

/* The format version of a file (header bytes 8..11). */
static uint32_t file_version(const uint8_t *buf)
{
    return (uint32_t)buf[8] | (uint32_t)buf[9] << 8 | (uint32_t)buf[10] << 16 | (uint32_t)buf[11] << 24;
}

/* Sequence 1 of a and of b (two caches of different layouts, filled here)
 * as files: a's smaller, of versions va and vb, and each refused by the
 * other cache with `why`, which stays as it was. Returns a's file. */
static uint8_t *save_refused_pair(vq_ctx *ctx, vq_cache *a, vq_cache *b, uint32_t va, uint32_t vb, const char *why,
                                  size_t *size)
{
    int64_t ids[NSEQ], bids[NSEQ], id;
    fill(ctx, a, ids);
    fill(ctx, b, bids);
    size_t bsize;
    uint8_t *buf = save(ctx, a, ids[1], size), *bbuf = save(ctx, b, bids[1], &bsize);
    VT_CHECK(file_version(buf) == va && file_version(bbuf) == vb, "file versions %u, %u: expected %u, %u",
             (unsigned)file_version(buf), (unsigned)file_version(bbuf), (unsigned)va, (unsigned)vb);
    VT_CHECK(bsize > *size, "version %u file (%zu bytes) not smaller than version %u's (%zu)", (unsigned)va, *size,
             (unsigned)vb, bsize);
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, why, vq_cache_seq_load_buffer(b, buf, *size, &id));
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, why, vq_cache_seq_load_buffer(a, bbuf, bsize, &id));
    vq_cache_memory_report rep;
    VT_OK(ctx, vq_cache_memory(b, &rep));
    VT_CHECK(rep.sequences == NSEQ, "a refused load changed the cache");
    free(bbuf);
    return buf;
}

/* buf (a sequence file of c, freed here) relabelled as version v, checksums
 * fixed, is refused by c with `why`. */
static void refused_as_version(vq_ctx *ctx, vq_cache *c, uint8_t *buf, size_t size, uint8_t v, const char *why)
{
    buf[8] = v;
    vq_container_fixup(buf, size);
    int64_t id;
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, why, vq_cache_seq_load_buffer(c, buf, size, &id));
    free(buf);
}

/* 8-bit windows round-trip as the f16 ones do; their files are version 2
 * (f16 windows: 1) and a cache of the other window refuses them. */
static void test_window8(void)
{
    vq_ctx *ctx = vt_ctx(2);
    const char *presets[] = {"kivi4-turbo2", "kivi2", "turbo3", "f16", "kivimix-turbo2"};
    window = VQ_WINDOW_TURBO8;
    for (int i = 0; i < 5; i++) round_trip(ctx, presets[i]);
    vq_cache *c = make_cache(ctx, "kivi4", R);
    window = VQ_WINDOW_F16;
    vq_cache *f16 = make_cache(ctx, "kivi4", R);
    size_t size;
    uint8_t *buf = save_refused_pair(ctx, c, f16, 2, 1, "not this cache", &size);
    refused_as_version(ctx, c, buf, size, 1, "version 1 has"); /* version 1's CONF is shorter */
    vq_cache_free(c), vq_cache_free(f16);
    vq_ctx_free(ctx);
}

/* VQ_WINDOW_TURBO windows (5 bits) round-trip; their files are version 3
 * and a cache of the 8-bit window refuses them (and they its files); as
 * version 2 their window word is out of range. */
static void test_window_bits(void)
{
    vq_ctx *ctx = vt_ctx(2);
    const char *presets[] = {"kivi4-turbo2", "turbo3", "kivimix-turbo2"};
    window = VQ_WINDOW_TURBO, window_bits = 5;
    for (int i = 0; i < 3; i++) round_trip(ctx, presets[i]);
    vq_cache *c = make_cache(ctx, "kivi4", R);
    window = VQ_WINDOW_TURBO8, window_bits = 0;
    vq_cache *c8 = make_cache(ctx, "kivi4", R);
    window = VQ_WINDOW_F16;
    size_t size;
    uint8_t *buf = save_refused_pair(ctx, c, c8, 3, 2, "not this cache", &size);
    refused_as_version(ctx, c, buf, size, 2, "window storage 2");
    vq_cache_free(c), vq_cache_free(c8);
    vq_ctx_free(ctx);
}

/* KIVI_MIX wide_channels and f16 TurboQuant value scales round-trip; their
 * files are version 3 (the same presets without them stay 1); a cache of
 * the default fields refuses them; a version-2 header over them is corrupt
 * (its LCFG reserved words are not 0). */
static void test_layer_fields_v3(void)
{
    vq_ctx *ctx = vt_ctx(2);
    wide_channels = 20, scale_f16 = true;
    round_trip(ctx, "kivimix-turbo2");
    round_trip(ctx, "kivi4-turbo2");
    vq_cache *c = make_cache(ctx, "kivimix-turbo2", R);
    wide_channels = 32, scale_f16 = false; /* D/2: the default, with the same 16-token groups */
    vq_cache *plain = make_cache(ctx, "kivimix-turbo2", R);
    wide_channels = 0;
    size_t size;
    uint8_t *buf = save_refused_pair(ctx, c, plain, 3, 1, "layer 0", &size);
    /* a width mask of another count (checksums fixed): the attention would misorder the channels */
    size_t bounds[8];
    VT_CHECK(vt_section_bounds(buf, size, bounds, 8) == 6, "CONF, 2 LCFG, 2 SQLY");
    const vq_cache_layer *L0 = &c->layers[0];
    const size_t mask_at = bounds[3] + VQ_FILE_SECTION_HEADER_BYTES + 32 /* SQLY head */ +
                           (size_t)L0->streams[3].page_off; /* k_codes, k_scale, k_zero, k_mask */
    VT_CHECK(strcmp(L0->streams[3].name, "k_mask") == 0, "stream 3 is %s", L0->streams[3].name);
    uint8_t *bad = malloc(size);
    memcpy(bad, buf, size);
    bad[mask_at] ^= 1u;
    vq_container_fixup(bad, size);
    int64_t id;
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "width mask marks", vq_cache_seq_load_buffer(c, bad, size, &id));
    free(bad);
    refused_as_version(ctx, c, buf, size, 2, "reserved fields");
    vq_cache_free(c), vq_cache_free(plain);
    vq_ctx_free(ctx);
}

static void test_files_and_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_cache *c = make_cache(ctx, "kivi2", R);
    int64_t ids[NSEQ];
    fill(ctx, c, ids);
    char path[] = "/tmp/vq_test_cache_XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    VT_OK(ctx, vq_cache_save(c, -1, path));
    vq_cache *back = NULL;
    VT_OK(ctx, vq_cache_load(ctx, path, &back));
    /* the loaded cache reports the saved shape (how a caller learns it from a file) */
    vq_cache_config got, was;
    memset(&got, 0x5a, sizeof got);
    VT_OK(ctx, vq_cache_get_config(c, &was));
    VT_OK(ctx, back ? vq_cache_get_config(back, &got) : VQ_ERR_INVALID_ARGUMENT);
    VT_CHECK(was.n_layers == L && was.n_kv_heads == HKV && was.n_q_heads == HQ && was.head_dim == D &&
                 was.page_size == P && was.residual_tokens == R && was.grow_pages == 2 && was.max_sequences == 8 &&
                 was.capacity_pages >= 4 && was.preset == NULL && was.layers == NULL && was.f16_layers == NULL &&
                 was.n_f16_layers == 0 && was.calibration == NULL,
             "vq_cache_get_config of the created cache");
    VT_CHECK(got.n_layers == L && got.n_kv_heads == HKV && got.n_q_heads == HQ && got.head_dim == D &&
                 got.page_size == P && got.residual_tokens == R && got.capacity_pages >= 1 && got.preset == NULL,
             "vq_cache_get_config of the loaded cache");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_cache_get_config(c, NULL));
    VT_CHECK(vq_cache_get_config(NULL, &got) == VQ_ERR_INVALID_ARGUMENT, "NULL cache");
    float *a = attend_all(ctx, c, ids, NSEQ), *b = back ? attend_all(ctx, back, ids, NSEQ) : NULL;
    VT_CHECK(b && same_outputs(a, b, NSEQ), "file round trip attends differently");
    free(a);
    free(b);
    /* a sequence file through a path */
    VT_OK(ctx, vq_cache_save(c, ids[1], path));
    int64_t id;
    VT_OK(ctx, vq_cache_seq_load(back, path, &id));
    VT_CHECK(vq_cache_seq_length(back, id, 0) == lengths[1], "seq_load length");
    unlink(path);
    vq_cache *none = (vq_cache *)&none;
    VT_FAILS(ctx, VQ_ERR_IO, "cannot open", vq_cache_load(ctx, path, &none));
    VT_CHECK(none == NULL, "*out cleared on failure");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "seq_id", vq_cache_save(c, 12345, path));
    size_t size;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "size_out", vq_cache_save_buffer(c, -1, NULL, 0, NULL));
    uint8_t *one = save(ctx, c, ids[1], &size);
    uint8_t small[8];
    size_t need;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "cap", vq_cache_save_buffer(c, ids[1], small, sizeof small, &need));
    VT_CHECK(need == size, "size on a short buffer");
    /* a cache of another config refuses the sequence, and stays as it was */
    vq_cache *turbo = make_cache(ctx, "turbo3", R);
    int64_t t0;
    VT_OK(ctx, vq_cache_seq_add(turbo, &t0));
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "layer 0", vq_cache_seq_load_buffer(turbo, one, size, &id));
    vq_cache_memory_report rep;
    VT_OK(ctx, vq_cache_memory(turbo, &rep));
    VT_CHECK(rep.sequences == 1 && rep.tokens == 0, "refused load changed the cache (%lld sequences)",
             (long long)rep.sequences);
    vq_cache *other_r = make_cache(ctx, "kivi2", R + 1);
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "not this cache", vq_cache_seq_load_buffer(other_r, one, size, &id));
    vq_cache_free(other_r);
    vq_cache_free(turbo);
    free(one);
    vq_cache_free(back);
    vq_cache_free(c);
    vq_ctx_free(ctx);
}

static vq_status load_cache(vq_ctx *ctx, const uint8_t *buf, size_t size)
{
    vq_cache *c = (vq_cache *)&c;
    const vq_status s = vq_cache_load_buffer(ctx, buf, size, &c);
    if ((s == VQ_OK) != (c != NULL)) return VQ_ERR_DEVICE;
    vq_cache_free(c);
    return s;
}

/* A small f16 cache (one layer, one head, D 8, a window) gets every byte
 * truncated and flipped; a kivi2 one the boundaries and every 7th byte. */
static void test_corruption(void)
{
    vq_ctx *ctx = vt_ctx(1);
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = 1, .n_q_heads = 1, .head_dim = 8, .page_size = 32,
                                 .capacity_pages = 3, .max_sequences = 4, .residual_tokens = 4, .preset = "f16"};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    int64_t a, b;
    VT_OK(ctx, vq_cache_seq_add(c, &a));
    VT_OK(ctx, vq_cache_seq_add(c, &b));
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    DLTensor *k = vt_new(VT_F16, VT_DIMS(1, 1, 40, 8)), *v = vt_new(VT_F16, VT_DIMS(1, 1, 40, 8));
    vt_fill_normal(k, &rng, 0, 1), vt_fill_normal(v, &rng, 0, 1);
    VT_OK(ctx, vq_cache_append(c, 0, 1, &b, k, v, NULL));
    DLTensor *k5 = vt_view(k, 4, (const int64_t[]){1, 1, 5, 8}), *v5 = vt_view(v, 4, (const int64_t[]){1, 1, 5, 8});
    VT_OK(ctx, vq_cache_append(c, 0, 1, &a, k5, v5, NULL));
    size_t size;
    uint8_t *buf = save(ctx, c, -1, &size);
    size_t bounds[16];
    const int nb = vt_section_bounds(buf, size, bounds, 16);
    VT_CHECK(nb == 5, "CONF, LCFG, 2 SQLY: %d bounds", nb);
    /* CONF: L, Hkv, Hq, D, P, (max_sequences is a limit: 2^20 is valid), R, sequences */
    size_t counts[12];
    for (int i = 0; i < 8; i++)
        counts[i] = VQ_FILE_HEADER_BYTES + VQ_FILE_SECTION_HEADER_BYTES + 4 * (size_t)(i == 5 ? 7 : i);
    /* the first sequence's id, n and n_enc (low words) */
    counts[8] = bounds[2] + VQ_FILE_SECTION_HEADER_BYTES;
    counts[9] = bounds[2] + VQ_FILE_SECTION_HEADER_BYTES + 16;
    counts[10] = bounds[2] + VQ_FILE_SECTION_HEADER_BYTES + 24;
    counts[11] = bounds[1] + VQ_FILE_SECTION_HEADER_BYTES;  /* the layer's key method */
    vt_check_corruption(ctx, buf, size, load_cache, counts, 12, true);
    free(buf);
    /* the same with an 8-bit window (version 2: CONF's window word, 8-bit window rows) */
    vq_cache_config cfg8 = cfg;
    cfg8.window = VQ_WINDOW_TURBO8;
    vq_cache *c8 = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg8, &c8));
    int64_t a8;
    VT_OK(ctx, vq_cache_seq_add(c8, &a8));
    VT_OK(ctx, vq_cache_append(c8, 0, 1, &a8, k, v, NULL));
    buf = save(ctx, c8, -1, &size);
    VT_CHECK(file_version(buf) == 2, "8-bit window file version %u", (unsigned)file_version(buf));
    vt_check_corruption(ctx, buf, size, load_cache, counts, 8, true);
    free(buf);
    vq_cache_free(c8);
    vt_free_view(k5), vt_free_view(v5), vt_free(k), vt_free(v);
    vq_cache_free(c);
    /* kivi2 over two layers: boundaries, every 7th byte */
    c = make_cache(ctx, "kivi2", R);
    int64_t ids[NSEQ];
    fill(ctx, c, ids);
    buf = save(ctx, c, -1, &size);
    vt_check_corruption(ctx, buf, size, load_cache, counts, 8, false);
    free(buf);
    vq_cache_free(c);
    /* CommVQ positions outside the RoPE table behind valid checksums */
    c = make_cache(ctx, "commvq", 0);
    int64_t id;
    VT_OK(ctx, vq_cache_seq_add(c, &id));
    append(ctx, c, id, 0, 0, 5, false);
    vq_cache_layer *Ly = &c->layers[1];
    int pos_stream = -1;
    for (int s = 0; s < Ly->n_streams; s++)
        if (strcmp(Ly->streams[s].name, "k_pos") == 0) pos_stream = s;
    VT_CHECK(pos_stream >= 0, "commvq layer has a k_pos stream");
    if (pos_stream >= 0) {
        int32_t *pos = (int32_t *)vq_cache_page_stream(Ly, c->seqs[0].layers[1].pages[0], pos_stream);
        pos[3] = PMAX;
        buf = save(ctx, c, -1, &size);
        VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "position 512", load_cache(ctx, buf, size));
        free(buf);
        pos[3] = 3;
        buf = save(ctx, c, -1, &size);
        VT_OK(ctx, load_cache(ctx, buf, size));
        free(buf);
    }
    vq_cache_free(c);
    vq_ctx_free(ctx);
}

int main(void)
{
    /* tables for vecinfer2 (VECINFER, D/4 subspaces of 256) and commvq (R = D/4 stages of 256) */
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 31);
    DLTensor *k = vt_new(VT_F32, VT_DIMS(L, HKV, 300, D)), *v = vt_new(VT_F32, VT_DIMS(L, HKV, 300, D));
    vt_fill_keys(k, &rng, 2, 4.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);
    const vq_calibration_config cc = {.vecinfer_subspaces = D / 4, .commvq_stages = D / 4, .value_centroids = 16,
                                      .iters = 2, .seed = 9};
    VT_OK(ctx, vq_calibration_fit(ctx, &cc, k, v, &cal));
    vt_free(k);
    vt_free(v);
    vq_ctx_free(ctx);
    rope_cos = vt_new(VT_F32, VT_DIMS(PMAX, D / 2));
    rope_sin = vt_new(VT_F32, VT_DIMS(PMAX, D / 2));
    for (int64_t p = 0; p < PMAX; p++)
        for (int64_t i = 0; i < D / 2; i++) {
            const double th = (double)p * pow(10000.0, -2.0 * (double)i / D);
            vt_set(rope_cos, p * (D / 2) + i, cos(th));
            vt_set(rope_sin, p * (D / 2) + i, sin(th));
        }
    VT_RUN(test_presets_round_trip);
    VT_RUN(test_window8);
    VT_RUN(test_layer_fields_v3);
    VT_RUN(test_window_bits);
    VT_RUN(test_files_and_errors);
    VT_RUN(test_corruption);
    vq_calibration_free(cal);
    vt_free(rope_cos);
    vt_free(rope_sin);
    return vt_finish();
}
