/* attention_ref.h — the one float64 reference of attention that every test
 * compares against: out = softmax(score + mask, causal) v_hat, and the
 * natural-log log-sum-exp of each row, as plain loops. GQA (query head h
 * reads kv head h / (Hq / Hkv)), an additive mask, causal rows, lse. Each
 * test supplies the score of its format (a callback: a dot product over
 * tensors, or a table of scores it filled) and the decoded values v_hat
 * [B,Hkv,Skv,D] as doubles. */
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

/* s [n] -> exp(s - max) in place (unnormalised; -inf entries give 0);
 * returns their sum and sets *mx to the max (-inf when every entry is -inf:
 * then s is left as it was and the sum is 0). */
static inline double ref_softmax(double *s, int64_t n, double *mx)
{
    double m = -INFINITY, sum = 0.0;
    for (int64_t t = 0; t < n; t++) m = s[t] > m ? s[t] : m;
    *mx = m;
    if (m == -INFINITY) return 0.0;
    for (int64_t t = 0; t < n; t++) sum += (s[t] = exp(s[t] - m));
    return sum;
}

/* out [B,Hq,Sq,D]; lse [B,Hq,Sq] or NULL; mask [Sq, Skv] rows at
 * mask + b*mask_sb + h*mask_sh, or NULL. Causal: query i sees tokens
 * t < Skv - Sq + i + 1. Rows that see nothing give 0 and lse -inf. */
static inline void ref_attention(const ref_dims *d, ref_score_fn score, const void *arg, const double *vhat,
                                 const double *mask, int64_t mask_sb, int64_t mask_sh, bool causal, double *out,
                                 double *lse)
{
    const int64_t G = d->Hq / d->Hkv;
    double *s = malloc(sizeof(double) * (size_t)(d->Skv ? d->Skv : 1));
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->Hq; h++)
            for (int64_t i = 0; i < d->Sq; i++) {
                const int64_t hk = h / G, lim = causal ? d->Skv - d->Sq + i + 1 : d->Skv;
                const int64_t row = (b * d->Hq + h) * d->Sq + i;
                for (int64_t t = 0; t < d->Skv; t++) {
                    s[t] = t < lim ? score(arg, b, h, i, t) : -INFINITY;
                    if (mask) s[t] += mask[b * mask_sb + h * mask_sh + i * d->Skv + t];
                }
                double mx;
                const double sum = ref_softmax(s, d->Skv, &mx);
                double *o = out + row * d->D;
                for (int64_t c = 0; c < d->D; c++) o[c] = 0.0;
                if (lse) lse[row] = mx == -INFINITY ? -INFINITY : mx + log(sum);
                if (mx == -INFINITY) continue;
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
    double mx;
    for (int64_t t = 0; t < lim; t++) s[t] = score(arg, b, h, i, t);
    return ref_softmax(s, lim, &mx);
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

/* Scores a test computed itself, as a table [B,Hq,Sq,Skv] of doubles (the
 * arg is the table). */
typedef struct ref_table_arg {
    const double *s;
    ref_dims d;
} ref_table_arg;

static inline double ref_table_score(const void *varg, int64_t b, int64_t h, int64_t i, int64_t t)
{
    const ref_table_arg *a = varg;
    return a->s[((b * a->d.Hq + h) * a->d.Sq + i) * a->d.Skv + t];
}

/* A tensor's elements as doubles (malloc'd; the caller frees). */
static inline double *ref_doubles(const DLTensor *t)
{
    const int64_t n = vt_numel(t);
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t e = 0; e < n; e++) x[e] = vt_get(t, e);
    return x;
}

#endif
