/* persist_corrupt.h — the corruption classes every veloxquant file loader
 * must reject (test_calibration.c, test_cache_persist.c): truncation at every
 * section boundary and at every byte of a small file, every byte flipped,
 * wrong magic, newer and zero versions, a section size that lies, and huge
 * counts behind valid checksums. `load` parses size bytes and returns the
 * status (freeing whatever it made); `count_at` lists byte offsets of u32
 * count fields that, set huge with the checksums fixed up, must give
 * VQ_ERR_CORRUPT_DATA without a large allocation (ASan would report one). */
#ifndef VQ_TEST_PERSIST_CORRUPT_H
#define VQ_TEST_PERSIST_CORRUPT_H

#include "persist/container.h"
#include "persist/crc32c.h"
#include "harness.h"

typedef vq_status (*vt_loader)(vq_ctx *ctx, const uint8_t *buf, size_t size);

/* Offsets at which sections start (and the end of the file): the section
 * boundaries of a valid file. Returns how many (<= cap). */
static int vt_section_bounds(const uint8_t *buf, size_t size, size_t *out, int cap)
{
    int n = 0;
    size_t pos = VQ_FILE_HEADER_BYTES;
    out[n++] = pos;
    while (pos + VQ_FILE_SECTION_HEADER_BYTES <= size && n < cap) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)buf[pos + 8 + i] << (8 * i);
        pos += VQ_FILE_SECTION_HEADER_BYTES + (size_t)len + ((8 - (len & 7)) & 7);
        out[n++] = pos;
    }
    return n;
}

static void vt_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void vt_check_corruption(vq_ctx *ctx, const uint8_t *valid, size_t size, vt_loader load,
                                const size_t *count_at, int n_counts, bool every_byte)
{
    VT_OK(ctx, load(ctx, valid, size));
    uint8_t *b = malloc(size + 64);
    /* truncation: every section boundary (and one byte either side), or every length */
    size_t bounds[4096];
    const int nb = vt_section_bounds(valid, size, bounds, 4096);
    VT_CHECK(bounds[nb - 1] == size, "sections end at %zu, the file at %zu", bounds[nb - 1], size);
    for (int i = 0; i < nb; i++)
        for (int d = -1; d <= 1; d++) {
            const size_t cut = bounds[i] + (size_t)d;
            if (cut >= size) continue;
            memcpy(b, valid, cut);
            const vq_status s = load(ctx, b, cut);
            VT_CHECK(s == VQ_ERR_CORRUPT_DATA, "truncated to %zu of %zu bytes -> %s (%s)", cut, size,
                     vq_status_string(s), vq_ctx_last_error(ctx));
            /* the same cut with the header claiming the cut size and fresh CRCs */
            vq_container_fixup(b, cut);
            const vq_status s2 = load(ctx, b, cut);
            VT_CHECK(s2 == VQ_ERR_CORRUPT_DATA, "truncated+fixed to %zu bytes -> %s (%s)", cut,
                     vq_status_string(s2), vq_ctx_last_error(ctx));
        }
    for (size_t cut = 0; every_byte && cut < size; cut++) {
        memcpy(b, valid, cut);
        VT_CHECK(load(ctx, b, cut) == VQ_ERR_CORRUPT_DATA, "truncated to %zu bytes", cut);
    }
    /* extended by a zero word */
    memcpy(b, valid, size);
    memset(b + size, 0, 8);
    VT_CHECK(load(ctx, b, size + 8) == VQ_ERR_CORRUPT_DATA, "extended by 8 bytes");
    vq_container_fixup(b, size + 8);
    VT_CHECK(load(ctx, b, size + 8) == VQ_ERR_CORRUPT_DATA, "extended by 8 bytes (fixed up)");
    /* flipped bits: every byte (or every 7th of a large file), low and high bit */
    const size_t step = every_byte ? 1 : 7;
    for (size_t i = 0; i < size; i += step)
        for (int bit = 0; bit < 8; bit += 7) {
            memcpy(b, valid, size);
            b[i] ^= (uint8_t)(1u << bit);
            const vq_status s = load(ctx, b, size);
            VT_CHECK(s == VQ_ERR_CORRUPT_DATA || s == VQ_ERR_UNSUPPORTED, "byte %zu bit %d flipped -> %s", i, bit,
                     vq_status_string(s));
        }
    /* magic */
    memcpy(b, valid, size);
    b[0] ^= 0x20;
    vq_container_fixup(b, size);
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "magic", load(ctx, b, size));
    /* versions: newer is unsupported, 0 is corrupt (1000: newer than every format's current version) */
    memcpy(b, valid, size);
    vt_put32(b + 8, 1000);
    vq_container_fixup(b, size);
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "newer", load(ctx, b, size));
    vt_put32(b + 8, 0);
    vq_container_fixup(b, size);
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "version", load(ctx, b, size));
    /* section count too large, too small */
    memcpy(b, valid, size);
    vt_put32(b + 24, 0xFFFFFFFFu);
    vq_container_fixup(b, size);
    VT_FAILS(ctx, VQ_ERR_CORRUPT_DATA, "sections", load(ctx, b, size));
    memcpy(b, valid, size);
    uint32_t ns = (uint32_t)valid[24] | (uint32_t)valid[25] << 8 | (uint32_t)valid[26] << 16 | (uint32_t)valid[27] << 24;
    vt_put32(b + 24, ns - 1);
    vq_container_fixup(b, size);
    VT_CHECK(load(ctx, b, size) == VQ_ERR_CORRUPT_DATA, "one section fewer listed");
    /* the first section's size lies (larger, smaller, huge) with fresh CRCs */
    const uint64_t lies[3] = {8, 0, 1ull << 62};
    for (int k = 0; k < 3; k++) {
        memcpy(b, valid, size);
        uint8_t *len = b + VQ_FILE_HEADER_BYTES + 8;
        uint64_t v = 0;
        for (int i = 0; i < 8; i++) v |= (uint64_t)len[i] << (8 * i);
        v = k == 0 ? v + lies[k] : k == 1 ? (v >= 8 ? v - 8 : 0) : lies[k];
        for (int i = 0; i < 8; i++) len[i] = (uint8_t)(v >> (8 * i));
        vq_container_fixup(b, size);
        const vq_status s = load(ctx, b, size);
        VT_CHECK(s == VQ_ERR_CORRUPT_DATA, "first section size %llu -> %s (%s)", (unsigned long long)v,
                 vq_status_string(s), vq_ctx_last_error(ctx));
    }
    /* huge counts behind valid checksums */
    const uint32_t huge[4] = {0xFFFFFFFFu, 0x7FFFFFFFu, 1u << 20, 0};
    for (int c = 0; c < n_counts; c++)
        for (int k = 0; k < 4; k++) {
            memcpy(b, valid, size);
            vt_put32(b + count_at[c], huge[k]);
            if (memcmp(b, valid, size) == 0) continue;  /* the field already held this value */
            vq_container_fixup(b, size);
            const vq_status s = load(ctx, b, size);
            VT_CHECK(s == VQ_ERR_CORRUPT_DATA, "count at byte %zu set to %u -> %s (%s)", count_at[c],
                     (unsigned)huge[k], vq_status_string(s), vq_ctx_last_error(ctx));
        }
    free(b);
}

#endif
