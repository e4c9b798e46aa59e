/* test_cache_errors.c — the KV cache under bad input: every failing call
 * returns the documented status with a message naming the argument, and
 * changes nothing: every sequence's attention output is bit-identical
 * before and after it (checked after each failure). Also a fixed pool that
 * runs out of pages, and a growing one that does not. */
#include "cache_test_util.h"

enum { HKV = 2, HQ = 4, DIM = 32, PAGE = 32 };

typedef struct fixture {
    vq_ctx *ctx;
    vq_cache *c;
    ct_store st;
    int64_t ids[3];
    float *snap;  /* decode outputs of layers 0 and 1 for all three sequences */
} fixture;

static float *outputs(fixture *f)
{
    const size_t per = (size_t)3 * HQ * DIM;
    float *all = malloc(sizeof(float) * per * 2);
    vq_rng rng;
    vq_rng_seed(&rng, 77);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(3, HQ, 1, DIM)), *out = vt_new(VT_F32, VT_DIMS(3, HQ, 1, DIM));
    vt_fill_normal(q, &rng, 0, 1);
    for (int l = 0; l < 2; l++) {
        VT_OK(f->ctx, vq_cache_attend(f->c, l, 3, f->ids, q, out, NULL));
        memcpy(all + per * (size_t)l, out->data, sizeof(float) * per);
    }
    vt_free(q), vt_free(out);
    return all;
}

/* The cache must be as it was when the fixture was snapshot. */
static void unchanged(fixture *f, const char *after)
{
    float *now = outputs(f);
    VT_CHECK(memcmp(now, f->snap, sizeof(float) * 3 * HQ * DIM * 2) == 0, "the cache changed after: %s", after);
    free(now);
}

/* Two KIVI layers (g 8, R 4), sequences of 5, 40 and 70 tokens; a fixed
 * pool of `capacity` pages per layer. */
static fixture make(int64_t capacity, int64_t grow)
{
    fixture f = {.ctx = vt_ctx(2)};
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    f.st = ct_store_new(3, HKV, 200, DIM, &rng);
    const vq_cache_layer_config lc = {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 8},
                                      {.method = VQ_VALUE_KIVI, .bits = 4, .group_size = 16}};
    f.c = ct_cache(f.ctx, &lc, 2, HKV, HQ, DIM, PAGE, 4, capacity, grow);
    const int64_t len[3] = {5, 40, 70};
    for (int s = 0; s < 3; s++) {
        VT_OK(f.ctx, vq_cache_seq_add(f.c, &f.ids[s]));
        for (int l = 0; l < 2; l++) VT_OK(f.ctx, ct_append(f.c, l, &f.st, f.ids, s, 1, 0, len[s]));
    }
    f.snap = outputs(&f);
    return f;
}

static void release(fixture *f)
{
    free(f->snap);
    vq_cache_free(f->c);
    ct_store_free(&f->st);
    vq_ctx_free(f->ctx);
}

#define FAILS(f, status, needle, call)        \
    do {                                      \
        VT_FAILS((f)->ctx, status, needle, call); \
        unchanged(f, #call);                  \
    } while (0)

static void test_append_errors(void)
{
    fixture f = make(16, 0);
    vq_cache *c = f.c;
    ct_view hk, hv;
    const DLTensor *k = ct_slice(&hk, &f.st, f.st.k, 0, 2, 100, 3), *v = ct_slice(&hv, &f.st, f.st.v, 0, 2, 100, 3);
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'layer'", vq_cache_append(c, 2, 2, f.ids, k, v, NULL));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'layer'", vq_cache_append(c, -1, 2, f.ids, k, v, NULL));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'n_seq'", vq_cache_append(c, 0, 0, f.ids, k, v, NULL));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'seq_ids'", vq_cache_append(c, 0, 2, NULL, k, v, NULL));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'k'", vq_cache_append(c, 0, 2, f.ids, NULL, v, NULL));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'v'", vq_cache_append(c, 0, 2, f.ids, k, NULL, NULL));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'k'", vq_cache_append(c, 0, 3, f.ids, k, v, NULL)); /* batch 2 vs n_seq 3 */
    const int64_t bad_ids[2] = {f.ids[0], 12345}, twice[2] = {f.ids[1], f.ids[1]};
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "seq_ids[1]", vq_cache_append(c, 0, 2, bad_ids, k, v, NULL));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "appears twice", vq_cache_append(c, 0, 2, twice, k, v, NULL));
    const DLTensor *v4 = ct_slice(&hv, &f.st, f.st.v, 0, 2, 100, 4); /* 4 tokens of v vs 3 of k */
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'v'", vq_cache_append(c, 0, 2, f.ids, k, v4, NULL));
    v = ct_slice(&hv, &f.st, f.st.v, 0, 2, 100, 3);
    DLTensor kb = *k; /* bf16, wrong device, misaligned, non-contiguous last axis */
    kb.dtype = VT_BF16;
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'k'", vq_cache_append(c, 0, 2, f.ids, &kb, v, NULL));
    kb = *k, kb.device.device_type = kDLCUDA;
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'k'", vq_cache_append(c, 0, 2, f.ids, &kb, v, NULL));
    kb = *k, kb.byte_offset += 1;
    FAILS(&f, VQ_ERR_UNSUPPORTED, "'k'", vq_cache_append(c, 0, 2, f.ids, &kb, v, NULL));
    int64_t st_bad[4] = {hk.strides[0], hk.strides[1], hk.strides[2], 2};
    kb = *k, kb.strides = st_bad;
    FAILS(&f, VQ_ERR_UNSUPPORTED, "'k'", vq_cache_append(c, 0, 2, f.ids, &kb, v, NULL));
    DLTensor *pos = vt_new(VT_I32, VT_DIMS(2, 4));
    for (int64_t i = 0; i < 8; i++) vt_set(pos, i, (double)i);
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'positions'", vq_cache_append(c, 0, 2, f.ids, k, v, pos));
    vt_free(pos);
    pos = vt_new(VT_F32, VT_DIMS(2, 3));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'positions'", vq_cache_append(c, 0, 2, f.ids, k, v, pos));
    vt_free(pos);
    VT_CHECK(vq_cache_append(NULL, 0, 2, f.ids, k, v, NULL) == VQ_ERR_INVALID_ARGUMENT, "NULL cache");
    /* out of pages: 16 per layer, 3 used; 600 more tokens for sequence 2 need 18 more */
    ct_store big = ct_store_new(3, HKV, 600, DIM, &(vq_rng){{9, 8, 7, 6}});
    FAILS(&f, VQ_ERR_OUT_OF_MEMORY, "pool of 16 pages is full", ct_append(c, 0, &big, f.ids, 2, 1, 0, 600));
    /* a batch in which only the last sequence does not fit changes none of them */
    ct_view bk, bv;
    FAILS(&f, VQ_ERR_OUT_OF_MEMORY, "pool of 16 pages is full",
          vq_cache_append(c, 1, 3, f.ids, ct_slice(&bk, &big, big.k, 0, 3, 0, 300), ct_slice(&bv, &big, big.v, 0, 3, 0, 300),
                          NULL));
    ct_store_free(&big);
    release(&f);
}

static void test_attend_errors(void)
{
    fixture f = make(16, 0);
    vq_ctx *ctx = f.ctx;
    vq_cache *c = f.c;
    DLTensor *q = vt_new(VT_F32, VT_DIMS(3, HQ, 1, DIM)), *out = vt_new(VT_F32, VT_DIMS(3, HQ, 1, DIM));
    DLTensor *lse = vt_new(VT_F32, VT_DIMS(3, HQ, 1));
    vt_fill_normal(q, &(vq_rng){{1, 2, 3, 4}}, 0, 1);
    void *os = vt_snapshot(out), *ls = vt_snapshot(lse);
    const vq_cache_attend_opts bad_scale = {.scale = -1.0f}, nan_scale = {.scale = NAN}, with_lse = {.lse_out = lse};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'layer'", vq_cache_attend(c, 5, 3, f.ids, q, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'n_seq'", vq_cache_attend(c, 0, 0, f.ids, q, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'seq_ids'", vq_cache_attend(c, 0, 3, NULL, q, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'q'", vq_cache_attend(c, 0, 2, f.ids, q, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'q'", vq_cache_attend(c, 0, 3, f.ids, NULL, out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_cache_attend(c, 0, 3, f.ids, q, NULL, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'opts->scale'", vq_cache_attend(c, 0, 3, f.ids, q, out, &bad_scale));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'opts->scale'", vq_cache_attend(c, 0, 3, f.ids, q, out, &nan_scale));
    const int64_t unknown[3] = {f.ids[0], f.ids[1], 999};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "seq_ids[2]", vq_cache_attend(c, 0, 3, unknown, q, out, &with_lse));
    DLTensor *lse_bad = vt_new(VT_F32, VT_DIMS(3, HQ, 2));
    const vq_cache_attend_opts wrong_lse = {.lse_out = lse_bad};
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'opts->lse_out'", vq_cache_attend(c, 0, 3, f.ids, q, out, &wrong_lse));
    DLTensor *o16 = vt_new(VT_F16, VT_DIMS(3, HQ, 2, DIM));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_cache_attend(c, 0, 3, f.ids, q, o16, NULL));
    int64_t zero_st[4] = {0, DIM, DIM, 1}; /* rows of out sharing memory */
    DLTensor ov = *out;
    ov.strides = zero_st;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_cache_attend(c, 0, 3, f.ids, q, &ov, NULL));
    VT_CHECK(vt_unchanged(out, os) && vt_unchanged(lse, ls), "a failed attend wrote its outputs");
    unchanged(&f, "failed attends");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "overlaps argument 'q'", vq_cache_attend(c, 0, 3, f.ids, q, q, NULL));
    /* a sequence with no token: rows of 0, lse -inf */
    int64_t empty, mixed[3] = {f.ids[0], 0, f.ids[2]};
    VT_OK(ctx, vq_cache_seq_add(c, &empty));
    mixed[1] = empty;
    VT_OK(ctx, vq_cache_attend(c, 0, 3, mixed, q, out, &with_lse));
    bool zero = true;
    for (int64_t i = 0; i < HQ * DIM; i++) zero &= vt_get(out, HQ * DIM + i) == 0.0;
    for (int64_t i = 0; i < HQ; i++) zero &= vt_get(lse, HQ + i) == -INFINITY;
    VT_CHECK(zero, "an empty sequence must give rows of 0 and lse -inf");
    VT_OK(ctx, vq_cache_seq_remove(c, empty));
    /* repeats are allowed, and strided q/out views work */
    const int64_t rep[3] = {f.ids[2], f.ids[2], f.ids[2]};
    VT_OK(ctx, vq_cache_attend(c, 0, 3, rep, q, out, &with_lse));
    free(os), free(ls);
    vt_free(q), vt_free(out), vt_free(lse), vt_free(lse_bad), vt_free(o16);
    release(&f);
}

static void test_sequence_errors(void)
{
    fixture f = make(16, 0);
    vq_ctx *ctx = f.ctx;
    vq_cache *c = f.c;
    int64_t id;
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'seq_id'", vq_cache_seq_remove(c, 777));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'seq_id'", vq_cache_seq_truncate(c, -4, 0));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'n_tokens'", vq_cache_seq_truncate(c, f.ids[1], -1));
    FAILS(&f, VQ_ERR_UNSUPPORTED, "encoded KIVI key group", vq_cache_seq_truncate(c, f.ids[2], 21));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'src_seq_id'", vq_cache_seq_fork(c, 555, &id));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'dst_seq_id_out'", vq_cache_seq_fork(c, f.ids[0], NULL));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "'seq_id_out'", vq_cache_seq_add(c, NULL));
    VT_CHECK(vq_cache_seq_length(c, 777, 0) == -1 && vq_cache_seq_length(c, f.ids[0], 2) == -1 &&
                 vq_cache_seq_length(NULL, 0, 0) == -1,
             "seq_length of unknowns");
    /* max_sequences = 16: 13 more fit, the next is refused */
    int64_t more[13];
    for (int i = 0; i < 13; i++) VT_OK(ctx, vq_cache_seq_add(c, &more[i]));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "max_sequences", vq_cache_seq_add(c, &id));
    FAILS(&f, VQ_ERR_INVALID_ARGUMENT, "max_sequences", vq_cache_seq_fork(c, f.ids[1], &id));
    for (int i = 0; i < 13; i++) VT_OK(ctx, vq_cache_seq_remove(c, more[i]));
    /* a removed sequence's pages are reused: add/fill/remove many times in a fixed pool */
    for (int round = 0; round < 20; round++) {
        VT_OK(ctx, vq_cache_seq_add(c, &id));
        VT_OK(ctx, ct_append(c, 0, &f.st, &id, 0, 1, 0, 200));
        VT_OK(ctx, vq_cache_seq_remove(c, id));
    }
    unchanged(&f, "20 rounds of add/append/remove");
    vq_cache_memory_report r;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_cache_memory(c, NULL));
    VT_OK(ctx, vq_cache_memory(c, &r));
    VT_CHECK(r.tokens == 2 * (5 + 40 + 70) && r.sequences == 3, "tokens %lld", (long long)r.tokens);
    release(&f);
}

/* A growing pool takes what a fixed one refuses; then the earlier sequences
 * are unchanged. */
static void test_grow(void)
{
    fixture f = make(8, 3);
    ct_store big = ct_store_new(1, HKV, 300, DIM, &(vq_rng){{9, 8, 7, 6}});
    int64_t id;
    VT_OK(f.ctx, vq_cache_seq_add(f.c, &id));
    VT_OK(f.ctx, ct_append(f.c, 0, &big, &id, 0, 1, 0, 300));
    VT_CHECK(vq_cache_seq_length(f.c, id, 0) == 300, "grown");
    unchanged(&f, "growing the pool");
    ct_store_free(&big);
    release(&f);
}

/* vq_cache_create refuses every bad config with the argument named. */
static void test_create_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    vq_cache *c = (vq_cache *)&c;
    const vq_cache_config good = {.n_layers = 2, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .preset = "kivi2"};
    VT_CHECK(vq_cache_create(NULL, &good, &c) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cfg'", vq_cache_create(ctx, NULL, &c));
    VT_CHECK(c == NULL, "*out must be NULL on failure");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out'", vq_cache_create(ctx, &good, NULL));
    struct {
        vq_cache_config cfg;
        vq_status s;
        const char *needle;
    } bad[] = {
        {{.n_layers = 0, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64}, VQ_ERR_INVALID_ARGUMENT, "n_layers"},
        {{.n_layers = 1, .n_kv_heads = 0, .n_q_heads = 4, .head_dim = 64}, VQ_ERR_INVALID_ARGUMENT, "n_kv_heads"},
        {{.n_layers = 1, .n_kv_heads = 3, .n_q_heads = 4, .head_dim = 64}, VQ_ERR_INVALID_ARGUMENT, "n_q_heads"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 60}, VQ_ERR_INVALID_ARGUMENT, "head_dim"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 512}, VQ_ERR_UNSUPPORTED, "head_dim"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .page_size = 48}, VQ_ERR_INVALID_ARGUMENT,
         "page_size"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .capacity_pages = -1},
         VQ_ERR_INVALID_ARGUMENT, "capacity_pages"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .grow_pages = -2}, VQ_ERR_INVALID_ARGUMENT,
         "grow_pages"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .max_sequences = -1},
         VQ_ERR_INVALID_ARGUMENT, "max_sequences"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .residual_tokens = -1},
         VQ_ERR_INVALID_ARGUMENT, "residual_tokens"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .preset = "kivi3"}, VQ_ERR_INVALID_ARGUMENT,
         "unknown preset 'kivi3' (presets: quality-4bit, balanced-3bit, compact-2.5bit, f16, kivi2"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .preset = "vecinfer2"},
         VQ_ERR_INVALID_ARGUMENT, "needs codebooks"},
        {{.n_layers = 1, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 96, .preset = "turbo2"}, VQ_ERR_INVALID_ARGUMENT,
         "power of two"},
        {{.n_layers = 2, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .f16_layers = (const int[]){2},
          .n_f16_layers = 1},
         VQ_ERR_INVALID_ARGUMENT, "f16_layers[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = (vq_cache *)&c;
        VT_FAILS(ctx, bad[i].s, bad[i].needle, vq_cache_create(ctx, &bad[i].cfg, &c));
        VT_CHECK(c == NULL, "case %zu: *out not NULL", i);
    }
    /* per-layer methods, named by their layer */
    DLTensor *cb = vt_new(VT_F32, VT_DIMS(16, 8, 4)), *cbh = vt_new(VT_F32, VT_DIMS(3, 16, 8, 4));
    vt_fill_normal(cb, &(vq_rng){{1, 1, 1, 1}}, 0, 1), vt_fill_normal(cbh, &(vq_rng){{1, 1, 1, 1}}, 0, 1);
    DLTensor cb_dev = *cb;
    cb_dev.device.device_type = kDLCUDA;
    DLTensor *cb_nan = vt_new(VT_F32, VT_DIMS(16, 8, 4));
    vt_fill_normal(cb_nan, &(vq_rng){{1, 1, 1, 1}}, 0, 1), vt_set(cb_nan, 5, NAN);
    const struct {
        vq_cache_layer_config lc;
        const char *needle;
    } lbad[] = {
        {{{.method = 0}, {.method = VQ_VALUE_F16}}, "cfg->layers[1].keys.method"},
        {{{.method = VQ_KEY_F16}, {.method = 9}}, "cfg->layers[1].values.method"},
        {{{.method = VQ_KEY_KIVI, .bits = 3}, {.method = VQ_VALUE_F16}}, "cfg->layers[1].keys.bits"},
        {{{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 48}, {.method = VQ_VALUE_F16}}, "keys.group_size"},
        {{{.method = VQ_KEY_TURBO, .bits = 9}, {.method = VQ_VALUE_F16}}, "keys.bits"},
        {{{.method = VQ_KEY_KIVI_MIX, .bits = 4, .bits2 = 4}, {.method = VQ_VALUE_F16}}, "keys.bits/bits2"},
        {{{.method = VQ_KEY_KIVI_MIX, .bits = 0, .bits2 = 4}, {.method = VQ_VALUE_F16}}, "1 <= bits < bits2 <= 8"},
        {{{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 9}, {.method = VQ_VALUE_F16}}, "keys.bits/bits2"},
        {{{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .group_size = 48}, {.method = VQ_VALUE_F16}}, "keys.group_size"},
        {{{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .wide_channels = 64}, {.method = VQ_VALUE_F16}}, "keys.wide_channels"},
        {{{.method = VQ_KEY_KIVI_MIX, .bits = 2, .bits2 = 4, .wide_channels = -1}, {.method = VQ_VALUE_F16}}, "1..63 (0 = 32), got -1"},
        {{{.method = VQ_KEY_TURBO_RVQ, .bits = 2, .bits2 = 0}, {.method = VQ_VALUE_F16}}, "keys.bits2"},
        {{{.method = VQ_KEY_RABITQ, .rabitq_score = 7}, {.method = VQ_VALUE_F16}}, "keys.rabitq_score"},
        {{{.method = VQ_KEY_QJL, .qjl_sketch = 2000}, {.method = VQ_VALUE_F16}}, "keys.qjl_sketch"},
        {{{.method = VQ_KEY_VECINFER}, {.method = VQ_VALUE_F16}}, "keys.codebook' is NULL"},
        {{{.method = VQ_KEY_VECINFER, .codebook = cbh}, {.method = VQ_VALUE_F16}}, "keys.codebook"},
        {{{.method = VQ_KEY_VECINFER, .codebook = &cb_dev}, {.method = VQ_VALUE_F16}}, "host memory"},
        {{{.method = VQ_KEY_VECINFER, .codebook = cb_nan}, {.method = VQ_VALUE_F16}}, "not finite"},
        {{{.method = VQ_KEY_COMMVQ, .codebook = cb}, {.method = VQ_VALUE_F16}}, "keys.codebook"},
        {{{.method = VQ_KEY_F16}, {.method = VQ_VALUE_KIVI, .bits = 8}}, "values.bits"},
        {{{.method = VQ_KEY_F16}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 24}}, "values.group_size"},
        {{{.method = VQ_KEY_F16}, {.method = VQ_VALUE_CODEBOOK, .bits = 2}}, "values.bits"},
        {{{.method = VQ_KEY_F16}, {.method = VQ_VALUE_TURBO, .bits = 0}}, "values.bits"},
    };
    for (size_t i = 0; i < sizeof lbad / sizeof lbad[0]; i++) {
        const vq_cache_layer_config layers[2] = {{{.method = VQ_KEY_F16}, {.method = VQ_VALUE_F16}}, lbad[i].lc};
        const vq_cache_config cfg = {.n_layers = 2, .n_kv_heads = 2, .n_q_heads = 4, .head_dim = 64, .layers = layers};
        c = (vq_cache *)&c;
        VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, lbad[i].needle, vq_cache_create(ctx, &cfg, &c));
        VT_CHECK(c == NULL, "layer case %zu: *out not NULL", i);
    }
    VT_OK(ctx, vq_cache_create(ctx, &good, &c));
    vq_cache_free(c);
    vq_cache_free(NULL);
    vt_free(cb), vt_free(cbh), vt_free(cb_nan);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_append_errors);
    VT_RUN(test_attend_errors);
    VT_RUN(test_sequence_errors);
    VT_RUN(test_grow);
    VT_RUN(test_create_errors);
    return vt_finish();
}
