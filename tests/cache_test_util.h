/* cache_test_util.h — what the cache tests share: token stores that hand out
 * strided views of many sequences at once, and a cache built from one layer
 * config. Header-only (static functions), used by test_cache*.c. */
#ifndef VQ_TEST_CACHE_UTIL_H
#define VQ_TEST_CACHE_UTIL_H

#include "harness.h"

/* Tokens of S sequences, K and V f16 [S][Hkv][N][D] (one buffer, so a batch
 * of sequences is one strided view). */
typedef struct ct_store {
    int64_t S, Hkv, N, D;
    DLTensor *k, *v;
} ct_store;

static ct_store ct_store_new(int64_t S, int64_t Hkv, int64_t N, int64_t D, vq_rng *rng)
{
    ct_store s = {S, Hkv, N, D, vt_new(VT_F16, VT_DIMS(S, Hkv, N, D)), vt_new(VT_F16, VT_DIMS(S, Hkv, N, D))};
    vt_fill_keys(s.k, rng, 2, 4.0);
    vt_fill_normal(s.v, rng, 0.0, 1.0);
    return s;
}

static void ct_store_free(ct_store *s)
{
    vt_free(s->k);
    vt_free(s->v);
}

/* A view of tokens [t0, t0 + m) of sequences [s0, s0 + n) of x: shape
 * [n, Hkv, m, D], strides of the store. shape/strides live in *hold. */
typedef struct ct_view {
    DLTensor t;
    int64_t shape[4], strides[4];
} ct_view;

static const DLTensor *ct_slice(ct_view *hold, const ct_store *s, const DLTensor *x, int64_t s0, int64_t n,
                                int64_t t0, int64_t m)
{
    hold->t = *x;
    hold->shape[0] = n, hold->shape[1] = s->Hkv, hold->shape[2] = m, hold->shape[3] = s->D;
    hold->strides[0] = s->Hkv * s->N * s->D, hold->strides[1] = s->N * s->D, hold->strides[2] = s->D;
    hold->strides[3] = 1;
    hold->t.shape = hold->shape;
    hold->t.strides = hold->strides;
    hold->t.byte_offset = (uint64_t)(((s0 * s->Hkv) * s->N + t0) * s->D * 2);
    return &hold->t;
}

/* Appends tokens [t0, t0 + m) of sequences s0.. (ids[]) to layer l. */
static vq_status ct_append(vq_cache *c, int l, const ct_store *s, const int64_t *ids, int64_t s0, int n, int64_t t0,
                           int64_t m)
{
    ct_view hk, hv;
    return vq_cache_append(c, l, n, ids + s0, ct_slice(&hk, s, s->k, s0, n, t0, m),
                           ct_slice(&hv, s, s->v, s0, n, t0, m), NULL);
}

/* A named layer config (key + value method): the method tables of the
 * cache tests. */
typedef struct method {
    const char *name;
    vq_cache_layer_config lc;
} method;

/* The residual window storage of the caches ct_cache_seqs makes (tests that
 * run for both set it). */
static vq_cache_window ct_window = VQ_WINDOW_F16;
static int ct_window_bits; /* VQ_WINDOW_TURBO's */

/* A cache of L layers of one config, for max_seqs sequences. */
static vq_cache *ct_cache_seqs(vq_ctx *ctx, const vq_cache_layer_config *lc, int L, int Hkv, int Hq, int D, int P,
                               int R, int64_t capacity, int64_t grow, int max_seqs)
{
    vq_cache_layer_config *layers = malloc(sizeof *layers * (size_t)L);
    for (int l = 0; l < L; l++) layers[l] = *lc;
    const vq_cache_config cfg = {.n_layers = L,
                                 .n_kv_heads = Hkv,
                                 .n_q_heads = Hq,
                                 .head_dim = D,
                                 .page_size = P,
                                 .capacity_pages = capacity,
                                 .grow_pages = grow,
                                 .max_sequences = max_seqs,
                                 .residual_tokens = R,
                                 .layers = layers,
                                 .window = ct_window,
                                 .window_bits = ct_window_bits};
    vq_cache *c = NULL;
    VT_OK(ctx, vq_cache_create(ctx, &cfg, &c));
    free(layers);
    return c;
}

static inline vq_cache *ct_cache(vq_ctx *ctx, const vq_cache_layer_config *lc, int L, int Hkv, int Hq, int D, int P, int R,
                          int64_t capacity, int64_t grow)
{
    return ct_cache_seqs(ctx, lc, L, Hkv, Hq, D, P, R, capacity, grow, 16);
}

/* out [S, Hq, 1, D] f32 of a decode attend of sequences ids of layer l with
 * queries drawn from seed -> a malloc'd copy. */
static inline float *ct_decode_out(vq_ctx *ctx, vq_cache *c, int l, const int64_t *ids, int S, int64_t Hq, int64_t D,
                            uint64_t seed)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    DLTensor *q = vt_new(VT_F32, VT_DIMS(S, Hq, 1, D)), *out = vt_new(VT_F32, VT_DIMS(S, Hq, 1, D));
    vt_fill_normal(q, &rng, 0, 1);
    VT_OK(ctx, vq_cache_attend(c, l, S, ids, q, out, NULL));
    float *o = malloc(vt_bytes(out));
    memcpy(o, out->data, vt_bytes(out));
    vt_free(q), vt_free(out);
    return o;
}

#endif
