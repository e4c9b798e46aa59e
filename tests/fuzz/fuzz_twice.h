/* fuzz_twice.h — what the container loaders' fuzz targets share: the CPU
 * ctx, and running a check on the input as it is and on a copy whose
 * checksums and size field are rewritten (vq_container_fixup), so that
 * mutations also reach the checks behind the CRCs. */
#ifndef VQ_FUZZ_TWICE_H
#define VQ_FUZZ_TWICE_H

#include <stdlib.h>
#include <string.h>

#include "persist/container.h"
#include "veloxquant.h"

static vq_ctx *fuzz_ctx(void)
{
    static vq_ctx *ctx;
    if (!ctx && vq_ctx_create(&(vq_ctx_config){.num_threads = 1}, &ctx) != VQ_OK) abort();
    return ctx;
}

static void fuzz_twice(const uint8_t *data, size_t size, void (*check)(const uint8_t *, size_t))
{
    check(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    if (size) memcpy(fixed, data, size);
    vq_container_fixup(fixed, size);
    check(fixed, size);
    free(fixed);
}

#endif
