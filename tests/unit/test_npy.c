/* test_npy.c — the .npy parser of the vq tool (tools/vq/npy.c): what NumPy
 * writes parses (versions 1-3, f16/f32, 0-d to 8-d, any key order and
 * quoting), and every malformed header or size is refused with a reason
 * without reading outside the buffer (exact-size heap copies, so ASan sees
 * any over-read). */
#include "harness.h"
#include <unistd.h>

#include "npy.h"

/* A .npy of `major` with header text h and `data_bytes` bytes of data. */
static size_t make(uint8_t *buf, int major, const char *h, size_t data_bytes)
{
    const size_t pre = major == 1 ? 10 : 12, hl = strlen(h);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (uint8_t)(hl >> (8 * i));
    memcpy(buf + pre, h, hl);
    memset(buf + pre + hl, 0x3C, data_bytes);
    return pre + hl + data_bytes;
}

static int parse_copy(const uint8_t *src, size_t n, vq_npy *a, char *err)
{
    uint8_t *b = malloc(n ? n : 1);
    memcpy(b, src, n);
    const int rc = vq_npy_parse(b, n, a, err, 256);
    free(b);
    return rc;
}

static void test_accepts(void)
{
    static uint8_t buf[4096];
    vq_npy a;
    char err[256];
    size_t n = make(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   \n", 24);
    VT_CHECK(parse_copy(buf, n, &a, err) == 0 && a.ndim == 2 && a.shape[1] == 3 && a.elem_bytes == 4, "%s", err);
    n = make(buf, 2, "{\"shape\":(5,),\"fortran_order\":False,\"descr\":\"<f2\"}", 10);
    VT_CHECK(parse_copy(buf, n, &a, err) == 0 && a.ndim == 1 && a.shape[0] == 5 && a.elem_bytes == 2, "%s", err);
    n = make(buf, 3, "{'descr': '<f2', 'fortran_order': False, 'shape': ()}", 2);
    VT_CHECK(parse_copy(buf, n, &a, err) == 0 && a.ndim == 0 && a.numel == 1, "%s", err);
    n = make(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 7), }", 0);
    VT_CHECK(parse_copy(buf, n, &a, err) == 0 && a.numel == 0, "%s", err);
    n = make(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,2), }", 8);
    VT_CHECK(parse_copy(buf, n, &a, err) == 0 && a.ndim == 8, "%s", err);
}

static void test_rejects(void)
{
    static uint8_t buf[4096];
    vq_npy a;
    char err[256];
    static const struct {
        int major;
        const char *header, *why;
        size_t data;
    } bad[] = {
        {1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", "not supported", 8},
        {1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", "not supported", 8},
        {1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", "fortran_order True", 8},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", "needs 12 bytes", 8},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "needs 8 bytes", 9},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", "more than 8", 4},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "2^56", 0},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "not a size", 0},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "not a size", 0},
        {1, "{'descr': '<f4', 'shape': (2,), }", "lacks 'fortran_order'", 8},
        {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "repeated", 8},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", "unexpected", 8},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,) } trailing", "after its closing", 8},
        {1, "{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", "not supported", 8},
        {1, "['descr']", "does not start", 0},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", "not a size", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const size_t n = make(buf, bad[i].major, bad[i].header, bad[i].data);
        err[0] = '\0';
        VT_CHECK(parse_copy(buf, n, &a, err) != 0 && strstr(err, bad[i].why) != NULL,
                 "case %zu: '%s' -> '%s', expected '%s'", i, bad[i].header, err, bad[i].why);
    }
    /* preamble: magic, version, header length past the end, NUL in header */
    size_t n = make(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
    for (size_t cut = 0; cut < n; cut++)
        VT_CHECK(parse_copy(buf, cut, &a, err) != 0, "truncated to %zu bytes accepted", cut);
    buf[1] = 'X';
    VT_CHECK(parse_copy(buf, n, &a, err) != 0 && strstr(err, "magic"), "%s", err);
    buf[1] = 'N';
    buf[6] = 4;
    VT_CHECK(parse_copy(buf, n, &a, err) != 0 && strstr(err, "version 4.0"), "%s", err);
    buf[6] = 1;
    buf[8] = 0xFF;
    buf[9] = 0xFF;
    VT_CHECK(parse_copy(buf, n, &a, err) != 0 && strstr(err, "runs past"), "%s", err);
    n = make(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
    buf[20] = '\0';
    VT_CHECK(parse_copy(buf, n, &a, err) != 0 && strstr(err, "NUL"), "%s", err);
    n = make(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
    buf[11] = 0x40;  /* a 1 GiB header length */
    VT_CHECK(parse_copy(buf, n, &a, err) != 0 && strstr(err, "over the limit"), "%s", err);
}

static void test_save_load(void)
{
    char path[] = "/tmp/vq_test_npy_XXXXXX";
    const int fd = mkstemp(path);
    VT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    float data[2 * 3 * 4];
    for (int i = 0; i < 24; i++) data[i] = (float)i * 0.5f - 3.0f;
    char err[256];
    VT_CHECK(vq_npy_save(path, 4, 3, (const int64_t[]){2, 3, 4}, data, err, sizeof err) == 0, "%s", err);
    uint8_t *buf = NULL;
    vq_npy a;
    VT_CHECK(vq_npy_load(path, 1 << 20, &buf, &a, err, sizeof err) == 0, "%s", err);
    VT_CHECK(a.ndim == 3 && a.shape[0] == 2 && a.shape[2] == 4 && memcmp(a.data, data, sizeof data) == 0,
             "round trip");
    VT_CHECK((size_t)(a.data - buf) % 64 == 0, "data offset %zu not 64-aligned", (size_t)(a.data - buf));
    free(buf);
    VT_CHECK(vq_npy_load(path, 10, &buf, &a, err, sizeof err) != 0 && strstr(err, "limit"), "%s", err);
    unlink(path);
    VT_CHECK(vq_npy_load(path, 1 << 20, &buf, &a, err, sizeof err) != 0 && strstr(err, "cannot open"), "%s", err);
}

int main(void)
{
    VT_RUN(test_accepts);
    VT_RUN(test_rejects);
    VT_RUN(test_save_load);
    return vt_finish();
}
