/*
 * Fault tolerance, as Python sees it: revoke a group, the failed ranks a
 * member knows of, shrink and grow (fccl/pg.h).  Ranks are global here, as
 * src and dst are: the exclude list and the failed ranks are world ranks,
 * translated to and from the group's ranks.  A shrink's or a grow's new
 * group is registered under its library name (fccl_<n>_<sha1>), like
 * new_group's.  A grow's newcomers get the grown group as their world
 * (group.c's init).
 */
#include "fcclpy.h"

#include <stdlib.h>

static PyObject *py_revoke(PyObject *self, PyObject *arg)
{
    (void)self;
    fpy_group *grp = fpy_group_arg(arg, "revoke_group");
    if (!grp)
        return NULL;
    int rc = fccl_group_revoke(grp->g);
    if (rc < 0)
        return fpy_raise_on(rc, "revoke_group", grp->g);
    Py_RETURN_NONE;
}

static PyObject *world_list(const fpy_group *grp, const int *granks, int n)
{
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        int w = -1;
        fccl_group_to_world(grp->g, granks[i], &w);
        PyObject *v = PyLong_FromLong(w);
        if (!v) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

static PyObject *py_failed_ranks(PyObject *self, PyObject *arg)
{
    (void)self;
    fpy_group *grp = fpy_group_arg(arg, "get_failed_ranks");
    if (!grp)
        return NULL;
    int n = fccl_group_failed_ranks(grp->g, NULL, 0);
    if (n < 0)
        return fpy_raise_on(n, "get_failed_ranks", grp->g);
    int *r = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!r)
        return PyErr_NoMemory();
    int m = fccl_group_failed_ranks(grp->g, r, n);
    PyObject *l = world_list(grp, r, m < n ? m : n);
    PyMem_Free(r);
    return l;
}

/* The exclude list: world ranks -> group ranks (PyMem_Malloc'd, NULL for
 * None with *n 0). */
static int exclude_arg(fpy_group *grp, PyObject *v, int **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (v == Py_None)
        return 0;
    if (!PyList_Check(v) && !PyTuple_Check(v)) {
        PyErr_Format(PyExc_TypeError, "exclude_ranks must be list, but got "
                     "%s", Py_TYPE(v)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(v);
    int *a = PyMem_Malloc((size_t)(len ? len : 1) * sizeof(int));
    if (!a) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *w = PySequence_Fast_GET_ITEM(v, i);
        int r = fpy_group_rank_of(grp, w, "shrink_group", "exclude_ranks");
        if (r < 0) {
            PyMem_Free(a);
            return -1;
        }
        a[i] = r;
    }
    *out = a;
    *n = (int)len;
    return 0;
}

/* The new group as a registered Group; its name (new reference). */
static PyObject *register_new(fccl_group_t *ng)
{
    int n = fccl_group_size(ng);
    int *ranks = PyMem_Malloc((size_t)n * sizeof(int));
    PyObject *name = PyUnicode_FromString(fccl_group_name(ng));
    fpy_group *grp = NULL;
    if (ranks && name && fccl_group_members(ng, ranks, (size_t)n) == 0)
        grp = fpy_group_make(name, ranks, n, ng);
    PyMem_Free(ranks);
    if (!grp || fpy_registry_add(grp) < 0) {
        Py_XDECREF(grp);
        Py_XDECREF(name);
        fccl_group_destroy(ng);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    Py_DECREF(grp); /* the registry holds it */
    fpy_sigint_install();
    return name;
}

/* shrink(group, exclude_ranks) -> name */
static PyObject *py_shrink(PyObject *self, PyObject *const *args,
                           Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "shrink(group, exclude_ranks)");
        return NULL;
    }
    fpy_group *grp = fpy_group_arg(args[0], "shrink_group");
    int *ex, nex, rc;
    if (!grp || exclude_arg(grp, args[1], &ex, &nex) < 0)
        return NULL;
    fccl_group_t *ng = NULL;
    fpy_enter(grp);
    Py_BEGIN_ALLOW_THREADS rc = fccl_group_shrink(grp->g, ex, nex, &ng);
    Py_END_ALLOW_THREADS
    fpy_leave(grp);
    PyMem_Free(ex);
    if (rc < 0)
        return fpy_raise_on(rc, "shrink_group", grp->g);
    return register_new(ng);
}

/* grow(group, count) -> name */
static PyObject *py_grow(PyObject *self, PyObject *const *args,
                         Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "grow(group, count: int)");
        return NULL;
    }
    fpy_group *grp = fpy_group_arg(args[0], "grow_group");
    long count = PyLong_AsLong(args[1]);
    if (!grp || (count == -1 && PyErr_Occurred()))
        return NULL;
    if (count < 1 || count > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "For 'grow_group', count must be "
                     "positive, but got %ld", count);
        return NULL;
    }
    fccl_group_t *ng = NULL;
    int rc;
    fpy_enter(grp);
    Py_BEGIN_ALLOW_THREADS rc = fccl_group_grow(grp->g, (int)count, &ng);
    Py_END_ALLOW_THREADS
    fpy_leave(grp);
    if (rc < 0)
        return fpy_raise_on(rc, "grow_group", grp->g);
    return register_new(ng);
}

PyMethodDef fpy_ft_methods[] = {
    {"revoke", py_revoke, METH_O, "revoke(group)"},
    {"failed_ranks", py_failed_ranks, METH_O,
     "failed_ranks(group) -> list of world ranks"},
    {"shrink", (PyCFunction)(void (*)(void))py_shrink, METH_FASTCALL,
     "shrink(group, exclude_ranks) -> name"},
    {"grow", (PyCFunction)(void (*)(void))py_grow, METH_FASTCALL,
     "grow(group, count) -> name"},
    {NULL, NULL, 0, NULL},
};
