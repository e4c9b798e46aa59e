/* calibration.h — the vq_calibration object (public API: section 6 of
 * veloxquant.h), shared by the fitter (calibration.c) and the file reader
 * and writer (calibration_io.c). Internal. */
#ifndef VQ_CALIBRATION_H
#define VQ_CALIBRATION_H

#include "core/core.h"

/* Limits a calibration may have, checked on fit and on load (a loader must
 * not trust a file to stay small). */
enum {
    VQ_CAL_MAX_LAYERS = 4096,
    VQ_CAL_MAX_HEADS = 4096,
    VQ_CAL_MAX_DIM = 4096,
    VQ_CAL_MAX_CENTROIDS = 65536,
    VQ_CAL_MAX_STAGES = 64,
    VQ_CAL_MAX_VALUE_CENTROIDS = 256,
    VQ_CAL_MAX_ITERS = 1000,
    VQ_CAL_TABLES = 4,  /* vq_calibration_table values 1..4 */
};

struct vq_calibration {
    int n_layers, n_kv_heads, head_dim;
    int64_t n_samples;
    vq_calibration_config cfg;   /* resolved defaults, progress NULL */
    /* Floats per layer of each table (0 when not fitted), its rank and shape;
     * index = vq_calibration_table - 1. */
    int64_t count[VQ_CAL_TABLES];
    int ndim[VQ_CAL_TABLES];
    int64_t shape[VQ_CAL_TABLES][4];
    /* tables[t] holds n_layers * count[t] floats, layer-major (NULL when
     * count[t] is 0). */
    float *tables[VQ_CAL_TABLES];
};

/* Fills in defaults and checks the config against the dimensions; then
 * computes count/ndim/shape. Messages name the config field. */
vq_status vq_calibration_resolve(vq_ctx *ctx, int n_layers, int n_kv_heads, int head_dim,
                                 const vq_calibration_config *cfg, vq_calibration *cal);
/* Allocates the tables (contents undefined) for a resolved calibration.
 * VQ_ERR_OUT_OF_MEMORY. */
vq_status vq_calibration_alloc_tables(vq_ctx *ctx, vq_calibration *cal);
/* Checks table values: finite everywhere, smooth > 0, value centroids
 * ascending. `where` prefixes the message ("fitted" / "file"). */
vq_status vq_calibration_check_values(vq_ctx *ctx, const vq_calibration *cal, vq_status status, const char *where);

#endif
