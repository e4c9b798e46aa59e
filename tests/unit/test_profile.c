/* test_profile.c — vq_profile: a cache made from a profile is the cache its
 * plan's fields make (outputs bit for bit, the same memory report and
 * layer configs), profile files round-trip canonically, and bad input
 * (another model shape, a field beside the profile, a plan a cache refuses,
 * truncated, corrupted or newer files) is a clear error naming the value,
 * changing nothing. */
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
    unsigned char *a = save(ctx, p, &n);
    vq_profile *q = NULL;
    VT_OK(ctx, vq_profile_load_buffer(ctx, a, n, &q));
    unsigned char *b = save(ctx, q, &m);
    VT_CHECK(n == m && memcmp(a, b, n) == 0, "a loaded profile saves to other bytes");
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
    free(a), free(b), free(c);
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
    b[8] = 2;
    vq_container_fixup(b, n);
    vq_profile *q = NULL;
    VT_CHECK(vq_profile_load_buffer(ctx, b, n, &q) == VQ_ERR_UNSUPPORTED && q == NULL, "version 2 loaded");
    /* a field out of the cache's range, checksums right: named */
    memcpy(b, a, n);
    const size_t layr1 = 32 + 16 + 32 + (16 + 80) + 16; /* header, CONF, LAYR 0, LAYR 1's payload */
    b[layr1 + 8 + 4] = 9; /* layer 1 keys.bits */
    vq_container_fixup(b, n);
    VT_CHECK(vq_profile_load_buffer(ctx, b, n, &q) == VQ_ERR_CORRUPT_DATA, "keys.bits 9 loaded");
    VT_CHECK(strstr(vq_ctx_last_error(ctx), "cfg->layers[1].keys.bits") != NULL, "message '%s'", vq_ctx_last_error(ctx));
    free(a), free(b);
    vq_profile_free(p);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_same_cache);
    VT_RUN(test_round_trip);
    VT_RUN(test_cache_errors);
    VT_RUN(test_create_errors);
    VT_RUN(test_bad_files);
    return vt_finish();
}
