/* attn_f32.c — uncompressed f32 attention inside the runtime (plain loops,
 * float64 softmax sums): the test oracle for the vq_cache path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

vq_status vqm_attn_f32_init(vqm_session *s, char *err)
{
    const vqm_config *c = &s->m->cfg;
    const size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    const int slots = c->n_layers;
    const size_t n = (size_t)slots * (size_t)s->cfg.max_tokens * kvd;
    s->kc = malloc((n ? n : 1) * sizeof(float));
    s->vc = malloc((n ? n : 1) * sizeof(float));
    s->scores = malloc((size_t)vqm_pool_size(s->pool) * (size_t)s->cfg.max_tokens * sizeof(float));
    if (s->kc == NULL || s->vc == NULL || s->scores == NULL)
        return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "session: out of memory for a %d-token f32 store of %d layers",
                        s->cfg.max_tokens, slots);
    s->attn_step = vqm_attn_f32_step;
    return VQ_OK;
}

typedef struct attn_job {
    vqm_session *s;
    int layer;
    int64_t T;
} attn_job;

/* (query row, head) pairs split over threads. */
static void attn_part(void *arg, int ti, int tn)
{
    const attn_job *j = arg;
    vqm_session *s = j->s;
    const vqm_config *c = &s->m->cfg;
    const int D = c->head_dim, Hq = c->n_heads, G = c->n_heads / c->n_kv_heads;
    const size_t kvd = (size_t)c->n_kv_heads * D;
    const size_t slot = (size_t)j->layer;
    const float *K = s->kc + slot * s->cfg.max_tokens * kvd;
    const float *V = s->vc + slot * s->cfg.max_tokens * kvd;
    float *sc = s->scores + (size_t)ti * s->cfg.max_tokens;
    const int64_t total = j->T * Hq, p0 = total * ti / tn, p1 = total * (ti + 1) / tn;
    const float scale = c->attn_scale;
    const int64_t W = vqm_layer_window(s->m, j->layer);
    for (int64_t p = p0; p < p1; p++) {
        const int64_t t = p / Hq;
        const int h = (int)(p % Hq), kh = h / G;
        const int64_t n_keys = s->n_past - j->T + t + 1; /* causal: up to and including itself */
        /* a local layer: the newest W of them */
        const int64_t k0 = W > 0 && n_keys > W ? n_keys - W : 0;
        const float *q = s->q + (size_t)t * Hq * D + (size_t)h * D;
        float mx = -INFINITY;
        for (int64_t i = k0; i < n_keys; i++) {
            const float *k = K + (size_t)i * kvd + (size_t)kh * D;
            float d = 0;
            for (int e = 0; e < D; e++) d += q[e] * k[e];
            sc[i] = d * scale;
            if (sc[i] > mx) mx = sc[i];
        }
        double sum = 0;
        for (int64_t i = k0; i < n_keys; i++) {
            sc[i] = expf(sc[i] - mx);
            sum += sc[i];
        }
        float *o = s->att + (size_t)t * Hq * D + (size_t)h * D;
        for (int e = 0; e < D; e++) o[e] = 0;
        for (int64_t i = k0; i < n_keys; i++) {
            const float *v = V + (size_t)i * kvd + (size_t)kh * D;
            const float wgt = (float)(sc[i] / sum);
            for (int e = 0; e < D; e++) o[e] += wgt * v[e];
        }
    }
}

vq_status vqm_attn_f32_step(vqm_session *s, int layer, int64_t T, char *err)
{
    (void)err;
    const vqm_config *c = &s->m->cfg;
    const size_t kvd = (size_t)c->n_kv_heads * c->head_dim, slot = (size_t)layer;
    float *K = s->kc + (slot * s->cfg.max_tokens + (size_t)s->n_past) * kvd;
    float *V = s->vc + (slot * s->cfg.max_tokens + (size_t)s->n_past) * kvd;
    memcpy(K, s->kb, (size_t)T * kvd * sizeof(float));
    memcpy(V, s->vb, (size_t)T * kvd * sizeof(float));
    /* n_past counts the chunk only after the last layer: attend over n_past + T */
    s->n_past += T;
    attn_job job = {s, layer, T};
    vqm_pool_run(s->pool, attn_part, &job);
    s->n_past -= T;
    return VQ_OK;
}
