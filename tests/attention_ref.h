/* attention_ref.h — the float64 reference of attention shared by the
 * attention tests: out = softmax(score + mask, causal) v_hat, as plain loops.
 * Each test supplies the score of its format (a callback) and the decoded
 * values v_hat [B,Hkv,Skv,D] as doubles. */
#ifndef VQ_TEST_ATTENTION_REF_H
#define VQ_TEST_ATTENTION_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"

typedef struct ref_dims {
    int64_t B, Hq, Hkv, Sq, Skv, D;
} ref_dims;

/* score of query row (b, h, i) against token t of kv head h / (Hq/Hkv),
 * before the mask */
typedef double (*ref_score_fn)(const void *arg, int64_t b, int64_t h, int64_t i, int64_t t);

/* out [B,Hq,Sq,D]; mask [Sq, Skv] rows at mask + b*mask_sb + h*mask_sh, or
 * NULL. Rows that see nothing give 0. */
static inline void ref_attention(const ref_dims *d, ref_score_fn score, const void *arg, const double *vhat,
                                 const double *mask, int64_t mask_sb, int64_t mask_sh, bool causal, double *out)
{
    const int64_t G = d->Hq / d->Hkv;
    double *s = malloc(sizeof(double) * (size_t)d->Skv);
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->Hq; h++)
            for (int64_t i = 0; i < d->Sq; i++) {
                const int64_t hk = h / G, lim = causal ? d->Skv - d->Sq + i + 1 : d->Skv;
                double mx = -INFINITY;
                for (int64_t t = 0; t < d->Skv; t++) {
                    s[t] = t < lim ? score(arg, b, h, i, t) : -INFINITY;
                    if (mask) s[t] += mask[b * mask_sb + h * mask_sh + i * d->Skv + t];
                    if (s[t] > mx) mx = s[t];
                }
                double *o = out + ((b * d->Hq + h) * d->Sq + i) * d->D;
                for (int64_t c = 0; c < d->D; c++) o[c] = 0.0;
                if (mx == -INFINITY) continue;
                double sum = 0.0;
                for (int64_t t = 0; t < d->Skv; t++) {
                    s[t] = exp(s[t] - mx);
                    sum += s[t];
                }
                for (int64_t t = 0; t < d->Skv; t++)
                    for (int64_t c = 0; c < d->D; c++)
                        o[c] += s[t] / sum * vhat[((b * d->Hkv + hk) * d->Skv + t) * d->D + c];
            }
    free(s);
}

/* Row (b, h, i)'s exact probabilities over tokens [0, lim): s[t] =
 * exp(score - max) (unnormalised); returns their sum. */
static inline double ref_row_probs(ref_score_fn score, const void *arg, int64_t b, int64_t h, int64_t i, int64_t lim,
                                   double *s)
{
    double mx = -INFINITY, sum = 0.0;
    for (int64_t t = 0; t < lim; t++) {
        s[t] = score(arg, b, h, i, t);
        mx = s[t] > mx ? s[t] : mx;
    }
    for (int64_t t = 0; t < lim; t++) sum += (s[t] = exp(s[t] - mx));
    return sum;
}

/* The score of plain keys: scale * q[b,h,i] . k[b,hk,t] (any dtypes, read as
 * doubles through the harness). */
typedef struct ref_f16_arg {
    const DLTensor *q, *k; /* [B,Hq,Sq,D], [B,Hkv,Skv,D] compact */
    ref_dims d;
    double scale;
} ref_f16_arg;

static inline double ref_f16_score(const void *varg, int64_t b, int64_t h, int64_t i, int64_t t)
{
    const ref_f16_arg *a = varg;
    const int64_t D = a->d.D, hk = h / (a->d.Hq / a->d.Hkv);
    double acc = 0.0;
    for (int64_t c = 0; c < D; c++)
        acc += vt_get(a->q, ((b * a->d.Hq + h) * a->d.Sq + i) * D + c) *
               vt_get(a->k, ((b * a->d.Hkv + hk) * a->d.Skv + t) * D + c);
    return acc * a->scale;
}

#endif
