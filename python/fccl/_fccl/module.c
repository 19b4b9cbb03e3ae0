/*
 * _fccl: module init, the exceptions, the fork guard, Ctrl-C, and the
 * small argument parsers every file uses.
 *
 * Exceptions.  fccl.Error (a RuntimeError) carries `code` (the fccl
 * status) and the library's message; fccl.TimeoutError is also a
 * builtins.TimeoutError; fccl.PeerError names the failed world rank in
 * `rank` (fccl_group_failed_rank() of the call's group: the rank that
 * died, timed out or failed and told the group); fccl.RevokedError is a
 * revoked group's.  Argument errors found by the library become
 * ValueError.
 *
 * Fork.  A child forked after init_process_group inherits the parent's
 * endpoints and store connection: it must never use or tear them down.
 * A pthread_atfork child handler sets fpy_forked; every call that
 * communicates then raises RuntimeError, and nothing is finalized at the
 * child's exit.
 *
 * Ctrl-C.  Python's SIGINT handler only sets a flag that the interpreter
 * checks between bytecodes, so a call blocked in the library would not
 * see it until the group timeout.  A handler chained in front of
 * Python's aborts every group with a call blocked right now
 * (fccl_group_abort: one atomic store), then runs Python's; the blocked
 * call returns FCCL_ERR_ABORTED at once and fpy_raise() lets the pending
 * KeyboardInterrupt out.  The group is failed afterwards, as after a
 * timeout.  The handler is installed only while Python's SIGINT handler
 * is the default one (which raises KeyboardInterrupt): a program with
 * its own handler keeps its calls running.  It is checked again at
 * init_process_group and each group creation.
 */
#include "fcclpy.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

PyObject *fpy_Error, *fpy_TimeoutError, *fpy_PeerError, *fpy_RevokedError;
int fpy_forked;

/* ---- errors ---- */

PyObject *fpy_raise(int rc, const char *what)
{
    return fpy_raise_on(rc, what, fccl_world());
}

PyObject *fpy_raise_on(int rc, const char *what, const fccl_group_t *g)
{
    char msg[1200];
    snprintf(msg, sizeof msg, "%s: %s", what, fccl_last_error());
    if (PyErr_CheckSignals() < 0) /* Ctrl-C (its abort made rc) wins */
        return NULL;
    PyObject *type;
    switch (rc) {
    case FCCL_ERR_INVALID:
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    case FCCL_ERR_NOMEM:
        PyErr_SetString(PyExc_MemoryError, msg);
        return NULL;
    case FCCL_ERR_TIMEOUT:
        type = fpy_TimeoutError;
        break;
    case FCCL_ERR_PEER:
        type = fpy_PeerError;
        break;
    case FCCL_ERR_REVOKED:
        type = fpy_RevokedError;
        break;
    default:
        type = fpy_Error;
    }
    PyObject *exc = PyObject_CallFunction(type, "s", msg);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(rc);
    if (code && PyObject_SetAttrString(exc, "code", code) == 0 &&
        type == fpy_PeerError) {
        long r = g ? fccl_group_failed_rank(g) : -1;
        PyObject *rank = r >= 0 ? PyLong_FromLong(r) : Py_NewRef(Py_None);
        if (rank)
            PyObject_SetAttrString(exc, "rank", rank);
        Py_XDECREF(rank);
    }
    Py_XDECREF(code);
    if (!PyErr_Occurred())
        PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *make_exc(PyObject *m, const char *name, const char *doc,
                          PyObject *bases)
{
    char full[64];
    snprintf(full, sizeof full, "fccl.%s", name);
    PyObject *e = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    Py_DECREF(bases);
    if (!e || PyModule_AddObjectRef(m, name, e) < 0) {
        Py_XDECREF(e);
        return NULL;
    }
    return e;
}

static int add_exceptions(PyObject *m)
{
    fpy_Error = make_exc(m, "Error",
        "An fccl call failed.  `code` is the fccl status (negative), the "
        "message the library's.", PyTuple_Pack(1, PyExc_RuntimeError));
    if (!fpy_Error)
        return -1;
    fpy_TimeoutError = make_exc(m, "TimeoutError",
        "A deadline passed: a store get or wait, a collective, a handle's "
        "wait.  Both an fccl.Error (so a RuntimeError, as the seeds raise) "
        "and a builtins.TimeoutError.",
        PyTuple_Pack(2, fpy_Error, PyExc_TimeoutError));
    if (!fpy_TimeoutError)
        return -1;
    fpy_PeerError = make_exc(m, "PeerError",
        "A rank failed or vanished; `rank` is its world rank (None when "
        "the library did not say).", PyTuple_Pack(1, fpy_Error));
    if (!fpy_PeerError)
        return -1;
    fpy_RevokedError = make_exc(m, "RevokedError",
        "A member revoked the group (revoke_group); the message names "
        "it.  Shrink the group (shrink_group) or destroy it.",
        PyTuple_Pack(1, fpy_Error));
    return fpy_RevokedError ? 0 : -1;
}

/* ---- fork ---- */

static void after_fork_child(void) { fpy_forked = 1; }

int fpy_check_usable(int need_init)
{
    if (fpy_forked) {
        PyErr_SetString(PyExc_RuntimeError,
                        "fccl: this process was forked from a rank; the "
                        "parent's process group cannot be used here");
        return -1;
    }
    if (need_init && !fccl_is_initialized()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "fccl: the default process group is not "
                        "initialized (call init_process_group first)");
        return -1;
    }
    return 0;
}

/* ---- Ctrl-C ---- */

static struct sigaction prev_sa;
static _Atomic int sig_installed;

static void on_sigint(int sig, siginfo_t *si, void *uc)
{
    fpy_abort_blocked();
    if (prev_sa.sa_flags & SA_SIGINFO)
        prev_sa.sa_sigaction(sig, si, uc);
    else if (prev_sa.sa_handler != SIG_IGN && prev_sa.sa_handler != SIG_DFL)
        prev_sa.sa_handler(sig);
}

/* Is Python's SIGINT handler the default one (KeyboardInterrupt)? */
static int python_default_sigint(void)
{
    PyObject *mod = PyImport_ImportModule("signal");
    if (!mod)
        return -1;
    PyObject *cur = PyObject_CallMethod(mod, "getsignal", "i", SIGINT);
    PyObject *def = PyObject_GetAttrString(mod, "default_int_handler");
    int same = cur && def ? cur == def : -1;
    Py_XDECREF(cur);
    Py_XDECREF(def);
    Py_DECREF(mod);
    return same;
}

void fpy_sigint_install(void)
{
    if (fpy_forked)
        return;
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) < 0)
        return;
    int ours = (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigint;
    int deflt = python_default_sigint();
    if (deflt < 0) {
        PyErr_Clear();
        return;
    }
    if (ours) {
        if (!deflt) /* Python's handler changed under ours: step aside */
            sigaction(SIGINT, &prev_sa, NULL);
        return;
    }
    if (!deflt || (!(cur.sa_flags & SA_SIGINFO) &&
                   (cur.sa_handler == SIG_IGN || cur.sa_handler == SIG_DFL)))
        return;
    prev_sa = cur;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigint;
    sa.sa_flags = SA_SIGINFO | (cur.sa_flags & SA_ONSTACK);
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    atomic_store(&sig_installed, 1);
}

static PyObject *py_sigint_install(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    fpy_sigint_install();
    struct sigaction cur;
    int ours = sigaction(SIGINT, NULL, &cur) == 0 &&
               (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigint;
    return PyBool_FromLong(ours);
}

/* ---- argument helpers ---- */

static PyObject *op_names[FCCL_NUM_OPS];

int fpy_op_arg(PyObject *op, const char *fn)
{
    for (int i = 0; i < FCCL_NUM_OPS; i++)
        if (op == op_names[i])
            return i;
    if (!PyUnicode_Check(op)) {
        PyErr_Format(PyExc_TypeError, "For %s, the input op type must be str",
                     fn);
        return -1;
    }
    for (int i = 0; i < FCCL_NUM_OPS; i++)
        if (PyUnicode_Compare(op, op_names[i]) == 0)
            return i;
    PyErr_Format(PyExc_TypeError,
                 "For %s, the input op value must be one of sum, prod, min, "
                 "max, avg, band, bor, bxor, but got %R", fn, op);
    return -1;
}

int fpy_bool_arg(PyObject *v, const char *what)
{
    if (v == Py_False)
        return 0;
    if (v == Py_True)
        return 1;
    PyErr_Format(PyExc_TypeError, "The argument '%s' must be a bool, but got "
                 "%s.", what, Py_TYPE(v)->tp_name);
    return -1;
}

int fpy_int_arg(PyObject *v, long *out, const char *fn, const char *what)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "For %s, the %s must be int, but got %s",
                     fn, what, Py_TYPE(v)->tp_name);
        return -1;
    }
    *out = PyLong_AsLong(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

int fpy_sizes_arg(PyObject *v, size_t **out, size_t *n, const char *fn,
                  const char *what)
{
    *out = NULL;
    *n = 0;
    if (v == Py_None)
        return 0;
    if (!PyList_Check(v) && !PyTuple_Check(v)) {
        PyErr_Format(PyExc_TypeError, "For %s, %s must be a list or tuple of "
                     "int, but got %s", fn, what, Py_TYPE(v)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(v);
    if (len == 0)
        return 0;
    size_t *a = PyMem_Malloc(len * sizeof *a);
    if (!a) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(v, i);
        long val;
        if (fpy_int_arg(x, &val, fn, what) < 0) {
            PyMem_Free(a);
            return -1;
        }
        if (val < 0) {
            PyErr_Format(PyExc_ValueError, "For %s, %s[%zd] is negative (%ld)",
                         fn, what, i, val);
            PyMem_Free(a);
            return -1;
        }
        a[i] = (size_t)val;
    }
    *out = a;
    *n = (size_t)len;
    return 0;
}

/* ---- small module-level calls ---- */

static PyObject *py_strerror(PyObject *self, PyObject *arg)
{
    (void)self;
    long c = PyLong_AsLong(arg);
    if (c == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(fccl_strerror((int)c));
}

static PyObject *py_forked(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(fpy_forked);
}

static PyObject *py_dtypes(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *d = PyDict_New();
    for (int t = 0; d && t < FCCL_NUM_DTYPES; t++) {
        PyObject *v = PyLong_FromLong(t);
        if (!v || PyDict_SetItemString(d, fccl_dtype_name(t), v) < 0) {
            Py_XDECREF(v);
            Py_CLEAR(d);
            break;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *py_is_tensor(PyObject *self, PyObject *obj)
{
    (void)self;
    return PyBool_FromLong(fbuf_is_array(obj));
}

static PyMethodDef module_methods[] = {
    {"is_tensor", py_is_tensor, METH_O,
     "True for an array fccl takes (buffer protocol or torch tensor)."},
    {"strerror", py_strerror, METH_O, "fccl_strerror(code)"},
    {"forked", py_forked, METH_NOARGS,
     "True in a child forked after init_process_group."},
    {"dtypes", py_dtypes, METH_NOARGS, "{fccl dtype name: code}"},
    {"sigint_install", py_sigint_install, METH_NOARGS,
     "Install (again) the Ctrl-C handler that aborts blocked calls; True "
     "when it is in place."},
    {NULL, NULL, 0, NULL},
};

static int add_methods(PyObject *m, PyMethodDef *defs)
{
    return PyModule_AddFunctions(m, defs);
}

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "fccl._fccl",
    "The C part of the fccl package: calls of the public libfccl API.  Use "
    "the fccl package instead.",
    -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fccl(void)
{
    for (int i = 0; i < FCCL_NUM_OPS; i++)
        if (!op_names[i] &&
            !(op_names[i] = PyUnicode_InternFromString(fccl_redop_name(i))))
            return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    if (add_exceptions(m) < 0 || add_methods(m, fpy_group_methods) < 0 ||
        add_methods(m, fpy_ft_methods) < 0 ||
        add_methods(m, fpy_coll_methods) < 0 ||
        add_methods(m, fpy_coll_list_methods) < 0 ||
        add_methods(m, fpy_shaped_methods) < 0 ||
        add_methods(m, fpy_p2p_methods) < 0 ||
        add_methods(m, fpy_torchstore_methods) < 0 ||
        add_methods(m, fpy_torchq_methods) < 0 || fpy_torchq_add_types(m) < 0 ||
        PyType_Ready(&fpy_GroupType) < 0 ||
        PyModule_AddObjectRef(m, "Group", (PyObject *)&fpy_GroupType) < 0 ||
        PyType_Ready(&fpy_HandleType) < 0 ||
        PyModule_AddObjectRef(m, "CommHandle", (PyObject *)&fpy_HandleType) < 0 ||
        fpy_store_add_types(m) < 0 || fpy_moe_add_types(m) < 0 ||
        PyModule_AddStringConstant(m, "version", fccl_version()) < 0 ||
        PyModule_AddStringConstant(m, "WORLD_GROUP", FCCL_WORLD_GROUP) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static int atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, after_fork_child);
        atfork_done = 1;
    }
    return m;
}
