/*
 * Point to point: send, recv, isend, irecv, batch_isend_irecv.
 *
 * `dst`, `src` and `peer` are world ranks, as in the seeds; they are
 * translated to ranks of the group here (the library takes group ranks),
 * and a world rank that is not in the group is a ValueError, never a
 * message to the wrong rank.  Tags are ints >= 0; a send matches the
 * receive of the same pair, group and tag.
 */
#include "fcclpy.h"

#include <string.h>

/* The checks common to the four calls: tensor, peer (world), group, tag.
 * On success b holds the tensor and *peer the group rank. */
static fpy_group *p2p_args(PyObject *const *a, fbuf *b, int *peer, int *tag,
                           int is_send, const char *fn)
{
    const char *who = is_send ? "dst" : "src";
    if (!fbuf_is_array(a[0])) {
        PyErr_Format(PyExc_TypeError, "For %s, the input tensor must be "
                     "tensor, but got %s", fn, Py_TYPE(a[0])->tp_name);
        return NULL;
    }
    long w, t;
    if (fpy_int_arg(a[1], &w, fn, who) < 0)
        return NULL;
    fpy_group *grp = fpy_group_arg(a[2], fn);
    if (!grp)
        return NULL;
    if (fpy_int_arg(a[3], &t, fn, "tag") < 0)
        return NULL;
    if (t < 0 || t > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "For %s, the tag must be in 0..%d, "
                     "but got %ld", fn, INT32_MAX, t);
        return NULL;
    }
    if (w == fccl_get_rank()) {
        PyErr_Format(PyExc_ValueError, is_send ?
                     "Invalid destination rank: destination rank should not "
                     "be the same as the rank of the current process." :
                     "Invalid source rank: source rank should not be the "
                     "same as the rank of the current process.");
        return NULL;
    }
    if ((*peer = fpy_group_rank_of(grp, a[1], fn, who)) < 0)
        return NULL;
    *tag = (int)t;
    if (fbuf_get(a[0], b, !is_send, fn, "tensor") < 0)
        return NULL;
    return grp;
}

#define P2P(name, is_send, call, async_)                                       \
    static PyObject *py_##name(PyObject *self, PyObject *const *a,             \
                               Py_ssize_t na)                                  \
    {                                                                          \
        (void)self;                                                            \
        if (na != 4)                                                           \
            return PyErr_Format(PyExc_TypeError, #name " takes 4 arguments"); \
        fbuf b;                                                                \
        int peer, tag, rc;                                                     \
        fpy_group *grp = p2p_args(a, &b, &peer, &tag, is_send, #name);         \
        if (!grp)                                                              \
            return NULL;                                                       \
        fccl_request_t *req = NULL;                                            \
        (void)req;                                                             \
        FPY_BLOCK(grp, rc = call);                                             \
        if (!(async_) && rc == FCCL_OK) {                                      \
            fbuf_release(&b);                                                  \
            return (is_send) ? Py_NewRef(Py_None) : PyLong_FromLong(0);        \
        }                                                                      \
        return fpy_done(rc, grp, async_, req, &b, 1, NULL, NULL, NULL, #name); \
    }

P2P(send, 1, fccl_send(b.ptr, b.count, b.dtype, peer, tag, grp->g), 0)
P2P(recv, 0, fccl_recv(b.ptr, b.count, b.dtype, peer, tag, grp->g), 0)
P2P(isend, 1,
    fccl_isend(b.ptr, b.count, b.dtype, peer, tag, grp->g, &req), 1)
P2P(irecv, 0,
    fccl_irecv(b.ptr, b.count, b.dtype, peer, tag, grp->g, &req), 1)

/* batch(ops, group): ops a list of (is_send, tensor, peer, tag) with world
 * peers; one handle for all of them. */
static PyObject *py_batch(PyObject *self, PyObject *const *a, Py_ssize_t na)
{
    (void)self;
    static const char fn[] = "batch_isend_irecv";
    if (na != 2)
        return PyErr_Format(PyExc_TypeError, "batch(ops, group)");
    if (!PyList_Check(a[0]))
        return PyErr_Format(PyExc_TypeError, "batch: ops must be a list");
    fpy_group *grp = fpy_group_arg(a[1], fn);
    if (!grp)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(a[0]);
    fbuf *bs = PyMem_RawCalloc(n + 1, sizeof(fbuf));
    fccl_p2p_op_t *ops = PyMem_Calloc(n + 1, sizeof *ops);
    PyObject *res = NULL;
    Py_ssize_t got = 0;
    if (!bs || !ops) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(a[0], i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
            PyErr_SetString(PyExc_TypeError, "batch: ops must be (is_send, "
                            "tensor, peer, tag) tuples");
            goto out;
        }
        int is_send = PyObject_IsTrue(PyTuple_GET_ITEM(t, 0));
        long tag;
        if (is_send < 0 ||
            fpy_int_arg(PyTuple_GET_ITEM(t, 3), &tag, "P2POp", "tag") < 0)
            goto out;
        if (tag < 0 || tag > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "For P2POp, the tag must be in "
                         "0..%d, but got %ld", INT32_MAX, tag);
            goto out;
        }
        int peer = fpy_group_rank_of(grp, PyTuple_GET_ITEM(t, 2), "P2POp",
                                     "peer");
        if (peer < 0)
            goto out;
        if (peer == grp->rank) {
            PyErr_Format(PyExc_ValueError, "For %s, op %zd has this rank "
                         "itself as its peer", fn, i);
            goto out;
        }
        if (fbuf_get(PyTuple_GET_ITEM(t, 1), &bs[i], !is_send, "P2POp",
                     "tensor") < 0)
            goto out;
        got = i + 1;
        ops[i] = (fccl_p2p_op_t){is_send, bs[i].ptr, bs[i].count,
                                 bs[i].dtype, peer, (int)tag};
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_batch_isend_irecv(ops, n, grp->g, &req));
    res = fpy_done(rc, grp, 1, req, bs, (int)n, NULL, NULL, NULL, fn);
    got = 0; /* moved into the handle, or released */
out:
    for (Py_ssize_t i = 0; i < got; i++)
        fbuf_release(&bs[i]);
    PyMem_RawFree(bs);
    PyMem_Free(ops);
    return res;
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, \
                 "See fccl." #name "."}
PyMethodDef fpy_p2p_methods[] = {
    M(send), M(recv), M(isend), M(irecv), M(batch),
    {NULL, NULL, 0, NULL},
};
