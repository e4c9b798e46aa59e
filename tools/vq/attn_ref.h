/* attn_ref.h — float64 reference attention for the vq commands that grade
 * compressed caches against exact results (demo, cache-eval). */
#ifndef VQ_TOOL_ATTN_REF_H
#define VQ_TOOL_ATTN_REF_H

#include <stdint.h>

#include "veloxquant.h"

/* out[h, i, t] = q[h, i] . k[h, t] in float64: q [1,H,Nq,D], k [1,H,S,D] f32. */
void ref_dots(const DLTensor *q, const DLTensor *k, double *out);
/* out [H, Nq, D] = softmax_t(scale * logits[h, i, t]) v[h, t] in float64; v [1,H,S,D] f32. */
void ref_attend(const double *logits, const DLTensor *v, int64_t nq, double scale, double *out);
/* ||a - b||_2 / ||b||_2 over n doubles. */
double ref_rel_err(const double *a, const double *b, int64_t n);

#endif
