/* sample.c — greedy and temperature / top-k / top-p (nucleus) sampling
 * with the library's PRNG (same seed, same text on every platform). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vqm.h"

typedef struct cand {
    float p;
    int32_t id;
} cand;

struct vqm_sampler {
    vqm_sampler_config cfg;
    int vocab;
    vq_rng rng;
    cand *c;
};

vq_status vqm_sampler_create(const vqm_sampler_config *cfg, int vocab, vqm_sampler **out, char *err)
{
    if (out == NULL) return VQ_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (cfg == NULL || vocab < 1 || !(cfg->temperature >= 0) || cfg->top_k < 0 || !(cfg->top_p > 0 && cfg->top_p <= 1)) {
        if (err != NULL)
            snprintf(err, VQM_ERR_LEN, "sampler: need temperature >= 0, top_k >= 0, 0 < top_p <= 1, vocab >= 1 "
                     "(got %g, %d, %g, %d)", cfg ? cfg->temperature : 0, cfg ? cfg->top_k : 0, cfg ? cfg->top_p : 0, vocab);
        return VQ_ERR_INVALID_ARGUMENT;
    }
    vqm_sampler *s = calloc(1, sizeof *s);
    if (s != NULL) s->c = malloc((size_t)vocab * sizeof *s->c);
    if (s == NULL || s->c == NULL) {
        free(s);
        if (err != NULL) snprintf(err, VQM_ERR_LEN, "sampler: out of memory");
        return VQ_ERR_OUT_OF_MEMORY;
    }
    s->cfg = *cfg;
    s->vocab = vocab;
    vq_rng_seed(&s->rng, cfg->seed);
    *out = s;
    return VQ_OK;
}

void vqm_sampler_free(vqm_sampler *s)
{
    if (s == NULL) return;
    free(s->c);
    free(s);
}

static int by_p_desc(const void *a, const void *b)
{
    const float x = ((const cand *)a)->p, y = ((const cand *)b)->p;
    if (x != y) return x > y ? -1 : 1;
    return ((const cand *)a)->id - ((const cand *)b)->id;
}

int32_t vqm_sample(vqm_sampler *s, const float *logits)
{
    int32_t best = 0;
    for (int i = 1; i < s->vocab; i++)
        if (logits[i] > logits[best]) best = i;
    if (s->cfg.temperature == 0) return best;
    /* softmax at the temperature, then keep the top k and the smallest prefix of mass >= top_p */
    const float mx = logits[best];
    double sum = 0;
    for (int i = 0; i < s->vocab; i++) {
        s->c[i].p = expf((logits[i] - mx) / s->cfg.temperature);
        s->c[i].id = i;
        sum += s->c[i].p;
    }
    int n = s->vocab;
    qsort(s->c, (size_t)n, sizeof *s->c, by_p_desc);
    if (s->cfg.top_k > 0 && s->cfg.top_k < n) n = s->cfg.top_k;
    double kept = 0;
    for (int i = 0; i < n; i++) kept += s->c[i].p;
    if (s->cfg.top_p < 1) {
        double acc = 0;
        for (int i = 0; i < n; i++) {
            acc += s->c[i].p;
            if (acc >= s->cfg.top_p * sum) {
                n = i + 1;
                kept = acc;
                break;
            }
        }
    }
    const double r = vq_rng_uniform(&s->rng) * kept;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += s->c[i].p;
        if (r < acc) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
