/* container.h — the container of every veloxquant file (calibrations and
 * caches; docs/FILE_FORMAT.md is the full description): a 32-byte header,
 * then sections in a fixed order, each with its own CRC-32C, all little-endian.
 *
 * Writing is two passes over the same code: a writer with a NULL buffer only
 * counts bytes, so the caller learns the exact size, allocates once, and
 * writes. Reading is bounded: every read checks the bytes are there, every
 * section's size is checked against what is left before its payload is
 * looked at, and a CRC mismatch or a section not consumed to its last byte is
 * VQ_ERR_CORRUPT_DATA. Internal. */
#ifndef VQ_CONTAINER_H
#define VQ_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

enum {
    VQ_FILE_HEADER_BYTES = 32,
    VQ_FILE_SECTION_HEADER_BYTES = 16,
    VQ_FILE_MAX_SECTIONS = 1 << 20,  /* sane bound, far above any real file */
};

/* A section tag from four characters, e.g. VQ_TAG('C','O','N','F'). */
#define VQ_TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

/* ---- writing ---- */

typedef struct vq_writer {
    uint8_t *buf;      /* NULL: counting pass */
    size_t cap, pos;   /* pos: bytes written (or counted) so far */
    size_t section;    /* offset of the open section's header */
    uint32_t n_sections;
} vq_writer;

/* Starts a file: reserves the header; `buf` may be NULL (counting pass). */
void vq_writer_init(vq_writer *w, void *buf, size_t cap);
void vq_put_u32(vq_writer *w, uint32_t v);
void vq_put_u64(vq_writer *w, uint64_t v);
void vq_put_i64(vq_writer *w, int64_t v);
void vq_put_f32s(vq_writer *w, const float *v, size_t n);
void vq_put_bytes(vq_writer *w, const void *p, size_t n);
/* Reserves n bytes for the caller to fill: their address, or NULL on the
 * counting pass. */
uint8_t *vq_put_space(vq_writer *w, size_t n);
void vq_section_begin(vq_writer *w, uint32_t tag);
void vq_section_end(vq_writer *w);  /* pads to 8 bytes, fills in size and CRC */
/* Writes the header (magic, version, file size, sections, CRC); returns the
 * file size. On the counting pass only returns the size. The writer must have
 * been given a buffer of at least the counted size (asserted). */
size_t vq_writer_finish(vq_writer *w, const char magic[8], uint32_t version);

/* ---- reading ---- */

/* A bounded cursor over bytes already in memory. */
typedef struct vq_reader {
    const uint8_t *p;
    size_t n, pos;
} vq_reader;

/* Each returns false (reading nothing) when fewer bytes remain than needed. */
bool vq_get_u32(vq_reader *r, uint32_t *v);
bool vq_get_u64(vq_reader *r, uint64_t *v);
bool vq_get_i64(vq_reader *r, int64_t *v);
bool vq_get_bytes(vq_reader *r, size_t n, const uint8_t **p);
/* n little-endian floats into out (aligned host memory). */
bool vq_get_f32s(vq_reader *r, float *out, size_t n);
static inline size_t vq_reader_left(const vq_reader *r) { return r->n - r->pos; }

/* An open file: the header checked, sections read in order. */
typedef struct vq_container {
    vq_reader all;
    uint32_t version, n_sections, next;  /* next: index of the next section */
    const char *what;                    /* "calibration" / "cache", for messages */
} vq_container;

/* Checks the header of `size` bytes at `buf`: size >= 32, magic, header CRC,
 * version (newer than max_version: VQ_ERR_UNSUPPORTED), header size, file
 * size == size, section count <= what the size can hold. */
vq_status vq_container_open(vq_ctx *ctx, const void *buf, size_t size, const char magic[8], uint32_t max_version,
                            const char *what, vq_container *c);
/* The next section, which must carry `tag`: its size fits what is left, its
 * padding is zero, its CRC matches. *section reads exactly its payload. */
vq_status vq_container_section(vq_ctx *ctx, vq_container *c, uint32_t tag, vq_reader *section);
/* Every section read, nothing after the last. */
vq_status vq_container_close(vq_ctx *ctx, const vq_container *c);
/* A section's payload must be consumed exactly; `tag_name` for the message. */
vq_status vq_section_done(vq_ctx *ctx, const vq_container *c, const vq_reader *section, const char *tag_name);

/* "CONF" etc. for messages (buf of 5 bytes, non-printable bytes as '?'). */
const char *vq_tag_name(uint32_t tag, char buf[5]);

/* For tests and fuzzers: rewrites, in place, the file size, the header CRC
 * and the CRC of every section whose header and payload lie inside buf, so
 * that a deliberately damaged file reaches the checks behind the checksums.
 * Stops at the first section that does not fit. Never reads past size. */
void vq_container_fixup(uint8_t *buf, size_t size);

/* ---- files ---- */

/* Reads a whole regular file (at most max_bytes) into a malloc'ed buffer.
 * VQ_ERR_IO when it cannot be opened or read, VQ_ERR_CORRUPT_DATA when it
 * is larger than max_bytes, VQ_ERR_OUT_OF_MEMORY. */
vq_status vq_file_read_all(vq_ctx *ctx, const char *path, uint64_t max_bytes, uint8_t **buf, size_t *size);
/* Writes bytes to `path` atomically: a temporary file in the same directory
 * (path.XXXXXX), fsync, rename over `path`. On failure the temporary is
 * removed and `path` is untouched. VQ_ERR_IO with errno's text. */
vq_status vq_file_write_atomic(vq_ctx *ctx, const char *path, const void *buf, size_t size);

/* ---- saving an object: the counting pass, then the write ---- */

/* Serialises obj (arg: what else the writer needs, e.g. the one sequence of
 * a cache to save) into buf[0..cap), or with buf NULL only counts; sets
 * *size to the bytes (either pass). */
typedef vq_status (*vq_serialise_fn)(const void *obj, const void *arg, void *buf, size_t cap, size_t *size);
/* The body of every *_save_buffer: *size_out = the size; buf NULL (then cap
 * must be 0) only counts; a cap below the size is VQ_ERR_INVALID_ARGUMENT
 * naming `what` ("the profile takes 512"), nothing written. */
vq_status vq_save_buffer(vq_ctx *ctx, vq_serialise_fn fn, const void *obj, const void *arg, const char *what,
                         void *buf, size_t cap, size_t *size_out);
/* The body of every *_save: counts, allocates once, serialises and writes
 * `path` atomically (vq_file_write_atomic). */
vq_status vq_save_file(vq_ctx *ctx, vq_serialise_fn fn, const void *obj, const void *arg, const char *path);

#endif
