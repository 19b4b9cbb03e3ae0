/*
 * fccl's CPython extension (_fccl): what its files share.
 *
 * The extension is a thin layer over the public libfccl API
 * (the headers of include/fccl): it turns Python objects into pointers, counts and
 * dtypes, makes one library call with the GIL released, and turns the
 * library's status into a Python exception.  The Python modules of the
 * fccl package (the .py files of fccl/) add the docstrings and call in here.
 *
 *   module.c   module init, exceptions, the fork guard, SIGINT -> abort
 *   buffer.c   buffer-protocol objects and torch tensors -> fbuf
 *   group.c    init/finalize, the group registry, queries
 *   coll.c     the collectives
 *   shaped.c   the collectives on shaped tensors (NeighborExchangeV2,
 *              AlltoAll with split and concat dimensions)
 *   p2p.c      send, recv, isend, irecv, batch_isend_irecv
 *   handle.c   the asynchronous handle type (CommHandle)
 *   store.c    the TCPStore client type (Store), the embeddable server
 *   moe.c      the MoE config type
 *   torchstore.c  a torch.distributed Store as an fccl store (for fccl.torch)
 *   torchq*.c  fccl.torch's per-group queue and its threads (torchq.h)
 *
 * Threads: every call that may block or run longer than a few
 * microseconds releases the GIL (FPY_BLOCK).  A group is used by one
 * thread at a time (the library's rule); the extension does not lock.
 */
#ifndef FCCLPY_H
#define FCCLPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fccl/fccl.h"

/* ---- module.c ---- */

extern PyObject *fpy_Error;        /* fccl.Error (RuntimeError) */
extern PyObject *fpy_TimeoutError; /* fccl.TimeoutError (Error, TimeoutError) */
extern PyObject *fpy_PeerError;    /* fccl.PeerError (Error) */
extern PyObject *fpy_RevokedError; /* fccl.RevokedError (Error) */
extern int fpy_forked;             /* set in a child after fork() */

/* Raise the exception for a negative fccl status, with the calling
 * thread's fccl_last_error() text, prefixed by `what` (the Python call).
 * A KeyboardInterrupt that caused an FCCL_ERR_ABORTED wins.  Returns
 * NULL so callers can `return fpy_raise(...)`. */
PyObject *fpy_raise(int rc, const char *what);
/* The same for a call on group g: PeerError.rank is g's failed rank
 * (fccl_group_failed_rank), None when unknown.  fpy_raise uses the
 * world's. */
PyObject *fpy_raise_on(int rc, const char *what, const fccl_group_t *g);
/* 0 if fccl may be used here; else -1 with RuntimeError set (a forked
 * child, or `need_init` and no init_process_group). */
int fpy_check_usable(int need_init);
/* Install (or re-install, if someone replaced it) the SIGINT handler that
 * aborts the groups blocked in a call and chains to Python's. */
void fpy_sigint_install(void);

/* ---- buffer.c ---- */

/* A borrowed view of an array argument.  `row` is the number of elements
 * of one index of the first dimension (count for 0-d and 1-d arrays). */
typedef struct fbuf {
    void *ptr;
    size_t count;  /* elements */
    size_t nbytes;
    size_t row;    /* elements per first-dimension index */
    Py_ssize_t dim0; /* first dimension (1 for 0-d) */
    int ndim;
    fccl_dtype_t dtype;
    PyObject *obj; /* new reference to the object */
    int has_view;
    Py_buffer view;
} fbuf;

/* Fill b from obj: a C-contiguous buffer-protocol object, or a torch CPU
 * tensor.  `writable`: obj is written to.  `fn` and `what` name the call
 * and the argument for messages.  Returns 0, or -1 with TypeError (not an
 * array, unsupported dtype) or ValueError (not contiguous, read-only). */
int fbuf_get(PyObject *obj, fbuf *b, int writable, const char *fn,
             const char *what);
void fbuf_release(fbuf *b);
/* TypeError unless a and b have the same dtype. */
int fbuf_same_dtype(const fbuf *a, const fbuf *b, const char *fn);
/* The numpy-style name of a dtype, for messages. */
const char *fpy_dtype_name(fccl_dtype_t t);
/* Is obj something fbuf_get may accept (without touching its data)? */
int fbuf_is_array(PyObject *obj);

/* ---- group.c ---- */

typedef struct {
    PyObject_HEAD
    fccl_group_t *g;   /* NULL for a group this rank is not in, or destroyed */
    PyObject *name;    /* str */
    PyObject *alias;   /* str given to create_group, or NULL */
    int *ranks;        /* world ranks, sorted (group rank order) */
    int size;
    int rank;          /* this rank's group rank, -1 if not a member */
    int world;         /* 1 for the world group */
    int destroyed;
    _Atomic int blocking; /* calls of this group blocked right now */
} fpy_group;

extern PyTypeObject fpy_GroupType;

/* Resolve a `group` argument (None, a name, a Group) to a group this rank
 * is a member of.  NULL with an exception otherwise.  Borrowed. */
fpy_group *fpy_group_arg(PyObject *arg, const char *fn);
/* Same, but a group this rank is not in is returned too. */
fpy_group *fpy_group_lookup(PyObject *arg, const char *fn);
/* Group rank of world rank `world` in grp, or -1 with ValueError naming
 * `what` ("src", "dst", "peer"). */
int fpy_group_rank_of(fpy_group *grp, PyObject *world, const char *fn,
                      const char *what);
/* A new Group over world ranks (sorted; copied) and its registration
 * by its name (group.c; ft.c makes the groups of a shrink with them). */
fpy_group *fpy_group_make(PyObject *name, const int *ranks, int n,
                          fccl_group_t *g);
int fpy_registry_add(fpy_group *grp);
/* Mark grp as blocked in the calling thread's call (for Ctrl-C). */
static inline void fpy_enter(fpy_group *grp)
{
    atomic_fetch_add_explicit(&grp->blocking, 1, memory_order_relaxed);
}
static inline void fpy_leave(fpy_group *grp)
{
    atomic_fetch_sub_explicit(&grp->blocking, 1, memory_order_relaxed);
}
/* Abort every group with a blocked call (the SIGINT handler calls it:
 * only atomic loads and fccl_group_abort). */
void fpy_abort_blocked(void);

/* Run `stmt` with the GIL released, the group marked as blocked. */
#define FPY_BLOCK(grp, stmt)                                                   \
    do {                                                                       \
        fpy_enter(grp);                                                        \
        Py_BEGIN_ALLOW_THREADS stmt;                                           \
        Py_END_ALLOW_THREADS fpy_leave(grp);                                   \
    } while (0)

/* ---- handle.c ---- */

/* What a handle does after its request completed (copy a temporary out,
 * for example).  Runs with the GIL held; returns 0 or -1 with an
 * exception. */
typedef int (*fpy_finish_fn)(void *arg);

typedef struct {
    PyObject_HEAD
    fccl_request_t *req;   /* NULL when done */
    fpy_group *grp;        /* new reference */
    fbuf *held;            /* buffers borrowed until done (RawMalloc'd) */
    int nheld;
    PyObject *keep;        /* a list of further objects to keep alive */
    void *tmp;             /* PyMem_RawMalloc'd scratch, freed when done */
    fpy_finish_fn finish;
    void *finish_arg;      /* freed with PyMem_RawFree when done */
    int status;            /* once done */
    int done;
    const char *what;      /* the call's name, for messages */
} fpy_handle;

extern PyTypeObject fpy_HandleType;

/* A new handle for req on grp.  Takes over the n buffers of bufs (the
 * structs are copied: the caller frees its array but releases none of
 * them), tmp and finish_arg.  req NULL: already done (finish runs now). */
PyObject *fpy_handle_new(fccl_request_t *req, fpy_group *grp, fbuf *bufs,
                         int n, void *tmp, fpy_finish_fn finish,
                         void *finish_arg, const char *what);
/* Add a reference to keep alive until the handle is done. */
int fpy_handle_keep(PyObject *h, PyObject *obj);

/* The common end of a call: on failure (rc < 0) release everything and
 * raise; done synchronously (async_ == 0) run finish, release, return
 * None; else return a handle that owns it all. */
PyObject *fpy_done(int rc, fpy_group *grp, int async_, fccl_request_t *req,
                   fbuf *bufs, int n, void *tmp, fpy_finish_fn finish,
                   void *finish_arg, const char *what);

/* A finish step that copies consecutive pieces of `src` to n places. */
typedef struct {
    const char *src;
    size_t n;
    struct fpy_piece { void *dst; size_t len; } piece[];
} fpy_unpack;
fpy_unpack *fpy_unpack_new(size_t n);
int fpy_unpack_run(void *arg);

/* ---- the collectives' arguments (coll.c; coll_list.c, shaped.c) ---- */

/* A METH_FASTCALL function's parameters, and the check of their count. */
#define ARGS PyObject *self, PyObject *const *a, Py_ssize_t na
#define NARGS(fn, k)                                                           \
    do {                                                                       \
        (void)self;                                                            \
        if (na != (k))                                                         \
            return PyErr_Format(PyExc_TypeError, fn " takes %d arguments",    \
                                (int)(k));                                     \
    } while (0)

/* group and async_op, in the seed's order (group first): the group, or
 * NULL with an exception. */
fpy_group *fpy_group_async(PyObject *g, PyObject *async_obj, int *async_,
                           const char *fn);
/* A list (or tuple) of tensors into *n bufs (PyMem_RawMalloc'd; free with
 * fpy_list_free); None (a non-root's) is an empty list.  The seed's
 * TypeErrors for a non-list, a non-tensor, or mixed dtypes. */
fbuf *fpy_list_arg(PyObject *list, Py_ssize_t *n, int writable,
                   const char *fn, const char *what);
void fpy_list_free(fbuf *bs, Py_ssize_t n);
/* The seed's _check_tensor_list against t and the group size. */
int fpy_check_list(const fbuf *bs, Py_ssize_t n, const fbuf *t, int size,
                   const char *fn);

/* ---- the method tables of each file, joined by module.c ---- */
extern PyMethodDef fpy_group_methods[];
extern PyMethodDef fpy_ft_methods[];
extern PyMethodDef fpy_coll_methods[];
extern PyMethodDef fpy_coll_list_methods[];
extern PyMethodDef fpy_shaped_methods[];
extern PyMethodDef fpy_p2p_methods[];
int fpy_store_add_types(PyObject *m);
/* A Store object owning s (closed with it); NULL with an exception (s is
 * then closed). */
PyObject *fpy_store_wrap(fccl_store_t *s);
extern PyMethodDef fpy_torchstore_methods[];
extern PyMethodDef fpy_torchq_methods[];
int fpy_torchq_add_types(PyObject *m);
int fpy_moe_add_types(PyObject *m);

/* ---- small argument helpers (module.c) ---- */
/* Parse the seeds' `op` (a str: "sum", "prod", "max", "min", "avg");
 * TypeError otherwise.  Returns the op or -1. */
int fpy_op_arg(PyObject *op, const char *fn);
/* 0/1 for a bool, -1 with TypeError naming `what` otherwise. */
int fpy_bool_arg(PyObject *v, const char *what);
/* An int (not bool) into *out; TypeError naming fn and what otherwise. */
int fpy_int_arg(PyObject *v, long *out, const char *fn, const char *what);
/* A list or tuple of non-negative ints (split sizes) into a new array of
 * *n size_t (PyMem_Free it).  None or [] gives *n = 0 and NULL. */
int fpy_sizes_arg(PyObject *v, size_t **out, size_t *n, const char *fn,
                  const char *what);

#endif
