/* lm_eval.c — see lm_eval.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "lm_eval.h"

char *vqt_read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = calloc((size_t)(n < 0 ? 0 : n) + 1, 1);
    if (p == NULL) {
        fclose(f);
        return NULL;
    }
    const size_t got = n > 0 ? fread(p, 1, (size_t)n, f) : 0;
    fclose(f);
    *len = got;
    return p;
}

int vqt_log_softmax(const float *x, int n, double *out)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - x[best]);
    const double lse = x[best] + log(sum);
    for (int i = 0; i < n; i++) out[i] = x[i] - lse;
    return best;
}

double vqt_kl(const float *lp, const double *lq, int n)
{
    double kl = 0;
    for (int i = 0; i < n; i++) kl += exp((double)lp[i]) * ((double)lp[i] - lq[i]);
    return kl;
}
