/* gguf.c — the GGUF reader: a bounds-checked cursor over the file bytes.
 * Every read checks the bytes left first; every count is checked against
 * what the remaining bytes could hold before anything is allocated, so a
 * corrupt header cannot ask for a huge allocation. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vqm.h"

typedef struct cursor {
    const uint8_t *p;
    size_t pos, size;
    char *err;
    bool failed;
} cursor;

vq_status vqm_fail(char *err, vq_status s, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, VQM_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* Marks the cursor failed with a message (first failure wins). */
static bool cur_fail(cursor *c, const char *fmt, ...)
{
    if (!c->failed && c->err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, VQM_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    c->failed = true;
    return false;
}

static bool cur_need(cursor *c, size_t n, const char *what)
{
    if (c->failed) return false;
    if (n > c->size - c->pos)
        return cur_fail(c, "GGUF truncated: %s needs %zu bytes at offset %zu, file has %zu", what, n, c->pos,
                        c->size);
    return true;
}

static uint64_t cur_uint(cursor *c, size_t n, const char *what)
{
    if (!cur_need(c, n, what)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)c->p[c->pos + i] << (8 * i);
    c->pos += n;
    return v;
}

static vqm_str cur_str(cursor *c, const char *what)
{
    vqm_str s = {"", 0};
    const uint64_t len = cur_uint(c, 8, what);
    if (c->failed) return s;
    if (len > c->size - c->pos) {
        cur_fail(c, "GGUF truncated: %s of %llu bytes at offset %zu, file has %zu", what, (unsigned long long)len,
                 c->pos, c->size);
        return s;
    }
    s.s = (const char *)c->p + c->pos;
    s.len = (size_t)len;
    c->pos += (size_t)len;
    return s;
}

static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case VQM_GGUF_U8: case VQM_GGUF_I8: case VQM_GGUF_BOOL: return 1;
    case VQM_GGUF_U16: case VQM_GGUF_I16: return 2;
    case VQM_GGUF_U32: case VQM_GGUF_I32: case VQM_GGUF_F32: return 4;
    case VQM_GGUF_U64: case VQM_GGUF_I64: case VQM_GGUF_F64: return 8;
    default: return 0;
    }
}

/* Reads one scalar of type t into kv's u64/i64/f64. */
static void read_scalar(cursor *c, uint32_t t, vqm_gguf_kv *kv)
{
    const size_t n = scalar_size(t);
    const uint64_t raw = cur_uint(c, n, "a metadata value");
    if (c->failed) return;
    switch (t) {
    case VQM_GGUF_I8: kv->i64 = (int8_t)raw; break;
    case VQM_GGUF_I16: kv->i64 = (int16_t)raw; break;
    case VQM_GGUF_I32: kv->i64 = (int32_t)raw; break;
    case VQM_GGUF_I64: kv->i64 = (int64_t)raw; break;
    case VQM_GGUF_F32: { float f; uint32_t u = (uint32_t)raw; memcpy(&f, &u, 4); kv->f64 = f; break; }
    case VQM_GGUF_F64: memcpy(&kv->f64, &raw, 8); break;
    default: kv->i64 = (int64_t)raw; break;
    }
    if (t == VQM_GGUF_F32 || t == VQM_GGUF_F64) {
        /* integer views only where the value fits (NaN, inf and huge values give 0) */
        const bool fits = kv->f64 > -9.2e18 && kv->f64 < 9.2e18;
        kv->i64 = fits ? (int64_t)kv->f64 : 0;
        kv->u64 = fits && kv->f64 >= 0 ? (uint64_t)kv->i64 : 0;
    } else if (t == VQM_GGUF_U8 || t == VQM_GGUF_U16 || t == VQM_GGUF_U32 || t == VQM_GGUF_U64 ||
               t == VQM_GGUF_BOOL) {
        kv->u64 = raw;
        kv->i64 = (int64_t)raw;
        kv->f64 = (double)raw;
    } else {
        kv->u64 = kv->i64 >= 0 ? (uint64_t)kv->i64 : 0;
        kv->f64 = (double)kv->i64;
    }
}

static void read_value(cursor *c, vqm_gguf_kv *kv)
{
    const uint32_t t = (uint32_t)cur_uint(c, 4, "a metadata type");
    if (c->failed) return;
    kv->type = (vqm_gguf_type)t;
    if (t == VQM_GGUF_STRING) {
        kv->str = cur_str(c, "a metadata string");
        return;
    }
    if (t != VQM_GGUF_ARRAY) {
        if (scalar_size(t) == 0) {
            cur_fail(c, "GGUF metadata '%.*s' has type %u, expected 0..12", (int)kv->key.len, kv->key.s, t);
            return;
        }
        read_scalar(c, t, kv);
        return;
    }
    const uint32_t at = (uint32_t)cur_uint(c, 4, "an array element type");
    const uint64_t n = cur_uint(c, 8, "an array length");
    if (c->failed) return;
    kv->arr_type = (vqm_gguf_type)at;
    kv->arr_n = n;
    const size_t left = c->size - c->pos;
    if (at == VQM_GGUF_STRING) {
        if (n > left / 8) {
            cur_fail(c, "GGUF truncated: array '%.*s' claims %llu strings, only %zu bytes left", (int)kv->key.len, kv->key.s,
                     (unsigned long long)n, left);
            return;
        }
        kv->arr_strs = calloc(n ? (size_t)n : 1, sizeof *kv->arr_strs);
        if (kv->arr_strs == NULL) {
            cur_fail(c, "out of memory for %llu strings", (unsigned long long)n);
            return;
        }
        for (uint64_t i = 0; i < n && !c->failed; i++) kv->arr_strs[i] = cur_str(c, "an array string");
        return;
    }
    const size_t es = scalar_size(at);
    if (es == 0) {
        cur_fail(c, "GGUF array '%.*s' has element type %u, expected a scalar or string type (nested arrays are "
                 "not supported)", (int)kv->key.len, kv->key.s, at);
        return;
    }
    if (n > left / es) {
        cur_fail(c, "GGUF truncated: array '%.*s' claims %llu elements of %zu bytes, only %zu bytes left", (int)kv->key.len,
                 kv->key.s, (unsigned long long)n, es, left);
        return;
    }
    kv->arr_data = c->p + c->pos;
    c->pos += (size_t)n * es;
}

/* Block sizes and bytes per block of ggml types (facts of the ggml format). */
static bool type_layout(uint32_t type, int64_t *block, uint64_t *bytes)
{
    static const struct { uint32_t type; int block; int bytes; } tab[] = {
        {0, 1, 4},     {1, 1, 2},     {2, 32, 18},   {3, 32, 20},   {6, 32, 22},   {7, 32, 24},
        {8, 32, 34},   {9, 32, 36},   {10, 256, 84}, {11, 256, 110}, {12, 256, 144}, {13, 256, 176},
        {14, 256, 210}, {15, 256, 292}, {24, 1, 1},   {25, 1, 2},    {26, 1, 4},    {27, 1, 8},
        {28, 1, 8},    {30, 1, 2},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (tab[i].type == type) {
            *block = tab[i].block;
            *bytes = (uint64_t)tab[i].bytes;
            return true;
        }
    return false;
}

uint64_t vqm_wtype_row_bytes(uint32_t type, int64_t n, int64_t *block)
{
    int64_t b = 0;
    uint64_t bytes = 0;
    if (!type_layout(type, &b, &bytes) || n < 0 || n % b != 0) return 0;
    if (block != NULL) *block = b;
    return (uint64_t)(n / b) * bytes;
}

const char *vqm_wtype_name(uint32_t type)
{
    switch (type) {
    case 0: return "F32"; case 1: return "F16"; case 2: return "Q4_0"; case 3: return "Q4_1";
    case 6: return "Q5_0"; case 7: return "Q5_1"; case 8: return "Q8_0"; case 9: return "Q8_1";
    case 10: return "Q2_K"; case 11: return "Q3_K"; case 12: return "Q4_K"; case 13: return "Q5_K";
    case 14: return "Q6_K"; case 15: return "Q8_K"; case 24: return "I8"; case 25: return "I16";
    case 26: return "I32"; case 27: return "I64"; case 28: return "F64"; case 30: return "BF16";
    default: return "unknown";
    }
}

bool vqm_wtype_supported(uint32_t type)
{
    return type == VQM_W_F32 || type == VQM_W_F16 || type == VQM_W_BF16 || type == VQM_W_Q8_0 ||
           type == VQM_W_Q4_0 || type == VQM_W_Q4_1 || type == VQM_W_Q5_0 || type == VQM_W_Q4_K || type == VQM_W_Q6_K;
}

static void read_tensor(cursor *c, vqm_gguf_tensor *t, uint64_t idx)
{
    t->name = cur_str(c, "a tensor name");
    const uint32_t nd = (uint32_t)cur_uint(c, 4, "a tensor rank");
    if (c->failed) return;
    if (nd < 1 || nd > 4) {
        cur_fail(c, "GGUF tensor %llu '%.*s' has %u dims, expected 1..4", (unsigned long long)idx, (int)t->name.len,
                 t->name.s, nd);
        return;
    }
    t->n_dims = (int)nd;
    uint64_t numel = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        const uint64_t ne = cur_uint(c, 8, "a tensor dim");
        if (c->failed) return;
        if (ne == 0 || ne > ((uint64_t)1 << 40) || numel > (((uint64_t)1 << 50) / ne)) {
            cur_fail(c, "GGUF tensor '%.*s' dim %u is %llu (zero or too large)", (int)t->name.len, t->name.s, d,
                     (unsigned long long)ne);
            return;
        }
        numel *= ne;
        t->ne[d] = (int64_t)ne;
    }
    t->type = (uint32_t)cur_uint(c, 4, "a tensor type");
    t->offset = cur_uint(c, 8, "a tensor offset");
    if (c->failed) return;
    int64_t block = 0;
    const uint64_t row = vqm_wtype_row_bytes(t->type, t->ne[0], &block);
    if (row == 0) {
        int64_t b = 0;
        uint64_t bytes = 0;
        if (!type_layout(t->type, &b, &bytes))
            cur_fail(c, "GGUF tensor '%.*s' has type %u, which this reader does not know", (int)t->name.len,
                     t->name.s, t->type);
        else
            cur_fail(c, "GGUF tensor '%.*s': row of %lld elements is not a multiple of %s's block of %lld",
                     (int)t->name.len, t->name.s, (long long)t->ne[0], vqm_wtype_name(t->type), (long long)b);
        return;
    }
    t->nbytes = row * (numel / (uint64_t)t->ne[0]);
}

vq_status vqm_gguf_parse(const uint8_t *bytes, size_t size, vqm_gguf **out, char *err)
{
    if (out == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (bytes == NULL && size > 0) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "bytes is NULL");
    char local[VQM_ERR_LEN];
    cursor c = {bytes, 0, size, err != NULL ? err : local, false};
    if (size < 4 || memcmp(bytes, "GGUF", 4) != 0)
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "not a GGUF file (magic is not 'GGUF')");
    c.pos = 4;
    vqm_gguf *g = calloc(1, sizeof *g);
    if (g == NULL) return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "out of memory");
    g->bytes = bytes;
    g->size = size;
    g->alignment = 32;
    g->version = (uint32_t)cur_uint(&c, 4, "the version");
    if (!c.failed && (g->version < 2 || g->version > 3))
        cur_fail(&c, "GGUF version %u, expected 2 or 3", g->version);
    const uint64_t nt = cur_uint(&c, 8, "the tensor count");
    const uint64_t nkv = cur_uint(&c, 8, "the metadata count");
    /* a metadata entry takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8 */
    if (!c.failed && (nkv > (size - c.pos) / 13 || nt > (size - c.pos) / 32))
        cur_fail(&c, "GGUF truncated: it claims %llu metadata entries and %llu tensors, more than its %zu bytes can hold",
                 (unsigned long long)nkv, (unsigned long long)nt, size);
    if (!c.failed) {
        g->kv = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
        g->tensors = calloc(nt ? (size_t)nt : 1, sizeof *g->tensors);
        if (g->kv == NULL || g->tensors == NULL) cur_fail(&c, "out of memory for the GGUF tables");
    }
    for (uint64_t i = 0; i < nkv && !c.failed; i++) {
        g->kv[i].key = cur_str(&c, "a metadata key");
        g->n_kv = i + 1;
        read_value(&c, &g->kv[i]);
        if (!c.failed && g->kv[i].key.len == 17 && memcmp(g->kv[i].key.s, "general.alignment", 17) == 0) {
            const uint64_t a = g->kv[i].u64;
            if (g->kv[i].type != VQM_GGUF_U32 || a == 0 || (a & (a - 1)) != 0 || a > 65536)
                cur_fail(&c, "GGUF general.alignment must be a u32 power of two <= 65536, got %llu",
                         (unsigned long long)a);
            else
                g->alignment = a;
        }
    }
    for (uint64_t i = 0; i < nt && !c.failed; i++) {
        read_tensor(&c, &g->tensors[i], i);
        g->n_tensors = i + 1;
    }
    if (!c.failed) {
        const uint64_t data_start = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
        if (data_start > size && nt > 0) cur_fail(&c, "GGUF truncated: no data section (file ends at %zu)", size);
        const uint64_t data_size = data_start <= size ? size - data_start : 0;
        for (uint64_t i = 0; i < nt && !c.failed; i++) {
            vqm_gguf_tensor *t = &g->tensors[i];
            if (t->offset % g->alignment != 0)
                cur_fail(&c, "GGUF tensor '%.*s' offset %llu is not a multiple of the alignment %llu",
                         (int)t->name.len, t->name.s, (unsigned long long)t->offset,
                         (unsigned long long)g->alignment);
            else if (t->offset > data_size || t->nbytes > data_size - t->offset)
                cur_fail(&c, "GGUF truncated: tensor '%.*s' needs bytes %llu..%llu of the data section, which has %llu",
                         (int)t->name.len, t->name.s, (unsigned long long)t->offset,
                         (unsigned long long)(t->offset + t->nbytes), (unsigned long long)data_size);
            else
                t->data = bytes + data_start + t->offset;
        }
    }
    if (c.failed) {
        vqm_gguf_free(g);
        return VQ_ERR_CORRUPT_DATA;
    }
    *out = g;
    return VQ_OK;
}

vq_status vqm_gguf_open(const char *path, vqm_gguf **out, char *err)
{
    if (out == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (path == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "path is NULL");
    const int fd = open(path, O_RDONLY);
    if (fd < 0) return vqm_fail(err, VQ_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return vqm_fail(err, VQ_ERR_IO, "'%s' is not a regular file", path);
    }
    const size_t size = (size_t)st.st_size;
    void *map = size > 0 ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (size > 0 && map == MAP_FAILED) return vqm_fail(err, VQ_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    static const uint8_t empty[1];
    vqm_gguf *g = NULL;
    char inner[VQM_ERR_LEN] = "";
    const vq_status s = vqm_gguf_parse(size > 0 ? map : empty, size, &g, inner);
    if (s != VQ_OK) {
        if (map != NULL) munmap(map, size);
        return vqm_fail(err, s, "%s: %s", path, inner);
    }
    g->map = map;
    g->map_size = size;
    *out = g;
    return VQ_OK;
}

void vqm_gguf_release(const vqm_gguf *g, const void *p, size_t n)
{
    if (g == NULL || g->map == NULL || n == 0) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t base = (uintptr_t)g->map, top = base + g->map_size;
    uintptr_t a = ((uintptr_t)p + page - 1) / page * page, b = ((uintptr_t)p + n) / page * page;
    if (a < base) a = base;
    if (b > top) b = top;
    /* read-only private pages: dropped now, read again from the file if touched */
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

void vqm_gguf_free(vqm_gguf *g)
{
    if (g == NULL) return;
    for (uint64_t i = 0; i < g->n_kv; i++) free(g->kv[i].arr_strs);
    free(g->kv);
    free(g->tensors);
    if (g->map != NULL) munmap(g->map, g->map_size);
    free(g);
}

bool vqm_str_eq(vqm_str s, const char *z)
{
    const size_t n = strlen(z);
    return s.len == n && memcmp(s.s, z, n) == 0;
}

const vqm_gguf_kv *vqm_gguf_find(const vqm_gguf *g, const char *key)
{
    if (g == NULL || key == NULL) return NULL;
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (vqm_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const vqm_gguf_tensor *vqm_gguf_tensor_find(const vqm_gguf *g, const char *name)
{
    if (g == NULL || name == NULL) return NULL;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (vqm_str_eq(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}
