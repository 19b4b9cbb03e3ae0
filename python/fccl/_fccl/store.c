/*
 * Store: the TCPStore client of fccl/store.h as a Python type, and (when
 * the library has fccl/server.h) Server, the embeddable store server.
 *
 * Every call releases the GIL (one round trip or more).  Calls that wait
 * for keys (get, wait, multi_get, a blocking queue_pop) wait in slices of
 * 50 ms and check for signals in between, so Ctrl-C ends them at once;
 * their deadline is the call's timeout (the store's default when -1), and
 * running out of it raises fccl.TimeoutError naming the keys.
 * fccl.TCPStore (fccl/store.py) adds the seed's argument checks.
 */
#include "fcclpy.h"

#include <string.h>
#include <time.h>

#define SLICE_MS 50

typedef struct {
    PyObject_HEAD
    fccl_store_t *s;
} fpy_store;

static PyTypeObject StoreType;

fccl_store_t *fpy_store_handle(PyObject *obj)
{
    PyObject *inner = NULL;
    if (!PyObject_TypeCheck(obj, &StoreType)) {
        /* fccl.TCPStore keeps its Store in `instance` */
        inner = PyObject_GetAttrString(obj, "instance");
        if (!inner || !PyObject_TypeCheck(inner, &StoreType)) {
            Py_XDECREF(inner);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "store must be a fccl.TCPStore, not "
                         "%s", Py_TYPE(obj)->tp_name);
            return NULL;
        }
        obj = inner;
    }
    fccl_store_t *s = ((fpy_store *)obj)->s;
    Py_XDECREF(inner);
    if (!s)
        PyErr_SetString(PyExc_ValueError, "the store is closed");
    return s;
}

PyObject *fpy_store_wrap(fccl_store_t *s)
{
    fpy_store *o = PyObject_New(fpy_store, &StoreType);
    if (!o) {
        fccl_store_close(s);
        return NULL;
    }
    o->s = s;
    return (PyObject *)o;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static fccl_store_t *live(fpy_store *self)
{
    if (fpy_check_usable(0) < 0)
        return NULL;
    if (!self->s)
        PyErr_SetString(PyExc_ValueError, "the store is closed");
    return self->s;
}

/* Bytes of a str (UTF-8) or a bytes-like value; *keep owns them. */
static int value_arg(PyObject *v, const char **p, Py_ssize_t *n,
                     Py_buffer *view, const char *fn)
{
    view->obj = NULL;
    if (PyUnicode_Check(v)) {
        *p = PyUnicode_AsUTF8AndSize(v, n);
        return *p ? 0 : -1;
    }
    if (PyObject_GetBuffer(v, view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "For 'TCPStore.%s', the argument "
                     "'value' must be type of string or bytes, but got "
                     "'value' type : %s.", fn, Py_TYPE(v)->tp_name);
        return -1;
    }
    *p = view->buf;
    *n = view->len;
    return 0;
}

static int64_t timeout_of(fpy_store *self, long long t)
{
    return t < 0 ? fccl_store_timeout_ms(self->s) : t;
}

/* Keys of a list (or one str) into a C array valid while `list` lives. */
static const char **keys_arg(PyObject *v, size_t *n, PyObject **fast)
{
    if (PyUnicode_Check(v))
        v = *fast = PyTuple_Pack(1, v);
    else
        *fast = PySequence_Fast(v, "keys must be a list of str");
    if (!*fast)
        return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(*fast);
    const char **k = PyMem_Malloc((len + 1) * sizeof *k);
    if (!k) {
        Py_CLEAR(*fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(*fast, i);
        if (!PyUnicode_Check(x) || !(k[i] = PyUnicode_AsUTF8(x))) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "keys must be str, not %s",
                             Py_TYPE(x)->tp_name);
            PyMem_Free(k);
            Py_CLEAR(*fast);
            return NULL;
        }
    }
    *n = (size_t)len;
    return k;
}

/* Wait for keys until the deadline, in slices; 0 when all are there,
 * FCCL_ERR_TIMEOUT, another error, or -100 with a signal's exception. */
static int wait_sliced(fccl_store_t *s, const char *const *keys, size_t n,
                       int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        int64_t slice = left < SLICE_MS ? (left > 0 ? left : 0) : SLICE_MS;
        int rc;
        Py_BEGIN_ALLOW_THREADS rc = fccl_store_wait(s, keys, n, slice);
        Py_END_ALLOW_THREADS
        if (rc != FCCL_ERR_TIMEOUT || now_ms() >= deadline)
            return rc;
        if (PyErr_CheckSignals() < 0)
            return -100;
    }
}

static PyObject *timeout_error(const char *fn, const char *const *keys,
                               size_t n, int64_t ms)
{
    PyObject *names = PyList_New(0);
    for (size_t i = 0; names && i < n && i < 8; i++) {
        PyObject *k = PyUnicode_FromString(keys[i]);
        if (!k || PyList_Append(names, k) < 0)
            Py_CLEAR(names);
        Py_XDECREF(k);
    }
    if (!names)
        return NULL;
    PyErr_Format(fpy_TimeoutError, "%s: timed out after %lld ms waiting for "
                 "%R", fn, (long long)ms, names);
    Py_DECREF(names);
    return NULL;
}

/* ---- the type ---- */

static int store_init(fpy_store *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"addr", "timeout_ms", "dialect", "raw_keys",
                             "tls", "tls_ca", "tls_cert", "tls_key",
                             "tls_server_name", "token_file", "reconnect",
                             NULL};
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    fccl_store_opts_env(&o, "TCPSTORE");
    const char *addr, *dialect = NULL, *ca = NULL, *cert = NULL, *key = NULL,
               *sni = NULL, *token = NULL;
    long long timeout = 0;
    int raw = 0, tls = 0, reconnect = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|Lzppzzzzzi", kwlist, &addr,
                                     &timeout, &dialect, &raw, &tls, &ca,
                                     &cert, &key, &sni, &token, &reconnect))
        return -1;
    if (fpy_check_usable(0) < 0)
        return -1;
    o.addr = addr;
    o.timeout_ms = timeout;
    if (!dialect)
        dialect = getenv("TCPSTORE_DIALECT");
    if (dialect && strcmp(dialect, "legacy") == 0)
        o.dialect = FCCL_DIALECT_LEGACY;
    else if (dialect && *dialect && strcmp(dialect, "modern") != 0) {
        PyErr_Format(PyExc_ValueError, "TCPStore: dialect must be 'modern' "
                     "or 'legacy', not %R", PyTuple_GET_ITEM(args, 0));
        return -1;
    }
    o.raw_keys = raw;
    o.tls = tls || o.tls;
    if (ca) o.tls_ca = ca;
    if (cert) o.tls_cert = cert;
    if (key) o.tls_key = key;
    if (sni) o.tls_server_name = sni;
    if (token) o.token_file = token;
    if (reconnect >= 0) o.reconnect = reconnect;
    fccl_store_t *s = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_connect(&o, &s);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        fpy_raise(rc, "TCPStore");
        return -1;
    }
    fccl_store_close(self->s);
    self->s = s;
    return 0;
}

static void store_dealloc(fpy_store *self)
{
    if (self->s && !fpy_forked)
        fccl_store_close(self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *st_close(fpy_store *self, PyObject *unused)
{
    (void)unused;
    if (self->s && !fpy_forked)
        fccl_store_close(self->s);
    self->s = NULL;
    Py_RETURN_NONE;
}

static PyObject *st_set(fpy_store *self, PyObject *args)
{
    const char *key, *v;
    PyObject *val;
    Py_ssize_t n;
    Py_buffer view;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "sO", &key, &val) ||
        value_arg(val, &v, &n, &view, "set") < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_set(s, key, v, (size_t)n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.set");
    Py_RETURN_NONE;
}

static PyObject *st_append(fpy_store *self, PyObject *args)
{
    const char *key, *v;
    PyObject *val;
    Py_ssize_t n;
    Py_buffer view;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "sO", &key, &val) ||
        value_arg(val, &v, &n, &view, "append") < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_append(s, key, v, (size_t)n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.append");
    Py_RETURN_NONE;
}

static PyObject *bytes_take(void *v, size_t n)
{
    PyObject *b = PyBytes_FromStringAndSize(v, (Py_ssize_t)n);
    free(v);
    return b;
}

static PyObject *st_get(fpy_store *self, PyObject *args)
{
    const char *key;
    long long t = -1;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "s|L", &key, &t))
        return NULL;
    int64_t ms = timeout_of(self, t), deadline = now_ms() + ms;
    void *v = NULL;
    size_t n = 0;
    int rc;
    int64_t first = ms < SLICE_MS ? ms : SLICE_MS;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_get(s, key, &v, &n, first);
    Py_END_ALLOW_THREADS
    if (rc == FCCL_ERR_TIMEOUT && now_ms() < deadline) {
        if (PyErr_CheckSignals() < 0)
            return NULL;
        const char *keys[1] = {key};
        rc = wait_sliced(s, keys, 1, deadline);
        if (rc == -100)
            return NULL;
        if (rc == FCCL_OK) {
            int64_t left = deadline - now_ms();
            Py_BEGIN_ALLOW_THREADS rc = fccl_store_get(s, key, &v, &n,
                                                       left > 0 ? left : 0);
            Py_END_ALLOW_THREADS
        }
    }
    if (rc == FCCL_ERR_TIMEOUT) {
        const char *keys[1] = {key};
        return timeout_error("TCPStore.get", keys, 1, ms);
    }
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.get");
    return bytes_take(v, n);
}

static PyObject *st_add(fpy_store *self, PyObject *args)
{
    const char *key;
    long long d;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "sL", &key, &d))
        return NULL;
    int64_t out = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_add(s, key, d, &out);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.add");
    return PyLong_FromLongLong(out);
}

static PyObject *st_compare_set(fpy_store *self, PyObject *args)
{
    const char *key, *e, *d;
    PyObject *eo, *dobj;
    Py_ssize_t en, dn;
    Py_buffer ev, dv;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "sOO", &key, &eo, &dobj))
        return NULL;
    if (value_arg(eo, &e, &en, &ev, "compare_set") < 0)
        return NULL;
    if (value_arg(dobj, &d, &dn, &dv, "compare_set") < 0) {
        PyBuffer_Release(&ev);
        return NULL;
    }
    void *cur = NULL;
    size_t curlen = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_compare_set(
        s, key, e, (size_t)en, d, (size_t)dn, &cur, &curlen);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ev);
    PyBuffer_Release(&dv);
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.compare_set");
    return bytes_take(cur, curlen);
}

static PyObject *st_check(fpy_store *self, PyObject *arg)
{
    fccl_store_t *s = live(self);
    PyObject *fast;
    size_t n;
    const char **keys = s ? keys_arg(arg, &n, &fast) : NULL;
    if (!keys)
        return NULL;
    int all = 0, rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_check(s, keys, n, &all);
    Py_END_ALLOW_THREADS
    PyMem_Free(keys);
    Py_DECREF(fast);
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.check");
    return PyBool_FromLong(all);
}

static PyObject *st_wait(fpy_store *self, PyObject *args)
{
    PyObject *ko, *fast;
    long long t = -1;
    size_t n;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "O|L", &ko, &t))
        return NULL;
    const char **keys = keys_arg(ko, &n, &fast);
    if (!keys)
        return NULL;
    int64_t ms = timeout_of(self, t);
    int rc = wait_sliced(s, keys, n, now_ms() + ms);
    PyObject *r = NULL;
    if (rc == FCCL_ERR_TIMEOUT)
        timeout_error("TCPStore.wait", keys, n, ms);
    else if (rc < 0 && rc != -100)
        fpy_raise(rc, "TCPStore.wait");
    else if (rc == 0)
        r = Py_NewRef(Py_None);
    PyMem_Free(keys);
    Py_DECREF(fast);
    return r;
}

static PyObject *st_delete_key(fpy_store *self, PyObject *args)
{
    const char *key;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "s", &key))
        return NULL;
    int del = 0, rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_delete(s, key, &del);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.delete_key");
    return PyBool_FromLong(del);
}

static PyObject *st_num_keys(fpy_store *self, PyObject *unused)
{
    (void)unused;
    fccl_store_t *s = live(self);
    if (!s)
        return NULL;
    int64_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_num_keys(s, &n);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.num_keys");
    return PyLong_FromLongLong(n);
}

static PyObject *st_multi_get(fpy_store *self, PyObject *args)
{
    PyObject *ko, *fast, *res = NULL;
    long long t = -1;
    size_t n;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "O|L", &ko, &t))
        return NULL;
    const char **keys = keys_arg(ko, &n, &fast);
    if (!keys)
        return NULL;
    void **vals = PyMem_Calloc(n + 1, sizeof *vals);
    size_t *lens = PyMem_Calloc(n + 1, sizeof *lens);
    int64_t ms = timeout_of(self, t), deadline = now_ms() + ms;
    int rc = vals && lens ? wait_sliced(s, keys, n, deadline) : FCCL_ERR_NOMEM;
    if (rc == FCCL_OK) {
        int64_t left = deadline - now_ms();
        Py_BEGIN_ALLOW_THREADS rc = fccl_store_multi_get(
            s, keys, n, vals, lens, left > 0 ? left : 0);
        Py_END_ALLOW_THREADS
    }
    if (rc == FCCL_ERR_TIMEOUT)
        timeout_error("TCPStore.multi_get", keys, n, ms);
    else if (rc < 0 && rc != -100)
        fpy_raise(rc, "TCPStore.multi_get");
    else if (rc == 0 && (res = PyList_New((Py_ssize_t)n))) {
        for (size_t i = 0; i < n; i++) {
            PyObject *b = bytes_take(vals[i], lens[i]);
            vals[i] = NULL;
            if (!b) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, b);
        }
    }
    for (size_t i = 0; vals && rc == 0 && i < n; i++)
        free(vals[i]);
    PyMem_Free(vals);
    PyMem_Free(lens);
    PyMem_Free(keys);
    Py_DECREF(fast);
    return res;
}

static PyObject *st_multi_set(fpy_store *self, PyObject *args)
{
    PyObject *ko, *vo, *kfast, *vfast = NULL, *res = NULL;
    size_t n;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "OO", &ko, &vo))
        return NULL;
    const char **keys = keys_arg(ko, &n, &kfast);
    if (!keys)
        return NULL;
    const void **vals = PyMem_Calloc(n + 1, sizeof *vals);
    size_t *lens = PyMem_Calloc(n + 1, sizeof *lens);
    Py_buffer *views = PyMem_Calloc(n + 1, sizeof *views);
    size_t got = 0;
    if (!vals || !lens || !views) {
        PyErr_NoMemory();
        goto out;
    }
    if (!(vfast = PySequence_Fast(vo, "values must be a list")))
        goto out;
    if ((size_t)PySequence_Fast_GET_SIZE(vfast) != n) {
        PyErr_SetString(PyExc_ValueError, "TCPStore.multi_set: as many "
                        "values as keys are needed");
        goto out;
    }
    for (; got < n; got++) {
        Py_ssize_t len;
        if (value_arg(PySequence_Fast_GET_ITEM(vfast, got),
                      (const char **)&vals[got], &len, &views[got],
                      "multi_set") < 0)
            goto out;
        lens[got] = (size_t)len;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_multi_set(s, keys, vals, lens, n);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        fpy_raise(rc, "TCPStore.multi_set");
    else
        res = Py_NewRef(Py_None);
out:
    for (size_t i = 0; views && i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(vals);
    PyMem_Free(lens);
    PyMem_Free(keys);
    Py_DECREF(kfast);
    Py_XDECREF(vfast);
    return res;
}

static PyObject *st_list_keys(fpy_store *self, PyObject *args)
{
    const char *prefix = "";
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "|s", &prefix))
        return NULL;
    char **keys = NULL;
    size_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_list_keys(s, prefix, &keys, &n);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.list_keys");
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *k = PyUnicode_DecodeUTF8(keys[i], strlen(keys[i]),
                                           "surrogateescape");
        if (!k) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, k);
    }
    fccl_store_free_keys(keys, n);
    return l;
}

static PyObject *st_queue_push(fpy_store *self, PyObject *args)
{
    const char *key, *v;
    PyObject *val;
    Py_ssize_t n;
    Py_buffer view;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "sO", &key, &val) ||
        value_arg(val, &v, &n, &view, "queue_push") < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_queue_push(s, key, v, (size_t)n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.queue_push");
    Py_RETURN_NONE;
}

/* queue_pop(key, block=True, timeout_ms=-1): bytes, or None when not
 * blocking and the queue is empty. */
static PyObject *st_queue_pop(fpy_store *self, PyObject *args)
{
    const char *key;
    int block = 1;
    long long t = -1;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "s|pL", &key, &block, &t))
        return NULL;
    int64_t ms = timeout_of(self, t), deadline = now_ms() + ms;
    void *v = NULL;
    size_t n = 0;
    int rc;
    for (;;) {
        int64_t left = deadline - now_ms();
        int64_t slice = left < SLICE_MS ? (left > 0 ? left : 0) : SLICE_MS;
        Py_BEGIN_ALLOW_THREADS rc = fccl_store_queue_pop(s, key, block, &v,
                                                         &n, slice);
        Py_END_ALLOW_THREADS
        if (!block || rc != FCCL_ERR_TIMEOUT || now_ms() >= deadline)
            break;
        if (PyErr_CheckSignals() < 0)
            return NULL;
    }
    if (rc == FCCL_ERR_NOTFOUND && !block)
        Py_RETURN_NONE;
    if (rc == FCCL_ERR_TIMEOUT) {
        const char *keys[1] = {key};
        return timeout_error("TCPStore.queue_pop", keys, 1, ms);
    }
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.queue_pop");
    return bytes_take(v, n);
}

static PyObject *st_queue_len(fpy_store *self, PyObject *args)
{
    const char *key;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "s", &key))
        return NULL;
    int64_t n = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_queue_len(s, key, &n);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.queue_len");
    return PyLong_FromLongLong(n);
}

static PyObject *st_ping(fpy_store *self, PyObject *unused)
{
    (void)unused;
    fccl_store_t *s = live(self);
    if (!s)
        return NULL;
    double us = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_store_ping(s, &us);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.ping");
    return PyFloat_FromDouble(us);
}

static PyObject *st_prefixed(fpy_store *self, PyObject *args)
{
    const char *prefix;
    fccl_store_t *s = live(self);
    if (!s || !PyArg_ParseTuple(args, "s", &prefix))
        return NULL;
    fccl_store_t *v = NULL;
    int rc = fccl_store_prefixed(s, prefix, &v);
    if (rc < 0)
        return fpy_raise(rc, "TCPStore.prefixed");
    fpy_store *o = PyObject_New(fpy_store, &StoreType);
    if (!o) {
        fccl_store_close(v);
        return NULL;
    }
    o->s = v;
    return (PyObject *)o;
}

static PyObject *st_get_addr(fpy_store *self, void *c)
{
    (void)c;
    return self->s ? PyUnicode_FromString(fccl_store_addr(self->s))
                   : Py_NewRef(Py_None);
}

static PyObject *st_get_timeout(fpy_store *self, void *c)
{
    (void)c;
    return self->s ? PyLong_FromLongLong(fccl_store_timeout_ms(self->s))
                   : Py_NewRef(Py_None);
}

static PyMethodDef store_methods[] = {
    {"close", (PyCFunction)st_close, METH_NOARGS, "close()"},
    {"set", (PyCFunction)st_set, METH_VARARGS, "set(key, value)"},
    {"append", (PyCFunction)st_append, METH_VARARGS, "append(key, value)"},
    {"get", (PyCFunction)st_get, METH_VARARGS, "get(key, timeout_ms=-1)"},
    {"add", (PyCFunction)st_add, METH_VARARGS, "add(key, amount) -> int"},
    {"compare_set", (PyCFunction)st_compare_set, METH_VARARGS,
     "compare_set(key, expected, desired) -> bytes"},
    {"check", (PyCFunction)st_check, METH_O, "check(keys) -> bool"},
    {"wait", (PyCFunction)st_wait, METH_VARARGS, "wait(keys, timeout_ms=-1)"},
    {"delete_key", (PyCFunction)st_delete_key, METH_VARARGS,
     "delete_key(key) -> bool"},
    {"num_keys", (PyCFunction)st_num_keys, METH_NOARGS, "num_keys() -> int"},
    {"multi_get", (PyCFunction)st_multi_get, METH_VARARGS,
     "multi_get(keys, timeout_ms=-1) -> list of bytes"},
    {"multi_set", (PyCFunction)st_multi_set, METH_VARARGS,
     "multi_set(keys, values)"},
    {"list_keys", (PyCFunction)st_list_keys, METH_VARARGS,
     "list_keys(prefix='') -> list of str"},
    {"queue_push", (PyCFunction)st_queue_push, METH_VARARGS,
     "queue_push(key, value)"},
    {"queue_pop", (PyCFunction)st_queue_pop, METH_VARARGS,
     "queue_pop(key, block=True, timeout_ms=-1) -> bytes or None"},
    {"queue_len", (PyCFunction)st_queue_len, METH_VARARGS,
     "queue_len(key) -> int"},
    {"ping", (PyCFunction)st_ping, METH_NOARGS, "ping() -> round trip in us"},
    {"prefixed", (PyCFunction)st_prefixed, METH_VARARGS,
     "prefixed(prefix) -> Store (a view adding prefix to every key)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef store_getset[] = {
    {"addr", (getter)st_get_addr, NULL, "HOST:PORT", NULL},
    {"timeout_ms", (getter)st_get_timeout, NULL, "default timeout", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject StoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fccl._fccl.Store",
    .tp_basicsize = sizeof(fpy_store),
    .tp_dealloc = (destructor)store_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Store(addr, timeout_ms=0, dialect=None, raw_keys=False, "
              "tls=False, tls_ca=None, tls_cert=None, tls_key=None, "
              "tls_server_name=None, token_file=None, reconnect=-1): a "
              "connection to a TCPStore server (fccl_store_connect).",
    .tp_methods = store_methods,
    .tp_getset = store_getset,
    .tp_init = (initproc)store_init,
    .tp_new = PyType_GenericNew,
};

/* ---- the embeddable server (fccl/server.h, when the library has it) ---- */

#if defined(__has_include)
#if __has_include("fccl/server.h")
#define FPY_HAVE_SERVER 1
#include "fccl/server.h"
#endif
#endif

#ifdef FPY_HAVE_SERVER
typedef struct {
    PyObject_HEAD
    fccl_server_t *srv;
} fpy_server;

/* Server(options: dict of tcpstore-server option names -> str values);
 * binds and starts serving on its own thread. */
static int server_init(fpy_server *self, PyObject *args, PyObject *kw)
{
    PyObject *opts = NULL;
    static char *kwlist[] = {"options", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O!", kwlist, &PyDict_Type,
                                     &opts))
        return -1;
    fccl_server_opts_t o;
    fccl_server_opts_init(&o);
    int rc = 0;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (rc == 0 && opts && PyDict_Next(opts, &pos, &k, &v)) {
        PyObject *vs = PyObject_Str(v);
        const char *ks = PyUnicode_AsUTF8(k), *vv = vs ? PyUnicode_AsUTF8(vs)
                                                       : NULL;
        if (!ks || !vv) {
            Py_XDECREF(vs);
            return -1;
        }
        rc = fccl_server_opts_set(&o, ks, vv);
        Py_DECREF(vs);
    }
    fccl_server_t *srv = NULL;
    if (rc == 0) {
        Py_BEGIN_ALLOW_THREADS rc = fccl_server_create(&o, &srv);
        if (rc == 0 && (rc = fccl_server_start(srv)) < 0)
            fccl_server_free(srv);
        Py_END_ALLOW_THREADS
    }
    if (rc < 0) {
        fpy_raise(rc, "TCPStore(is_master=True)");
        return -1;
    }
    self->srv = srv;
    return 0;
}

static PyObject *sv_stop(fpy_server *self, PyObject *unused)
{
    (void)unused;
    fccl_server_t *srv = self->srv;
    self->srv = NULL;
    if (srv && !fpy_forked) {
        Py_BEGIN_ALLOW_THREADS fccl_server_stop(srv);
        fccl_server_free(srv);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static void server_dealloc(fpy_server *self)
{
    PyObject *r = sv_stop(self, NULL);
    Py_XDECREF(r);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *sv_port(fpy_server *self, void *c)
{
    (void)c;
    return self->srv ? PyLong_FromLong(fccl_server_port(self->srv))
                     : Py_NewRef(Py_None);
}

static PyMethodDef server_methods[] = {
    {"stop", (PyCFunction)sv_stop, METH_NOARGS, "stop serving"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef server_getset[] = {
    {"port", (getter)sv_port, NULL, "the port it listens on", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ServerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fccl._fccl.Server",
    .tp_basicsize = sizeof(fpy_server),
    .tp_dealloc = (destructor)server_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Server(options): the store server in this process "
              "(fccl_server_create + fccl_server_start).",
    .tp_methods = server_methods,
    .tp_getset = server_getset,
    .tp_init = (initproc)server_init,
    .tp_new = PyType_GenericNew,
};
#endif

int fpy_store_add_types(PyObject *m)
{
    if (PyType_Ready(&StoreType) < 0 ||
        PyModule_AddObjectRef(m, "Store", (PyObject *)&StoreType) < 0)
        return -1;
#ifdef FPY_HAVE_SERVER
    if (PyType_Ready(&ServerType) < 0 ||
        PyModule_AddObjectRef(m, "Server", (PyObject *)&ServerType) < 0)
        return -1;
#endif
    return 0;
}
