/* attn_ref.c — float64 reference attention (see attn_ref.h). */
#include "attn_ref.h"

#include <math.h>
#include <stdlib.h>

#include "tool.h"

/* out[h, i, t] = q[h, i] . k[h, t] in float64: q [1,H,Nq,D], k [1,H,S,D]. */
void ref_dots(const DLTensor *q, const DLTensor *k, double *out)
{
    const int64_t h = q->shape[1], nq = q->shape[2], d = q->shape[3], s = k->shape[2];
    for (int64_t hh = 0; hh < h; hh++)
        for (int64_t i = 0; i < nq; i++)
            for (int64_t t = 0; t < s; t++) {
                const float *qr = tool_f32(q) + (hh * nq + i) * d, *kr = tool_f32(k) + (hh * s + t) * d;
                double acc = 0;
                for (int64_t j = 0; j < d; j++) acc += (double)qr[j] * kr[j];
                out[(hh * nq + i) * s + t] = acc;
            }
}

/* out [H, Nq, D] = softmax_t(scale * logits[h, i, t]) v[h, t] in float64. */
void ref_attend(const double *logits, const DLTensor *v, int64_t nq, double scale, double *out)
{
    const int64_t h = v->shape[1], s = v->shape[2], d = v->shape[3];
    double *p = tool_calloc((size_t)s, sizeof *p);
    for (int64_t hh = 0; hh < h; hh++)
        for (int64_t i = 0; i < nq; i++) {
            const double *l = logits + (hh * nq + i) * s;
            double mx = -INFINITY, sum = 0;
            for (int64_t t = 0; t < s; t++) mx = fmax(mx, scale * l[t]);
            for (int64_t t = 0; t < s; t++) sum += p[t] = exp(scale * l[t] - mx);
            double *o = out + (hh * nq + i) * d;
            for (int64_t j = 0; j < d; j++) o[j] = 0;
            for (int64_t t = 0; t < s; t++) {
                const float *vr = tool_f32(v) + (hh * s + t) * d;
                for (int64_t j = 0; j < d; j++) o[j] += p[t] / sum * vr[j];
            }
        }
    free(p);
}

/* ||a - b||_2 / ||b||_2 over n doubles. */
double ref_rel_err(const double *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / den);
}

