/* npy.h — NumPy .npy files (format versions 1.0, 2.0, 3.0), little-endian
 * f16 / f32 arrays in C order: a validating parser for untrusted bytes (fuzzed
 * by tests/fuzz/fuzz_npy.c) and a writer. The format: NumPy's
 * numpy/lib/format.py documentation ("\x93NUMPY", major, minor, a u16 (1.0)
 * or u32 (2.0, 3.0) header length, a Python dict literal with 'descr',
 * 'fortran_order' and 'shape', padded so the data starts aligned). */
#ifndef VQ_TOOL_NPY_H
#define VQ_TOOL_NPY_H

#include <stddef.h>
#include <stdint.h>

enum { VQ_NPY_MAX_DIMS = 8 };

typedef struct vq_npy {
    int elem_bytes;                   /* 2 (f16, '<f2') or 4 (f32, '<f4') */
    int ndim;                         /* 0..VQ_NPY_MAX_DIMS */
    int64_t shape[VQ_NPY_MAX_DIMS];
    int64_t numel;
    const uint8_t *data;              /* points into the parsed buffer; may be unaligned */
    size_t data_bytes;                /* numel * elem_bytes == the bytes after the header */
} vq_npy;

/* Parses size bytes. Returns 0 and fills *out, or -1 with a sentence in
 * err[0..cap). Reads nothing outside buf[0..size); accepts only what it can
 * check: descr '<f2'/'<f4' (or '|'/'=' byte order markers of the same on
 * a little-endian host), fortran_order False, dims >= 0 whose product fits,
 * data exactly filling the rest of the file. */
int vq_npy_parse(const uint8_t *buf, size_t size, vq_npy *out, char *err, size_t cap);

/* Reads and parses a file (at most max_bytes); *buf (free() it) owns the
 * bytes out->data points into. Returns 0, or -1 with err. */
int vq_npy_load(const char *path, size_t max_bytes, uint8_t **buf, vq_npy *out, char *err, size_t cap);

/* Writes a version 1.0 file of little-endian elem_bytes-wide floats (2: f16
 * bits, 4: f32) from host memory. Returns 0, or -1 with err. */
int vq_npy_save(const char *path, int elem_bytes, int ndim, const int64_t *shape, const void *data, char *err,
                size_t cap);

#endif
