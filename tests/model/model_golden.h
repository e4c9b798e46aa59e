/* model_golden.h — readers for the golden files that tests/model/model_reference.py
 * writes (tests/data/): Python unicode_escape text and whitespace-separated
 * numbers. */
#ifndef VQ_TEST_MODEL_GOLDEN_H
#define VQ_TEST_MODEL_GOLDEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
