/* npy.c — the .npy parser and writer (see npy.h). The header is a Python
 * literal; this parser accepts the subset NumPy writes ({'descr': '<f4',
 * 'fortran_order': False, 'shape': (2, 3), }, keys in any order, single or
 * double quotes, any spacing) and rejects everything else with a reason. */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAX_HEADER (1u << 20)  /* NumPy itself refuses headers over 10 kB by default */

static int fail(char *err, size_t cap, const char *fmt, ...)
{
    if (cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string (no escapes: NumPy's keys and descrs have none) into
 * out[0..cap); false if unterminated or too long. */
static bool string_lit(cursor *c, char *out, size_t cap)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    const char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap) return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    out[n] = '\0';
    return true;
}

static bool word(cursor *c, const char *w)
{
    skip_ws(c);
    const size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
    c->p += n;
    return true;
}

/* A non-negative decimal integer below 2^62. */
static bool integer(cursor *c, int64_t *v)
{
    skip_ws(c);
    int64_t x = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > ((int64_t)1 << 58)) return false;
        x = x * 10 + (*c->p - '0');
        c->p++;
    }
    if (c->p == start) return false;
    *v = x;
    return true;
}

static int parse_header(cursor *c, vq_npy *out, char *err, size_t cap)
{
    bool have_descr = false, have_order = false, have_shape = false;
    if (!eat(c, '{')) return fail(err, cap, ".npy header does not start with '{'");
    for (;;) {
        if (eat(c, '}')) break;
        char key[32];
        if (!string_lit(c, key, sizeof key)) return fail(err, cap, ".npy header: expected a quoted key");
        if (!eat(c, ':')) return fail(err, cap, ".npy header: expected ':' after '%s'", key);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            char d[16];
            if (!string_lit(c, d, sizeof d)) return fail(err, cap, ".npy header: 'descr' is not a short string");
            if (strcmp(d, "<f4") == 0 || strcmp(d, "=f4") == 0) out->elem_bytes = 4;
            else if (strcmp(d, "<f2") == 0 || strcmp(d, "=f2") == 0) out->elem_bytes = 2;
            else return fail(err, cap, ".npy dtype '%s' is not supported (little-endian f16 '<f2' or f32 '<f4')", d);
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (word(c, "True")) return fail(err, cap, ".npy fortran_order True is not supported (C order only)");
            if (!word(c, "False")) return fail(err, cap, ".npy header: fortran_order is not True or False");
            have_order = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (!eat(c, '(')) return fail(err, cap, ".npy header: shape is not a tuple");
            out->ndim = 0;
            while (!eat(c, ')')) {
                if (out->ndim == VQ_NPY_MAX_DIMS)
                    return fail(err, cap, ".npy shape has more than %d dimensions", VQ_NPY_MAX_DIMS);
                int64_t v;
                if (!integer(c, &v)) return fail(err, cap, ".npy header: shape entry %d is not a size", out->ndim);
                out->shape[out->ndim++] = v;
                if (!eat(c, ',')) {
                    if (!eat(c, ')')) return fail(err, cap, ".npy header: expected ',' or ')' in shape");
                    break;
                }
            }
            have_shape = true;
        } else {
            return fail(err, cap, ".npy header: unexpected or repeated key '%s'", key);
        }
        if (!eat(c, ',')) {
            if (!eat(c, '}')) return fail(err, cap, ".npy header: expected ',' or '}'");
            break;
        }
    }
    skip_ws(c);
    if (c->p != c->end) return fail(err, cap, ".npy header has bytes after its closing '}'");
    if (!have_descr || !have_order || !have_shape)
        return fail(err, cap, ".npy header lacks %s", !have_descr ? "'descr'" : !have_order ? "'fortran_order'" : "'shape'");
    return 0;
}

int vq_npy_parse(const uint8_t *buf, size_t size, vq_npy *out, char *err, size_t cap)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (size < 10 || memcmp(buf, magic, 6) != 0) return fail(err, cap, "not a .npy file (no \\x93NUMPY magic)");
    const int major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return fail(err, cap, ".npy format version %d.%d is not supported (1.0, 2.0, 3.0)", major, minor);
    size_t header_len, offset;
    if (major == 1) {
        header_len = (size_t)buf[8] | (size_t)buf[9] << 8;
        offset = 10;
    } else {
        if (size < 12) return fail(err, cap, ".npy file of %zu bytes is shorter than its preamble", size);
        header_len = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        offset = 12;
    }
    if (header_len > NPY_MAX_HEADER) return fail(err, cap, ".npy header of %zu bytes is over the limit", header_len);
    if (header_len > size - offset)
        return fail(err, cap, ".npy header of %zu bytes runs past the end of the %zu-byte file", header_len, size);
    const char *h = (const char *)buf + offset;
    for (size_t i = 0; i < header_len; i++)
        if (h[i] == '\0') return fail(err, cap, ".npy header contains a NUL byte");
    vq_npy a = {0};
    cursor c = {h, h + header_len};
    if (parse_header(&c, &a, err, cap) != 0) return -1;
    int64_t numel = 1;
    for (int i = 0; i < a.ndim; i++) {
        if (a.shape[i] != 0 && numel > ((int64_t)1 << 56) / a.shape[i])
            return fail(err, cap, ".npy shape has more than 2^56 elements");
        numel *= a.shape[i];
    }
    const size_t data_off = offset + header_len, left = size - data_off;
    if ((uint64_t)numel * (uint64_t)a.elem_bytes != left)
        return fail(err, cap, ".npy shape needs %lld bytes of data, the file has %zu after its header",
                    (long long)(numel * a.elem_bytes), left);
    a.numel = numel;
    a.data = buf + data_off;
    a.data_bytes = left;
    *out = a;
    return 0;
}

int vq_npy_load(const char *path, size_t max_bytes, uint8_t **buf, vq_npy *out, char *err, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, cap, "cannot open '%s': %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return fail(err, cap, "cannot seek in '%s'", path);
    }
    const long n = ftell(f);
    if (n < 0 || (unsigned long)n > max_bytes) {
        fclose(f);
        return fail(err, cap, "'%s' has %ld bytes, over the limit of %zu", path, n, max_bytes);
    }
    rewind(f);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (!b) {
        fclose(f);
        return fail(err, cap, "cannot allocate %ld bytes for '%s'", n, path);
    }
    const size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(b);
        return fail(err, cap, "reading '%s': got %zu of %ld bytes", path, got, n);
    }
    char why[256];
    if (vq_npy_parse(b, (size_t)n, out, why, sizeof why) != 0) {
        free(b);
        return fail(err, cap, "%s: %s", path, why);
    }
    *buf = b;
    return 0;
}

int vq_npy_save(const char *path, int elem_bytes, int ndim, const int64_t *shape, const void *data, char *err,
                size_t cap)
{
    if ((elem_bytes != 2 && elem_bytes != 4) || ndim < 0 || ndim > VQ_NPY_MAX_DIMS)
        return fail(err, cap, "vq_npy_save: elem_bytes %d / ndim %d not supported", elem_bytes, ndim);
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f%d', 'fortran_order': False, 'shape': (", elem_bytes);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld%s", (long long)shape[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
        numel *= shape[i];
    }
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    /* pad with spaces and a newline so the data starts at a multiple of 64 */
    const int total = (10 + n + 1 + 63) / 64 * 64;
    while (10 + n + 1 < total) hdr[n++] = ' ';
    hdr[n++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) return fail(err, cap, "cannot create '%s': %s", path, strerror(errno));
    const uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(n & 0xFF), (uint8_t)(n >> 8)};
    /* elements are written in host order: the library targets little-endian hosts */
    const bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n &&
                    fwrite(data, (size_t)elem_bytes, (size_t)numel, f) == (size_t)numel;
    if (fclose(f) != 0 || !ok) return fail(err, cap, "writing '%s' failed", path);
    return 0;
}
