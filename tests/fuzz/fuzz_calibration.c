/* fuzz_calibration.c — libFuzzer target for the calibration loader
 * (vq_calibration_load_buffer). Each input is loaded twice: as it is, and
 * with its checksums and size field rewritten (vq_container_fixup) so that
 * mutations reach the checks behind the CRCs. Properties: no crash, no
 * over-read, no leak (ASan/UBSan); a status agrees with the output pointer;
 * a loaded calibration saves back to exactly the bytes it was loaded from
 * (the format is canonical). */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ctx = fuzz_ctx();
    fuzz_twice(data, size, check);
    return 0;
}
