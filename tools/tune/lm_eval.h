/* lm_eval.h — what the commands that score a model's next-token
 * distributions share (`vq perplexity`, the tuner): a text file read whole, the
 * log-softmax of a logit row, and the KL divergence of two distributions. */
#ifndef VQ_TOOL_LM_EVAL_H
#define VQ_TOOL_LM_EVAL_H

#include <stddef.h>

/* The file's bytes, NUL-terminated (malloc'd; *len without the NUL), or NULL
 * when it cannot be read or memory runs out. */
char *vqt_read_text(const char *path, size_t *len);
/* log-softmax of x[n] into out (in double); returns the argmax. */
int vqt_log_softmax(const float *x, int n, double *out);
/* KL(p || q) = sum_i p_i (log p_i - log q_i) of log-probabilities lp (f32)
 * and lq (double) over n outcomes. */
double vqt_kl(const float *lp, const double *lq, int n);

#endif
