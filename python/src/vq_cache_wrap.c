/*
 * vq_cache_wrap.c — the vq_cache_* functions for veloxquant._vq (section 5 of
 * include/veloxquant.h). As in vq_module.c, each wrapper converts and calls;
 * the KVCache class (veloxquant/_cache.py) gives them their Python shape.
 *
 * A cache is a capsule "veloxquant.cache" whose context is the ctx capsule it
 * was created with (one reference held), so the ctx outlives the cache.
 *
 * A layer config travels as a flat tuple, in the order of the struct members:
 *   keys:   method, bits, bits2, group_size, norm_correct, rabitq_score,
 *           rabitq_mag, qjl_sketch, seed, codebook, smooth, cos_freqs,
 *           sin_freqs, rope                                   (14 items)
 *   values: method, bits, group_size, centroids, seed        (5 items)
 *   then keys.wide_channels, values.scale_f16                (2 items)
 * A layer's transforms (vq_cache_transforms) travel as (center_keys,
 * center_values, smooth, key_mean, value_mean, key_scale).
 * Table entries are host arrays (DLPack) or None.
 */
#include "vq_module.h"

#include <string.h>

static const char CACHE_CAPSULE[] = "veloxquant.cache";
#define LAYER_TUPLE 21

static void cache_capsule_free(PyObject *cap)
{
    vq_cache_free(PyCapsule_GetPointer(cap, CACHE_CAPSULE));
    Py_XDECREF((PyObject *)PyCapsule_GetContext(cap));
}

static int cache_arg(PyObject *o, vq_cache **out)
{
    *out = PyCapsule_GetPointer(o, CACHE_CAPSULE);
    return *out ? 0 : -1;
}

static PyObject *new_cache_capsule(vq_cache *cache, PyObject *ctx_capsule);

static PyObject *cache_error(vq_cache *c, vq_status s)
{
    return raise_status(s, vq_ctx_last_error(vq_cache_ctx(c)));
}

/* A sequence of ints into int64s: ids points at buf (n <= cap) or at a
 * PyMem block the caller frees when ids != buf. */
static int seq_ids_arg(PyObject *o, int64_t *buf, int cap, int64_t **ids, int *n)
{
    PyObject *f = PySequence_Fast(o, "argument 'seq_ids': expected a sequence of ints");
    if (!f) return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(f);
    if (len > 1 << 20) {
        Py_DECREF(f);
        PyErr_Format(invalid_argument_class(), "argument 'seq_ids': %zd ids is too many", len);
        return -1;
    }
    *ids = len <= cap ? buf : PyMem_Malloc((size_t)(len ? len : 1) * sizeof(int64_t));
    if (!*ids) {
        Py_DECREF(f);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        if (i64_arg(PySequence_Fast_GET_ITEM(f, i), "seq_ids", &(*ids)[i])) {
            if (*ids != buf) PyMem_Free(*ids);
            Py_DECREF(f);
            return -1;
        }
    }
    *n = (int)len;
    Py_DECREF(f);
    return 0;
}

/* A layer tuple into *lc; table tensors go into A's slots. */
static int layer_config_arg(args *A, PyObject *o, vq_cache_layer_config *lc)
{
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != LAYER_TUPLE) {
        PyErr_Format(invalid_argument_class(), "argument 'layers': expected tuples of %d items", LAYER_TUPLE);
        return -1;
    }
    PyObject *const *t = &PyTuple_GET_ITEM(o, 0);
    vq_key_config *k = &lc->keys;
    vq_value_config *v = &lc->values;
    int km, ks, kmag, rope, vm;
    DLTensor *cb, *sm, *cf, *sf, *cents;
    memset(lc, 0, sizeof *lc);
    if (int_arg(t[0], "keys.method", &km) || int_arg(t[1], "keys.bits", &k->bits) ||
        int_arg(t[2], "keys.bits2", &k->bits2) || int_arg(t[3], "keys.group_size", &k->group_size) ||
        bool_arg(t[4], "keys.norm_correct", &k->norm_correct) || int_arg(t[5], "keys.rabitq_score", &ks) ||
        int_arg(t[6], "keys.rabitq_mag", &kmag) || int_arg(t[7], "keys.qjl_sketch", &k->qjl_sketch) ||
        u64_arg(t[8], "keys.seed", &k->seed) || tensor_arg(A, t[9], "keys.codebook", 1, &cb) ||
        tensor_arg(A, t[10], "keys.smooth", 1, &sm) || tensor_arg(A, t[11], "keys.cos_freqs", 1, &cf) ||
        tensor_arg(A, t[12], "keys.sin_freqs", 1, &sf) || int_arg(t[13], "keys.rope", &rope) ||
        int_arg(t[14], "values.method", &vm) || int_arg(t[15], "values.bits", &v->bits) ||
        int_arg(t[16], "values.group_size", &v->group_size) ||
        tensor_arg(A, t[17], "values.centroids", 1, &cents) || u64_arg(t[18], "values.seed", &v->seed) ||
        int_arg(t[19], "keys.wide_channels", &k->wide_channels) || bool_arg(t[20], "values.scale_f16", &v->scale_f16))
        return -1;
    k->method = (vq_key_method)km;
    k->rabitq_score = (vq_rabitq_score)ks;
    k->rabitq_mag = (vq_rabitq_mag)kmag;
    k->codebook = cb;
    k->smooth = sm;
    k->cos_freqs = cf;
    k->sin_freqs = sf;
    k->rope = (vq_rope_layout)rope;
    v->method = (vq_value_method)vm;
    v->centroids = cents;
    return 0;
}

static PyObject *layer_config_tuple(const vq_cache_layer_config *lc)
{
    const vq_key_config *k = &lc->keys;
    const vq_value_config *v = &lc->values;
    return Py_BuildValue("(iiiiNiiiKOOOOiiiiOKiN)", (int)k->method, k->bits, k->bits2, k->group_size,
                         PyBool_FromLong(k->norm_correct), (int)k->rabitq_score, (int)k->rabitq_mag, k->qjl_sketch,
                         (unsigned long long)k->seed, Py_None, Py_None, Py_None, Py_None, (int)k->rope,
                         (int)v->method, v->bits, v->group_size, Py_None, (unsigned long long)v->seed,
                         k->wide_channels, PyBool_FromLong(v->scale_f16));
}

/* cache_presets() -> [(name, description, key_bits, value_bits, needs_tables, recipe, bits, sink_tokens,
 * center_keys, center_values, smooth, residual_tokens, window)], window "f16", "turbo8" or "turboN" */
static PyObject *py_cache_presets(PyObject *self, PyObject *unused)
{
    int n = vq_cache_preset_count();
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int i = 0; i < n; i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        char window[16];
        if (p->window == VQ_WINDOW_TURBO) snprintf(window, sizeof window, "turbo%d", p->window_bits);
        else snprintf(window, sizeof window, "%s", p->window == VQ_WINDOW_TURBO8 ? "turbo8" : "f16");
        PyObject *item = Py_BuildValue("(ssddNNdiNNNis)", p->name, p->description, p->key_bits, p->value_bits,
                                       PyBool_FromLong(p->needs_tables), PyBool_FromLong(p->recipe), p->bits,
                                       p->sink_tokens, PyBool_FromLong(p->transforms.center_keys),
                                       PyBool_FromLong(p->transforms.center_values),
                                       PyBool_FromLong(p->transforms.smooth), p->residual_tokens, window);
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* cache_preset_layer_config(name, head_dim) -> layer tuple */
static PyObject *py_cache_preset_layer_config(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    int d;
    if (n != 2 || !PyUnicode_Check(a[0])) return PyErr_Format(PyExc_TypeError, "cache_preset_layer_config(name, head_dim)");
    if (int_arg(a[1], "head_dim", &d)) return NULL;
    const char *name = PyUnicode_AsUTF8(a[0]);
    if (!name) return NULL;
    vq_cache_layer_config lc;
    vq_status s = vq_cache_preset_layer_config(name, d, &lc);
    if (s != VQ_OK)
        return PyErr_Format(invalid_argument_class(),
                            "vq_cache_preset_layer_config: unknown preset '%s' or head_dim %d (a multiple of 8, >= 8)",
                            name, d);
    return layer_config_tuple(&lc);
}

/* A transforms tuple into *xf; its tables go into A's slots. */
static int transforms_arg(args *A, PyObject *o, vq_cache_transforms *xf)
{
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 6) {
        PyErr_Format(invalid_argument_class(), "argument 'transforms': expected tuples of 6 items");
        return -1;
    }
    PyObject *const *t = &PyTuple_GET_ITEM(o, 0);
    DLTensor *km, *vm, *ks;
    memset(xf, 0, sizeof *xf);
    if (bool_arg(t[0], "center_keys", &xf->center_keys) || bool_arg(t[1], "center_values", &xf->center_values) ||
        bool_arg(t[2], "smooth", &xf->smooth) || tensor_arg(A, t[3], "key_mean", 1, &km) ||
        tensor_arg(A, t[4], "value_mean", 1, &vm) || tensor_arg(A, t[5], "key_scale", 1, &ks))
        return -1;
    xf->key_mean = km, xf->value_mean = vm, xf->key_scale = ks;
    return 0;
}

static int source_arg(PyObject *o, const char *fn, const char **buf, size_t *size, const char **path);

/* A sequence of n ints (a sequence argument `name`) into a PyMem block *out. */
static int ints_arg(PyObject *o, const char *name, Py_ssize_t n, int **out)
{
    PyObject *f = PySequence_Fast(o, "expected a sequence of ints");
    if (!f) return -1;
    if (PySequence_Fast_GET_SIZE(f) != n) {
        PyErr_Format(invalid_argument_class(), "argument '%s': expected %zd ints, got %zd", name, n,
                     PySequence_Fast_GET_SIZE(f));
        Py_DECREF(f);
        return -1;
    }
    *out = PyMem_Calloc((size_t)(n ? n : 1), sizeof **out);
    int rc = *out ? 0 : (PyErr_NoMemory(), -1);
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) rc = int_arg(PySequence_Fast_GET_ITEM(f, i), name, &(*out)[i]);
    Py_DECREF(f);
    return rc;
}

/* cache_create(ctx, n_layers, n_kv_heads, n_q_heads, head_dim, page_size, capacity_pages, grow_pages,
 *              max_sequences, residual_tokens, preset or None, layers (tuple of layer tuples) or None,
 *              f16_layers (sequence of ints) or None, window (vq_cache_window as int), window_bits,
 *              sink_tokens, transforms (tuple of n_layers transforms tuples) or None,
 *              sliding_windows (sequence of n_layers ints) or None, profile (a profile file's path or
 *              bytes) or None) -> cache capsule */
static PyObject *py_cache_create(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 19) return PyErr_Format(PyExc_TypeError, "cache_create takes 19 arguments (%zd given)", n);
    vq_ctx *ctx;
    if (ctx_arg(a[0], &ctx)) return NULL;
    vq_cache_config cfg = {0};
    args *layer_args = NULL;
    int n_layer_args = 0;
    vq_cache_layer_config *layers = NULL;
    int *f16 = NULL, *sliding = NULL;
    vq_profile *profile = NULL;
    args *xf_args = NULL;
    int n_xf_args = 0;
    vq_cache_transforms *xf = NULL;
    PyObject *result = NULL;
    if (int_arg(a[1], "n_layers", &cfg.n_layers) || int_arg(a[2], "n_kv_heads", &cfg.n_kv_heads) ||
        int_arg(a[3], "n_q_heads", &cfg.n_q_heads) || int_arg(a[4], "head_dim", &cfg.head_dim) ||
        int_arg(a[5], "page_size", &cfg.page_size) || i64_arg(a[6], "capacity_pages", &cfg.capacity_pages) ||
        i64_arg(a[7], "grow_pages", &cfg.grow_pages) || int_arg(a[8], "max_sequences", &cfg.max_sequences) ||
        int_arg(a[9], "residual_tokens", &cfg.residual_tokens))
        goto done;
    int window;
    if (int_arg(a[13], "window", &window) || int_arg(a[14], "window_bits", &cfg.window_bits)) goto done;
    cfg.window = (vq_cache_window)window; /* the library checks the range */
    if (int_arg(a[15], "sink_tokens", &cfg.sink_tokens)) goto done;
    if (a[16] != Py_None) {
        if (!PyTuple_Check(a[16]) || PyTuple_GET_SIZE(a[16]) != cfg.n_layers) {
            PyErr_Format(invalid_argument_class(), "argument 'transforms': expected a tuple of n_layers = %d tuples",
                         cfg.n_layers);
            goto done;
        }
        xf = PyMem_Calloc((size_t)cfg.n_layers, sizeof *xf);
        xf_args = PyMem_Calloc((size_t)cfg.n_layers, sizeof *xf_args);
        if (!xf || !xf_args) {
            PyErr_NoMemory();
            goto done;
        }
        n_xf_args = cfg.n_layers;
        for (int i = 0; i < cfg.n_layers; i++)
            if (transforms_arg(&xf_args[i], PyTuple_GET_ITEM(a[16], i), &xf[i])) goto done;
        cfg.transforms = xf;
    }
    if (a[10] != Py_None) {
        cfg.preset = PyUnicode_AsUTF8(a[10]);
        if (!cfg.preset) goto done;
    }
    if (a[11] != Py_None) {
        if (!PyTuple_Check(a[11]) || PyTuple_GET_SIZE(a[11]) != cfg.n_layers) {
            PyErr_Format(invalid_argument_class(), "argument 'layers': expected a tuple of n_layers = %d configs",
                         cfg.n_layers);
            goto done;
        }
        /* one tensor-slot set per layer: every layer may pass its own tables */
        layers = PyMem_Calloc((size_t)cfg.n_layers, sizeof *layers);
        layer_args = PyMem_Calloc((size_t)cfg.n_layers, sizeof *layer_args);
        if (!layers || !layer_args) {
            PyErr_NoMemory();
            goto done;
        }
        n_layer_args = cfg.n_layers;
        for (int i = 0; i < cfg.n_layers; i++)
            if (layer_config_arg(&layer_args[i], PyTuple_GET_ITEM(a[11], i), &layers[i])) goto done;
        cfg.layers = layers;
    }
    if (a[12] != Py_None) {
        PyObject *f = PySequence_Fast(a[12], "argument 'f16_layers': expected a sequence of ints");
        if (!f) goto done;
        Py_ssize_t len = PySequence_Fast_GET_SIZE(f);
        f16 = PyMem_Calloc((size_t)(len ? len : 1), sizeof *f16);
        if (!f16) {
            Py_DECREF(f);
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < len; i++)
            if (int_arg(PySequence_Fast_GET_ITEM(f, i), "f16_layers", &f16[i])) {
                Py_DECREF(f);
                goto done;
            }
        Py_DECREF(f);
        cfg.f16_layers = f16;
        cfg.n_f16_layers = (int)len;
    }
    if (a[17] != Py_None) {
        if (ints_arg(a[17], "sliding_windows", cfg.n_layers, &sliding)) goto done;
        cfg.sliding_windows = sliding;
    }
    if (a[18] != Py_None) {
        const char *buf, *path;
        size_t size;
        if (source_arg(a[18], "profile", &buf, &size, &path)) goto done;
        const vq_status ps = path ? vq_profile_load(ctx, path, &profile) : vq_profile_load_buffer(ctx, buf, size, &profile);
        if (ps != VQ_OK) {
            raise_status(ps, vq_ctx_last_error(ctx));
            goto done;
        }
        cfg.profile = profile;
    }
    vq_cache *cache = NULL;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = vq_cache_create(ctx, &cfg, &cache);
    Py_END_ALLOW_THREADS
    if (s != VQ_OK) {
        raise_status(s, vq_ctx_last_error(ctx));
        goto done;
    }
    result = new_cache_capsule(cache, a[0]);
done:
    for (int i = 0; i < n_layer_args; i++) args_release(&layer_args[i]);
    for (int i = 0; i < n_xf_args; i++) args_release(&xf_args[i]);
    PyMem_Free(xf_args);
    PyMem_Free(xf);
    PyMem_Free(layer_args);
    PyMem_Free(layers);
    PyMem_Free(f16);
    PyMem_Free(sliding);
    vq_profile_free(profile);
    return result;
}

/* profile_bytes(ctx, n_layers, n_kv_heads, head_dim, layers (tuple of layer tuples, tables None),
 *               sliding_windows or None, residual_tokens, window, window_bits) -> the profile file's bytes */
static PyObject *py_profile_bytes(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 9) return PyErr_Format(PyExc_TypeError, "profile_bytes takes 9 arguments (%zd given)", n);
    vq_ctx *ctx;
    if (ctx_arg(a[0], &ctx)) return NULL;
    vq_profile_config pc = {0};
    int window;
    if (int_arg(a[1], "n_layers", &pc.n_layers) || int_arg(a[2], "n_kv_heads", &pc.n_kv_heads) ||
        int_arg(a[3], "head_dim", &pc.head_dim) || int_arg(a[6], "residual_tokens", &pc.residual_tokens) ||
        int_arg(a[7], "window", &window) || int_arg(a[8], "window_bits", &pc.window_bits))
        return NULL;
    pc.window = (vq_cache_window)window;
    if (!PyTuple_Check(a[4]) || PyTuple_GET_SIZE(a[4]) != pc.n_layers || pc.n_layers < 1)
        return PyErr_Format(invalid_argument_class(), "argument 'layers': expected a tuple of n_layers = %d configs",
                            pc.n_layers);
    vq_cache_layer_config *layers = PyMem_Calloc((size_t)pc.n_layers, sizeof *layers);
    args *la = PyMem_Calloc((size_t)pc.n_layers, sizeof *la);
    int *sliding = NULL, n_la = 0;
    vq_profile *p = NULL;
    PyObject *result = NULL;
    if (!layers || !la) {
        PyErr_NoMemory();
        goto done;
    }
    for (n_la = 0; n_la < pc.n_layers; n_la++)
        if (layer_config_arg(&la[n_la], PyTuple_GET_ITEM(a[4], n_la), &layers[n_la])) goto done;
    pc.layers = layers;
    if (a[5] != Py_None) {
        if (ints_arg(a[5], "sliding_windows", pc.n_layers, &sliding)) goto done;
        pc.sliding_windows = sliding;
    }
    size_t size = 0;
    vq_status s = vq_profile_create(ctx, &pc, &p);
    if (s == VQ_OK) s = vq_profile_save_buffer(ctx, p, NULL, 0, &size);
    if (s == VQ_OK && (result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size)) != NULL)
        s = vq_profile_save_buffer(ctx, p, PyBytes_AS_STRING(result), size, &size);
    if (s != VQ_OK) {
        Py_CLEAR(result);
        raise_status(s, vq_ctx_last_error(ctx));
    }
done:
    for (int i = 0; i < n_la; i++) args_release(&la[i]);
    PyMem_Free(la);
    PyMem_Free(layers);
    PyMem_Free(sliding);
    vq_profile_free(p);
    return result;
}

/* cache_layer_config(cache, layer) -> layer tuple (tables None) */
static PyObject *py_cache_layer_config(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int layer;
    if (n != 2) return PyErr_Format(PyExc_TypeError, "cache_layer_config(cache, layer)");
    if (cache_arg(a[0], &c) || int_arg(a[1], "layer", &layer)) return NULL;
    vq_cache_layer_config lc;
    vq_status s = vq_cache_get_layer_config(c, layer, &lc);
    if (s != VQ_OK) return cache_error(c, s);
    return layer_config_tuple(&lc);
}

/* cache_config(cache) -> (n_layers, n_kv_heads, n_q_heads, head_dim, page_size,
 * capacity_pages, grow_pages, max_sequences, residual_tokens, window, window_bits, sink_tokens) */
static PyObject *py_cache_config(PyObject *self, PyObject *o)
{
    vq_cache *c;
    if (cache_arg(o, &c)) return NULL;
    vq_cache_config cfg;
    vq_status s = vq_cache_get_config(c, &cfg);
    if (s != VQ_OK) return cache_error(c, s);
    return Py_BuildValue("(iiiiiLLiiiii)", cfg.n_layers, cfg.n_kv_heads, cfg.n_q_heads, cfg.head_dim, cfg.page_size,
                         (long long)cfg.capacity_pages, (long long)cfg.grow_pages, cfg.max_sequences,
                         cfg.residual_tokens, (int)cfg.window, cfg.window_bits, cfg.sink_tokens);
}

static PyObject *py_cache_seq_add(PyObject *self, PyObject *o)
{
    vq_cache *c;
    int64_t id;
    if (cache_arg(o, &c)) return NULL;
    vq_status s = vq_cache_seq_add(c, &id);
    if (s != VQ_OK) return cache_error(c, s);
    return PyLong_FromLongLong(id);
}

/* cache_seq_remove(cache, id) */
static PyObject *py_cache_seq_remove(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int64_t id;
    if (n != 2) return PyErr_Format(PyExc_TypeError, "cache_seq_remove(cache, seq_id)");
    if (cache_arg(a[0], &c) || i64_arg(a[1], "seq_id", &id)) return NULL;
    vq_status s = vq_cache_seq_remove(c, id);
    if (s != VQ_OK) return cache_error(c, s);
    Py_RETURN_NONE;
}

/* cache_seq_truncate(cache, id, n_tokens) */
static PyObject *py_cache_seq_truncate(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int64_t id, tokens;
    if (n != 3) return PyErr_Format(PyExc_TypeError, "cache_seq_truncate(cache, seq_id, n_tokens)");
    if (cache_arg(a[0], &c) || i64_arg(a[1], "seq_id", &id) || i64_arg(a[2], "n_tokens", &tokens)) return NULL;
    vq_status s = vq_cache_seq_truncate(c, id, tokens);
    if (s != VQ_OK) return cache_error(c, s);
    Py_RETURN_NONE;
}

/* cache_seq_fork(cache, id) -> new id */
static PyObject *py_cache_seq_fork(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int64_t id, dst;
    if (n != 2) return PyErr_Format(PyExc_TypeError, "cache_seq_fork(cache, seq_id)");
    if (cache_arg(a[0], &c) || i64_arg(a[1], "seq_id", &id)) return NULL;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = vq_cache_seq_fork(c, id, &dst);
    Py_END_ALLOW_THREADS
    if (s != VQ_OK) return cache_error(c, s);
    return PyLong_FromLongLong(dst);
}

/* cache_seq_length(cache, id, layer) -> int (-1 unknown) */
static PyObject *py_cache_seq_length(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int64_t id;
    int layer;
    if (n != 3) return PyErr_Format(PyExc_TypeError, "cache_seq_length(cache, seq_id, layer)");
    if (cache_arg(a[0], &c) || i64_arg(a[1], "seq_id", &id) || int_arg(a[2], "layer", &layer)) return NULL;
    return PyLong_FromLongLong(vq_cache_seq_length(c, id, layer));
}

/* The (cache, layer, seq_ids) that start append's and attend's arguments;
 * ids is buf (64 entries) or a PyMem block the caller frees. */
static int cache_layer_seqs(PyObject *const *a, vq_cache **c, int *layer, int64_t *buf, int64_t **ids, int *n_seq)
{
    return cache_arg(a[0], c) || int_arg(a[1], "layer", layer) || seq_ids_arg(a[2], buf, 64, ids, n_seq) ? -1 : 0;
}

/* cache_append(cache, layer, seq_ids, k, v, positions or None) */
static PyObject *py_cache_append(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int layer, n_seq;
    int64_t buf[64], *ids;
    if (n != 6) return PyErr_Format(PyExc_TypeError, "cache_append takes 6 arguments (%zd given)", n);
    if (cache_layer_seqs(a, &c, &layer, buf, &ids, &n_seq)) return NULL;
    args A;
    A.n = 0; /* not the whole struct: the slots are written as used */
    PyObject *r = NULL;
    DLTensor *k, *v, *pos;
    if (tensor_arg(&A, a[3], "k", 0, &k) || tensor_arg(&A, a[4], "v", 0, &v) ||
        tensor_arg(&A, a[5], "positions", 1, &pos))
        goto done;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = vq_cache_append(c, layer, n_seq, ids, k, v, pos);
    Py_END_ALLOW_THREADS
    r = s == VQ_OK ? Py_NewRef(Py_None) : cache_error(c, s);
done:
    args_release(&A);
    if (ids != buf) PyMem_Free(ids);
    return r;
}

/* cache_attend(cache, layer, seq_ids, q, out, scale, causal, lse_out or None) */
static PyObject *py_cache_attend(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int layer, n_seq;
    int64_t buf[64], *ids;
    if (n != 9) return PyErr_Format(PyExc_TypeError, "cache_attend takes 9 arguments (%zd given)", n);
    if (cache_layer_seqs(a, &c, &layer, buf, &ids, &n_seq)) return NULL;
    args A;
    A.n = 0; /* not the whole struct: the slots are written as used */
    PyObject *r = NULL;
    DLTensor *q, *out, *lse;
    vq_cache_attend_opts o = {0};
    int arith; /* the two fields' enums share their values: 0 AUTO, 1 F32, 2 INT8 */
    if (tensor_arg(&A, a[3], "q", 0, &q) || tensor_arg(&A, a[4], "out", 0, &out) ||
        float_arg(a[5], "scale", &o.scale) || bool_arg(a[6], "causal", &o.causal) ||
        tensor_arg(&A, a[7], "lse_out", 1, &lse) || int_arg(a[8], "kivi_arith", &arith))
        goto done;
    o.lse_out = lse;
    o.key_scores = (vq_key_scores)arith;
    o.value_accum = (vq_value_accum)arith;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = vq_cache_attend(c, layer, n_seq, ids, q, out, &o);
    Py_END_ALLOW_THREADS
    r = s == VQ_OK ? Py_NewRef(Py_None) : cache_error(c, s);
done:
    args_release(&A);
    if (ids != buf) PyMem_Free(ids);
    return r;
}

/* cache_fit_transforms(cache, layer, seq_ids, k, v, q or None) */
static PyObject *py_cache_fit_transforms(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int layer, n_seq;
    int64_t buf[64], *ids;
    if (n != 6) return PyErr_Format(PyExc_TypeError, "cache_fit_transforms takes 6 arguments (%zd given)", n);
    if (cache_layer_seqs(a, &c, &layer, buf, &ids, &n_seq)) return NULL;
    args A;
    A.n = 0;
    PyObject *r = NULL;
    DLTensor *k, *v, *q;
    if (tensor_arg(&A, a[3], "k", 0, &k) || tensor_arg(&A, a[4], "v", 0, &v) || tensor_arg(&A, a[5], "q", 1, &q))
        goto done;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = vq_cache_fit_transforms(c, layer, n_seq, ids, k, v, q);
    Py_END_ALLOW_THREADS
    r = s == VQ_OK ? Py_NewRef(Py_None) : cache_error(c, s);
done:
    args_release(&A);
    if (ids != buf) PyMem_Free(ids);
    return r;
}

/* cache_get_transforms(cache, seq_id, layer, key_mean, value_mean, key_scale (arrays or None))
 * -> (center_keys, center_values, smooth); the tables are written into the arrays */
static PyObject *py_cache_get_transforms(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int64_t id;
    int layer;
    if (n != 6) return PyErr_Format(PyExc_TypeError, "cache_get_transforms takes 6 arguments (%zd given)", n);
    if (cache_arg(a[0], &c) || i64_arg(a[1], "seq_id", &id) || int_arg(a[2], "layer", &layer)) return NULL;
    args A;
    A.n = 0;
    PyObject *r = NULL;
    DLTensor *km, *vm, *ks;
    if (tensor_arg(&A, a[3], "key_mean", 1, &km) || tensor_arg(&A, a[4], "value_mean", 1, &vm) ||
        tensor_arg(&A, a[5], "key_scale", 1, &ks))
        goto done;
    vq_cache_transforms xf;
    const vq_status s = vq_cache_get_transforms(c, id, layer, &xf, km, vm, ks);
    r = s == VQ_OK ? Py_BuildValue("(OOO)", xf.center_keys ? Py_True : Py_False,
                                   xf.center_values ? Py_True : Py_False, xf.smooth ? Py_True : Py_False)
                   : cache_error(c, s);
done:
    args_release(&A);
    return r;
}

/* cache_memory(cache) -> dict of vq_cache_memory_report */
static PyObject *py_cache_memory(PyObject *self, PyObject *o)
{
    vq_cache *c;
    if (cache_arg(o, &c)) return NULL;
    vq_cache_memory_report m;
    vq_status s = vq_cache_memory(c, &m);
    if (s != VQ_OK) return cache_error(c, s);
    return Py_BuildValue("{sLsLsLsLsLsLsLsLsdsdsd}", "code_bytes", (long long)m.code_bytes, "param_bytes",
                         (long long)m.param_bytes, "residual_bytes", (long long)m.residual_bytes, "table_bytes",
                         (long long)m.table_bytes, "slack_bytes", (long long)m.slack_bytes, "total_bytes",
                         (long long)m.total_bytes, "tokens", (long long)m.tokens, "sequences",
                         (long long)m.sequences, "bits_per_element", m.bits_per_element, "key_bits_per_element",
                         m.key_bits_per_element, "value_bits_per_element", m.value_bits_per_element);
}

/* ---- persistence ---- */

static PyObject *new_cache_capsule(vq_cache *cache, PyObject *ctx_capsule)
{
    PyObject *r = PyCapsule_New(cache, CACHE_CAPSULE, cache_capsule_free);
    if (!r) {
        vq_cache_free(cache);
        return NULL;
    }
    if (PyCapsule_SetContext(r, Py_NewRef(ctx_capsule)) < 0) {
        Py_DECREF(ctx_capsule);
        Py_CLEAR(r);
    }
    return r;
}

/* cache_save(cache, seq_id (-1 = all), path) */
static PyObject *py_cache_save(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int64_t id;
    if (n != 3 || !PyUnicode_Check(a[2])) return PyErr_Format(PyExc_TypeError, "cache_save(cache, seq_id, path)");
    if (cache_arg(a[0], &c) || i64_arg(a[1], "seq_id", &id)) return NULL;
    const char *path = PyUnicode_AsUTF8(a[2]);
    if (!path) return NULL;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = vq_cache_save(c, id, path);
    Py_END_ALLOW_THREADS
    if (s != VQ_OK) return cache_error(c, s);
    Py_RETURN_NONE;
}

/* cache_save_bytes(cache, seq_id) -> bytes */
static PyObject *py_cache_save_bytes(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int64_t id;
    size_t size = 0;
    if (n != 2) return PyErr_Format(PyExc_TypeError, "cache_save_bytes(cache, seq_id)");
    if (cache_arg(a[0], &c) || i64_arg(a[1], "seq_id", &id)) return NULL;
    vq_status s = vq_cache_save_buffer(c, id, NULL, 0, &size);
    if (s != VQ_OK && size == 0) return cache_error(c, s);
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!b) return NULL;
    Py_BEGIN_ALLOW_THREADS
    s = vq_cache_save_buffer(c, id, PyBytes_AS_STRING(b), size, &size);
    Py_END_ALLOW_THREADS
    if (s != VQ_OK) {
        Py_DECREF(b);
        return cache_error(c, s);
    }
    return b;
}

/* A load source: bytes (*buf, *size) or a path (*path); -1 with TypeError else. */
static int source_arg(PyObject *o, const char *fn, const char **buf, size_t *size, const char **path)
{
    *buf = *path = NULL;
    *size = 0;
    if (PyBytes_Check(o)) {
        *buf = PyBytes_AS_STRING(o);
        *size = (size_t)PyBytes_GET_SIZE(o);
        return 0;
    }
    *path = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (*path) return 0;
    PyErr_Format(PyExc_TypeError, "%s: expected a path (str) or bytes", fn);
    return -1;
}

/* cache_load(ctx, path or bytes) -> cache capsule */
static PyObject *py_cache_load(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_ctx *ctx;
    const char *buf, *path;
    size_t size;
    if (n != 2) return PyErr_Format(PyExc_TypeError, "cache_load(ctx, path_or_bytes)");
    if (ctx_arg(a[0], &ctx) || source_arg(a[1], "cache_load", &buf, &size, &path)) return NULL;
    vq_cache *cache = NULL;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = path ? vq_cache_load(ctx, path, &cache) : vq_cache_load_buffer(ctx, buf, size, &cache);
    Py_END_ALLOW_THREADS
    if (s != VQ_OK) return raise_status(s, vq_ctx_last_error(ctx));
    return new_cache_capsule(cache, a[0]);
}

/* cache_seq_load(cache, path or bytes) -> new seq id */
static PyObject *py_cache_seq_load(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    vq_cache *c;
    int64_t id;
    const char *buf, *path;
    size_t size;
    if (n != 2) return PyErr_Format(PyExc_TypeError, "cache_seq_load(cache, path_or_bytes)");
    if (cache_arg(a[0], &c) || source_arg(a[1], "cache_seq_load", &buf, &size, &path)) return NULL;
    vq_status s;
    Py_BEGIN_ALLOW_THREADS
    s = path ? vq_cache_seq_load(c, path, &id) : vq_cache_seq_load_buffer(c, buf, size, &id);
    Py_END_ALLOW_THREADS
    if (s != VQ_OK) return cache_error(c, s);
    return PyLong_FromLongLong(id);
}

#define FCW(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, NULL}
PyMethodDef vq_cache_methods[] = {
    {"cache_presets", py_cache_presets, METH_NOARGS, NULL},
    FCW(cache_preset_layer_config),
    FCW(cache_create),
    FCW(profile_bytes),
    FCW(cache_layer_config),
    {"cache_config", py_cache_config, METH_O, NULL},
    {"cache_seq_add", py_cache_seq_add, METH_O, NULL},
    FCW(cache_seq_remove),
    FCW(cache_seq_truncate),
    FCW(cache_seq_fork),
    FCW(cache_seq_length),
    FCW(cache_append),
    FCW(cache_attend),
    FCW(cache_fit_transforms),
    FCW(cache_get_transforms),
    {"cache_memory", py_cache_memory, METH_O, NULL},
    FCW(cache_save), FCW(cache_save_bytes), FCW(cache_load), FCW(cache_seq_load),
    {NULL, NULL, 0, NULL}};
