/*
 * CommHandle: an asynchronous operation in flight (async_op=True, isend,
 * irecv, batch_isend_irecv).
 *
 * The handle keeps the operation's buffers exported (and their objects
 * alive) until the library reports the end, then releases them; list
 * variants also run a `finish` step then (copying a temporary into the
 * caller's tensors).  wait(timeout) is fccl_wait(req, timeout): when its
 * own timeout passes first the library fails the operation and the group
 * (NCCL's abort model, on every member: see fccl/coll.h), frees the
 * request and lets go of the buffers, and fccl.TimeoutError is raised.  A failure seen by is_completed() is raised by the next wait().
 * A handle dropped while its operation runs waits for it first, so the
 * library never writes into freed memory.
 */
#include "fcclpy.h"

#include <math.h>
#include <string.h>

typedef struct {
    fpy_handle h;
    char errmsg[1024]; /* a failure seen by is_completed() */
} handle_full;

static void release_all(fpy_handle *self)
{
    for (int i = 0; i < self->nheld; i++)
        fbuf_release(&self->held[i]);
    self->nheld = 0;
    PyMem_RawFree(self->held);
    self->held = NULL;
    Py_CLEAR(self->keep);
    PyMem_RawFree(self->tmp);
    self->tmp = NULL;
    PyMem_RawFree(self->finish_arg);
    self->finish_arg = NULL;
    self->finish = NULL;
}

/* The request ended with rc: run the finish step, release everything.
 * Returns 0 or -1 with an exception. */
static int complete(fpy_handle *self, int rc)
{
    self->req = NULL;
    self->done = 1;
    self->status = rc;
    int ok = 0;
    if (rc == FCCL_OK && self->finish)
        ok = self->finish(self->finish_arg);
    release_all(self);
    return ok;
}

/* Wait for req (when there is one) with the GIL released, then release
 * the n buffers it used: for a request that cannot be tracked. */
static void wait_release(fccl_request_t *req, fbuf *bufs, int n)
{
    Py_BEGIN_ALLOW_THREADS if (req) fccl_wait(req, -1);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < n; i++)
        fbuf_release(&bufs[i]);
}

PyObject *fpy_handle_new(fccl_request_t *req, fpy_group *grp, fbuf *bufs,
                         int n, void *tmp, fpy_finish_fn finish,
                         void *finish_arg, const char *what)
{
    handle_full *hf = PyObject_New(handle_full, &fpy_HandleType);
    if (!hf) {
        /* cannot track it: wait here so nothing is written later */
        wait_release(req, bufs, n);
        PyMem_RawFree(tmp);
        PyMem_RawFree(finish_arg);
        return NULL;
    }
    fpy_handle *h = &hf->h;
    hf->errmsg[0] = 0;
    h->req = req;
    h->grp = (fpy_group *)Py_NewRef(grp);
    h->held = NULL;
    h->nheld = 0;
    h->keep = NULL;
    h->tmp = tmp;
    h->finish = finish;
    h->finish_arg = finish_arg;
    h->status = 0;
    h->done = req == NULL;
    h->what = what;
    if (n > 0 && !(h->held = PyMem_RawMalloc(n * sizeof(fbuf)))) {
        /* keep the data safe, then fail (tmp and finish_arg are freed
         * with the handle, unfinished) */
        h->req = NULL;
        h->finish = NULL;
        h->done = 1;
        wait_release(req, bufs, n);
        Py_DECREF(h);
        return PyErr_NoMemory();
    }
    if (n > 0) {
        memcpy(h->held, bufs, n * sizeof(fbuf));
        h->nheld = n;
    }
    if (!req) { /* finished already (nothing to wait for) */
        if (complete(h, FCCL_OK) < 0) {
            Py_DECREF(h);
            return NULL;
        }
    }
    return (PyObject *)h;
}

int fpy_handle_keep(PyObject *obj, PyObject *item)
{
    fpy_handle *h = (fpy_handle *)obj;
    if (!h->keep && !(h->keep = PyList_New(0)))
        return -1;
    return PyList_Append(h->keep, item);
}

/* The group went away (destroyed, finalized) under the handle: the
 * request is gone with it. */
static int orphaned(fpy_handle *self)
{
    if (!self->grp->destroyed)
        return 0;
    self->req = NULL;
    self->done = 1;
    self->status = FCCL_ERR_STATE;
    release_all(self);
    PyErr_Format(PyExc_RuntimeError, "%s: the group %R was destroyed before "
                 "the operation was waited for", self->what, self->grp->name);
    return -1;
}

static int64_t timeout_ms_of(PyObject *t)
{
    if (t == Py_None)
        return -1;
    double s;
    if (PyFloat_Check(t) || PyLong_Check(t)) {
        s = PyFloat_AsDouble(t);
    } else {
        PyObject *r = PyObject_CallMethod(t, "total_seconds", NULL);
        if (!r) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "wait: timeout must be None, "
                         "seconds or a timedelta, not %s",
                         Py_TYPE(t)->tp_name);
            return -2;
        }
        s = PyFloat_AsDouble(r);
        Py_DECREF(r);
    }
    if (s == -1.0 && PyErr_Occurred())
        return -2;
    if (!(s >= 0) || !isfinite(s)) {
        PyErr_SetString(PyExc_ValueError, "wait: timeout must be >= 0");
        return -2;
    }
    return (int64_t)(s * 1000.0 + 0.5);
}

static PyObject *handle_wait(fpy_handle *self, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *kw = "timeout";
    PyObject *t = Py_None;
    if (nargs > 1 || (kwnames && PyTuple_GET_SIZE(kwnames) + nargs > 1))
        return PyErr_Format(PyExc_TypeError, "wait(timeout=None)");
    if (nargs == 1)
        t = args[0];
    else if (kwnames && PyTuple_GET_SIZE(kwnames) == 1) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0),
                                             kw) != 0)
            return PyErr_Format(PyExc_TypeError, "wait(timeout=None)");
        t = args[0];
    }
    handle_full *hf = (handle_full *)self;
    if (self->done) {
        if (self->status < 0 && hf->errmsg[0]) {
            int st = self->status;
            self->status = 0;
            PyErr_SetString(st == FCCL_ERR_TIMEOUT ? fpy_TimeoutError :
                            st == FCCL_ERR_PEER ? fpy_PeerError : fpy_Error,
                            hf->errmsg);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (orphaned(self))
        return NULL;
    int64_t ms = timeout_ms_of(t);
    if (ms == -2)
        return NULL;
    int rc;
    fccl_request_t *req = self->req;
    FPY_BLOCK(self->grp, rc = fccl_wait(req, ms));
    /* the request is freed whatever rc is (a timeout failed the group) */
    if (complete(self, rc) < 0)
        return NULL;
    if (rc < 0)
        return fpy_raise_on(rc, self->what, self->grp->g);
    Py_RETURN_NONE;
}

static PyObject *handle_is_completed(fpy_handle *self, PyObject *unused)
{
    (void)unused;
    if (self->done)
        Py_RETURN_TRUE;
    if (orphaned(self))
        return NULL;
    int done = 0;
    int rc = fccl_test(self->req, &done);
    if (!done && rc == FCCL_OK)
        Py_RETURN_FALSE;
    if (!done) /* an argument error: the handle is not ours any more */
        return fpy_raise(rc, self->what);
    if (rc < 0) {
        handle_full *hf = (handle_full *)self;
        snprintf(hf->errmsg, sizeof hf->errmsg, "%s: %s", self->what,
                 fccl_last_error());
    }
    if (complete(self, rc) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static void handle_dealloc(fpy_handle *self)
{
    if (!self->done && self->req && !self->grp->destroyed) {
        fccl_request_t *req = self->req;
        FPY_BLOCK(self->grp, fccl_wait(req, -1));
    }
    release_all(self);
    Py_XDECREF(self->grp);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *handle_repr(fpy_handle *self)
{
    return PyUnicode_FromFormat("<fccl.CommHandle %s on %R, %s>", self->what,
                                self->grp->name,
                                self->done ? "done" : "pending");
}

static PyMethodDef handle_methods[] = {
    {"wait", (PyCFunction)(void (*)(void))handle_wait,
     METH_FASTCALL | METH_KEYWORDS,
     "wait(timeout=None)\n--\n\n"
     "Block until the operation is done (its output is then in place) and "
     "release its buffers.  timeout: None (the group's timeout) or seconds "
     "(a float or a timedelta); when it passes first the operation and the "
     "group fail on every member, as NCCL's abort does, and "
     "fccl.TimeoutError is raised (the other members raise fccl.PeerError "
     "naming this rank).  A failed operation "
     "raises its error (fccl.PeerError, fccl.TimeoutError, fccl.Error)."},
    {"is_completed", (PyCFunction)handle_is_completed, METH_NOARGS,
     "is_completed()\n--\n\n"
     "True once the operation has ended (never blocks).  A failure is "
     "raised by the next wait()."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject fpy_HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fccl.CommHandle",
    .tp_basicsize = sizeof(handle_full),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_repr = (reprfunc)handle_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An asynchronous communication in flight; wait() for it.  "
              "Returned by the collectives with async_op=True, by isend, "
              "irecv and (in a list) by batch_isend_irecv.",
    .tp_methods = handle_methods,
};

PyObject *fpy_done(int rc, fpy_group *grp, int async_, fccl_request_t *req,
                   fbuf *bufs, int n, void *tmp, fpy_finish_fn finish,
                   void *finish_arg, const char *what)
{
    if (rc < 0 || !async_) {
        int ok = rc < 0 || !finish ? 0 : finish(finish_arg);
        for (int i = 0; i < n; i++)
            fbuf_release(&bufs[i]);
        PyMem_RawFree(tmp);
        PyMem_RawFree(finish_arg);
        if (rc < 0)
            return fpy_raise_on(rc, what, grp ? grp->g : NULL);
        if (ok < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return fpy_handle_new(req, grp, bufs, n, tmp, finish, finish_arg, what);
}

fpy_unpack *fpy_unpack_new(size_t n)
{
    fpy_unpack *u = PyMem_RawCalloc(1, sizeof *u + n * sizeof u->piece[0]);
    if (!u)
        PyErr_NoMemory();
    else
        u->n = n;
    return u;
}

int fpy_unpack_run(void *arg)
{
    fpy_unpack *u = arg;
    const char *p = u->src;
    for (size_t i = 0; i < u->n; i++) {
        if (u->piece[i].len)
            memcpy(u->piece[i].dst, p, u->piece[i].len);
        p += u->piece[i].len;
    }
    return 0;
}
