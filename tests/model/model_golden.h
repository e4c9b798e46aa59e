/* model_golden.h — readers for the golden files that tests/model/model_reference*.py
 * writes (tests/model/data/): Python unicode_escape text and whitespace-separated
 * numbers. */
#ifndef VQ_TEST_MODEL_GOLDEN_H
#define VQ_TEST_MODEL_GOLDEN_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "vqm.h"

/* The file's bytes, NUL-terminated (NULL when it cannot be read). */
static inline char *golden_read(const char *dir, const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p != NULL && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p != NULL) p[n] = 0;
    if (len != NULL) *len = (size_t)n;
    return p;
}

static inline int golden_utf8(uint32_t cp, char *o)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Decodes Python's unicode_escape of s[0..n) into UTF-8 out (capacity >= 4n); returns the length. */
static inline size_t golden_unescape(const char *s, size_t n, char *out)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) { out[w++] = s[i]; continue; }
        const char c = s[++i];
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits > 0 && i + (size_t)digits < n) {
            char hex[9] = {0};
            memcpy(hex, s + i + 1, (size_t)digits);
            w += (size_t)golden_utf8((uint32_t)strtoul(hex, NULL, 16), out + w);
            i += (size_t)digits;
            continue;
        }
        out[w++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    }
    return w;
}

/* Logits of the whole token list through a session with chunks of `batch`;
 * preset NULL = the f32 oracle, else vq_cache with that preset. */
static inline float *golden_run(const vqm_model *model, vq_ctx *ctx, const char *preset, const int32_t *tok, int64_t n,
                         int batch, bool one_call)
{
    const vq_cache_config cc = {.preset = preset};
    const vqm_session_config sc = {.max_tokens = (int)n + 8, .max_batch = batch,
                                   .attn = preset != NULL ? VQM_ATTN_CACHE : VQM_ATTN_F32, .cache = &cc};
    vqm_session *s = NULL;
    char err[VQM_ERR_LEN];
    VT_CHECK(vqm_session_create(model, ctx, &sc, &s, err) == VQ_OK, "session: %s", err);
    if (s == NULL) return NULL;
    const int V = model->cfg.vocab;
    float *lg = malloc(sizeof(float) * (size_t)(n * V));
    for (int64_t i = 0; i < n * V; i++) lg[i] = NAN;
    if (one_call) {
        VT_CHECK(vqm_forward(s, tok, n, n, lg, err) == VQ_OK, "forward: %s", err);
    } else { /* one token per call: decode */
        for (int64_t i = 0; i < n; i++) VT_CHECK(vqm_forward(s, tok + i, 1, 1, lg + i * V, err) == VQ_OK, "%s", err);
    }
    VT_CHECK(vqm_session_length(s) == n, "length %lld", (long long)vqm_session_length(s));
    vqm_session_free(s);
    return lg;
}

/* One prompt of a golden logits file: its ids, and from position `first` on
 * (rows of them) max |logit|, the top ids and logits, every stride-th logit. */
typedef struct golden_prompt {
    int32_t ids[1024];
    int n, first, rows;
    double maxabs[64];
    int kid[64][16];
    double kval[64][16];
    int nk[64];
    double s[64][520];
    int ns[64];
} golden_prompt;

/* Reads up to cap prompts of $VQM_TESTDATA/<name> (tests/model_reference*.py); the count. */
static inline int golden_read_logits(const char *name, golden_prompt *p, int cap)
{
    const char *dir = getenv("VQM_TESTDATA");
    char *txt = golden_read(dir ? dir : "tests/model/data", name, NULL);
    VT_CHECK(txt != NULL, "cannot read %s", name);
    if (txt == NULL) return 0;
    int np = -1, pos = -1;
    for (char *line = strtok(txt, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *q = line + 2, *end;
        if (line[0] == 'P') {
            if (++np >= cap) break;
            p[np].n = p[np].first = p[np].rows = 0;
            pos = -1;
            while (p[np].n < 1024 && (p[np].ids[p[np].n] = (int32_t)strtol(q, &end, 10), end != q)) { p[np].n++; q = end; }
        } else if (np >= 0 && np < cap && line[0] == 'L') {
            p[np].first = (int)strtol(q, NULL, 10);
        } else if (np >= 0 && np < cap && line[0] == 'M') {
            if (++pos >= 64) break;
            p[np].rows = pos + 1;
            p[np].maxabs[pos] = strtod(q, NULL);
            p[np].nk[pos] = p[np].ns[pos] = 0;
        } else if (np >= 0 && pos >= 0 && line[0] == 'K') {
            while (p[np].nk[pos] < 16) {
                const long id = strtol(q, &end, 10);
                if (end == q || *end != ':') break;
                p[np].kid[pos][p[np].nk[pos]] = (int)id;
                p[np].kval[pos][p[np].nk[pos]++] = strtod(end + 1, &q);
            }
        } else if (np >= 0 && pos >= 0 && line[0] == 'S') {
            while (p[np].ns[pos] < 520) {
                const double v = strtod(q, &end);
                if (end == q) break;
                p[np].s[pos][p[np].ns[pos]++] = v;
                q = end;
            }
        }
    }
    free(txt);
    return np + 1 < cap ? np + 1 : cap;
}

/* max over golden entries of |ours - golden| / max |logit| at each kept
 * position (lg: rows from position `first`, V each); the worst position */
static inline double golden_error(const golden_prompt *p, const float *lg, int V, int stride, int *worst_pos)
{
    double worst = 0;
    for (int t = 0; t < p->rows; t++) {
        double e = 0;
        for (int i = 0; i < p->nk[t]; i++) e = fmax(e, fabs(lg[(size_t)t * V + p->kid[t][i]] - p->kval[t][i]));
        for (int i = 0; i < p->ns[t]; i++) e = fmax(e, fabs(lg[(size_t)t * V + (size_t)stride * i] - p->s[t][i]));
        e /= p->maxabs[t];
        if (isnan(e) || e > worst) { worst = isnan(e) ? INFINITY : e; *worst_pos = p->first + t; }
    }
    return worst;
}

/* The model of $VQM_MODEL, or NULL after printing why the model part skips. */
static inline struct vqm_model *golden_model(void)
{
    const char *path = getenv("VQM_MODEL");
    char err[VQM_ERR_LEN];
    struct vqm_model *m = NULL;
    if (path == NULL || vqm_model_load(path, &m, err) != VQ_OK)
        printf("SKIP: model file %s not loadable (sh tools/fetch_model.sh installs it)\n",
               path ? path : "(VQM_MODEL unset)");
    return m;
}

#endif
