/*
 * The world and its groups, as Python sees them.
 *
 * Every group this process knows of has one Group object, registered by
 * name: "fccl_world_group", the "fccl_<n>_<sha1>" names of new_group(),
 * and the names given to create_group().  A rank that is not a member of
 * a group still gets a Group (g NULL, rank -1) when it calls new_group or
 * create_group, so that get_rank(name) is -1 and get_world_size(name) and
 * the rank translations answer, without anything created or awaited.
 *
 * Collective calls resolve their `group` argument here: None is the
 * world (a pointer kept aside), a str is looked up in the registry, a
 * Group object is used as it is.
 *
 * Groups also sit in a fixed table that the SIGINT handler reads (only
 * atomics and fccl_group_abort there): a group whose `blocking` count is
 * positive has a call blocked in the library and is aborted on Ctrl-C.
 */
#include "fcclpy.h"

#include <stdlib.h>
#include <string.h>

#define SIG_SLOTS 4096
static fpy_group *_Atomic sig_table[SIG_SLOTS];

static PyObject *registry; /* {name: Group} */
static fpy_group *world;   /* borrowed from the registry */

fccl_store_t *fpy_store_handle(PyObject *obj); /* store.c */

/* ---- the Group type ---- */

static void sig_add(fpy_group *grp)
{
    for (int i = 0; i < SIG_SLOTS; i++) {
        fpy_group *expect = NULL;
        if (atomic_compare_exchange_strong(&sig_table[i], &expect, grp))
            return;
    }
}

static void sig_remove(fpy_group *grp)
{
    for (int i = 0; i < SIG_SLOTS; i++) {
        fpy_group *expect = grp;
        if (atomic_compare_exchange_strong(&sig_table[i], &expect, NULL))
            return;
    }
}

void fpy_abort_blocked(void)
{
    for (int i = 0; i < SIG_SLOTS; i++) {
        fpy_group *grp = atomic_load(&sig_table[i]);
        if (grp && grp->g && atomic_load(&grp->blocking) > 0)
            fccl_group_abort(grp->g);
    }
}

static void group_dealloc(fpy_group *self)
{
    sig_remove(self);
    Py_XDECREF(self->name);
    Py_XDECREF(self->alias);
    PyMem_Free(self->ranks);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *group_repr(fpy_group *self)
{
    return PyUnicode_FromFormat("<fccl.Group %R size=%d rank=%d%s>",
                                self->name, self->size, self->rank,
                                self->destroyed ? " destroyed" : "");
}

static PyObject *group_get_ranks(fpy_group *self, void *c)
{
    (void)c;
    PyObject *t = PyTuple_New(self->size);
    for (int i = 0; t && i < self->size; i++) {
        PyObject *v = PyLong_FromLong(self->ranks[i]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *group_get_name(fpy_group *self, void *c)
{
    (void)c;
    return Py_NewRef(self->name);
}

static PyObject *group_get_fccl_name(fpy_group *self, void *c)
{
    (void)c;
    if (self->g)
        return PyUnicode_FromString(fccl_group_name(self->g));
    return Py_NewRef(self->name);
}

static PyObject *group_get_rank(fpy_group *self, void *c)
{
    (void)c;
    return PyLong_FromLong(self->destroyed ? -1 : self->rank);
}

static PyObject *group_get_size(fpy_group *self, void *c)
{
    (void)c;
    return PyLong_FromLong(self->size);
}

static PyObject *group_get_member(fpy_group *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->g != NULL);
}

static PyObject *group_get_providers(fpy_group *self, void *c)
{
    (void)c;
    char buf[128];
    if (!self->g || self->destroyed)
        Py_RETURN_NONE;
    int rc = fccl_group_providers(self->g, buf, sizeof buf);
    if (rc < 0)
        return fpy_raise(rc, "Group.providers");
    return PyUnicode_FromString(buf);
}

static PyObject *group_get_failed_rank(fpy_group *self, void *c)
{
    (void)c;
    int r = self->g && !self->destroyed ? fccl_group_failed_rank(self->g) : -1;
    if (r < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(r);
}

static PyGetSetDef group_getset[] = {
    {"providers", (getter)group_get_providers, NULL,
     "the libfabric providers that reach the other members from this rank "
     "(\"shm\", \"tcp;ofi_rxm\", \"shm,tcp;ofi_rxm\"); None for a "
     "non-member", NULL},
    {"failed_rank", (getter)group_get_failed_rank, NULL,
     "the world rank the group's failure came from, or None", NULL},
    {"name", (getter)group_get_name, NULL, "the name collectives take", NULL},
    {"fccl_name", (getter)group_get_fccl_name, NULL,
     "the library's name of the group (fccl_<n>_<sha1>)", NULL},
    {"ranks", (getter)group_get_ranks, NULL, "world ranks, by group rank",
     NULL},
    {"rank", (getter)group_get_rank, NULL, "this rank's group rank, or -1",
     NULL},
    {"size", (getter)group_get_size, NULL, "number of ranks", NULL},
    {"member", (getter)group_get_member, NULL,
     "True if this rank belongs to the group (and it is not destroyed)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject fpy_GroupType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fccl.Group",
    .tp_basicsize = sizeof(fpy_group),
    .tp_dealloc = (destructor)group_dealloc,
    .tp_repr = (reprfunc)group_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A process group.  Made by init_process_group, new_group and "
              "create_group; collectives take it or its name.",
    .tp_getset = group_getset,
};

/* A new Group over sorted world ranks (copied). */
fpy_group *fpy_group_make(PyObject *name, const int *ranks, int n,
                          fccl_group_t *g)
{
    fpy_group *grp = PyObject_New(fpy_group, &fpy_GroupType);
    if (!grp)
        return NULL;
    grp->g = g;
    grp->name = Py_NewRef(name);
    grp->alias = NULL;
    grp->size = n;
    grp->rank = g ? fccl_group_rank(g) : -1;
    grp->world = 0;
    grp->destroyed = 0;
    atomic_init(&grp->blocking, 0);
    grp->ranks = PyMem_Malloc((n ? n : 1) * sizeof(int));
    if (!grp->ranks) {
        Py_DECREF(grp);
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(grp->ranks, ranks, n * sizeof(int));
    if (g)
        sig_add(grp);
    return grp;
}

int fpy_registry_add(fpy_group *grp)
{
    if (!registry && !(registry = PyDict_New()))
        return -1;
    return PyDict_SetItem(registry, grp->name, (PyObject *)grp);
}

/* ---- resolving `group` arguments ---- */

fpy_group *fpy_group_lookup(PyObject *arg, const char *fn)
{
    if (arg == Py_None) {
        if (fpy_check_usable(1) < 0)
            return NULL;
        return world;
    }
    fpy_group *grp;
    if (PyUnicode_Check(arg)) {
        grp = registry ? (fpy_group *)PyDict_GetItemWithError(registry, arg)
                       : NULL;
        if (!grp) {
            if (PyErr_Occurred())
                return NULL;
            if (fpy_check_usable(1) < 0)
                return NULL;
            PyErr_Format(PyExc_ValueError, "For %s, the group %R does not "
                         "exist (make it with new_group or create_group)",
                         fn, arg);
            return NULL;
        }
    } else if (Py_IS_TYPE(arg, &fpy_GroupType)) {
        grp = (fpy_group *)arg;
    } else {
        PyErr_Format(PyExc_TypeError, "The argument 'group' must be type of "
                     "string, but got 'group' type : %s.",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if (fpy_check_usable(1) < 0)
        return NULL;
    if (grp->destroyed) {
        PyErr_Format(PyExc_RuntimeError, "For %s, the group %R was destroyed",
                     fn, grp->name);
        return NULL;
    }
    return grp;
}

fpy_group *fpy_group_arg(PyObject *arg, const char *fn)
{
    if (arg == Py_None && world && !fpy_forked)
        return world; /* the fast path */
    fpy_group *grp = fpy_group_lookup(arg, fn);
    if (grp && !grp->g) {
        PyErr_Format(PyExc_RuntimeError, "For %s, this rank (%d) is not a "
                     "member of the group %R", fn, fccl_get_rank(), grp->name);
        return NULL;
    }
    return grp;
}

/* Index of world rank w in the ranks of grp (sorted, except a grown
 * group's, whose newcomers follow the others), or -1. */
static int find_rank(const fpy_group *grp, long w)
{
    if (w >= 0 && w < grp->size && grp->ranks[w] == w) /* the world */
        return (int)w;
    int lo = 0, hi = grp->size - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (grp->ranks[mid] == w)
            return mid;
        if (grp->ranks[mid] < w)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    for (int i = 0; i < grp->size; i++)
        if (grp->ranks[i] == w)
            return i;
    return -1;
}

int fpy_group_rank_of(fpy_group *grp, PyObject *world_rank, const char *fn,
                      const char *what)
{
    long w;
    if (fpy_int_arg(world_rank, &w, fn, what) < 0)
        return -1;
    int r = find_rank(grp, w);
    if (r < 0)
        PyErr_Format(PyExc_ValueError, "For %s, %s %ld is not a rank of the "
                     "group %R (%s is a global rank)", fn, what, w, grp->name,
                     what);
    return r;
}

/* ---- init and finalize ---- */

static void forget_all(void)
{
    if (registry) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(registry, &pos, &k, &v)) {
            fpy_group *grp = (fpy_group *)v;
            sig_remove(grp);
            grp->g = NULL;
            grp->rank = -1;
            grp->destroyed = 1;
        }
        PyDict_Clear(registry);
    }
    world = NULL;
}

/* init(init_method, store, world_size, rank, timeout_ms, provider, job_id) */
static PyObject *py_init(PyObject *self, PyObject *const *args,
                         Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "init takes 7 arguments");
        return NULL;
    }
    if (fpy_check_usable(0) < 0)
        return NULL;
    if (fccl_is_initialized()) {
        PyErr_SetString(PyExc_RuntimeError, "init_process_group: the default "
                        "process group is already initialized");
        return NULL;
    }
    fccl_init_opts_t o;
    fccl_init_opts_init(&o);
    if (args[0] != Py_None && !(o.init_method = PyUnicode_AsUTF8(args[0])))
        return NULL;
    if (args[1] != Py_None && !(o.store = fpy_store_handle(args[1])))
        return NULL;
    o.world_size = (int)PyLong_AsLong(args[2]);
    o.rank = (int)PyLong_AsLong(args[3]);
    o.timeout_ms = PyLong_AsLongLong(args[4]);
    if (args[5] != Py_None && !(o.provider = PyUnicode_AsUTF8(args[5])))
        return NULL;
    if (args[6] != Py_None && !(o.job_id = PyUnicode_AsUTF8(args[6])))
        return NULL;
    if (PyErr_Occurred())
        return NULL;
    fccl_group_t *wg = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fccl_init(&o, &wg);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return fpy_raise(rc, "init_process_group");
    /* The world's members: 0..n-1, except on a rejoining process, whose
     * world is the group the members grew (fccl_group_grow), in its
     * order and with global ranks, as every group here. */
    int n = fccl_group_size(wg);
    int *ranks = PyMem_Malloc(n * sizeof(int));
    PyObject *name = PyUnicode_FromString(FCCL_WORLD_GROUP);
    fpy_group *grp = NULL;
    if (ranks && name && fccl_group_members(wg, ranks, (size_t)n) == 0)
        grp = fpy_group_make(name, ranks, n, wg);
    PyMem_Free(ranks);
    Py_XDECREF(name);
    if (!grp || fpy_registry_add(grp) < 0) {
        Py_XDECREF(grp);
        Py_BEGIN_ALLOW_THREADS fccl_finalize();
        Py_END_ALLOW_THREADS
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    grp->world = 1;
    world = grp;
    Py_DECREF(grp); /* the registry holds it */
    /* A rejoined process's world is the grown group: also under the name
     * grow_group gave the others, so the same code finds it everywhere. */
    if (strcmp(fccl_group_name(wg), FCCL_WORLD_GROUP) != 0) {
        PyObject *lib = PyUnicode_FromString(fccl_group_name(wg));
        int bad = !lib || PyDict_SetItem(registry, lib, (PyObject *)grp) < 0;
        Py_XDECREF(lib);
        if (bad)
            return NULL;
    }
    fpy_sigint_install();
    Py_RETURN_NONE;
}

static PyObject *py_finalize(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (fpy_forked || !fccl_is_initialized()) {
        if (!fpy_forked)
            forget_all();
        Py_RETURN_NONE;
    }
    forget_all();
    Py_BEGIN_ALLOW_THREADS fccl_finalize();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_is_initialized(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(!fpy_forked && fccl_is_initialized());
}

/* ---- groups ---- */

/* Read a list of world ranks: TypeError for a non-list, non-int or a
 * duplicate (the seeds' types), ValueError out of range.  Sorted copy in
 * *out (PyMem_Free). */
static int ranks_arg(PyObject *v, int **out, int *n, const char *fn)
{
    if (!PyList_Check(v) && !PyTuple_Check(v)) {
        PyErr_Format(PyExc_TypeError, "ranks must be list, but got %s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(v);
    int ws = fccl_get_world_size();
    if (len == 0) {
        PyErr_Format(PyExc_ValueError, "For %s, ranks is empty", fn);
        return -1;
    }
    int *a = PyMem_Malloc(len * sizeof(int));
    if (!a) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        long r;
        if (fpy_int_arg(PySequence_Fast_GET_ITEM(v, i), &r, fn, "rank") < 0)
            goto fail;
        if (r < 0 || (ws > 0 && r >= ws)) {
            PyErr_Format(PyExc_ValueError, "For %s, rank %ld is out of range "
                         "(world size %d)", fn, r, ws);
            goto fail;
        }
        a[i] = (int)r;
    }
    for (Py_ssize_t i = 1; i < len; i++) { /* insertion sort: short lists */
        int x = a[i];
        Py_ssize_t j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
    for (Py_ssize_t i = 1; i < len; i++)
        if (a[i] == a[i - 1]) {
            PyErr_Format(PyExc_TypeError, "For %s, the rank list has the "
                         "duplicate rank id %d", fn, a[i]);
            goto fail;
        }
    *out = a;
    *n = (int)len;
    return 0;
fail:
    PyMem_Free(a);
    return -1;
}

static int is_member(const int *ranks, int n, int me)
{
    for (int i = 0; i < n; i++)
        if (ranks[i] == me)
            return 1;
    return 0;
}

/* Make (or, for a member, create) the group of `ranks` under `name`
 * (NULL: the library's name).  Returns the Group, borrowed. */
static fpy_group *make_group(PyObject *name, PyObject *ranks_obj,
                             const char *fn)
{
    if (fpy_check_usable(1) < 0)
        return NULL;
    int *ranks, n;
    if (ranks_arg(ranks_obj, &ranks, &n, fn) < 0)
        return NULL;
    char libname[64];
    if (fccl_group_name_for(ranks, n, libname, sizeof libname) < 0) {
        PyMem_Free(ranks);
        return (fpy_group *)fpy_raise(FCCL_ERR_INVALID, fn);
    }
    PyObject *key = name ? Py_NewRef(name) : PyUnicode_FromString(libname);
    fpy_group *grp = NULL;
    if (!key)
        goto done;
    grp = (fpy_group *)PyDict_GetItemWithError(registry, key);
    if (grp) {
        int same = grp->size == n &&
                   memcmp(grp->ranks, ranks, n * sizeof(int)) == 0;
        if (!same || name) {
            PyErr_Format(name ? PyExc_ValueError : PyExc_RuntimeError,
                         "For %s, the group %R exists already", fn, key);
            grp = NULL;
        }
        goto done; /* new_group of an existing set: its name again */
    }
    if (PyErr_Occurred())
        goto done;
    fccl_group_t *g = NULL;
    const char *uname = name ? PyUnicode_AsUTF8(name) : NULL;
    if (name && !uname)
        goto done;
    if (uname && fccl_group_name_check(uname) < 0) { /* members and not */
        PyErr_Format(PyExc_ValueError, "For %s, %s", fn, fccl_last_error());
        goto done;
    }
    if (is_member(ranks, n, fccl_get_rank())) {
        int rc;
        fpy_enter(world);
        Py_BEGIN_ALLOW_THREADS rc = uname
                                        ? fccl_group_new_named(uname, ranks,
                                                               n, &g)
                                        : fccl_group_new(ranks, n, &g);
        Py_END_ALLOW_THREADS
        fpy_leave(world);
        if (rc < 0) {
            fpy_raise(rc, fn);
            goto done;
        }
    }
    grp = fpy_group_make(key, ranks, n, g);
    if (grp && name)
        grp->alias = Py_NewRef(name);
    if (!grp || fpy_registry_add(grp) < 0) {
        if (g)
            fccl_group_destroy(g);
        if (grp) {
            grp->g = NULL;
            Py_DECREF(grp);
        }
        grp = NULL;
        goto done;
    }
    Py_DECREF(grp); /* the registry holds it */
    fpy_sigint_install();
done:
    Py_XDECREF(key);
    PyMem_Free(ranks);
    return grp;
}

static PyObject *py_new_group(PyObject *self, PyObject *ranks)
{
    (void)self;
    if (ranks == Py_None) { /* new_group(None): the library's world */
        fccl_group_t *g = NULL;
        if (fpy_check_usable(1) < 0)
            return NULL;
        int rc = fccl_group_new(NULL, 0, &g);
        if (rc < 0)
            return fpy_raise(rc, "new_group");
        return PyUnicode_FromString(fccl_group_name(g));
    }
    fpy_group *grp = make_group(NULL, ranks, "new_group");
    return grp ? Py_NewRef(grp->name) : NULL;
}

static PyObject *py_create_group(PyObject *self, PyObject *const *args,
                                 Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "create_group(group, rank_ids)");
        return NULL;
    }
    if (!PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "For 'create_group', the argument "
                     "'group' must be type of string, but got 'group' type : "
                     "%s.", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    if (PyUnicode_CompareWithASCIIString(args[0], FCCL_WORLD_GROUP) == 0) {
        PyErr_SetString(PyExc_ValueError, "For 'create_group', the world "
                        "group exists already");
        return NULL;
    }
    fpy_group *grp = make_group(args[0], args[1], "create_group");
    return grp ? Py_NewRef(grp) : NULL;
}

static PyObject *py_destroy_group(PyObject *self, PyObject *arg)
{
    (void)self;
    fpy_group *grp = fpy_group_lookup(arg, "destroy_group");
    if (!grp)
        return NULL;
    if (grp->world) {
        PyErr_SetString(PyExc_ValueError, "destroy_group: the world group is "
                        "destroyed by destroy_process_group()");
        return NULL;
    }
    fccl_group_t *g = grp->g;
    sig_remove(grp);
    grp->g = NULL;
    grp->rank = -1;
    grp->destroyed = 1;
    Py_INCREF(grp);
    int rc = PyDict_DelItem(registry, grp->name);
    if (g) {
        int st;
        Py_BEGIN_ALLOW_THREADS st = fccl_group_destroy(g);
        Py_END_ALLOW_THREADS
        if (st < 0 && rc == 0) {
            Py_DECREF(grp);
            return fpy_raise(st, "destroy_group");
        }
    }
    Py_DECREF(grp);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_get_group(PyObject *self, PyObject *arg)
{
    (void)self;
    fpy_group *grp = fpy_group_lookup(arg, "get_group");
    return grp ? Py_NewRef(grp) : NULL;
}

/* get_rank(group): -1 for a non-member or an unknown group. */
static PyObject *py_get_rank(PyObject *self, PyObject *arg)
{
    (void)self;
    /* The world's rank is the global one, also on a rejoined process
     * whose world (the grown group) puts it after the others. */
    if (arg == Py_None && world)
        return PyLong_FromLong(fccl_get_rank());
    if (!PyUnicode_Check(arg) && arg != Py_None &&
        !Py_IS_TYPE(arg, &fpy_GroupType)) {
        PyErr_Format(PyExc_TypeError, "For 'get_rank', the argument 'group' "
                     "must be type of string, but got 'group' type : %s.",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    fpy_group *grp = fpy_group_lookup(arg, "get_rank");
    if (!grp) {
        if (PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    return PyLong_FromLong(grp->world ? fccl_get_rank() : grp->rank);
}

static PyObject *py_get_world_size(PyObject *self, PyObject *arg)
{
    (void)self;
    if (arg == Py_None && world)
        return PyLong_FromLong(world->size);
    if (!PyUnicode_Check(arg) && arg != Py_None &&
        !Py_IS_TYPE(arg, &fpy_GroupType)) {
        PyErr_Format(PyExc_TypeError, "For 'get_world_size', the argument "
                     "'group' must be type of string, but got 'group' type : "
                     "%s.", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    fpy_group *grp = fpy_group_lookup(arg, "get_world_size");
    if (!grp) {
        if (PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    return PyLong_FromLong(grp->size);
}

static PyObject *py_group_ranks(PyObject *self, PyObject *arg)
{
    (void)self;
    fpy_group *grp = fpy_group_lookup(arg, "get_process_group_ranks");
    if (!grp)
        return NULL;
    PyObject *t = group_get_ranks(grp, NULL);
    if (!t)
        return NULL;
    PyObject *l = PySequence_List(t);
    Py_DECREF(t);
    return l;
}

/* group_rank_of(group, world_rank) -> group rank (RuntimeError if not a
 * member, as the seeds' backends raise) */
static PyObject *py_group_rank_of(PyObject *self, PyObject *const *args,
                                  Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "group_rank_of(group, rank, fn)");
    const char *fn = PyUnicode_AsUTF8(args[2]);
    if (!fn)
        return NULL;
    fpy_group *grp = fpy_group_lookup(args[0], fn);
    if (!grp)
        return NULL;
    long w;
    if (!PyLong_Check(args[1]) || PyBool_Check(args[1]))
        return PyErr_Format(PyExc_TypeError, "The global_rank argument must "
                            "be integer, but got %s.",
                            Py_TYPE(args[1])->tp_name);
    w = PyLong_AsLong(args[1]);
    if (w == -1 && PyErr_Occurred())
        return NULL;
    int r = find_rank(grp, w);
    if (r < 0)
        return PyErr_Format(PyExc_RuntimeError, "For %s, world rank %ld is "
                            "not a member of the group %R", fn, w, grp->name);
    return PyLong_FromLong(r);
}

static PyObject *py_world_rank_of(PyObject *self, PyObject *const *args,
                                  Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "world_rank_of(group, rank, fn)");
    const char *fn = PyUnicode_AsUTF8(args[2]);
    if (!fn)
        return NULL;
    fpy_group *grp = fpy_group_lookup(args[0], fn);
    if (!grp)
        return NULL;
    if (!PyLong_Check(args[1]) || PyBool_Check(args[1]))
        return PyErr_Format(PyExc_TypeError, "The group_rank argument must be "
                            "integer, but got %s.", Py_TYPE(args[1])->tp_name);
    long r = PyLong_AsLong(args[1]);
    if (r == -1 && PyErr_Occurred())
        return NULL;
    if (r < 0 || r >= grp->size)
        return PyErr_Format(PyExc_RuntimeError, "For %s, group rank %ld is "
                            "out of range for the group %R of %d ranks", fn,
                            r, grp->name, grp->size);
    return PyLong_FromLong(grp->ranks[r]);
}

/* local_rank(group, want_size): this rank's index among the members on its
 * host, or how many members are on its host. */
static PyObject *py_local(PyObject *self, PyObject *const *args,
                          Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "local(group, want_size)");
    fpy_group *grp = fpy_group_lookup(args[0], "get_local_rank");
    if (!grp)
        return NULL;
    fccl_topology_t t;
    if (!grp->g) /* not a member: nothing of it is here */
        return PyLong_FromLong(-1);
    int rc = fccl_group_topology(grp->g, &t);
    if (rc < 0)
        return fpy_raise(rc, "get_local_rank");
    return PyLong_FromLong(PyObject_IsTrue(args[1]) ? t.local_size
                                                    : t.local_rank);
}

static PyObject *py_name_for(PyObject *self, PyObject *ranks_obj)
{
    (void)self;
    int *ranks, n;
    if (ranks_arg(ranks_obj, &ranks, &n, "new_group") < 0)
        return NULL;
    char name[64];
    int rc = fccl_group_name_for(ranks, n, name, sizeof name);
    PyMem_Free(ranks);
    if (rc < 0)
        return fpy_raise(rc, "new_group");
    return PyUnicode_FromString(name);
}

static PyObject *py_set_timeout(PyObject *self, PyObject *const *args,
                                Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "set_timeout(group, ms)");
    fpy_group *grp = fpy_group_arg(args[0], "set_timeout");
    if (!grp)
        return NULL;
    long long ms = PyLong_AsLongLong(args[1]);
    if (ms == -1 && PyErr_Occurred())
        return NULL;
    int rc = fccl_group_set_timeout(grp->g, ms);
    if (rc < 0)
        return fpy_raise(rc, "set_timeout");
    Py_RETURN_NONE;
}

/* set_next_timeout(group, ms): the next operation's own timeout (-1
 * clears it); the collectives' timeout= argument. */
static PyObject *py_set_next_timeout(PyObject *self, PyObject *const *args,
                                     Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "set_next_timeout(group, ms)");
    fpy_group *grp = fpy_group_arg(args[0], "timeout");
    if (!grp)
        return NULL;
    long long ms = PyLong_AsLongLong(args[1]);
    if (ms == -1 && PyErr_Occurred())
        return NULL;
    int rc = fccl_set_next_timeout(grp->g, ms);
    if (rc < 0)
        return fpy_raise(rc, "timeout");
    Py_RETURN_NONE;
}

static PyObject *py_abort(PyObject *self, PyObject *arg)
{
    (void)self;
    fpy_group *grp = fpy_group_arg(arg, "abort");
    if (!grp)
        return NULL;
    fccl_group_abort(grp->g);
    Py_RETURN_NONE;
}

static PyObject *py_group_names(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return registry ? PyDict_Keys(registry) : PyList_New(0);
}

static PyObject *py_set_algo(PyObject *self, PyObject *const *args,
                             Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "set_algo(group, op, algo)");
    fpy_group *grp = fpy_group_arg(args[0], "set_algo");
    if (!grp)
        return NULL;
    const char *op = PyUnicode_AsUTF8(args[1]);
    const char *algo = args[2] == Py_None ? NULL : PyUnicode_AsUTF8(args[2]);
    if (!op || (args[2] != Py_None && !algo))
        return NULL;
    int rc = fccl_set_algo(grp->g, op, algo);
    if (rc < 0)
        return fpy_raise(rc, "set_algo");
    Py_RETURN_NONE;
}

PyMethodDef fpy_group_methods[] = {
    {"init", (PyCFunction)(void (*)(void))py_init, METH_FASTCALL,
     "init(init_method, store, world_size, rank, timeout_ms, provider, "
     "job_id)"},
    {"finalize", py_finalize, METH_NOARGS, "finalize()"},
    {"is_initialized", py_is_initialized, METH_NOARGS, "is_initialized()"},
    {"new_group", py_new_group, METH_O, "new_group(ranks) -> name"},
    {"create_group", (PyCFunction)(void (*)(void))py_create_group,
     METH_FASTCALL, "create_group(name, ranks) -> Group"},
    {"destroy_group", py_destroy_group, METH_O, "destroy_group(group)"},
    {"get_group", py_get_group, METH_O, "get_group(group) -> Group"},
    {"get_rank", py_get_rank, METH_O, "get_rank(group)"},
    {"get_world_size", py_get_world_size, METH_O, "get_world_size(group)"},
    {"group_ranks", py_group_ranks, METH_O, "group_ranks(group) -> list"},
    {"group_rank_of", (PyCFunction)(void (*)(void))py_group_rank_of,
     METH_FASTCALL, "group_rank_of(group, world_rank, fn)"},
    {"world_rank_of", (PyCFunction)(void (*)(void))py_world_rank_of,
     METH_FASTCALL, "world_rank_of(group, group_rank, fn)"},
    {"local", (PyCFunction)(void (*)(void))py_local, METH_FASTCALL,
     "local(group, want_size)"},
    {"name_for", py_name_for, METH_O, "name_for(ranks) -> name"},
    {"set_timeout", (PyCFunction)(void (*)(void))py_set_timeout,
     METH_FASTCALL, "set_timeout(group, ms)"},
    {"abort", py_abort, METH_O, "abort(group)"},
    {"set_next_timeout", (PyCFunction)(void (*)(void))py_set_next_timeout,
     METH_FASTCALL, "set_next_timeout(group, ms)"},
    {"group_names", py_group_names, METH_NOARGS, "group_names()"},
    {"set_algo", (PyCFunction)(void (*)(void))py_set_algo, METH_FASTCALL,
     "set_algo(group, op, algo)"},
    {NULL, NULL, 0, NULL},
};
