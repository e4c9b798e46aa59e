/* fuzz_calibration.c — libFuzzer target for the calibration and profile
 * loaders (vq_calibration_load_buffer, vq_profile_load_buffer: the same
 * container, small files; the corpus holds seeds of both). Each input is
 * loaded by both, twice: as it is, and
 * with its checksums and size field rewritten (vq_container_fixup) so that
 * mutations reach the checks behind the CRCs. Properties: no crash, no
 * over-read, no leak (ASan/UBSan); a status agrees with the output pointer;
 * a loaded calibration or profile saves back to exactly the bytes it was
 * loaded from (the formats are canonical), and a loaded profile makes a
 * cache of its shape (or a refusal naming a layer's field that the
 * cache's own config decides: page size, fitted tables). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_twice.h"
#include "veloxquant.h"

static vq_ctx *ctx;

static void check(const uint8_t *data, size_t size)
{
    vq_calibration *cal = (vq_calibration *)&cal;
    const vq_status s = vq_calibration_load_buffer(ctx, data, size, &cal);
    if ((s == VQ_OK) != (cal != NULL)) abort();
    if (s != VQ_OK) {
        if (s != VQ_ERR_CORRUPT_DATA && s != VQ_ERR_UNSUPPORTED && s != VQ_ERR_OUT_OF_MEMORY) abort();
        if (vq_ctx_last_error(ctx)[0] == '\0') abort();  /* every failure says why */
        return;
    }
    size_t n = 0;
    if (vq_calibration_save_buffer(ctx, cal, NULL, 0, &n) != VQ_OK || n != size) abort();
    uint8_t *again = malloc(n);
    if (vq_calibration_save_buffer(ctx, cal, again, n, &n) != VQ_OK || memcmp(again, data, n) != 0) abort();
    free(again);
    vq_calibration_free(cal);
}

static void check_profile(const uint8_t *data, size_t size)
{
    vq_profile *p = (vq_profile *)&p;
    const vq_status s = vq_profile_load_buffer(ctx, data, size, &p);
    if ((s == VQ_OK) != (p != NULL)) abort();
    if (s != VQ_OK) {
        if (s != VQ_ERR_CORRUPT_DATA && s != VQ_ERR_UNSUPPORTED && s != VQ_ERR_OUT_OF_MEMORY) abort();
        if (vq_ctx_last_error(ctx)[0] == '\0') abort();
        return;
    }
    /* The format is canonical for the version written (2): such a file saves
     * back byte for byte. An older file is saved as version 2, which must then
     * load and save back to itself. */
    const uint32_t version = (uint32_t)data[8] | (uint32_t)data[9] << 8 | (uint32_t)data[10] << 16 |
                             (uint32_t)data[11] << 24;
    size_t n = 0;
    if (vq_profile_save_buffer(ctx, p, NULL, 0, &n) != VQ_OK || (version == 2 && n != size)) abort();
    uint8_t *again = malloc(n);
    if (vq_profile_save_buffer(ctx, p, again, n, &n) != VQ_OK || (version == 2 && memcmp(again, data, n) != 0))
        abort();
    if (version != 2) {
        vq_profile *q = NULL;
        size_t m = 0;
        if (vq_profile_load_buffer(ctx, again, n, &q) != VQ_OK) abort();
        uint8_t *third = malloc(n);
        if (vq_profile_save_buffer(ctx, q, third, n, &m) != VQ_OK || m != n || memcmp(third, again, n) != 0) abort();
        free(third);
        vq_profile_free(q);
    }
    free(again);
    vq_profile_config pc;
    if (vq_profile_get(p, &pc) != VQ_OK) abort();
    /* a small cache of its shape (a plan for many layers or large sizes says nothing new) */
    if (pc.n_layers <= 64 && pc.n_kv_heads <= 16) {
        const vq_cache_config cfg = {.n_layers = pc.n_layers, .n_kv_heads = pc.n_kv_heads,
                                     .n_q_heads = pc.n_kv_heads, .head_dim = pc.head_dim, .capacity_pages = 1,
                                     .max_sequences = 1, .profile = p};
        vq_cache *c = NULL;
        const vq_status cs = vq_cache_create(ctx, &cfg, &c);
        /* a refusal must name the layer field the cache's own config decides: the page size a KIVI
         * group divides, the fitted tables of VECINFER / CommVQ keys (the calibration) */
        if (cs != VQ_OK && cs != VQ_ERR_OUT_OF_MEMORY &&
            !(cs == VQ_ERR_INVALID_ARGUMENT && strstr(vq_ctx_last_error(ctx), "argument 'cfg->layers[")))
            abort();
        vq_cache_free(c);
    }
    vq_profile_free(p);
}

static void check_both(const uint8_t *data, size_t size)
{
    check(data, size);
    check_profile(data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ctx = fuzz_ctx();
    fuzz_twice(data, size, check_both);
    return 0;
}
