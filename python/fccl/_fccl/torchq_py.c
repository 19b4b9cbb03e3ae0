/*
 * TorchQueue, the Python type over fccl.torch's queue (torchq.c): made
 * per torch group by fccl/torch/__init__.py, called by
 * fccl/torch/_pg.py with tensors' addresses and sizes and a Work to
 * complete (fccl/torch/_work.cpp).
 */
#include "torchq.h"

#include <string.h>

/* ---- the Python type ---- */

static PyTypeObject TorchQueueType;

static int q_live(tq *q)
{
    if (fpy_check_usable(1) < 0)
        return -1;
    if (!q->g) {
        PyErr_SetString(PyExc_RuntimeError, "fccl: the group was destroyed");
        return -1;
    }
    return 0;
}


static PyObject *q_close(tq *q, PyObject *unused)
{
    (void)unused;
    if (!q->g)
        Py_RETURN_NONE;
    Py_BEGIN_ALLOW_THREADS tq_stop(q);
    Py_END_ALLOW_THREADS
    fccl_group_t *g = q->g;
    q->g = NULL;
    if (q->owned && !fpy_forked && fccl_is_initialized()) {
        int rc;
        Py_BEGIN_ALLOW_THREADS rc = fccl_group_destroy(g);
        Py_END_ALLOW_THREADS
        if (rc < 0)
            return fpy_raise(rc, "destroy_process_group");
    }
    Py_RETURN_NONE;
}

static void q_dealloc(tq *q)
{
    if (q->g && !fpy_forked) {
        Py_BEGIN_ALLOW_THREADS tq_stop(q);
        Py_END_ALLOW_THREADS
        if (q->owned && fccl_is_initialized())
            fccl_group_destroy(q->g);
    }
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->lock);
    Py_TYPE(q)->tp_free((PyObject *)q);
}

/* TorchQueue(ranks, name, complete, timeout_ms, inline_bytes): ranks None
 * for the world group (fccl_init done), else the sorted world ranks of a
 * new group of which this rank is a member (a collective of the
 * members); complete the capsule of fccl_work_complete. */
static int q_init(tq *q, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ranks", "name", "complete", "timeout_ms",
                             "inline_bytes", NULL};
    PyObject *ranks, *cap;
    const char *name;
    long long timeout_ms, inl;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OsOLL", kwlist, &ranks,
                                     &name, &cap, &timeout_ms, &inl))
        return -1;
    if (q->g) {
        PyErr_SetString(PyExc_RuntimeError, "TorchQueue: already set up");
        return -1;
    }
    complete_fn fn = (complete_fn)PyCapsule_GetPointer(cap,
                                                       "fccl_work_complete");
    if (!fn || fpy_check_usable(1) < 0)
        return -1;
    if (timeout_ms <= 0) {
        PyErr_SetString(PyExc_ValueError, "TorchQueue: timeout must be > 0");
        return -1;
    }
    fccl_group_t *g = NULL;
    int owned = 0;
    if (ranks == Py_None) {
        g = fccl_world();
    } else {
        size_t *r = NULL, n = 0;
        if (fpy_sizes_arg(ranks, &r, &n, "new_group", "ranks") < 0)
            return -1;
        int *ir = PyMem_Malloc((n ? n : 1) * sizeof *ir);
        if (!ir) {
            PyMem_Free(r);
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            ir[i] = (int)r[i];
        PyMem_Free(r);
        int rc;
        Py_BEGIN_ALLOW_THREADS rc = fccl_group_new(ir, n, &g);
        Py_END_ALLOW_THREADS
        PyMem_Free(ir);
        if (rc < 0) {
            fpy_raise(rc, "new_group");
            return -1;
        }
        owned = 1;
    }
    fccl_group_set_timeout(g, timeout_ms);
    q->g = g;
    q->owned = owned;
    q->rank = fccl_group_rank(g);
    q->size = fccl_group_size(g);
    q->complete = fn;
    q->timeout_ms = timeout_ms;
    q->inline_bytes = inl < 0 ? 0 : (size_t)inl;
    snprintf(q->name, sizeof q->name, "group '%s' (%s, rank %d of %d)", name,
             fccl_group_name(g), q->rank, q->size);
    return 0;
}

static PyObject *q_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    tq *q = (tq *)type->tp_alloc(type, 0);
    if (!q)
        return NULL;
    pthread_condattr_t at;
    pthread_condattr_init(&at);
    pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&q->lock, NULL) != 0 ||
        pthread_cond_init(&q->cv, &at) != 0) {
        pthread_condattr_destroy(&at);
        Py_DECREF(q);
        return PyErr_NoMemory();
    }
    pthread_condattr_destroy(&at);
    return (PyObject *)q;
}

/* An address from _work.retain(). */
static void *work_arg(PyObject *v)
{
    void *w = PyLong_AsVoidPtr(v);
    if (!w && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "TorchQueue: no Work");
    return w;
}

static int dtype_arg(PyObject *v, fccl_dtype_t *out)
{
    long d = PyLong_AsLong(v);
    if (d == -1 && PyErr_Occurred())
        return -1;
    if (d < 0 || d >= FCCL_NUM_DTYPES) {
        PyErr_Format(PyExc_ValueError, "TorchQueue: bad dtype %ld", d);
        return -1;
    }
    *out = (fccl_dtype_t)d;
    return 0;
}

static PyObject *invalid(tq *q, const char *what)
{
    char m[1300];
    snprintf(m, sizeof m, "fccl: %s on %s: %s", what, q->name,
             fccl_last_error());
    PyErr_SetString(PyExc_ValueError, m);
    return NULL;
}

/* coll(op, work, sptr, rptr, count, dtype, redop, root, counts1, counts2)
 * Pointers are addresses (tensor.data_ptr()); counts lists or None. */
static PyObject *q_coll(tq *q, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "coll takes 10 arguments");
        return NULL;
    }
    if (q_live(q) < 0)
        return NULL;
    coll_args a = {0};
    long op = PyLong_AsLong(args[0]);
    void *work = work_arg(args[1]);
    a.sbuf = PyLong_AsVoidPtr(args[2]);
    a.rbuf = PyLong_AsVoidPtr(args[3]);
    a.count = PyLong_AsSize_t(args[4]);
    long redop = PyLong_AsLong(args[6]);
    a.root = (int)PyLong_AsLong(args[7]);
    if (PyErr_Occurred() || !work || dtype_arg(args[5], &a.dtype) < 0)
        return NULL;
    if (op < 0 || op >= TQ_NUM_OPS || redop < 0 || redop >= FCCL_NUM_OPS) {
        PyErr_SetString(PyExc_ValueError, "TorchQueue: bad op");
        return NULL;
    }
    a.op = (int)op;
    a.redop = (fccl_redop_t)redop;
    size_t n1 = 0, n2 = 0;
    if (fpy_sizes_arg(args[8], &a.c1, &n1, tq_op_names[op], "counts") < 0)
        return NULL;
    if (fpy_sizes_arg(args[9], &a.c2, &n2, tq_op_names[op], "counts") < 0) {
        PyMem_Free(a.c1);
        return NULL;
    }
    if ((a.c1 && n1 != (size_t)q->size) || (a.c2 && n2 != (size_t)q->size)) {
        PyMem_Free(a.c1);
        PyMem_Free(a.c2);
        PyErr_Format(PyExc_ValueError, "fccl: %s on %s: %d counts needed",
                     tq_op_names[op], q->name, q->size);
        return NULL;
    }
    if (a.c1 && (a.op == TQ_ALL_GATHER_V || a.op == TQ_REDUCE_SCATTER_V)) {
        size_t total = 0;
        for (size_t i = 0; i < n1; i++)
            total += a.c1[i];
        a.count = a.op == TQ_ALL_GATHER_V ? a.c1[q->rank] : total;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = tq_submit_coll(q, work, &a);
    Py_END_ALLOW_THREADS
    PyMem_Free(a.c1);
    PyMem_Free(a.c2);
    if (rc < 0)
        return invalid(q, tq_op_names[op]);
    Py_RETURN_NONE;
}

/* p2p(is_send, work, ptr, count, dtype, peer, tag); peer -1: any source */
static PyObject *q_p2p(tq *q, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "p2p takes 7 arguments");
        return NULL;
    }
    if (q_live(q) < 0)
        return NULL;
    int is_send = PyObject_IsTrue(args[0]);
    void *work = work_arg(args[1]);
    void *buf = PyLong_AsVoidPtr(args[2]);
    size_t count = PyLong_AsSize_t(args[3]);
    fccl_dtype_t dt;
    long peer = PyLong_AsLong(args[5]), tag = PyLong_AsLong(args[6]);
    if (PyErr_Occurred() || !work || dtype_arg(args[4], &dt) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = tq_submit_p2p(q, work, is_send, buf, count, dt,
                                           (int)peer, (int)tag);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return invalid(q, is_send ? "send" : "recv");
    Py_RETURN_NONE;
}

static PyObject *q_monitored_barrier(tq *q, PyObject *args)
{
    if (q_live(q) < 0)
        return NULL;
    return tq_monitored_barrier(q, args);
}

static PyObject *q_get_rank(tq *q, void *c)
{
    (void)c;
    return PyLong_FromLong(q->rank);
}

static PyObject *q_get_size(tq *q, void *c)
{
    (void)c;
    return PyLong_FromLong(q->size);
}

static PyObject *q_get_fccl_name(tq *q, void *c)
{
    (void)c;
    return PyUnicode_FromString(q->g ? fccl_group_name(q->g) : "");
}

static PyObject *q_get_handle(tq *q, void *c)
{
    (void)c;
    return PyCapsule_New(q, TQ_QUEUE_CAPSULE, NULL);
}

static PyObject *q_get_pending(tq *q, void *c)
{
    (void)c;
    int n = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&q->lock);
    for (item *it = q->head; it; it = it->next)
        n++;
    pthread_mutex_unlock(&q->lock);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(n);
}

static PyMethodDef q_methods[] = {
    {"coll", (PyCFunction)(void (*)(void))q_coll, METH_FASTCALL,
     "coll(op, work, sptr, rptr, count, dtype, redop, root, counts1, "
     "counts2)"},
    {"p2p", (PyCFunction)(void (*)(void))q_p2p, METH_FASTCALL,
     "p2p(is_send, work, ptr, count, dtype, peer, tag)"},
    {"monitored_barrier", (PyCFunction)q_monitored_barrier, METH_VARARGS,
     "monitored_barrier(timeout_ms, wait_all)"},
    {"close", (PyCFunction)q_close, METH_NOARGS,
     "close(): cancel queued p2p, wait for queued collectives, destroy "
     "the group if the queue made it"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef q_getset[] = {
    {"rank", (getter)q_get_rank, NULL, "group rank", NULL},
    {"size", (getter)q_get_size, NULL, "group size", NULL},
    {"fccl_name", (getter)q_get_fccl_name, NULL, "fccl's group name", NULL},
    {"pending", (getter)q_get_pending, NULL, "queued operations", NULL},
    {"handle", (getter)q_get_handle, NULL, "the queue for torchq_hot (a "
     "capsule; keep the TorchQueue alive while using it)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TorchQueueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fccl._fccl.TorchQueue",
    .tp_basicsize = sizeof(tq),
    .tp_dealloc = (destructor)q_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "fccl.torch's per-group queue (see torchq.c)",
    .tp_methods = q_methods,
    .tp_getset = q_getset,
    .tp_init = (initproc)q_init,
    .tp_new = q_new,
};

/* ---- the C++ process group's entry (torchq_abi.h) ---- */

static int hot_refuse(tq *q, void *work, char *err, size_t errlen, int rc,
                      const char *why)
{
    snprintf(err, errlen, "fccl: %s", why);
    q->complete(work, FCCL_ERR_INVALID, err, -1);
    return rc;
}

static int hot_submit(void *queue, void *work, const tq_hot_args *h,
                      char *err, size_t errlen)
{
    tq *q = queue;
    if (fpy_forked)
        return hot_refuse(q, work, err, errlen, TQ_HOT_UNUSABLE,
                          "this process was forked "
                          "from a rank; the parent's process group cannot "
                          "be used here");
    if (!fccl_is_initialized())
        return hot_refuse(q, work, err, errlen, TQ_HOT_UNUSABLE,
                          "the default process group is not initialized "
                          "(call init_process_group first)");
    /* the _v forms take per-rank counts, which this entry has not */
    if (h->op < 0 || h->op >= TQ_NUM_OPS || h->op == TQ_ALL_GATHER_V ||
        h->op == TQ_REDUCE_SCATTER_V || h->op == TQ_ALL_TO_ALL_V ||
        h->dtype < 0 || h->dtype >= FCCL_NUM_DTYPES || h->redop < 0 ||
        h->redop >= FCCL_NUM_OPS)
        return hot_refuse(q, work, err, errlen, TQ_HOT_INVALID,
                          "torchq_hot: bad operation, dtype or reduction");
    coll_args a = {
        .op = h->op, .sbuf = h->sbuf, .rbuf = h->rbuf, .count = h->count,
        .dtype = (fccl_dtype_t)h->dtype, .redop = (fccl_redop_t)h->redop,
        .root = h->root,
    };
    if (tq_submit_coll(q, work, &a) == 0)
        return 0;
    snprintf(err, errlen, "fccl: %s on %s: %s", tq_op_names[h->op], q->name,
             fccl_last_error());
    return TQ_HOT_INVALID;
}

PyMethodDef fpy_torchq_methods[] = {
    {NULL, NULL, 0, NULL},
};

int fpy_torchq_add_types(PyObject *m)
{
    if (PyType_Ready(&TorchQueueType) < 0 ||
        PyModule_AddObjectRef(m, "TorchQueue", (PyObject *)&TorchQueueType) < 0)
        return -1;
    for (int i = 0; i < TQ_NUM_OPS; i++) {
        char name[40];
        snprintf(name, sizeof name, "TQ_%s", tq_op_names[i]);
        for (char *p = name; *p; p++)
            if (*p >= 'a' && *p <= 'z')
                *p = (char)(*p - 'a' + 'A');
        if (PyModule_AddIntConstant(m, name, i) < 0)
            return -1;
    }
    PyObject *hot = PyCapsule_New((void *)(tq_hot_fn)hot_submit,
                                  TQ_HOT_CAPSULE, NULL);
    int bad = !hot || PyModule_AddObjectRef(m, "torchq_hot", hot) < 0;
    Py_XDECREF(hot);
    if (bad)
        return -1;
    return PyModule_AddIntConstant(m, "TQ_MB_TAG", MB_TAG);
}
