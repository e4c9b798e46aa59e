/* fuzz_npy.c — libFuzzer target for the .npy parser of the vq tool
 * (tools/vq/npy.c). Properties: no crash, no over-read (every data byte of an
 * accepted array is read); an accepted array's data lies inside the input
 * and has exactly numel * elem_bytes bytes; a rejection says why. */
#include <stdlib.h>
#include <string.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vq_npy a;
    char err[256] = "";
    /* a heap copy of exactly size bytes, so ASan sees any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (size) memcpy(buf, data, size);
    if (vq_npy_parse(buf, size, &a, err, sizeof err) != 0) {
        if (err[0] == '\0') abort();
        free(buf);
        return 0;
    }
    if (a.data < buf || a.data + a.data_bytes != buf + size) abort();
    if ((uint64_t)a.numel * (uint64_t)a.elem_bytes != a.data_bytes) abort();
    if (a.ndim < 0 || a.ndim > VQ_NPY_MAX_DIMS) abort();
    volatile unsigned sum = 0;
    for (size_t i = 0; i < a.data_bytes; i++) sum += a.data[i];
    (void)sum;
    free(buf);
    return 0;
}
