/*
 * vq_module.h — what the files of the extension module share: the argument
 * converters (DLPack capsule -> DLTensor, Python int/float/bool -> C), the
 * error raiser, and the wrapper macros. See vq_module.c for the rules.
 */
#ifndef VQ_MODULE_H
#define VQ_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>

#include <veloxquant.h>

#define VQ_N_STATUS 8   /* vq_status values VQ_OK .. VQ_ERR_CORRUPT_DATA */
#define MAX_TENSORS 24  /* tensor arguments of one call at most */

/* The tensors of one call: each slot's DLTensor is a copy of the producer's,
 * and caps[i] the capsule keeping its memory alive (NULL for a capsule that
 * the caller passed in itself, which stays the caller's). */
typedef struct args {
    DLTensor t[MAX_TENSORS];
    PyObject *caps[MAX_TENSORS];
    int n;
} args;

void args_release(args *a);
/* o (capsule, object with __dlpack__, or None when optional) into the next
 * slot of a; *out NULL for None. 0, or -1 with an exception set. */
int tensor_arg(args *a, PyObject *o, const char *name, int optional, DLTensor **out);
int int_arg(PyObject *o, const char *name, int *out);
int i64_arg(PyObject *o, const char *name, int64_t *out);
int u64_arg(PyObject *o, const char *name, uint64_t *out);
int float_arg(PyObject *o, const char *name, float *out);
int bool_arg(PyObject *o, const char *name, bool *out);

extern const char CTX_CAPSULE[];
int ctx_arg(PyObject *o, vq_ctx **out);

/* The exception class of VQ_ERR_INVALID_ARGUMENT (ValueError before the
 * Python layer registered its classes). */
PyObject *invalid_argument_class(void);
/* Raises the class registered for s with msg (the C message); returns NULL. */
PyObject *raise_status(vq_status s, const char *msg);

/* The vq_cache_* wrappers (vq_cache_wrap.c). */
extern PyMethodDef vq_cache_methods[];
/* The tuner (vq_tune_wrap.c). */
extern PyMethodDef vq_tune_methods[];

/* Each wrapper: check the count, convert every argument (T tensor, TO optional
 * tensor, I int, F float, B bool), call with the GIL released, then DONE. */
#define BEGIN(nargs, fname)                                                                        \
    vq_ctx *ctx;                                                                                   \
    args A;                                                                                        \
    A.n = 0;                                                                                       \
    vq_status st;                                                                                  \
    if (n != (nargs)) return PyErr_Format(PyExc_TypeError, fname " takes %d arguments (%zd given)", \
                                          (int)(nargs), n);                                        \
    if (ctx_arg(a[0], &ctx)) return NULL
#define T(i, name, var)  DLTensor *var; if (tensor_arg(&A, a[i], name, 0, &var)) goto fail
#define TO(i, name, var) DLTensor *var; if (tensor_arg(&A, a[i], name, 1, &var)) goto fail
#define I(i, name, var)  int var; if (int_arg(a[i], name, &var)) goto fail
#define I64(i, name, var) int64_t var; if (i64_arg(a[i], name, &var)) goto fail
#define U64(i, name, var) uint64_t var; if (u64_arg(a[i], name, &var)) goto fail
#define F(i, name, var)  float var = 0; if (float_arg(a[i], name, &var)) goto fail
#define B(i, name, var)  bool var; if (bool_arg(a[i], name, &var)) goto fail
#define CALL(expr) Py_BEGIN_ALLOW_THREADS st = (expr); Py_END_ALLOW_THREADS
#define DONE                                                                                       \
    args_release(&A);                                                                              \
    if (st != VQ_OK) return raise_status(st, vq_ctx_last_error(ctx));                              \
    Py_RETURN_NONE;                                                                                \
fail:                                                                                              \
    args_release(&A);                                                                              \
    return NULL
#define WRAP(name) static PyObject *py_##name(PyObject *self, PyObject *const *a, Py_ssize_t n)


#endif /* VQ_MODULE_H */
