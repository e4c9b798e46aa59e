/* calibration_io.c — calibration files (docs/FILE_FORMAT.md, "Calibration
 * files"): a CONF section with the dimensions and the fit config, then one
 * LAYR section per layer with that layer's tables in table order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calibration.h"
#include "persist/container.h"

static const char CAL_MAGIC[8] = {'V', 'Q', 'C', 'A', 'L', 'I', 'B', '\0'};
enum { CAL_VERSION = 1, CONF_BYTES = 14 * 4 + 3 * 8 };
#define TAG_CONF VQ_TAG('C', 'O', 'N', 'F')
#define TAG_LAYR VQ_TAG('L', 'A', 'Y', 'R')

/* Largest file a load reads (2^36 bytes); a calibration of the largest
 * legal shape would be bigger, but none that a model needs. */
#define CAL_MAX_FILE_BYTES ((uint64_t)1 << 36)

static size_t write_calibration(const vq_calibration *cal, void *buf, size_t cap)
{
    vq_writer w;
    vq_writer_init(&w, buf, cap);
    const vq_calibration_config *c = &cal->cfg;
    vq_section_begin(&w, TAG_CONF);
    const uint32_t u[14] = {(uint32_t)cal->n_layers, (uint32_t)cal->n_kv_heads, (uint32_t)cal->head_dim,
                            (uint32_t)c->vecinfer_subspaces, (uint32_t)c->vecinfer_centroids, c->vecinfer_shared ? 1u : 0u,
                            (uint32_t)c->commvq_stages, (uint32_t)c->commvq_centroids,
                            (uint32_t)c->value_centroids, (uint32_t)c->iters, 0, 0, 0, 0};
    for (int i = 0; i < 14; i++) vq_put_u32(&w, u[i]);
    vq_put_i64(&w, c->max_samples);
    vq_put_u64(&w, c->seed);
    vq_put_i64(&w, cal->n_samples);
    vq_section_end(&w);
    for (int l = 0; l < cal->n_layers; l++) {
        vq_section_begin(&w, TAG_LAYR);
        vq_put_u32(&w, (uint32_t)l);
        vq_put_u32(&w, 0);
        for (int t = 0; t < VQ_CAL_TABLES; t++)
            if (cal->count[t]) vq_put_f32s(&w, cal->tables[t] + (int64_t)l * cal->count[t], (size_t)cal->count[t]);
        vq_section_end(&w);
    }
    return vq_writer_finish(&w, CAL_MAGIC, CAL_VERSION);
}

static vq_status serialise_calibration(const void *cal, const void *arg, void *buf, size_t cap, size_t *size)
{
    (void)arg;
    *size = write_calibration(cal, buf, cap);
    return VQ_OK;
}

vq_status vq_calibration_save_buffer(vq_ctx *ctx, const vq_calibration *cal, void *buf, size_t cap,
                                     size_t *size_out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, cal == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'cal' is NULL");
    return vq_save_buffer(ctx, serialise_calibration, cal, NULL, "the calibration", buf, cap, size_out);
}

vq_status vq_calibration_save(vq_ctx *ctx, const vq_calibration *cal, const char *path)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, cal == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'cal' is NULL");
    return vq_save_file(ctx, serialise_calibration, cal, NULL, path);
}

/* Reads CONF into a resolved calibration (no tables yet). Every count is
 * checked by vq_calibration_resolve's limits; messages say "file". */
static vq_status read_conf(vq_ctx *ctx, vq_container *c, vq_calibration *cal)
{
    vq_reader r;
    VQ_FORWARD_IF_ERROR(vq_container_section(ctx, c, TAG_CONF, &r));
    VQ_RETURN_IF(ctx, r.n != CONF_BYTES, VQ_ERR_CORRUPT_DATA,
                 "calibration section 'CONF' has %zu bytes, version 1 has %d", r.n, CONF_BYTES);
    uint32_t u[14];
    int64_t max_samples, n_samples;
    uint64_t seed;
    for (int i = 0; i < 14; i++) vq_get_u32(&r, &u[i]);  /* sizes checked above */
    vq_get_i64(&r, &max_samples);
    vq_get_u64(&r, &seed);
    vq_get_i64(&r, &n_samples);
    for (int i = 0; i < 10; i++)
        VQ_RETURN_IF(ctx, u[i] > (1u << 30), VQ_ERR_CORRUPT_DATA, "calibration CONF field %d is %u, out of range", i,
                     (unsigned)u[i]);
    VQ_RETURN_IF(ctx, u[5] > 1, VQ_ERR_CORRUPT_DATA, "calibration CONF vecinfer_shared is %u, not 0 or 1", (unsigned)u[5]);
    for (int i = 10; i < 14; i++)
        VQ_RETURN_IF(ctx, u[i] != 0, VQ_ERR_CORRUPT_DATA, "calibration CONF reserved field %d is %u, not 0", i,
                     (unsigned)u[i]);
    VQ_RETURN_IF(ctx, n_samples < 1, VQ_ERR_CORRUPT_DATA, "calibration CONF n_samples is %lld, not positive",
                 (long long)n_samples);
    /* a zero count in the file means "not fitted", never "default": resolve
     * would fill in defaults, so the fields it defaults must be non-zero */
    VQ_RETURN_IF(ctx, u[9] == 0 || max_samples == 0, VQ_ERR_CORRUPT_DATA,
                 "calibration CONF has iters %u and max_samples %lld; both must be set", (unsigned)u[9],
                 (long long)max_samples);
    VQ_RETURN_IF(ctx, (u[3] != 0) != (u[4] != 0) || (u[6] != 0) != (u[7] != 0), VQ_ERR_CORRUPT_DATA,
                 "calibration CONF: a method's centroid count (%u, %u) must be set exactly when it is (%u, %u)",
                 (unsigned)u[4], (unsigned)u[7], (unsigned)u[3], (unsigned)u[6]);
    VQ_RETURN_IF(ctx, u[3] == 0 && u[5] != 0, VQ_ERR_CORRUPT_DATA, "calibration CONF: vecinfer_shared without VECINFER tables");
    const vq_calibration_config cfg = {.vecinfer_subspaces = (int)u[3], .vecinfer_centroids = (int)u[4], .vecinfer_shared = u[5] != 0,
                                       .commvq_stages = (int)u[6], .commvq_centroids = (int)u[7],
                                       .value_centroids = (int)u[8], .iters = (int)u[9],
                                       .max_samples = max_samples, .seed = seed};
    const vq_status st = vq_calibration_resolve(ctx, (int)u[0], (int)u[1], (int)u[2], &cfg, cal);
    if (st != VQ_OK) {
        char why[sizeof ctx->last_error];
        const char *msg = strstr(vq_ctx_last_error(ctx), ": ");  /* past the function name */
        snprintf(why, sizeof why, "%s", msg ? msg + 2 : vq_ctx_last_error(ctx));
        return vq_fail(ctx, VQ_ERR_CORRUPT_DATA, "calibration CONF: %s", why);
    }
    cal->n_samples = n_samples;
    return VQ_OK;
}

static vq_status read_layers(vq_ctx *ctx, vq_container *c, vq_calibration *cal)
{
    uint64_t per_layer = 8;
    for (int t = 0; t < VQ_CAL_TABLES; t++) per_layer += 4 * (uint64_t)cal->count[t];
    /* before allocating: the layers must fit in what the file has left */
    const uint64_t need = (uint64_t)cal->n_layers * (per_layer + VQ_FILE_SECTION_HEADER_BYTES);
    VQ_RETURN_IF(ctx, need > vq_reader_left(&c->all), VQ_ERR_CORRUPT_DATA,
                 "calibration of %d layers needs at least %llu more bytes, the data has %zu", cal->n_layers,
                 (unsigned long long)need, vq_reader_left(&c->all));
    VQ_FORWARD_IF_ERROR(vq_calibration_alloc_tables(ctx, cal));
    for (int l = 0; l < cal->n_layers; l++) {
        vq_reader r;
        VQ_FORWARD_IF_ERROR(vq_container_section(ctx, c, TAG_LAYR, &r));
        VQ_RETURN_IF(ctx, r.n != per_layer, VQ_ERR_CORRUPT_DATA,
                     "calibration layer %d section has %zu bytes, its tables take %llu", l, r.n,
                     (unsigned long long)per_layer);
        uint32_t index, reserved;
        vq_get_u32(&r, &index);
        vq_get_u32(&r, &reserved);
        VQ_RETURN_IF(ctx, index != (uint32_t)l || reserved != 0, VQ_ERR_CORRUPT_DATA,
                     "calibration layer section %d says layer %u (reserved %u)", l, (unsigned)index,
                     (unsigned)reserved);
        for (int t = 0; t < VQ_CAL_TABLES; t++)
            if (cal->count[t]) vq_get_f32s(&r, cal->tables[t] + (int64_t)l * cal->count[t], (size_t)cal->count[t]);
        VQ_FORWARD_IF_ERROR(vq_section_done(ctx, c, &r, "LAYR"));
    }
    return VQ_OK;
}

vq_status vq_calibration_load_buffer(vq_ctx *ctx, const void *buf, size_t size, vq_calibration **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    VQ_RETURN_IF(ctx, buf == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'buf' is NULL");
    vq_container c;
    VQ_FORWARD_IF_ERROR(vq_container_open(ctx, buf, size, CAL_MAGIC, CAL_VERSION, "calibration", &c));
    vq_calibration *cal = calloc(1, sizeof *cal);
    VQ_RETURN_IF(ctx, cal == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate the calibration");
    vq_status st = read_conf(ctx, &c, cal);
    if (st == VQ_OK) st = read_layers(ctx, &c, cal);
    if (st == VQ_OK) st = vq_container_close(ctx, &c);
    if (st == VQ_OK) st = vq_calibration_check_values(ctx, cal, VQ_ERR_CORRUPT_DATA, "calibration file:");
    if (st != VQ_OK) {
        vq_calibration_free(cal);
        return st;
    }
    *out = cal;
    return VQ_OK;
}

vq_status vq_calibration_load(vq_ctx *ctx, const char *path, vq_calibration **out)
{
    VQ_ENTER(ctx);
    VQ_RETURN_IF(ctx, out == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    VQ_RETURN_IF(ctx, path == NULL, VQ_ERR_INVALID_ARGUMENT, "argument 'path' is NULL");
    uint8_t *buf;
    size_t size;
    VQ_FORWARD_IF_ERROR(vq_file_read_all(ctx, path, CAL_MAX_FILE_BYTES, &buf, &size));
    const vq_status st = vq_calibration_load_buffer(ctx, buf, size, out);
    free(buf);
    return st;
}
