/* test_profile.c — vq_profile: a cache made from a profile is the cache its
 * plan's fields make (outputs bit for bit, the same memory report and
 * layer configs; with its recipe, sink tokens and transforms with and
 * without tables, too), profile files round-trip canonically, version 1
 * files still load (stating no recipe), and bad input (another model
 * shape, a field beside the profile or one that conflicts with it, a plan
 * or recipe a cache refuses, truncated, corrupted or newer files) is a
 * clear error naming the value, changing nothing. */
#include <unistd.h>

#include "cache_test_util.h"
#include "persist/container.h"

enum { L = 4, HKV = 2, HQ = 4, DIM = 64 };

static const int WINS[L] = {0, 40, 0, 40};

static void plan_layers(vq_cache_layer_config *lc)
{
    lc[0] = (vq_cache_layer_config){{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 32,
                                     .wide_channels = 20},
                                    {.method = VQ_VALUE_TURBO, .bits = 2, .scale_f16 = true}};
    lc[1] = (vq_cache_layer_config){{.method = VQ_KEY_TURBO, .bits = 3, .seed = 9}, {.method = VQ_VALUE_TURBO, .bits = 3}};
    lc[2] = (vq_cache_layer_config){{.method = VQ_KEY_KIVI, .bits = 4, .group_size = 64},
                                    {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 32}};
    lc[3] = (vq_cache_layer_config){{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}};
}

static vq_profile_config plan(vq_cache_layer_config *lc)
{
    plan_layers(lc);
    return (vq_profile_config){.n_layers = L, .n_kv_heads = HKV, .head_dim = DIM, .layers = lc,
                               .sliding_windows = WINS, .residual_tokens = 8, .window = VQ_WINDOW_TURBO,
                               .window_bits = 6};
}

static vq_profile *make_profile(vq_ctx *ctx)
{
    vq_cache_layer_config lc[L];
    const vq_profile_config pc = plan(lc);
    vq_profile *p = NULL;
    VT_OK(ctx, vq_profile_create(ctx, &pc, &p));
    return p;
}

static unsigned char *save(vq_ctx *ctx, const vq_profile *p, size_t *n)
{
    VT_OK(ctx, vq_profile_save_buffer(ctx, p, NULL, 0, n));
    unsigned char *b = malloc(*n);
    VT_OK(ctx, vq_profile_save_buffer(ctx, p, b, *n, n));
    return b;
}

/* Save, load, save: the same bytes (the format is canonical); the loaded
 * profile, and the bytes in *bytes (n of them). */
static vq_profile *reload(vq_ctx *ctx, const vq_profile *p, unsigned char **bytes, size_t *n)
{
    size_t m;
    unsigned char *a = save(ctx, p, n);
    vq_profile *q = NULL;
    VT_OK(ctx, vq_profile_load_buffer(ctx, a, *n, &q));
    unsigned char *b = save(ctx, q, &m);
    VT_CHECK(*n == m && memcmp(a, b, *n) == 0, "a loaded profile saves to other bytes");
    free(b);
    *bytes = a;
    return q;
}

/* The profile's cache against the cache of the same fields set by hand. */
static void test_same_cache(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_profile *p = make_profile(ctx);
    vq_cache_layer_config lc[L];
    const vq_profile_config pc = plan(lc);
    const vq_cache_config base = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                  .page_size = 64, .capacity_pages = 4, .grow_pages = 4};
    vq_cache_config by_hand = base, by_profile = base;
    by_hand.layers = lc, by_hand.sliding_windows = WINS, by_hand.residual_tokens = 8;
    by_hand.window = VQ_WINDOW_TURBO, by_hand.window_bits = 6;
    by_profile.profile = p;
    vq_cache *a = NULL, *b = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &by_hand, &a));
    VT_OK(ctx, vq_cache_create(ctx, &by_profile, &b));
    vq_profile_free(p); /* copied at create */
    (void)pc;
    vq_rng rng;
    vq_rng_seed(&rng, 3);
    ct_store st = ct_store_new(2, HKV, 150, DIM, &rng);
    int64_t ids[2];
    for (int s = 0; s < 2; s++) {
        VT_OK(ctx, vq_cache_seq_add(a, &ids[s]));
        VT_OK(ctx, vq_cache_seq_add(b, &ids[s]));
    }
    for (int l = 0; l < L; l++)
        for (int64_t t = 0; t < 150; t += 50) {
            VT_OK(ctx, ct_append(a, l, &st, ids, 0, 2, t, 50));
            VT_OK(ctx, ct_append(b, l, &st, ids, 0, 2, t, 50));
        }
    for (int l = 0; l < L; l++) {
        float *x = ct_decode_out(ctx, a, l, ids, 2, HQ, DIM, 7), *y = ct_decode_out(ctx, b, l, ids, 2, HQ, DIM, 7);
        VT_CHECK(memcmp(x, y, sizeof(float) * 2 * HQ * DIM) == 0, "layer %d: the profile's cache differs", l);
        free(x), free(y);
        vq_cache_layer_config ca, cb;
        int wa, wb;
        VT_OK(ctx, vq_cache_get_layer_config(a, l, &ca));
        VT_OK(ctx, vq_cache_get_layer_config(b, l, &cb));
        VT_OK(ctx, vq_cache_get_sliding_window(b, l, &wb));
        VT_OK(ctx, vq_cache_get_sliding_window(a, l, &wa));
        VT_CHECK(memcmp(&ca, &cb, sizeof ca) == 0 && wa == wb, "layer %d: configs differ", l);
    }
    vq_cache_memory_report ra, rb;
    VT_OK(ctx, vq_cache_memory(a, &ra));
    VT_OK(ctx, vq_cache_memory(b, &rb));
    VT_CHECK(memcmp(&ra, &rb, sizeof ra) == 0, "memory reports differ: %.6f vs %.6f bits", ra.bits_per_element,
             rb.bits_per_element);
    vq_cache_config back;
    VT_OK(ctx, vq_cache_get_config(b, &back));
    VT_CHECK(back.residual_tokens == 8 && back.window == VQ_WINDOW_TURBO && back.window_bits == 6 &&
                 back.profile == NULL,
             "the profile's cache-wide fields did not apply");
    ct_store_free(&st);
    vq_cache_free(a);
    vq_cache_free(b);
    vq_ctx_free(ctx);
}

/* Save, load, save: the same bytes, the same plan; through a file too. */
static void test_round_trip(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_profile *p = make_profile(ctx);
    size_t n, m;
    unsigned char *a;
    vq_profile *q = reload(ctx, p, &a, &n);
    vq_profile_config pc, qc;
    VT_OK(ctx, vq_profile_get(p, &pc));
    VT_OK(ctx, vq_profile_get(q, &qc));
    VT_CHECK(pc.n_layers == qc.n_layers && pc.residual_tokens == qc.residual_tokens && pc.window == qc.window &&
                 pc.window_bits == qc.window_bits &&
                 memcmp(pc.layers, qc.layers, sizeof *pc.layers * L) == 0 &&
                 memcmp(pc.sliding_windows, qc.sliding_windows, sizeof(int) * L) == 0,
             "the loaded plan differs");
    char path[] = "/tmp/vq_test_profile_XXXXXX";
    const int fd = mkstemp(path);
    VT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    VT_OK(ctx, vq_profile_save(ctx, p, path));
    vq_profile *r = NULL;
    VT_OK(ctx, vq_profile_load(ctx, path, &r));
    unsigned char *c = save(ctx, r, &m);
    VT_CHECK(n == m && memcmp(a, c, n) == 0, "the file differs from the buffer");
    unlink(path);
    vq_profile_free(r);
    VT_CHECK(vq_profile_load(ctx, path, &r) == VQ_ERR_IO && r == NULL, "a missing file loaded");
    free(a), free(c);
    vq_profile_free(p), vq_profile_free(q);
    vq_ctx_free(ctx);
}

/* A cache of another shape, fields set beside the profile: refused, naming them. */
static void test_cache_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_profile *p = make_profile(ctx);
    const vq_cache_config ok = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM, .profile = p};
    static const struct {
        const char *what, *msg;
        int field;
    } cases[] = {{"n_layers", "a profile for n_layers 4, cfg->n_layers is 5", 0},
                 {"n_kv_heads", "a profile for n_kv_heads 2, cfg->n_kv_heads is 1", 1},
                 {"head_dim", "a profile for head_dim 64, cfg->head_dim is 128", 2},
                 {"preset", "'cfg->preset' is set beside cfg->profile", 3},
                 {"residual", "'cfg->residual_tokens' is set beside cfg->profile", 4},
                 {"sliding", "'cfg->sliding_windows' is set beside cfg->profile", 5}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vq_cache_config cfg = ok;
        switch (cases[i].field) {
        case 0: cfg.n_layers = 5; break;
        case 1: cfg.n_kv_heads = 1, cfg.n_q_heads = 4; break;
        case 2: cfg.head_dim = 128; break;
        case 3: cfg.preset = "kivi2"; break;
        case 4: cfg.residual_tokens = 3; break;
        case 5: cfg.sliding_windows = WINS; break;
        }
        vq_cache *c = (vq_cache *)&c;
        VT_CHECK(vq_cache_create(ctx, &cfg, &c) == VQ_ERR_INVALID_ARGUMENT && c == NULL, "%s passed", cases[i].what);
        VT_CHECK(strstr(vq_ctx_last_error(ctx), cases[i].msg) != NULL, "%s: message '%s'", cases[i].what,
                 vq_ctx_last_error(ctx));
    }
    /* a page size the profile's KIVI group (64) does not divide: the cache's own check */
    vq_cache_config cfg = ok;
    cfg.page_size = 96;
    vq_cache *c = NULL;
    VT_CHECK(vq_cache_create(ctx, &cfg, &c) == VQ_ERR_INVALID_ARGUMENT, "group 64 over pages of 96 passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "cfg->layers[2].keys.group_size") != NULL, "message '%s'",
             vq_ctx_last_error(ctx));
    vq_profile_free(p);
    vq_ctx_free(ctx);
}

/* Plans a cache refuses are refused at create, naming the field. */
static void test_create_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    static const struct {
        const char *msg;
        int field;
    } cases[] = {{"cfg->layers[1].keys.bits", 0}, {"cfg->layers[3].keys.codebook", 1},
                 {"cfg->sliding_windows[2]", 2},  {"cfg->head_dim", 3},
                 {"cfg->window_bits", 4},         {"cfg->layers[2].keys.group_size", 5},
                 {"cfg->layers", 6},              {"cfg->layers[0].keys.method", 7}};
    DLTensor cb = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vq_cache_layer_config lc[L];
        vq_profile_config pc = plan(lc);
        int wins[L] = {0, 40, 0, 40};
        switch (cases[i].field) {
        case 0: lc[1].keys.bits = 9; break;
        case 1: lc[3].keys.codebook = &cb; break;
        case 2: wins[2] = -1, pc.sliding_windows = wins; break;
        case 3: pc.head_dim = 60; break;
        case 4: pc.window_bits = 9; break;
        case 5: lc[2].keys.group_size = 70000; break;
        case 6: pc.layers = NULL; break;
        case 7: lc[0].keys.method = (vq_key_method)42; break;
        }
        vq_profile *p = (vq_profile *)&p;
        VT_CHECK(vq_profile_create(ctx, &pc, &p) == VQ_ERR_INVALID_ARGUMENT && p == NULL, "case %zu passed", i);
        VT_CHECK(strstr(vq_ctx_last_error(ctx), cases[i].msg) != NULL, "case %zu: message '%s'", i,
                 vq_ctx_last_error(ctx));
    }
    vq_ctx_free(ctx);
}

/* Truncated, corrupted (each byte, as written and with the checksums
 * recomputed), newer: errors with a message, never a profile that a cache
 * would refuse. */
static void test_bad_files(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_profile *p = make_profile(ctx);
    size_t n;
    unsigned char *a = save(ctx, p, &n);
    unsigned char *b = malloc(n);
    for (size_t cut = 0; cut < n; cut += 7) {
        vq_profile *q = (vq_profile *)&q;
        VT_CHECK(vq_profile_load_buffer(ctx, a, cut, &q) == VQ_ERR_CORRUPT_DATA && q == NULL, "%zu of %zu bytes loaded",
                 cut, n);
    }
    int accepted = 0;
    for (size_t i = 0; i < n; i++)
        for (int fix = 0; fix < 2; fix++) {
            memcpy(b, a, n);
            b[i] ^= 0x41;
            if (fix) vq_container_fixup(b, n);
            vq_profile *q = NULL;
            const vq_status s = vq_profile_load_buffer(ctx, b, n, &q);
            VT_CHECK((s == VQ_OK) == (q != NULL), "byte %zu: status %d with profile %p", i, (int)s, (void *)q);
            VT_CHECK(s == VQ_OK || s == VQ_ERR_CORRUPT_DATA || s == VQ_ERR_UNSUPPORTED, "byte %zu: status %d", i, (int)s);
            VT_CHECK(s == VQ_OK || vq_ctx_last_error(ctx)[0] != 0, "byte %zu: no message", i);
            VT_CHECK(fix || s != VQ_OK, "byte %zu changed without its checksum loaded", i);
            if (q == NULL) continue;
            accepted++;
            /* what loads makes a cache of its shape at page size 256 */
            const vq_cache_config cfg = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                         .profile = q};
            vq_profile_config qc;
            vq_profile_get(q, &qc);
            vq_cache *c = NULL;
            const vq_status cs = vq_cache_create(ctx, &cfg, &c);
            /* or a refusal naming a layer field the cache's own config decides (page size, tables) */
            const bool page = cs == VQ_ERR_INVALID_ARGUMENT &&
                              strstr(vq_ctx_last_error(ctx), "argument 'cfg->layers[") != NULL;
            VT_CHECK(cs == VQ_OK || page || (qc.n_layers != L || qc.n_kv_heads != HKV || qc.head_dim != DIM),
                     "byte %zu: a loaded profile's cache failed: %s", i, vq_ctx_last_error(ctx));
            vq_cache_free(c);
            vq_profile_free(q);
        }
    VT_CHECK(accepted > 0, "no corrupted-and-fixed file loaded (seeds and the bytes a field may take)");
    /* a newer version */
    memcpy(b, a, n);
    b[8] = 3;
    vq_container_fixup(b, n);
    vq_profile *q = NULL;
    VT_CHECK(vq_profile_load_buffer(ctx, b, n, &q) == VQ_ERR_UNSUPPORTED && q == NULL, "version 3 loaded");
    /* a field out of the cache's range, checksums right: named */
    memcpy(b, a, n);
    const size_t layr1 = 32 + 16 + 32 + (16 + 88) + 16; /* header, CONF, LAYR 0 (84 bytes, padded), LAYR 1's payload */
    b[layr1 + 8 + 4] = 9; /* layer 1 keys.bits */
    vq_container_fixup(b, n);
    VT_CHECK(vq_profile_load_buffer(ctx, b, n, &q) == VQ_ERR_CORRUPT_DATA, "keys.bits 9 loaded");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "cfg->layers[1].keys.bits") != NULL, "message '%s'", vq_ctx_last_error(ctx));
    free(a), free(b);
    vq_profile_free(p);
    vq_ctx_free(ctx);
}

/* The recipe: sink tokens, and transforms fitted (layer 0), given with
 * tables (layers 1, 3) and off (layer 2). */
static float TAB[3][HKV * DIM];
static int64_t TAB_SHAPE[2] = {HKV, DIM};
static DLTensor TABT[3];

static void recipe(vq_cache_transforms *xf)
{
    for (int j = 0; j < HKV * DIM; j++)
        TAB[0][j] = 0.02f * (float)(j % 17), TAB[1][j] = -0.1f * (float)(j % 5), TAB[2][j] = 0.5f + 0.25f * (float)(j % 7);
    for (int i = 0; i < 3; i++)
        TABT[i] = (DLTensor){.data = TAB[i], .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                             .shape = TAB_SHAPE};
    xf[0] = (vq_cache_transforms){.center_keys = true, .center_values = true};
    xf[1] = (vq_cache_transforms){.center_keys = true, .smooth = true, .key_mean = &TABT[0], .key_scale = &TABT[2]};
    xf[2] = (vq_cache_transforms){0};
    xf[3] = (vq_cache_transforms){.center_values = true, .value_mean = &TABT[1]};
}

static void test_recipe(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_cache_layer_config lc[L];
    vq_cache_transforms xf[L];
    vq_profile_config pc = plan(lc);
    recipe(xf);
    pc.sliding_windows = NULL; /* sink tokens take full attention */
    pc.sink_tokens = 3, pc.transforms = xf;
    vq_profile *p = NULL;
    VT_OK(ctx, vq_profile_create(ctx, &pc, &p));
    /* save, load, save: the same bytes and recipe */
    size_t n;
    unsigned char *a;
    vq_profile *q = reload(ctx, p, &a, &n);
    unsigned char *b = malloc(n);
    vq_profile_config qc;
    VT_OK(ctx, vq_profile_get(q, &qc));
    VT_CHECK(qc.sink_tokens == 3 && !qc.no_recipe && qc.transforms[1].smooth && qc.transforms[1].key_scale &&
                 memcmp(qc.transforms[1].key_scale->data, TAB[2], sizeof TAB[2]) == 0 && !qc.transforms[2].smooth &&
                 qc.transforms[0].key_mean == NULL && qc.transforms[3].value_mean != NULL,
             "the loaded recipe differs");
    /* the profile's cache against the same fields by hand */
    const vq_cache_config base = {.n_layers = L, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                  .page_size = 64, .capacity_pages = 4, .grow_pages = 4};
    vq_cache_config by_hand = base, by_profile = base;
    by_hand.layers = lc, by_hand.residual_tokens = 8, by_hand.window = VQ_WINDOW_TURBO, by_hand.window_bits = 6;
    by_hand.sink_tokens = 3, by_hand.transforms = xf;
    by_profile.profile = q;
    by_profile.sink_tokens = 3; /* the same number beside the profile: allowed */
    vq_cache *ca = NULL, *cb = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &by_hand, &ca));
    VT_OK(ctx, vq_cache_create(ctx, &by_profile, &cb));
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    ct_store st = ct_store_new(1, HKV, 120, DIM, &rng);
    int64_t id;
    VT_OK(ctx, vq_cache_seq_add(ca, &id));
    VT_OK(ctx, vq_cache_seq_add(cb, &id));
    for (int l = 0; l < L; l++)
        for (int64_t t = 0; t < 120; t += 40) {
            VT_OK(ctx, ct_append(ca, l, &st, &id, 0, 1, t, 40));
            VT_OK(ctx, ct_append(cb, l, &st, &id, 0, 1, t, 40));
        }
    for (int l = 0; l < L; l++) {
        float *x = ct_decode_out(ctx, ca, l, &id, 1, HQ, DIM, 7), *y = ct_decode_out(ctx, cb, l, &id, 1, HQ, DIM, 7);
        VT_CHECK(memcmp(x, y, sizeof(float) * HQ * DIM) == 0, "layer %d: the recipe profile's cache differs", l);
        free(x), free(y);
    }
    vq_cache_memory_report ra, rb;
    VT_OK(ctx, vq_cache_memory(ca, &ra));
    VT_OK(ctx, vq_cache_memory(cb, &rb));
    VT_CHECK(memcmp(&ra, &rb, sizeof ra) == 0, "memory reports differ");
    vq_cache_free(ca), vq_cache_free(cb);
    /* conflicting fields beside it: named, with both values */
    vq_cache_config bad = base;
    bad.profile = q, bad.sink_tokens = 2;
    vq_cache *c = (vq_cache *)&c;
    VT_CHECK(vq_cache_create(ctx, &bad, &c) == VQ_ERR_INVALID_ARGUMENT && c == NULL, "another sink count passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "'cfg->sink_tokens' is 2 beside cfg->profile, whose sink_tokens is 3"),
             "message '%s'", vq_ctx_last_error(ctx));
    vq_cache_transforms other[L] = {{.center_keys = true, .center_values = true}, {.center_keys = true}};
    bad.sink_tokens = 0, bad.transforms = other;
    VT_CHECK(vq_cache_create(ctx, &bad, &c) == VQ_ERR_INVALID_ARGUMENT, "other transforms passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "'cfg->transforms[1]' smooth differs beside cfg->profile"), "message '%s'",
             vq_ctx_last_error(ctx));
    /* recipes a cache refuses: refused at create, naming the field */
    pc.sink_tokens = VQ_CACHE_MAX_SINK_TOKENS + 1;
    vq_profile *r = (vq_profile *)&r;
    VT_CHECK(vq_profile_create(ctx, &pc, &r) == VQ_ERR_INVALID_ARGUMENT && r == NULL, "sink 1025 passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "'cfg->sink_tokens': expected 0..1024, got 1025"), "message '%s'",
             vq_ctx_last_error(ctx));
    pc.sink_tokens = 3;
    xf[2].key_mean = &TABT[0];
    VT_CHECK(vq_profile_create(ctx, &pc, &r) == VQ_ERR_INVALID_ARGUMENT, "a table without its switch passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "'cfg->transforms[2].key_mean' is given but center_keys is false"),
             "message '%s'", vq_ctx_last_error(ctx));
    xf[2].key_mean = NULL;
    TAB[2][5] = 0;
    VT_CHECK(vq_profile_create(ctx, &pc, &r) == VQ_ERR_INVALID_ARGUMENT, "a zero key scale passed");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "'cfg->transforms[1].key_scale': element [0, 5] is 0"), "message '%s'",
             vq_ctx_last_error(ctx));
    /* the same in a file: a corrupt file naming it */
    const size_t at = 32 + 16 + 24; /* CONF's sink_tokens */
    memcpy(b, a, n);
    b[at] = 0x01, b[at + 1] = 0x08; /* 2049 */
    vq_container_fixup(b, n);
    VT_CHECK(vq_profile_load_buffer(ctx, b, n, &r) == VQ_ERR_CORRUPT_DATA && r == NULL, "sink 2049 loaded");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "sink_tokens 2049 (at most 1024)"), "message '%s'", vq_ctx_last_error(ctx));
    ct_store_free(&st);
    free(a), free(b);
    vq_profile_free(p), vq_profile_free(q);
    vq_ctx_free(ctx);
}

/* A version 1 file (written here field by field) loads as a profile that
 * states no recipe: the cache takes its own sink tokens and transforms. */
static void test_version1(void)
{
    vq_ctx *ctx = vt_ctx(1);
    size_t n = 0;
    unsigned char *buf = NULL;
    for (int pass = 0; pass < 2; pass++) {
        vq_writer w;
        vq_writer_init(&w, buf, n);
        vq_section_begin(&w, VQ_TAG('C', 'O', 'N', 'F'));
        const uint32_t conf[8] = {1, HKV, DIM, 8, 0, 0, 0, 0};
        for (int i = 0; i < 8; i++) vq_put_u32(&w, conf[i]);
        vq_section_end(&w);
        vq_section_begin(&w, VQ_TAG('L', 'A', 'Y', 'R'));
        vq_put_u32(&w, 0), vq_put_u32(&w, 0);
        const uint32_t keys[10] = {VQ_KEY_KIVI, 4, 0, 32, 0, 0, 0, 0, 0, 0};
        for (int i = 0; i < 10; i++) vq_put_u32(&w, keys[i]);
        vq_put_u64(&w, 0);
        const uint32_t values[4] = {VQ_VALUE_TURBO, 2, 0, 0};
        for (int i = 0; i < 4; i++) vq_put_u32(&w, values[i]);
        vq_put_u64(&w, 0);
        vq_section_end(&w);
        n = vq_writer_finish(&w, "VQPROFL", 1);
        if (pass == 0) buf = malloc(n);
    }
    vq_profile *p = NULL;
    VT_OK(ctx, vq_profile_load_buffer(ctx, buf, n, &p));
    vq_profile_config pc;
    VT_OK(ctx, vq_profile_get(p, &pc));
    VT_CHECK(pc.no_recipe && pc.sink_tokens == 0 && !pc.transforms[0].center_keys && pc.residual_tokens == 8 &&
                 pc.layers[0].keys.bits == 4,
             "the version 1 profile read wrong");
    const vq_cache_transforms xf = {.center_keys = true};
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = HKV, .n_q_heads = HQ, .head_dim = DIM,
                                 .profile = p, .sink_tokens = 4, .transforms = &xf};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    vq_cache_config back;
    vq_cache_transforms got;
    VT_OK(ctx, vq_cache_get_config(c, &back));
    VT_OK(ctx, vq_cache_get_transforms(c, 0, 0, &got, NULL, NULL, NULL));
    VT_CHECK(back.sink_tokens == 4 && got.center_keys && back.residual_tokens == 8,
             "the cache beside a version 1 profile did not take its own recipe");
    /* saved again, it is a version 2 file stating no sinks or transforms */
    size_t m;
    unsigned char *b = save(ctx, p, &m);
    VT_CHECK(m > 8 && b[8] == 2, "saved as version %d", m > 8 ? b[8] : -1);
    vq_cache_free(c);
    vq_profile_free(p);
    free(buf), free(b);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_same_cache);
    VT_RUN(test_round_trip);
    VT_RUN(test_cache_errors);
    VT_RUN(test_create_errors);
    VT_RUN(test_bad_files);
    VT_RUN(test_recipe);
    VT_RUN(test_version1);
    return vt_finish();
}
