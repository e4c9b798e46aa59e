/* container.c — the file container: header, CRC'd sections, bounded reads,
 * atomic file writes (see container.h and docs/FILE_FORMAT.md). */
#include "persist/container.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "persist/crc32c.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define VQ_HOST_LE 1
#else
#define VQ_HOST_LE 0
#endif

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ---- writing ---- */

void vq_writer_init(vq_writer *w, void *buf, size_t cap)
{
    *w = (vq_writer){.buf = buf, .cap = cap, .pos = VQ_FILE_HEADER_BYTES};
    if (buf) {
        assert(cap >= VQ_FILE_HEADER_BYTES);
        memset(buf, 0, VQ_FILE_HEADER_BYTES);
    }
}

/* Reserves n bytes; NULL on the counting pass. */
static uint8_t *take(vq_writer *w, size_t n)
{
    uint8_t *p = NULL;
    if (w->buf) {
        assert(w->pos + n <= w->cap);  /* the counting pass sized the buffer */
        p = w->buf + w->pos;
    }
    w->pos += n;
    return p;
}

void vq_put_u32(vq_writer *w, uint32_t v)
{
    uint8_t *p = take(w, 4);
    if (p) le32(p, v);
}
void vq_put_u64(vq_writer *w, uint64_t v)
{
    uint8_t *p = take(w, 8);
    if (p) le64(p, v);
}
void vq_put_i64(vq_writer *w, int64_t v) { vq_put_u64(w, (uint64_t)v); }
void vq_put_bytes(vq_writer *w, const void *src, size_t n)
{
    uint8_t *p = take(w, n);
    if (p && n) memcpy(p, src, n);
}
uint8_t *vq_put_space(vq_writer *w, size_t n) { return take(w, n); }

void vq_put_f32s(vq_writer *w, const float *v, size_t n)
{
    uint8_t *p = take(w, 4 * n);
    if (!p) return;
    if (VQ_HOST_LE) {
        if (n) memcpy(p, v, 4 * n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, v + i, 4);
        le32(p + 4 * i, u);
    }
}

void vq_section_begin(vq_writer *w, uint32_t tag)
{
    w->section = w->pos;
    uint8_t *p = take(w, VQ_FILE_SECTION_HEADER_BYTES);
    if (p) {
        le32(p, tag);
        memset(p + 4, 0, 12);
    }
}

/* The section CRC covers its tag, its size and its payload (not the padding,
 * which must be zero). */
static uint32_t section_crc(const uint8_t *hdr, const uint8_t *payload, uint64_t size)
{
    uint8_t key[12];
    memcpy(key, hdr, 4);
    memcpy(key + 4, hdr + 8, 8);
    return vq_crc32c(vq_crc32c(0, key, sizeof key), payload, (size_t)size);
}

void vq_section_end(vq_writer *w)
{
    const uint64_t size = w->pos - w->section - VQ_FILE_SECTION_HEADER_BYTES;
    const size_t pad = (8 - (w->pos & 7)) & 7;
    uint8_t *z = take(w, pad);
    if (z) memset(z, 0, pad);
    w->n_sections++;
    if (!w->buf) return;
    uint8_t *hdr = w->buf + w->section;
    le64(hdr + 8, size);
    le32(hdr + 4, section_crc(hdr, hdr + VQ_FILE_SECTION_HEADER_BYTES, size));
}

size_t vq_writer_finish(vq_writer *w, const char magic[8], uint32_t version)
{
    if (!w->buf) return w->pos;
    uint8_t *h = w->buf;
    memcpy(h, magic, 8);
    le32(h + 8, version);
    le32(h + 12, VQ_FILE_HEADER_BYTES);
    le64(h + 16, (uint64_t)w->pos);
    le32(h + 24, w->n_sections);
    le32(h + 28, vq_crc32c(0, h, 28));
    return w->pos;
}

/* ---- reading ---- */

bool vq_get_bytes(vq_reader *r, size_t n, const uint8_t **p)
{
    if (n > r->n - r->pos) return false;
    *p = r->p + r->pos;
    r->pos += n;
    return true;
}
bool vq_get_u32(vq_reader *r, uint32_t *v)
{
    const uint8_t *p;
    if (!vq_get_bytes(r, 4, &p)) return false;
    *v = rd32(p);
    return true;
}
bool vq_get_u64(vq_reader *r, uint64_t *v)
{
    const uint8_t *p;
    if (!vq_get_bytes(r, 8, &p)) return false;
    *v = rd64(p);
    return true;
}
bool vq_get_i64(vq_reader *r, int64_t *v)
{
    uint64_t u;
    if (!vq_get_u64(r, &u)) return false;
    *v = (int64_t)u;
    return true;
}
bool vq_get_f32s(vq_reader *r, float *out, size_t n)
{
    const uint8_t *p;
    if (n > (r->n - r->pos) / 4 || !vq_get_bytes(r, 4 * n, &p)) return false;
    if (VQ_HOST_LE) {
        if (n) memcpy(out, p, 4 * n);
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = rd32(p + 4 * i);
        memcpy(out + i, &u, 4);
    }
    return true;
}

const char *vq_tag_name(uint32_t tag, char buf[5])
{
    for (int i = 0; i < 4; i++) {
        const unsigned c = (tag >> (8 * i)) & 0xFF;
        buf[i] = (c >= 0x20 && c < 0x7F) ? (char)c : '?';
    }
    buf[4] = '\0';
    return buf;
}

vq_status vq_container_open(vq_ctx *ctx, const void *buf, size_t size, const char magic[8], uint32_t max_version,
                            const char *what, vq_container *c)
{
    const uint8_t *h = buf;
    VQ_RETURN_IF(ctx, size < VQ_FILE_HEADER_BYTES, VQ_ERR_CORRUPT_DATA,
                 "%s data of %zu bytes is shorter than the %d-byte header", what, size, VQ_FILE_HEADER_BYTES);
    VQ_RETURN_IF(ctx, memcmp(h, magic, 8) != 0, VQ_ERR_CORRUPT_DATA,
                 "not a veloxquant %s: the first 8 bytes are not the magic \"%.7s\"", what, magic);
    const uint32_t crc = rd32(h + 28), want = vq_crc32c(0, h, 28);
    VQ_RETURN_IF(ctx, crc != want, VQ_ERR_CORRUPT_DATA, "%s header CRC-32C is 0x%08x, expected 0x%08x", what,
                 (unsigned)crc, (unsigned)want);
    const uint32_t version = rd32(h + 8);
    VQ_RETURN_IF(ctx, version == 0, VQ_ERR_CORRUPT_DATA, "%s format version 0 is not a version", what);
    VQ_RETURN_IF(ctx, version > max_version, VQ_ERR_UNSUPPORTED,
                 "%s format version %u is newer than this library reads (up to %u)", what, (unsigned)version,
                 (unsigned)max_version);
    VQ_RETURN_IF(ctx, rd32(h + 12) != VQ_FILE_HEADER_BYTES, VQ_ERR_CORRUPT_DATA,
                 "%s header size is %u, expected %d", what, (unsigned)rd32(h + 12), VQ_FILE_HEADER_BYTES);
    const uint64_t file_size = rd64(h + 16);
    VQ_RETURN_IF(ctx, file_size != size, VQ_ERR_CORRUPT_DATA,
                 "%s header says %llu bytes but the data has %zu (truncated or extended)", what,
                 (unsigned long long)file_size, size);
    const uint32_t n_sections = rd32(h + 24);
    VQ_RETURN_IF(ctx, n_sections > VQ_FILE_MAX_SECTIONS ||
                          n_sections > (size - VQ_FILE_HEADER_BYTES) / VQ_FILE_SECTION_HEADER_BYTES,
                 VQ_ERR_CORRUPT_DATA, "%s header lists %u sections, more than %zu bytes can hold", what,
                 (unsigned)n_sections, size);
    *c = (vq_container){.all = {.p = h, .n = size, .pos = VQ_FILE_HEADER_BYTES},
                        .version = version, .n_sections = n_sections, .what = what};
    return VQ_OK;
}

vq_status vq_container_section(vq_ctx *ctx, vq_container *c, uint32_t tag, vq_reader *section)
{
    char want_name[5], got_name[5];
    vq_tag_name(tag, want_name);
    VQ_RETURN_IF(ctx, c->next >= c->n_sections, VQ_ERR_CORRUPT_DATA,
                 "%s has %u sections; section %u ('%s') is missing", c->what, (unsigned)c->n_sections,
                 (unsigned)c->next, want_name);
    const size_t at = c->all.pos;
    const uint8_t *hdr;
    VQ_RETURN_IF(ctx, !vq_get_bytes(&c->all, VQ_FILE_SECTION_HEADER_BYTES, &hdr), VQ_ERR_CORRUPT_DATA,
                 "%s section %u ('%s') header at byte %zu runs past the end (%zu bytes)", c->what,
                 (unsigned)c->next, want_name, at, c->all.n);
    const uint32_t got = rd32(hdr), crc = rd32(hdr + 4);
    const uint64_t size = rd64(hdr + 8);
    VQ_RETURN_IF(ctx, got != tag, VQ_ERR_CORRUPT_DATA, "%s section %u at byte %zu is '%s', expected '%s'",
                 c->what, (unsigned)c->next, at, vq_tag_name(got, got_name), want_name);
    const size_t left = vq_reader_left(&c->all);
    VQ_RETURN_IF(ctx, size > left, VQ_ERR_CORRUPT_DATA,
                 "%s section '%s' at byte %zu claims %llu bytes, only %zu remain", c->what, want_name, at,
                 (unsigned long long)size, left);
    const size_t pad = (8 - (size & 7)) & 7;
    VQ_RETURN_IF(ctx, pad > left - size, VQ_ERR_CORRUPT_DATA,
                 "%s section '%s' at byte %zu lacks its %zu padding bytes", c->what, want_name, at, pad);
    const uint8_t *payload = hdr + VQ_FILE_SECTION_HEADER_BYTES;
    for (size_t i = 0; i < pad; i++)
        VQ_RETURN_IF(ctx, payload[size + i] != 0, VQ_ERR_CORRUPT_DATA,
                     "%s section '%s' at byte %zu has non-zero padding", c->what, want_name, at);
    const uint32_t actual = section_crc(hdr, payload, size);
    VQ_RETURN_IF(ctx, actual != crc, VQ_ERR_CORRUPT_DATA,
                 "%s section '%s' at byte %zu: CRC-32C is 0x%08x, the file says 0x%08x", c->what, want_name, at,
                 (unsigned)actual, (unsigned)crc);
    c->all.pos += (size_t)size + pad;
    c->next++;
    *section = (vq_reader){.p = payload, .n = (size_t)size, .pos = 0};
    return VQ_OK;
}

vq_status vq_section_done(vq_ctx *ctx, const vq_container *c, const vq_reader *section, const char *tag_name)
{
    VQ_RETURN_IF(ctx, section->pos != section->n, VQ_ERR_CORRUPT_DATA,
                 "%s section '%s' has %zu bytes, its contents take %zu", c->what, tag_name, section->n,
                 section->pos);
    return VQ_OK;
}

vq_status vq_container_close(vq_ctx *ctx, const vq_container *c)
{
    VQ_RETURN_IF(ctx, c->next != c->n_sections, VQ_ERR_CORRUPT_DATA,
                 "%s header lists %u sections, the format has %u", c->what, (unsigned)c->n_sections,
                 (unsigned)c->next);
    VQ_RETURN_IF(ctx, c->all.pos != c->all.n, VQ_ERR_CORRUPT_DATA, "%s has %zu bytes after its last section",
                 c->what, c->all.n - c->all.pos);
    return VQ_OK;
}

void vq_container_fixup(uint8_t *buf, size_t size)
{
    if (size < VQ_FILE_HEADER_BYTES) return;
    le64(buf + 16, (uint64_t)size);
    le32(buf + 28, vq_crc32c(0, buf, 28));
    size_t pos = VQ_FILE_HEADER_BYTES;
    while (size - pos >= VQ_FILE_SECTION_HEADER_BYTES) {
        uint8_t *hdr = buf + pos;
        const uint64_t len = rd64(hdr + 8);
        if (len > size - pos - VQ_FILE_SECTION_HEADER_BYTES) return;
        le32(hdr + 4, section_crc(hdr, hdr + VQ_FILE_SECTION_HEADER_BYTES, len));
        const size_t step = VQ_FILE_SECTION_HEADER_BYTES + (size_t)len + ((8 - (len & 7)) & 7);
        if (step > size - pos) return;
        pos += step;
    }
}

/* ---- files ---- */

vq_status vq_file_read_all(vq_ctx *ctx, const char *path, uint64_t max_bytes, uint8_t **buf, size_t *size)
{
    FILE *f = fopen(path, "rb");
    VQ_RETURN_IF(ctx, f == NULL, VQ_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return vq_fail(ctx, VQ_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes || (uint64_t)st.st_size > SIZE_MAX) {
        fclose(f);
        return vq_fail(ctx, VQ_ERR_CORRUPT_DATA, "'%s' has %lld bytes, more than the limit of %llu", path,
                       (long long)st.st_size, (unsigned long long)max_bytes);
    }
    const size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        fclose(f);
        return vq_fail(ctx, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for '%s'", n, path);
    }
    const size_t got = fread(b, 1, n, f);
    /* one byte more than stat said means the file grew under us: refuse it */
    const bool grew = got == n && fgetc(f) != EOF;
    const bool err = ferror(f) != 0;
    fclose(f);
    if (got != n || grew || err) {
        free(b);
        return vq_fail(ctx, VQ_ERR_IO, "reading '%s': got %zu of %zu bytes%s", path, got, n,
                       grew ? " (the file grew while read)" : "");
    }
    *buf = b;
    *size = n;
    return VQ_OK;
}

vq_status vq_file_write_atomic(vq_ctx *ctx, const char *path, const void *buf, size_t size)
{
    const size_t len = strlen(path);
    char *tmp = malloc(len + 8);
    VQ_RETURN_IF(ctx, tmp == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate a temporary name for '%s'", path);
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".XXXXXX", 8);
    const int fd = mkstemp(tmp);
    if (fd < 0) {
        const int e = errno;
        free(tmp);
        return vq_fail(ctx, VQ_ERR_IO, "cannot create a temporary file next to '%s': %s", path, strerror(e));
    }
    const char *p = buf;
    size_t left = size;
    int e = 0;
    while (left > 0) {
        const ssize_t k = write(fd, p, left);
        if (k < 0) {
            if (errno == EINTR) continue;
            e = errno;
            break;
        }
        p += k;
        left -= (size_t)k;
    }
    /* mkstemp creates 0600; a saved file is an ordinary 0644 one. The data
     * must be on disk before the rename makes it the file. */
    if (e == 0 && fchmod(fd, 0644) != 0) e = errno;
    if (e == 0 && fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && e == 0) e = errno;
    if (e == 0 && rename(tmp, path) != 0) e = errno;
    if (e != 0) {
        unlink(tmp);
        free(tmp);
        return vq_fail(ctx, VQ_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    free(tmp);
    return VQ_OK;
}

vq_status vq_save_buffer(vq_ctx *ctx, vq_serialise_fn fn, const void *obj, const void *arg, const char *what,
                         void *buf, size_t cap, size_t *size_out)
{
    VQ_RETURN_IF(ctx, size_out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'size_out' is NULL");
    size_t need = 0;
    VQ_FORWARD_IF_ERROR(fn(obj, arg, NULL, 0, &need));
    *size_out = need;
    if (buf == NULL) {
        VQ_RETURN_IF(ctx, cap != 0, VQ_ERR_INVALID_ARGUMENT, "argument 'buf' is NULL but cap is %zu", cap);
        return VQ_OK;
    }
    VQ_RETURN_IF(ctx, cap < need, VQ_ERR_INVALID_ARGUMENT, "argument 'cap' is %zu bytes, %s takes %zu", cap, what,
                 need);
    return fn(obj, arg, buf, cap, &need);
}

vq_status vq_save_file(vq_ctx *ctx, vq_serialise_fn fn, const void *obj, const void *arg, const char *path)
{
    VQ_RETURN_IF(ctx, path == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'path' is NULL");
    size_t need = 0;
    VQ_FORWARD_IF_ERROR(fn(obj, arg, NULL, 0, &need));
    void *buf = malloc(need);
    VQ_RETURN_IF(ctx, buf == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes to serialise into", need);
    vq_status st = fn(obj, arg, buf, need, &need);
    if (st == VQ_OK) st = vq_file_write_atomic(ctx, path, buf, need);
    free(buf);
    return st;
}
