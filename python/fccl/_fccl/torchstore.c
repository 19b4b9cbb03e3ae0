/*
 * A torch.distributed Store as an fccl store: the fccl_store_ops_t table
 * (fccl/store.h) over the Python object, so fccl_init() bootstraps over
 * the store torch hands a backend (TCPStore from env:// or tcp://,
 * FileStore, HashStore, the PrefixStore of each group).
 *
 * torch 1.13's Store has set, get, add, compare_set, wait, num_keys and
 * delete_key; the library builds check, multi_get and multi_set from
 * them.  Every entry takes the GIL (the library calls them from the
 * thread that runs fccl_init with the GIL released, or from any other)
 * and calls the object's method; torch's methods release the GIL while
 * they wait on the network.
 *
 * Timeouts: torch's get has none of its own (it uses the store's), so a
 * get with a timeout is a wait for the key with that timeout, then the
 * get.  A torch timeout of 0 can mean "no timeout", so 0 becomes 1 ms.
 * A wait that raised is a timeout when the key is still missing
 * afterwards (asked by a wait of 1 ms); otherwise the store failed.
 *
 * Lifetime: the table's context holds a reference to the object, dropped
 * by the table's close (when the library and every Python handle are
 * done with the store).  After the interpreter began finalizing, entries
 * fail with FCCL_ERR_CLOSED without touching Python.
 */
#include "fcclpy.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject *obj;       /* the torch Store (strong reference) */
    PyObject *timedelta; /* datetime.timedelta */
} tstore;

/* ---- helpers (all with the GIL held) ---- */

/* Turn the pending Python exception into an fccl error with its text. */
static int py_fail(int rc, const char *call, const char *key)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *s = v ? PyObject_Str(v) : NULL;
    const char *txt = s ? PyUnicode_AsUTF8(s) : NULL;
    char msg[600];
    snprintf(msg, sizeof msg, "torch store %s(%s): %s", call,
             key ? key : "", txt ? txt : "failed");
    Py_XDECREF(s);
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    PyErr_Clear();
    return fccl_set_error(rc, msg);
}

static PyObject *td_ms(tstore *ts, int64_t ms)
{
    if (ms <= 0)
        ms = 1; /* 0 may mean "no timeout" to torch */
    return PyObject_CallFunction(ts->timedelta, "iiiL", 0, 0, 0,
                                 (long long)ms);
}

/* store.wait([key], ms): 0, or -1 with the exception pending. */
static int wait_key(tstore *ts, const char *key, int64_t ms)
{
    PyObject *td = td_ms(ts, ms);
    PyObject *keys = td ? Py_BuildValue("[s]", key) : NULL;
    PyObject *r = keys ? PyObject_CallMethod(ts->obj, "wait", "OO", keys, td)
                       : NULL;
    Py_XDECREF(td);
    Py_XDECREF(keys);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* A wait raised: a timeout if the key is still missing, else an error. */
static int wait_failed(tstore *ts, const char *call, const char *key)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    int missing = wait_key(ts, key, 1) < 0;
    PyErr_Clear();
    PyErr_Restore(t, v, tb);
    return py_fail(missing ? FCCL_ERR_TIMEOUT : FCCL_ERR_IO, call, key);
}

/* Python 3.13 made the call public and removed the underscored one. */
static int finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing() != 0;
#else
    return _Py_IsFinalizing() != 0;
#endif
}

#define ENTER(ts)                                                              \
    if (finalizing())                                                          \
        return fccl_set_error(FCCL_ERR_CLOSED, "torch store: the Python "      \
                              "interpreter is shutting down");                 \
    PyGILState_STATE gil_ = PyGILState_Ensure();                               \
    tstore *ts = ctx
#define LEAVE(rc)                                                              \
    do {                                                                       \
        int rc_ = (rc);                                                        \
        PyGILState_Release(gil_);                                              \
        return rc_;                                                            \
    } while (0)

/* A malloc'd copy of a bytes result with a NUL after it, as fccl's get
 * hands out (the library frees it with free()). */
static int take_bytes(PyObject *b, void **val, size_t *len, const char *call,
                      const char *key)
{
    char *p;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(b, &p, &n) < 0)
        return py_fail(FCCL_ERR_PROTOCOL, call, key);
    char *m = malloc((size_t)n + 1);
    if (!m)
        return fccl_set_error(FCCL_ERR_NOMEM, "torch store: no memory");
    memcpy(m, p, (size_t)n);
    m[n] = '\0';
    *val = m;
    *len = (size_t)n;
    return FCCL_OK;
}

/* ---- the entries ---- */

static int e_set(void *ctx, const char *key, const void *val, size_t len)
{
    ENTER(ts);
    PyObject *r = PyObject_CallMethod(ts->obj, "set", "sy#", key, val,
                                      (Py_ssize_t)len);
    int rc = r ? FCCL_OK : py_fail(FCCL_ERR_IO, "set", key);
    Py_XDECREF(r);
    LEAVE(rc);
}

static int e_get(void *ctx, const char *key, void **val, size_t *len,
                 int64_t timeout_ms)
{
    ENTER(ts);
    if (wait_key(ts, key, timeout_ms) < 0)
        LEAVE(wait_failed(ts, "get", key));
    PyObject *r = PyObject_CallMethod(ts->obj, "get", "s", key);
    int rc = r ? take_bytes(r, val, len, "get", key)
               : py_fail(FCCL_ERR_IO, "get", key);
    Py_XDECREF(r);
    LEAVE(rc);
}

/* A method's integer result r (a new reference, NULL when the call
 * raised) into *out; r is released. */
static int int_result(PyObject *r, int64_t *out, const char *op,
                      const char *key)
{
    int rc = FCCL_OK;
    if (!r)
        rc = py_fail(FCCL_ERR_IO, op, key);
    else if ((*out = PyLong_AsLongLong(r)) == -1 && PyErr_Occurred())
        rc = py_fail(FCCL_ERR_PROTOCOL, op, key);
    Py_XDECREF(r);
    return rc;
}

static int e_add(void *ctx, const char *key, int64_t delta, int64_t *out)
{
    ENTER(ts);
    PyObject *r = PyObject_CallMethod(ts->obj, "add", "sL", key,
                                      (long long)delta);
    LEAVE(int_result(r, out, "add", key));
}

static int e_compare_set(void *ctx, const char *key, const void *expected,
                         size_t elen, const void *desired, size_t dlen,
                         void **cur, size_t *curlen)
{
    ENTER(ts);
    PyObject *r = PyObject_CallMethod(ts->obj, "compare_set", "sy#y#", key,
                                      expected, (Py_ssize_t)elen, desired,
                                      (Py_ssize_t)dlen);
    int rc = r ? take_bytes(r, cur, curlen, "compare_set", key)
               : py_fail(FCCL_ERR_IO, "compare_set", key);
    Py_XDECREF(r);
    LEAVE(rc);
}

static int e_wait(void *ctx, const char *const *keys, size_t n,
                  int64_t timeout_ms)
{
    ENTER(ts);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *k = PyUnicode_FromString(keys[i]);
        if (!k) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, k);
    }
    PyObject *td = list ? td_ms(ts, timeout_ms) : NULL;
    PyObject *r = td ? PyObject_CallMethod(ts->obj, "wait", "OO", list, td)
                     : NULL;
    int rc = FCCL_OK;
    if (!r) {
        /* name the first key still missing */
        rc = FCCL_ERR_IO;
        for (size_t i = 0; list && td && i < n; i++) {
            PyObject *t, *v, *tb;
            PyErr_Fetch(&t, &v, &tb);
            int missing = wait_key(ts, keys[i], 1) < 0;
            PyErr_Clear();
            PyErr_Restore(t, v, tb);
            if (missing) {
                rc = py_fail(FCCL_ERR_TIMEOUT, "wait", keys[i]);
                break;
            }
        }
        if (PyErr_Occurred())
            rc = py_fail(rc, "wait", n ? keys[0] : "");
    }
    Py_XDECREF(list);
    Py_XDECREF(td);
    Py_XDECREF(r);
    LEAVE(rc);
}

static int e_delete_key(void *ctx, const char *key, int *deleted)
{
    ENTER(ts);
    PyObject *r = PyObject_CallMethod(ts->obj, "delete_key", "s", key);
    int rc = FCCL_OK;
    if (!r)
        rc = py_fail(FCCL_ERR_IO, "delete_key", key);
    else if (deleted)
        *deleted = PyObject_IsTrue(r) == 1;
    Py_XDECREF(r);
    LEAVE(rc);
}

static int e_num_keys(void *ctx, int64_t *n)
{
    ENTER(ts);
    PyObject *r = PyObject_CallMethod(ts->obj, "num_keys", NULL);
    LEAVE(int_result(r, n, "num_keys", NULL));
}

static void e_close(void *ctx)
{
    tstore *ts = ctx;
    if (!finalizing()) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_XDECREF(ts->obj);
        Py_XDECREF(ts->timedelta);
        PyGILState_Release(g);
    } /* else: leak the references; Python frees everything anyway */
    free(ts);
}

static const fccl_store_ops_t torch_ops = {
    .set = e_set,
    .get = e_get,
    .add = e_add,
    .compare_set = e_compare_set,
    .wait = e_wait,
    .delete_key = e_delete_key,
    .num_keys = e_num_keys,
    .close = e_close,
};

/* store_from_torch(store, name, timeout_ms) -> Store */
static PyObject *py_store_from_torch(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj;
    const char *name;
    long long timeout_ms;
    if (!PyArg_ParseTuple(args, "OsL", &obj, &name, &timeout_ms))
        return NULL;
    static const char *const need[] = {"set", "get", "add", "wait",
                                       "delete_key"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!PyObject_HasAttrString(obj, need[i])) {
            PyErr_Format(PyExc_TypeError, "store_from_torch: %s has no %s()",
                         Py_TYPE(obj)->tp_name, need[i]);
            return NULL;
        }
    PyObject *dt = PyImport_ImportModule("datetime");
    PyObject *td = dt ? PyObject_GetAttrString(dt, "timedelta") : NULL;
    Py_XDECREF(dt);
    tstore *ts = td ? calloc(1, sizeof *ts) : NULL;
    if (!ts) {
        Py_XDECREF(td);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    ts->obj = Py_NewRef(obj);
    ts->timedelta = td;
    fccl_store_t *s;
    int rc = fccl_store_from_ops(&torch_ops, sizeof torch_ops, ts, name,
                                 timeout_ms, &s);
    if (rc < 0) {
        Py_DECREF(ts->obj);
        Py_DECREF(ts->timedelta);
        free(ts);
        return fpy_raise(rc, "store_from_torch");
    }
    return fpy_store_wrap(s);
}

PyMethodDef fpy_torchstore_methods[] = {
    {"store_from_torch", py_store_from_torch, METH_VARARGS,
     "store_from_torch(store, name, timeout_ms) -> Store: a torch "
     "Store as an fccl store (fccl_store_from_ops)."},
    {NULL, NULL, 0, NULL},
};
