/*
 * veloxquant._vq — the thin extension module under the Python package.
 *
 * Its only job: turn each argument that is a DLPack capsule (or an object with
 * __dlpack__) into a DLTensor, call the C function of the same name (vq_
 * dropped) with the GIL released, and raise the VeloxQuantError subclass of
 * the returned status carrying the context's message. It has no logic of its
 * own: shapes, output allocation and defaults live in the pure-Python layer
 * (veloxquant/_kernels.py), validation lives in the C library.
 *
 * Arguments are positional (METH_FASTCALL) in the C function's order; a
 * tensor argument may be None where the C function accepts NULL. The first
 * argument of a kernel is a context capsule made by ctx_create().
 *
 * Lifetime: the capsule that __dlpack__ returns keeps the producer's memory
 * alive; we hold it for the duration of the call and drop it afterwards
 * without renaming it, so the producer's capsule destructor releases the
 * DLManagedTensor (the DLPack rule for an unconsumed capsule). The library
 * keeps no pointer after it returns (include/veloxquant.h, Conventions).
 */
#include "vq_module.h"

#include <stdio.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------- */

/* Exception classes indexed by vq_status, registered by the Python layer
 * (veloxquant/_errors.py) through _set_error_classes(). */
static PyObject *g_errors[VQ_N_STATUS];

/* The class raised by the binding itself for an argument it cannot convert
 * (no __dlpack__, a non-integer where an int is expected). */
PyObject *invalid_argument_class(void)
{
    return g_errors[VQ_ERR_INVALID_ARGUMENT] ? g_errors[VQ_ERR_INVALID_ARGUMENT] : PyExc_ValueError;
}

PyObject *raise_status(vq_status s, const char *msg)
{
    PyObject *cls = (s > 0 && s < VQ_N_STATUS && g_errors[s]) ? g_errors[s] : PyExc_RuntimeError;
    PyObject *exc = PyObject_CallFunction(cls, "s", msg && *msg ? msg : vq_status_string(s));
    if (exc) {
        PyErr_SetObject(cls, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* ---- argument conversion ------------------------------------------------ */

void args_release(args *a)
{
    for (int i = 0; i < a->n; i++) Py_XDECREF(a->caps[i]);
    a->n = 0;
}

/* A fast exporter per framework type (torch.Tensor -> torch._C._to_dlpack),
 * registered by the Python layer: torch's Tensor.__dlpack__ is Python code
 * with checks that cost microseconds per tensor; the exporter it calls is the
 * same capsule without them. */
#define MAX_EXPORTERS 4
static PyObject *g_export_type[MAX_EXPORTERS], *g_export_fn[MAX_EXPORTERS];
static PyObject *g_str_dlpack;

static PyObject *export_capsule(PyObject *o)
{
    for (int i = 0; i < MAX_EXPORTERS && g_export_type[i]; i++)
        if (PyObject_TypeCheck(o, (PyTypeObject *)g_export_type[i]))
            return PyObject_CallOneArg(g_export_fn[i], o);
    return PyObject_CallMethodNoArgs(o, g_str_dlpack);
}

/* Converts o (capsule, object with __dlpack__, or None when optional) into the
 * next tensor slot of a; *out is NULL for None. Returns 0, or -1 with an
 * exception set. */
int tensor_arg(args *a, PyObject *o, const char *name, int optional, DLTensor **out)
{
    if (o == Py_None) {
        if (optional) {
            *out = NULL;
            return 0;
        }
        PyErr_Format(invalid_argument_class(), "argument '%s': expected an array, got None", name);
        return -1;
    }
    if (a->n == MAX_TENSORS) {
        PyErr_SetString(PyExc_RuntimeError, "veloxquant._vq: too many tensor arguments");
        return -1;
    }
    PyObject *cap;
    int owned;
    if (PyCapsule_CheckExact(o)) {
        cap = o;
        owned = 0;
    } else {
        if (!PyObject_HasAttr(o, g_str_dlpack)) {
            PyErr_Format(invalid_argument_class(),
                         "argument '%s': expected an array with __dlpack__ (NumPy, PyTorch, CuPy, JAX), "
                         "got %.200s", name, Py_TYPE(o)->tp_name);
            return -1;
        }
        cap = export_capsule(o);
        if (!cap) return -1;
        owned = 1;
        if (!PyCapsule_CheckExact(cap)) {
            Py_DECREF(cap);
            PyErr_Format(invalid_argument_class(), "argument '%s': __dlpack__ did not return a capsule", name);
            return -1;
        }
    }
    DLManagedTensor *mt = PyCapsule_GetPointer(cap, "dltensor");
    if (!mt) {
        if (owned) Py_DECREF(cap);
        PyErr_Clear();
        PyErr_Format(invalid_argument_class(),
                     "argument '%s': expected an unconsumed 'dltensor' capsule (a capsule can be used once)",
                     name);
        return -1;
    }
    a->t[a->n] = mt->dl_tensor;
    a->caps[a->n] = owned ? cap : NULL;
    *out = &a->t[a->n];
    a->n++;
    return 0;
}

/* The binding's own message for a scalar of the wrong type. */
static int bad_scalar(PyObject *o, const char *name, const char *expected)
{
    PyErr_Clear();
    PyErr_Format(invalid_argument_class(), "argument '%s': expected %s, got %.200s", name, expected,
                 Py_TYPE(o)->tp_name);
    return -1;
}

int int_arg(PyObject *o, const char *name, int *out)
{
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return bad_scalar(o, name, "an int");
    if (v < -2147483647L - 1 || v > 2147483647L) {
        PyErr_Format(invalid_argument_class(), "argument '%s': %ld does not fit a C int", name, v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int i64_arg(PyObject *o, const char *name, int64_t *out)
{
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return bad_scalar(o, name, "an int");
    *out = (int64_t)v;
    return 0;
}

int u64_arg(PyObject *o, const char *name, uint64_t *out)
{
    unsigned long long v = PyLong_AsUnsignedLongLongMask(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return bad_scalar(o, name, "an int");
    *out = (uint64_t)v;
    return 0;
}

int float_arg(PyObject *o, const char *name, float *out)
{
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return bad_scalar(o, name, "a float");
    *out = (float)v;
    return 0;
}

int bool_arg(PyObject *o, const char *name, bool *out)
{
    int v = PyObject_IsTrue(o);
    if (v < 0) return -1;
    *out = v != 0;
    return 0;
}

/* ---- contexts ------------------------------------------------------------- */

const char CTX_CAPSULE[] = "veloxquant.ctx";

static void ctx_capsule_free(PyObject *cap)
{
    vq_ctx_free(PyCapsule_GetPointer(cap, CTX_CAPSULE));
}

int ctx_arg(PyObject *o, vq_ctx **out)
{
    *out = PyCapsule_GetPointer(o, CTX_CAPSULE);
    return *out ? 0 : -1;
}

/* ctx_create(backend, device, stream, num_threads) -> capsule */
static PyObject *py_ctx_create(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 4) return PyErr_Format(PyExc_TypeError, "ctx_create takes 4 arguments");
    vq_ctx_config cfg = {0};
    int backend, device, threads;
    void *stream = NULL;
    if (int_arg(a[0], "backend", &backend) || int_arg(a[1], "device", &device) ||
        int_arg(a[3], "num_threads", &threads))
        return NULL;
    if (a[2] != Py_None) {
        stream = PyLong_AsVoidPtr(a[2]);
        if (!stream && PyErr_Occurred()) return NULL;
    }
    cfg.backend = (vq_backend)backend;
    cfg.device = device;
    cfg.stream = stream;
    cfg.num_threads = threads;
    vq_ctx *ctx = NULL;
    vq_status s = vq_ctx_create(&cfg, &ctx);
    if (s != VQ_OK) return raise_status(s, vq_ctx_last_error(NULL));
    PyObject *cap = PyCapsule_New(ctx, CTX_CAPSULE, ctx_capsule_free);
    if (!cap) vq_ctx_free(ctx);
    return cap;
}

/* ctx_info(ctx) -> (backend, isa, num_threads) */
static PyObject *py_ctx_info(PyObject *self, PyObject *o)
{
    vq_ctx *ctx;
    if (ctx_arg(o, &ctx)) return NULL;
    return Py_BuildValue("(isi)", (int)vq_ctx_backend(ctx), vq_ctx_isa(ctx), vq_ctx_num_threads(ctx));
}

static PyObject *py_ctx_synchronize(PyObject *self, PyObject *o)
{
    vq_ctx *ctx;
    if (ctx_arg(o, &ctx)) return NULL;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = vq_ctx_synchronize(ctx);
    Py_END_ALLOW_THREADS
    if (s != VQ_OK) return raise_status(s, vq_ctx_last_error(ctx));
    Py_RETURN_NONE;
}

static PyObject *py_backend_available(PyObject *self, PyObject *o)
{
    int b;
    if (int_arg(o, "backend", &b)) return NULL;
    return PyBool_FromLong(vq_backend_available((vq_backend)b));
}

static PyObject *py_version(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(vq_version_string());
}

static PyObject *py_set_error_classes(PyObject *self, PyObject *o)
{
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != VQ_N_STATUS)
        return PyErr_Format(PyExc_TypeError, "_set_error_classes: expected a tuple of %d", VQ_N_STATUS);
    for (int i = 0; i < VQ_N_STATUS; i++) {
        PyObject *c = PyTuple_GET_ITEM(o, i);
        Py_XSETREF(g_errors[i], c == Py_None ? NULL : Py_NewRef(c));
    }
    Py_RETURN_NONE;
}

static PyObject *py_set_exporter(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 2 || !PyType_Check(a[0]) || !PyCallable_Check(a[1]))
        return PyErr_Format(PyExc_TypeError, "_set_exporter(type, callable)");
    for (int i = 0; i < MAX_EXPORTERS; i++) {
        if (!g_export_type[i] || g_export_type[i] == a[0]) {
            Py_XSETREF(g_export_type[i], Py_NewRef(a[0]));
            Py_XSETREF(g_export_fn[i], Py_NewRef(a[1]));
            Py_RETURN_NONE;
        }
    }
    return PyErr_Format(PyExc_RuntimeError, "_set_exporter: table full");
}

/* ---- host-memory utilities ----------------------------------------------- */

/* A writable C-contiguous buffer (numpy array) of at least `floats` f32s. */
static int host_floats(PyObject *o, const char *name, int64_t floats, Py_buffer *buf)
{
    if (PyObject_GetBuffer(o, buf, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (floats < 0 || buf->len / (Py_ssize_t)sizeof(float) < floats) {
        PyErr_Format(invalid_argument_class(), "argument '%s': buffer holds %zd bytes, expected %lld floats",
                     name, buf->len, (long long)floats);
        PyBuffer_Release(buf);
        return -1;
    }
    return 0;
}

/* random_signs(seed, d, out_buffer) */
static PyObject *py_random_signs(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    uint64_t seed;
    int64_t d;
    Py_buffer buf;
    if (n != 3) return PyErr_Format(PyExc_TypeError, "random_signs takes 3 arguments");
    if (u64_arg(a[0], "seed", &seed) || i64_arg(a[1], "d", &d) || host_floats(a[2], "out", d, &buf)) return NULL;
    vq_status s = vq_random_signs(seed, d, buf.buf);
    PyBuffer_Release(&buf);
    if (s != VQ_OK) return raise_status(s, "vq_random_signs: argument 'd' must be >= 1");
    Py_RETURN_NONE;
}

/* qjl_projection(seed, m, d, out_buffer) */
static PyObject *py_qjl_projection(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    uint64_t seed;
    int64_t m, d;
    Py_buffer buf;
    if (n != 4) return PyErr_Format(PyExc_TypeError, "qjl_projection takes 4 arguments");
    if (u64_arg(a[0], "seed", &seed) || i64_arg(a[1], "m", &m) || i64_arg(a[2], "d", &d)) return NULL;
    if (m < 1 || d < 1) return raise_status(VQ_ERR_INVALID_ARGUMENT, "vq_qjl_projection: m and d must be >= 1");
    if (host_floats(a[3], "out", m * d, &buf)) return NULL;
    vq_status s = vq_qjl_projection(seed, m, d, buf.buf);
    PyBuffer_Release(&buf);
    if (s != VQ_OK) return raise_status(s, "vq_qjl_projection failed");
    Py_RETURN_NONE;
}

/* lloyd_max_codebook(bits, centroids_buffer, boundaries_buffer or None) */
static PyObject *py_lloyd_max_codebook(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    int bits;
    if (n != 3) return PyErr_Format(PyExc_TypeError, "lloyd_max_codebook takes 3 arguments");
    if (int_arg(a[0], "bits", &bits)) return NULL;
    if (bits < 1 || bits > 8)
        return PyErr_Format(g_errors[VQ_ERR_INVALID_ARGUMENT] ? g_errors[VQ_ERR_INVALID_ARGUMENT] : PyExc_ValueError,
                            "vq_lloyd_max_codebook: argument 'bits' is %d, expected 1..8", bits);
    Py_buffer c, b = {0};
    if (host_floats(a[1], "centroids", (int64_t)1 << bits, &c)) return NULL;
    if (a[2] != Py_None && host_floats(a[2], "boundaries", ((int64_t)1 << bits) - 1, &b)) {
        PyBuffer_Release(&c);
        return NULL;
    }
    vq_status s = vq_lloyd_max_codebook(bits, c.buf, a[2] != Py_None ? b.buf : NULL);
    PyBuffer_Release(&c);
    if (a[2] != Py_None) PyBuffer_Release(&b);
    if (s != VQ_OK) return raise_status(s, "vq_lloyd_max_codebook failed");
    Py_RETURN_NONE;
}

static PyObject *py_fused_sdpa_supports_shape(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    int64_t v[4];
    static const char *names[4] = {"batch", "heads", "seq_len", "head_dim"};
    if (n != 4) return PyErr_Format(PyExc_TypeError, "supports_shape takes 4 arguments");
    for (int i = 0; i < 4; i++)
        if (i64_arg(a[i], names[i], &v[i])) return NULL;
    return PyBool_FromLong(vq_fused_sdpa_supports_shape(v[0], v[1], v[2], v[3]));
}

/* ---- kernel wrappers ------------------------------------------------------- */

WRAP(bit_pack) {
    BEGIN(4, "bit_pack"); T(1, "idx", idx); I(2, "bits", bits); T(3, "out", out);
    CALL(vq_bit_pack(ctx, idx, bits, out)); DONE;
}
WRAP(bit_unpack) {
    BEGIN(5, "bit_unpack"); T(1, "packed", p); I(2, "bits", bits); I64(3, "original_length", len);
    T(4, "out", out);
    CALL(vq_bit_unpack(ctx, p, bits, len, out)); DONE;
}
WRAP(hadamard) {
    BEGIN(5, "hadamard"); T(1, "x", x); TO(2, "diag", diag); B(3, "inverse", inv); T(4, "out", out);
    CALL(vq_hadamard(ctx, x, diag, inv, out)); DONE;
}
WRAP(turboquant_scalar_quantize) {
    BEGIN(4, "turboquant_scalar_quantize"); T(1, "x", x); I(2, "bits", bits); T(3, "idx_out", idx);
    CALL(vq_turboquant_scalar_quantize(ctx, x, bits, idx)); DONE;
}
WRAP(turboquant_scalar_dequantize) {
    BEGIN(5, "turboquant_scalar_dequantize"); T(1, "idx", idx); I(2, "bits", bits); F(3, "scale", sc);
    T(4, "out", out);
    CALL(vq_turboquant_scalar_dequantize(ctx, idx, bits, sc, out)); DONE;
}
WRAP(turboquant_hadamard_quantize) {
    BEGIN(7, "turboquant_hadamard_quantize"); T(1, "x", x); TO(2, "diag", diag); I(3, "bits", bits);
    T(4, "idx_out", idx); T(5, "scale_out", sc); B(6, "norm_correct", nc);
    vq_turboquant_opts o = {.norm_correct = nc};
    CALL(vq_turboquant_hadamard_quantize(ctx, x, diag, bits, idx, sc, &o)); DONE;
}
WRAP(turboquant_hadamard_dequantize) {
    BEGIN(6, "turboquant_hadamard_dequantize"); T(1, "idx", idx); T(2, "scale", sc); TO(3, "diag", diag);
    I(4, "bits", bits); T(5, "out", out);
    CALL(vq_turboquant_hadamard_dequantize(ctx, idx, sc, diag, bits, out)); DONE;
}
WRAP(turboquant_rvq_encode) {
    BEGIN(9, "turboquant_rvq_encode"); T(1, "x", x); TO(2, "diag", diag); I(3, "b1", b1); I(4, "b2", b2);
    T(5, "idx1_out", i1); T(6, "scale1_out", s1); T(7, "idx2_out", i2); T(8, "scale2_out", s2);
    CALL(vq_turboquant_rvq_encode(ctx, x, diag, b1, b2, i1, s1, i2, s2)); DONE;
}
WRAP(turboquant_rvq_decode) {
    BEGIN(9, "turboquant_rvq_decode"); T(1, "idx1", i1); T(2, "scale1", s1); T(3, "idx2", i2);
    T(4, "scale2", s2); TO(5, "diag", diag); I(6, "b1", b1); I(7, "b2", b2); T(8, "out", out);
    CALL(vq_turboquant_rvq_decode(ctx, i1, s1, i2, s2, diag, b1, b2, out)); DONE;
}
WRAP(kivi_quantize_keys) {
    BEGIN(7, "kivi_quantize_keys"); T(1, "k", k); I(2, "bits", bits); I(3, "group_size", g);
    T(4, "codes_out", c); T(5, "scale_out", s); T(6, "zero_out", z);
    CALL(vq_kivi_quantize_keys(ctx, k, bits, g, c, s, z)); DONE;
}
WRAP(kivi_quantize_values) {
    BEGIN(7, "kivi_quantize_values"); T(1, "v", v); I(2, "bits", bits); I(3, "group_size", g);
    T(4, "codes_out", c); T(5, "scale_out", s); T(6, "zero_out", z);
    CALL(vq_kivi_quantize_values(ctx, v, bits, g, c, s, z)); DONE;
}
WRAP(kivi_dequantize_keys) {
    BEGIN(7, "kivi_dequantize_keys"); T(1, "codes", c); T(2, "scale", s); T(3, "zero", z);
    I(4, "bits", bits); I(5, "group_size", g); T(6, "out", out);
    CALL(vq_kivi_dequantize_keys(ctx, c, s, z, bits, g, out)); DONE;
}
WRAP(kivi_dequantize_values) {
    BEGIN(7, "kivi_dequantize_values"); T(1, "codes", c); T(2, "scale", s); T(3, "zero", z);
    I(4, "bits", bits); I(5, "group_size", g); T(6, "out", out);
    CALL(vq_kivi_dequantize_values(ctx, c, s, z, bits, g, out)); DONE;
}
WRAP(rabitq_encode) {
    BEGIN(6, "rabitq_encode"); T(1, "keys", k); TO(2, "diag", diag); T(3, "k_bits_out", kb);
    T(4, "k_mag_out", km); I(5, "mag", mag);
    vq_rabitq_encode_opts o = {.mag = (vq_rabitq_mag)mag};
    CALL(vq_rabitq_encode(ctx, k, diag, kb, km, &o)); DONE;
}
WRAP(rabitq_hamming_score) {
    BEGIN(6, "rabitq_hamming_score"); T(1, "qbits", qb); T(2, "bits", b); T(3, "cx", cx);
    T(4, "scale", sc); T(5, "out", out);
    CALL(vq_rabitq_hamming_score(ctx, qb, b, cx, sc, out)); DONE;
}
WRAP(rabitq_pack_values) {
    BEGIN(3, "rabitq_pack_values"); T(1, "v_idx", v); T(2, "out", out);
    CALL(vq_rabitq_pack_values(ctx, v, out)); DONE;
}
WRAP(codebook_quantize) {
    BEGIN(4, "codebook_quantize"); T(1, "x", x); T(2, "cents", c); T(3, "idx_out", idx);
    CALL(vq_codebook_quantize(ctx, x, c, idx)); DONE;
}
WRAP(lloyd_max_fit) {
    BEGIN(5, "lloyd_max_fit"); T(1, "samples", s); I(2, "n_cents", nc); I(3, "iters", it); T(4, "cents_out", c);
    CALL(vq_lloyd_max_fit(ctx, s, nc, it, c)); DONE;
}
WRAP(qjl_encode) {
    BEGIN(4, "qjl_encode"); T(1, "keys", k); T(2, "projection", p); T(3, "bits_out", b);
    CALL(vq_qjl_encode(ctx, k, p, b)); DONE;
}
WRAP(qjl_inner_product) {
    BEGIN(8, "qjl_inner_product"); T(1, "query_bits", qb); T(2, "key_bits", kb); I(3, "head_dim", hd);
    I(4, "sketch_dim", sd); T(5, "out", out); TO(6, "query_norm", qn); TO(7, "key_norm", kn);
    vq_qjl_inner_product_opts o = {.query_norm = qn, .key_norm = kn};
    CALL(vq_qjl_inner_product(ctx, qb, kb, hd, sd, out, &o)); DONE;
}
WRAP(qjl_score) {
    BEGIN(6, "qjl_score"); T(1, "query", q); T(2, "projection", p); T(3, "key_bits", kb);
    T(4, "key_norm", kn); T(5, "out", out);
    CALL(vq_qjl_score(ctx, q, p, kb, kn, out)); DONE;
}
WRAP(vecinfer_quantize) {
    BEGIN(6, "vecinfer_quantize"); T(1, "keys", k); T(2, "codebook", cb); T(3, "smooth", sm);
    I(4, "num_subspaces", m); T(5, "idx_out", idx);
    CALL(vq_vecinfer_quantize(ctx, k, cb, sm, m, idx)); DONE;
}
WRAP(vecinfer_dequant) {
    BEGIN(5, "vecinfer_dequant"); T(1, "idx", idx); T(2, "codebook", cb); T(3, "smooth", sm);
    T(4, "keys_out", out);
    CALL(vq_vecinfer_dequant(ctx, idx, cb, sm, out)); DONE;
}
WRAP(vecinfer_encode_decode) {
    BEGIN(7, "vecinfer_encode_decode"); T(1, "keys", k); T(2, "codebook", cb); T(3, "smooth", sm);
    I(4, "num_subspaces", m); T(5, "idx_out", idx); T(6, "keys_out", out);
    CALL(vq_vecinfer_encode_decode(ctx, k, cb, sm, m, idx, out)); DONE;
}
WRAP(vecinfer_query_lut) {
    BEGIN(5, "vecinfer_query_lut"); T(1, "queries", q); T(2, "codebook", cb); T(3, "smooth", sm);
    T(4, "lut_out", out);
    CALL(vq_vecinfer_query_lut(ctx, q, cb, sm, out)); DONE;
}
WRAP(vecinfer_smooth_factors) {
    BEGIN(3, "vecinfer_smooth_factors"); T(1, "keys", k); T(2, "smooth_out", out);
    CALL(vq_vecinfer_smooth_factors(ctx, k, out)); DONE;
}
WRAP(kmeans) {
    BEGIN(6, "kmeans"); T(1, "samples", s); I(2, "C", c); I(3, "iters", it); U64(4, "seed", seed);
    T(5, "centroids_out", out);
    CALL(vq_kmeans(ctx, s, c, it, seed, out)); DONE;
}
WRAP(commvq_decode) {
    BEGIN(9, "commvq_decode"); T(1, "indices", idx); T(2, "codebook", cb); T(3, "cos_freqs", cf);
    T(4, "sin_freqs", sf); T(5, "positions", pos); T(6, "out", out); I(7, "rope", rope); TO(8, "scale", sc);
    vq_commvq_opts o = {.rope = (vq_rope_layout)rope, .scale = sc};
    CALL(vq_commvq_decode(ctx, idx, cb, cf, sf, pos, out, &o)); DONE;
}
WRAP(commvq_train) {
    BEGIN(7, "commvq_train"); T(1, "samples", s); I(2, "R", r); I(3, "C", c); I(4, "iters", it);
    U64(5, "seed", seed); T(6, "codebook_out", out);
    CALL(vq_commvq_train(ctx, s, r, c, it, seed, out)); DONE;
}
WRAP(commvq_encode) {
    BEGIN(4, "commvq_encode"); T(1, "keys", k); T(2, "codebook", cb); T(3, "indices_out", out);
    CALL(vq_commvq_encode(ctx, k, cb, out)); DONE;
}

/* The parts of an encoded argument `what` ("keys" / "values"): its format,
 * up to nt tensors and ni ints from the (format, tensors, ints) tuples. */
static int encoded_parts(args *A, const char *what, PyObject *fmt_o, PyObject *tens, PyObject *ints, int nt, int ni,
                         int *fmt, DLTensor **t, int *iv)
{
    char name[32];
    snprintf(name, sizeof name, "%s.format", what);
    if (int_arg(fmt_o, name, fmt)) return -1;
    if (!PyTuple_Check(tens) || PyTuple_GET_SIZE(tens) > nt || !PyTuple_Check(ints) || PyTuple_GET_SIZE(ints) > ni) {
        PyErr_Format(invalid_argument_class(), "argument '%s': expected (format, tensors, ints) tuples", what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tens); i++)
        if (tensor_arg(A, PyTuple_GET_ITEM(tens, i), what, 1, &t[i])) return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ints); i++)
        if (int_arg(PyTuple_GET_ITEM(ints, i), what, &iv[i])) return -1;
    return 0;
}

/* vq_encoded_keys from (format, tensors tuple, ints tuple); the tuple orders
 * are those of the Python key classes (veloxquant/_keys.py), which mirror the
 * struct members in include/veloxquant.h. */
static int encoded_keys_arg(args *A, PyObject *fmt_o, PyObject *tens, PyObject *ints, vq_encoded_keys *k)
{
    int fmt;
    DLTensor *t[8] = {0};
    int iv[4] = {0};
    memset(k, 0, sizeof *k);
    if (encoded_parts(A, "keys", fmt_o, tens, ints, 8, 4, &fmt, t, iv)) return -1;
    k->format = (vq_keys_format)fmt;
    switch (fmt) {
    case VQ_KEYS_F16: k->f16.keys = t[0]; break;
    case VQ_KEYS_TURBO:
        k->turbo.idx = t[0]; k->turbo.scale = t[1]; k->turbo.diag = t[2]; k->turbo.bits = iv[0];
        break;
    case VQ_KEYS_TURBO_RVQ:
        k->rvq.idx1 = t[0]; k->rvq.scale1 = t[1]; k->rvq.idx2 = t[2]; k->rvq.scale2 = t[3];
        k->rvq.diag = t[4]; k->rvq.b1 = iv[0]; k->rvq.b2 = iv[1];
        break;
    case VQ_KEYS_KIVI:
        k->kivi.codes = t[0]; k->kivi.scale = t[1]; k->kivi.zero = t[2];
        k->kivi.bits = iv[0]; k->kivi.group_size = iv[1];
        break;
    case VQ_KEYS_RABITQ:
        k->rabitq.bits = t[0]; k->rabitq.mag = t[1]; k->rabitq.cnst = t[2]; k->rabitq.diag = t[3];
        break;
    case VQ_KEYS_QJL: k->qjl.bits = t[0]; k->qjl.norm = t[1]; k->qjl.projection = t[2]; break;
    case VQ_KEYS_VECINFER: k->vecinfer.idx = t[0]; k->vecinfer.codebook = t[1]; k->vecinfer.smooth = t[2]; break;
    case VQ_KEYS_COMMVQ:
        k->commvq.idx = t[0]; k->commvq.codebook = t[1]; k->commvq.cos_freqs = t[2];
        k->commvq.sin_freqs = t[3]; k->commvq.positions = t[4]; k->commvq.scale = t[5];
        k->commvq.rope = (vq_rope_layout)iv[0];
        break;
    default: break; /* the library names the bad format */
    }
    return 0;
}

/* vq_encoded_values from (format, tensors tuple, ints tuple), in the order of
 * the Python value classes (veloxquant/_keys.py). */
static int encoded_values_arg(args *A, PyObject *fmt_o, PyObject *tens, PyObject *ints, vq_encoded_values *v)
{
    int fmt;
    DLTensor *t[4] = {0};
    int iv[2] = {0};
    memset(v, 0, sizeof *v);
    if (encoded_parts(A, "values", fmt_o, tens, ints, 4, 2, &fmt, t, iv)) return -1;
    v->format = (vq_values_format)fmt;
    switch (fmt) {
    case VQ_VALUES_F16: v->f16.values = t[0]; break;
    case VQ_VALUES_KIVI:
        v->kivi.codes = t[0]; v->kivi.scale = t[1]; v->kivi.zero = t[2];
        v->kivi.bits = iv[0]; v->kivi.group_size = iv[1];
        break;
    case VQ_VALUES_CODEBOOK: v->codebook.idx = t[0]; v->codebook.cents = t[1]; v->codebook.scale = t[2]; break;
    case VQ_VALUES_TURBO:
        v->turbo.idx = t[0]; v->turbo.scale = t[1]; v->turbo.diag = t[2]; v->turbo.bits = iv[0];
        break;
    default: break; /* the library names the bad format */
    }
    return 0;
}

/* fused_sdpa(ctx, q, kfmt, ktens, kints, vfmt, vtens, vints, scale, mask, out, causal, num_splits, lse_out,
 *            key_scores, value_accum) */
WRAP(fused_sdpa) {
    BEGIN(16, "fused_sdpa"); T(1, "queries", q);
    vq_encoded_keys keys;
    vq_encoded_values values;
    if (encoded_keys_arg(&A, a[2], a[3], a[4], &keys) || encoded_values_arg(&A, a[5], a[6], a[7], &values))
        goto fail;
    F(8, "scale", sc); TO(9, "mask", mask); T(10, "out", out); B(11, "causal", causal);
    I(12, "num_splits", ns); TO(13, "lse_out", lse); I(14, "key_scores", ks); I(15, "value_accum", va);
    vq_attend_opts o = {.causal = causal, .num_splits = ns, .lse_out = lse, .key_scores = (vq_key_scores)ks,
                        .value_accum = (vq_value_accum)va};
    CALL(vq_fused_sdpa(ctx, q, &keys, &values, sc, mask, out, &o)); DONE;
}
/* turboquant_fused_rvq_decode_attend(ctx, q, fmt, ktens, kints, values, scale, out, causal, num_splits,
 *                                    lse_out) */
WRAP(turboquant_fused_rvq_decode_attend) {
    BEGIN(11, "turboquant_fused_rvq_decode_attend"); T(1, "queries", q);
    vq_encoded_keys keys;
    if (encoded_keys_arg(&A, a[2], a[3], a[4], &keys)) goto fail;
    T(5, "values", v); F(6, "scale", sc); T(7, "out", out); B(8, "causal", causal); I(9, "num_splits", ns);
    TO(10, "lse_out", lse);
    vq_attend_opts o = {.causal = causal, .num_splits = ns, .lse_out = lse};
    CALL(vq_turboquant_fused_rvq_decode_attend(ctx, q, &keys, v, sc, out, &o)); DONE;
}
/* attention_merge(ctx, out_a, lse_a, out_b, lse_b, out, lse_out) */
WRAP(attention_merge) {
    BEGIN(7, "attention_merge"); T(1, "out_a", oa); T(2, "lse_a", la); T(3, "out_b", ob); T(4, "lse_b", lb);
    T(5, "out", out); TO(6, "lse_out", lo);
    CALL(vq_attention_merge(ctx, oa, la, ob, lb, out, lo)); DONE;
}
/* scalar_fused_decode_attend(ctx, q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, group_size,
 *                            scale, nsg, out, causal, bits, lse_out, key_scores, value_accum) */
WRAP(scalar_fused_decode_attend) {
    BEGIN(17, "scalar_fused_decode_attend"); T(1, "q", q); T(2, "k_codes", kc); T(3, "k_scale", ks);
    T(4, "k_zero", kz); T(5, "v_codes", vc); T(6, "v_scale", vs); T(7, "v_zero", vz); I(8, "group_size", g);
    F(9, "scale", sc); I(10, "nsg", nsg); T(11, "out", out); B(12, "causal", causal); I(13, "bits", bits);
    TO(14, "lse_out", lse); I(15, "key_scores", ksc); I(16, "value_accum", vacc);
    vq_scalar_attend_opts o = {.causal = causal, .bits = bits, .lse_out = lse, .key_scores = (vq_key_scores)ksc,
                               .value_accum = (vq_value_accum)vacc};
    CALL(vq_kivi_fused_attend(ctx, q, kc, ks, kz, vc, vs, vz, g, sc, nsg, out, &o)); DONE;
}
static PyObject *rabitq_attend(PyObject *const *a, Py_ssize_t n, int prefill)
{
    BEGIN(15, prefill ? "rabitq_prefill_attend" : "rabitq_fused_attend"); T(1, "q", q); T(2, prefill ? "scale" : "q_scale", qs);
    T(3, "k_bits", kb); T(4, "k_mag", km); TO(5, "k_const", kc); T(6, "v_idx", vi); T(7, "v_cents", vcents);
    T(8, "out", out); I(9, "score", score); TO(10, "v_scale", vscale); B(11, "causal", causal);
    I(12, "num_splits", ns); TO(13, "lse_out", lse); I(14, "value_accum", vacc);
    vq_rabitq_attend_opts o = {.score = (vq_rabitq_score)score, .v_scale = vscale, .causal = causal,
                               .num_splits = ns, .lse_out = lse, .value_accum = (vq_value_accum)vacc};
    if (prefill) {
        CALL(vq_rabitq_prefill_attend(ctx, q, qs, kb, km, kc, vi, vcents, out, &o));
    } else {
        CALL(vq_rabitq_fused_attend(ctx, q, qs, kb, km, kc, vi, vcents, out, &o));
    }
    DONE;
}
/* rabitq_fused_attend(ctx, q, q_scale, k_bits, k_mag, k_const, v_idx, v_cents, out, score, v_scale,
 *                     causal, num_splits, lse_out, value_accum) */
WRAP(rabitq_fused_attend) { return rabitq_attend(a, n, 0); }
/* rabitq_prefill_attend: the same arguments with scale in q_scale's place */
WRAP(rabitq_prefill_attend) { return rabitq_attend(a, n, 1); }

/* ---- module ---------------------------------------------------------------- */

#define FC(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, NULL}
static PyMethodDef methods[] = {
    FC(ctx_create),
    {"ctx_info", py_ctx_info, METH_O, NULL},
    {"ctx_synchronize", py_ctx_synchronize, METH_O, NULL},
    {"backend_available", py_backend_available, METH_O, NULL},
    {"version", py_version, METH_NOARGS, NULL},
    {"_set_error_classes", py_set_error_classes, METH_O, NULL},
    {"_set_exporter", (PyCFunction)(void (*)(void))py_set_exporter, METH_FASTCALL, NULL},
    FC(random_signs), FC(qjl_projection), FC(lloyd_max_codebook), FC(fused_sdpa_supports_shape),
    FC(bit_pack), FC(bit_unpack), FC(hadamard),
    FC(turboquant_scalar_quantize), FC(turboquant_scalar_dequantize),
    FC(turboquant_hadamard_quantize), FC(turboquant_hadamard_dequantize),
    FC(turboquant_rvq_encode), FC(turboquant_rvq_decode),
    FC(kivi_quantize_keys), FC(kivi_quantize_values), FC(kivi_dequantize_keys), FC(kivi_dequantize_values),
    FC(rabitq_encode), FC(rabitq_hamming_score), FC(rabitq_pack_values),
    FC(codebook_quantize), FC(lloyd_max_fit),
    FC(qjl_encode), FC(qjl_inner_product), FC(qjl_score),
    FC(vecinfer_quantize), FC(vecinfer_dequant), FC(vecinfer_encode_decode), FC(vecinfer_query_lut),
    FC(vecinfer_smooth_factors), FC(kmeans),
    FC(commvq_decode), FC(commvq_train), FC(commvq_encode),
    FC(fused_sdpa), FC(turboquant_fused_rvq_decode_attend), FC(attention_merge), FC(scalar_fused_decode_attend),
    FC(rabitq_fused_attend), FC(rabitq_prefill_attend),
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_vq",
    "The C API of veloxquant, one function per vq_ function (see include/veloxquant.h); "
    "use the veloxquant package, not this module.",
    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__vq(void)
{
    g_str_dlpack = PyUnicode_InternFromString("__dlpack__");
    if (!g_str_dlpack) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddFunctions(m, vq_cache_methods) < 0 || PyModule_AddFunctions(m, vq_tune_methods) < 0 ||
        PyModule_AddIntConstant(m, "BACKEND_CPU", VQ_BACKEND_CPU) < 0 ||
        PyModule_AddIntConstant(m, "BACKEND_CUDA", VQ_BACKEND_CUDA) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
