/*
 * vq_tune_wrap.c — the tuner (tools/tune/vqtune.h, the core of `vq tune`)
 * for veloxquant._vq. veloxquant.tune() (veloxquant/_tune.py) gives it its
 * Python shape; this file converts, loads the model, and runs the tuner with
 * the GIL released, taking it back for each progress call.
 */
#include "vq_module.h"

#include "model_cli.h"
#include "vqtune.h"

/* The progress callable and the exception it (or a signal) raised. */
typedef struct progress_state {
    PyObject *fn;               /* None or a callable (done, total, step) */
    PyObject *exc_type, *exc_value, *exc_tb;
} progress_state;

static int progress(void *user, int64_t done, int64_t total, const char *step)
{
    progress_state *p = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = PyErr_CheckSignals() != 0;
    if (!stop && p->fn != Py_None) {
        PyObject *r = PyObject_CallFunction(p->fn, "LLs", (long long)done, (long long)total, step);
        stop = r == NULL;
        Py_XDECREF(r);
    }
    if (stop) PyErr_Fetch(&p->exc_type, &p->exc_value, &p->exc_tb);
    PyGILState_Release(g);
    return stop;
}

/* A str (or None: *out NULL) argument; 0, or -1 with an exception set. */
static int str_arg(PyObject *o, const char *name, const char **out)
{
    *out = NULL;
    if (o == Py_None) return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(invalid_argument_class(), "argument '%s': expected a str or None, got %s", name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(o);
    return *out ? 0 : -1;
}

/* The result's records as a dict (the profile's bytes under "profile"). */
static PyObject *result_dict(vq_ctx *ctx, const vqt_tune_result *r)
{
    size_t size = 0;
    vq_status s = vq_profile_save_buffer(ctx, r->profile, NULL, 0, &size);
    if (s != VQ_OK) return raise_status(s, vq_ctx_last_error(ctx));
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!bytes) return NULL;
    s = vq_profile_save_buffer(ctx, r->profile, PyBytes_AS_STRING(bytes), size, &size);
    if (s != VQ_OK) {
        Py_DECREF(bytes);
        return raise_status(s, vq_ctx_last_error(ctx));
    }
    PyObject *keys = PyList_New(r->n_keys), *values = PyList_New(r->n_values), *layers = PyList_New(r->n_layers),
             *checks = PyList_New(r->n_checks);
    for (int i = 0; keys && i < r->n_keys; i++)
        PyList_SET_ITEM(keys, i, Py_BuildValue("(sd)", r->keys[i].name, r->keys[i].bits));
    for (int i = 0; values && i < r->n_values; i++)
        PyList_SET_ITEM(values, i, Py_BuildValue("(sd)", r->values[i].name, r->values[i].bits));
    for (int l = 0; layers && l < r->n_layers; l++) {
        const int k = r->key_pick[l], v = r->value_pick[l];
        PyList_SET_ITEM(layers, l, Py_BuildValue("(sdsd)", r->keys[k].name,
                                                 r->loss[(size_t)l * VQT_TUNE_MAX_CAND + k], r->values[v].name,
                                                 r->loss[(size_t)(r->n_layers + l) * VQT_TUNE_MAX_CAND + v]));
    }
    for (int b = 0; checks && b < r->n_checks; b++)
        PyList_SET_ITEM(checks, b, Py_BuildValue("(ddd)", r->checks[b].bits, r->checks[b].predicted_kl,
                                                 r->checks[b].measured_kl));
    PyObject *d = NULL;
    if (keys && values && layers && checks)
        d = Py_BuildValue("{sOsssOsOsOsOsdsLsLsLsLsOsdsssds(ddd)sisLsO}", "profile", bytes, "kv", r->kv, "keys", keys,
                          "values", values, "layers", layers, "checks", checks, "min_bits", r->min_bits, "tokens",
                          (long long)r->tokens, "ctx", (long long)r->ctx, "n_windows", (long long)r->n_windows,
                          "bits_ctx", (long long)r->bits_ctx, "measured", r->measured ? Py_True : Py_False,
                          "seconds", r->seconds, "base", r->base_cheapest ? "cheapest" : "f16", "base_kl",
                          r->base_kl, "searched", r->searched.bits, r->searched.predicted_kl,
                          r->searched.measured_kl, "search_rounds", r->search_rounds, "search_runs",
                          (long long)r->search_runs, "chose_search", r->chose_search ? Py_True : Py_False);
    Py_DECREF(bytes);
    Py_XDECREF(keys), Py_XDECREF(values), Py_XDECREF(layers), Py_XDECREF(checks);
    return d;
}

/* tune(ctx, model path, text (bytes), text name, bits, tokens, ctx_len, bits_ctx, window, keys or None,
 *      values or None, measurements or None, residual, sink, no_center, center_keys, smooth, batch,
 *      kivi_arith (0 auto, 1 f32, 2 int8), progress (callable or None), base (str or None: cheapest),
 *      search (int))
 *      -> dict (result_dict) */
static PyObject *py_tune(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 22) return PyErr_Format(PyExc_TypeError, "tune takes 22 arguments (%zd given)", n);
    vq_ctx *ctx;
    const char *model_path, *text_name, *window, *keys, *values, *measurements, *base;
    vqt_tune_options o = {.opt_prefix = ""};
    if (ctx_arg(a[0], &ctx)) return NULL;
    if (!PyUnicode_Check(a[1]) || !(model_path = PyUnicode_AsUTF8(a[1])))
        return PyErr_Format(invalid_argument_class(), "argument 'model': expected a path (str)");
    if (!PyBytes_Check(a[2])) return PyErr_Format(PyExc_TypeError, "argument 'text': expected bytes");
    if (!PyUnicode_Check(a[3]) || !(text_name = PyUnicode_AsUTF8(a[3])))
        return PyErr_Format(PyExc_TypeError, "argument 'text name': expected a str");
    double bits = PyFloat_AsDouble(a[4]);
    if (bits == -1 && PyErr_Occurred()) return NULL;
    int batch, kivi_arith;
    bool no_center, center_keys, smooth;
    if (i64_arg(a[5], "tokens", &o.tokens) || i64_arg(a[6], "ctx", &o.ctx) || i64_arg(a[7], "bits_ctx", &o.bits_ctx) ||
        str_arg(a[8], "window", &window) || str_arg(a[9], "keys", &keys) || str_arg(a[10], "values", &values) ||
        str_arg(a[11], "measurements", &measurements) ||
        int_arg(a[12], "residual", &o.residual) || int_arg(a[13], "sink", &o.sink) ||
        bool_arg(a[14], "no_center", &no_center) || bool_arg(a[15], "center_keys", &center_keys) ||
        bool_arg(a[16], "smooth", &smooth) || int_arg(a[17], "batch", &batch) ||
        int_arg(a[18], "kivi_arith", &kivi_arith) || str_arg(a[20], "base", &base) || int_arg(a[21], "search", &o.search))
        return NULL;
    if (a[19] != Py_None && !PyCallable_Check(a[19]))
        return PyErr_Format(PyExc_TypeError, "argument 'progress': expected a callable or None");
    o.bits = bits;
    o.text = PyBytes_AS_STRING(a[2]);
    o.text_len = (size_t)PyBytes_GET_SIZE(a[2]);
    o.text_name = text_name;
    o.window = window, o.keys = keys, o.values = values, o.measurements = measurements, o.base = base;
    o.no_center = no_center, o.center_keys = center_keys, o.smooth = smooth;
    o.batch = batch, o.kivi_arith = kivi_arith;
    progress_state ps = {.fn = a[19]};
    o.progress = progress;
    o.progress_user = &ps;

    char err[VQT_TUNE_ERR_LEN > VQM_ERR_LEN ? VQT_TUNE_ERR_LEN : VQM_ERR_LEN] = {0};
    if (vqt_tune_validate(&o, err) != VQ_OK) return raise_status(VQ_ERR_INVALID_ARGUMENT, err); /* before the model loads */
    vqm_model *model = NULL;
    vqt_tune_result *r = NULL;
    vq_status st;
    bool loaded;
    Py_BEGIN_ALLOW_THREADS
    vqm_cli_set_quiet(true); /* the messages come back as the exception */
    st = vqm_model_load(model_path, &model, err);
    loaded = st == VQ_OK;
    if (loaded) st = vqt_tune(ctx, model, &o, &r, err);
    vqm_model_free(model);
    Py_END_ALLOW_THREADS
    if (ps.exc_type != NULL) {
        PyErr_Restore(ps.exc_type, ps.exc_value, ps.exc_tb);
        vqt_tune_result_free(r);
        return NULL;
    }
    if (!loaded)
        return PyErr_Format(invalid_argument_class(), "argument 'model': '%s' is not a model this runtime loads: %s",
                            model_path, err);
    if (st != VQ_OK) return raise_status(st, err);
    PyObject *d = result_dict(ctx, r);
    vqt_tune_result_free(r);
    return d;
}

PyMethodDef vq_tune_methods[] = {
    {"tune", (PyCFunction)(void (*)(void))py_tune, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
