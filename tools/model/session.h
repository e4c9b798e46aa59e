/* session.h — the run state shared by forward.c and the attention
 * back ends (attn_f32.c: the oracle; attn_cache.c: vq_cache). Private. */
#ifndef VQM_SESSION_H
#define VQM_SESSION_H

#include "vqm.h"

struct vqm_session {
    const vqm_model *m;
    vq_ctx *ctx;
    vqm_pool *pool;
    vqm_kernels k;
    vqm_session_config cfg;
    int64_t n_past;
    /* activations for one chunk of B = max_batch tokens */
    float *x, *xb;        /* [B, dim] */
    float *q, *att;       /* [B, Hq*D] */
    float *kb, *vb;       /* [B, Hkv*D] */
    float *h1, *h3;       /* [B, hidden] */
    float *xsum;          /* [B * max(dim, hidden) / 32] */
    float *rope_cos, *rope_sin; /* [B, rope_dim/2] */
    double *inv_freq;     /* [rope_dim/2] */
    float *rope_cos_l, *rope_sin_l; /* local layers' (rope_base_local): [B, rope_dim/2] */
    double *inv_freq_l;   /* [rope_dim/2] */
    /* VQM_ATTN_F32: the f32 store */
    float *kc, *vc;       /* [L, max_tokens, Hkv*D] */
    float *scores;        /* [threads, max_tokens] */
    /* VQM_ATTN_CACHE */
    vq_cache *cache;
    int64_t seq;
    /* the attention back end, set by its init */
    vq_status (*attn_step)(vqm_session *s, int layer, int64_t T, char *err);
    vq_status (*attn_reset)(vqm_session *s, char *err); /* NULL: nothing to forget */
    void (*attn_free)(vqm_session *s);                  /* NULL: nothing to free */
};

/* A back end's init allocates its store and sets attn_step (+ reset, free).
 * attn_step: attention of one layer for the chunk's T tokens at positions
 * n_past..: appends kb/vb [T, Hkv*D] (RoPE applied) to the layer's store,
 * then att [T, Hq*D] = causal softmax(q k^T * attn_scale) v over the
 * stored tokens of the layer each query sees (a local layer's query at
 * position p: p - sliding_window < position <= p). */
vq_status vqm_attn_f32_init(vqm_session *s, char *err);
vq_status vqm_attn_f32_step(vqm_session *s, int layer, int64_t T, char *err);
vq_status vqm_attn_cache_init(vqm_session *s, char *err);

#endif
