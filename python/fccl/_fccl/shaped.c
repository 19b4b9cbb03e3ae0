/*
 * The collectives on shaped tensors of comm_ops: NeighborExchangeV2 and
 * AlltoAll with split and concat dimensions (fccl_neighbor_exchange_v2,
 * fccl_all_to_all_dims), and their output shapes.
 *
 * The Python side (fccl/coll.py) passes the input's shape (tensor.shape,
 * which this layer's buffer view does not keep); here the seed's type
 * checks (lists of ints: TypeError; their lengths and data_format:
 * ValueError) come first, then the library checks every value on this
 * rank before anything is sent (FCCL_ERR_INVALID, a ValueError naming the
 * argument), and the buffers must hold exactly the elements of their
 * shapes.  Rank ids are group ranks, as the seed checks them against the
 * group's size.
 */
#include "fcclpy.h"

#include <string.h>

/* ---- arguments ---- */

/* A list or tuple of exactly n ints (the seed: a TypeError for what is
 * not a list of ints, a ValueError for the wrong length). */
static int int_list(PyObject *v, long *out, Py_ssize_t n, const char *fn,
                    const char *what)
{
    if (!PyList_Check(v) && !PyTuple_Check(v)) {
        PyErr_Format(PyExc_TypeError, "For '%s', the '%s' must be a list, "
                     "but got %s", fn, what, Py_TYPE(v)->tp_name);
        return -1;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(v);
    if (len != n) {
        PyErr_Format(PyExc_ValueError, "For '%s', the '%s' must have %zd "
                     "entries, but got %zd", fn, what, n, len);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (fpy_int_arg(PySequence_Fast_GET_ITEM(v, i), &out[i], fn, what) < 0)
            return -1;
    return 0;
}

/* A shape (a tuple of non-negative ints, at most FCCL_COLL_MAX_DIMS). */
static int shape_arg(PyObject *v, size_t *dims, size_t *nd, const char *fn)
{
    size_t *s, n;
    if (fpy_sizes_arg(v, &s, &n, fn, "shape") < 0)
        return -1;
    if (n > FCCL_COLL_MAX_DIMS) {
        PyMem_Free(s);
        PyErr_Format(PyExc_ValueError, "For '%s', the input has %zu "
                     "dimensions, at most %d are supported", fn, n,
                     FCCL_COLL_MAX_DIMS);
        return -1;
    }
    if (n)
        memcpy(dims, s, n * sizeof(size_t));
    PyMem_Free(s);
    *nd = n;
    return 0;
}

static PyObject *shape_tuple(const size_t *dims, size_t nd)
{
    PyObject *t = PyTuple_New((Py_ssize_t)nd);
    for (size_t i = 0; t && i < nd; i++) {
        PyObject *x = PyLong_FromSize_t(dims[i]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, x);
    }
    return t;
}

static size_t elems(const size_t *dims, size_t nd)
{
    size_t n = 1;
    for (size_t i = 0; i < nd; i++)
        n *= dims[i];
    return n;
}

/* The arguments of NeighborExchangeV2, parsed. */
struct nbr {
    size_t dims[FCCL_COLL_MAX_DIMS], nd;
    int sid[8], rid[8];
    int64_t slen[4], rlen[4];
};

static int ids_arg(PyObject *v, int *ids, const char *fn, const char *what)
{
    long t[8];
    if (int_list(v, t, 8, fn, what) < 0)
        return -1;
    for (int i = 0; i < 8; i++) {
        if (t[i] < -1 || t[i] > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "For '%s', all the rank ids must "
                         "be >= 0 or -1, but got %s[%d] = %ld", fn, what, i,
                         t[i]);
            return -1;
        }
        ids[i] = (int)t[i];
    }
    return 0;
}

static int lens_arg(PyObject *v, int64_t *lens, const char *fn,
                    const char *what)
{
    long t[4];
    if (int_list(v, t, 4, fn, what) < 0)
        return -1;
    for (int i = 0; i < 4; i++)
        lens[i] = t[i];
    return 0;
}

/* shape, send_rank_ids, send_lens, recv_rank_ids, recv_lens, data_format
 * at a[0..5], in the seed's order of checks; the output shape in out. */
static int nbr_args(PyObject *const *a, struct nbr *n, size_t *out,
                    const char *fn)
{
    if (shape_arg(a[0], n->dims, &n->nd, fn) < 0 ||
        ids_arg(a[1], n->sid, fn, "send_rank_ids") < 0 ||
        lens_arg(a[2], n->slen, fn, "send_lens") < 0 ||
        ids_arg(a[3], n->rid, fn, "recv_rank_ids") < 0 ||
        lens_arg(a[4], n->rlen, fn, "recv_lens") < 0)
        return -1;
    if (!PyUnicode_Check(a[5])) {
        PyErr_Format(PyExc_TypeError, "For '%s', the 'data_format' must be "
                     "str, but got %s", fn, Py_TYPE(a[5])->tp_name);
        return -1;
    }
    if (PyUnicode_CompareWithASCIIString(a[5], "NCHW") != 0) {
        PyErr_Format(PyExc_ValueError, "For '%s', the 'data_format' only "
                     "supports NCHW now, but got %U", fn, a[5]);
        return -1;
    }
    int rc = fccl_neighbor_exchange_v2_shape(n->dims, n->nd, n->sid, n->slen,
                                             n->rid, n->rlen, out);
    return rc < 0 ? (fpy_raise(rc, fn), -1) : 0;
}

/* The buffers: the same dtype, each exactly its shape's elements. */
static int shaped_bufs(PyObject *out, PyObject *in, size_t nin, size_t nout,
                       fbuf *bo, fbuf *bi, const char *fn)
{
    if (!fbuf_is_array(in) || !fbuf_is_array(out)) {
        PyErr_Format(PyExc_TypeError, "For '%s', the input and output must "
                     "be tensors, but got %s and %s", fn,
                     Py_TYPE(in)->tp_name, Py_TYPE(out)->tp_name);
        return -1;
    }
    if (fbuf_get(out, bo, 1, fn, "output") < 0)
        return -1;
    if (fbuf_get(in, bi, 0, fn, "input") < 0) {
        fbuf_release(bo);
        return -1;
    }
    const char *bad = fbuf_same_dtype(bi, bo, fn) < 0 ? ""
                      : bi->count != nin              ? "input"
                      : bo->count != nout             ? "output"
                                                      : NULL;
    if (bad && *bad)
        PyErr_Format(PyExc_ValueError, "For '%s', the %s has %zu elements, "
                     "but its shape needs %zu", fn, bad,
                     *bad == 'i' ? bi->count : bo->count,
                     *bad == 'i' ? nin : nout);
    if (bad) {
        fbuf_release(bo);
        fbuf_release(bi);
        return -1;
    }
    return 0;
}

static PyObject *done(int rc, fpy_group *grp, int async_, fccl_request_t *req,
                      fbuf *bo, fbuf *bi, const char *fn)
{
    fbuf bs[2] = {*bo, *bi};
    return fpy_done(rc, grp, async_, req, bs, 2, NULL, NULL, NULL, fn);
}

static fpy_group *group_async(PyObject *g, PyObject *async_obj, int *async_,
                              const char *fn)
{
    fpy_group *grp = fpy_group_arg(g, fn);
    if (!grp || (*async_ = fpy_bool_arg(async_obj, "async_op")) < 0)
        return NULL;
    return grp;
}

/* ---- NeighborExchangeV2 ---- */

/* neighbor_exchange_v2_shape(shape, send_rank_ids, send_lens,
 * recv_rank_ids, recv_lens, data_format) -> the output's shape */
static PyObject *py_neighbor_exchange_v2_shape(ARGS)
{
    NARGS("neighbor_exchange_v2_shape", 6);
    struct nbr n;
    size_t out[4];
    if (nbr_args(a, &n, out, "NeighborExchangeV2") < 0)
        return NULL;
    return shape_tuple(out, 4);
}

/* neighbor_exchange_v2(output, input, shape, send_rank_ids, send_lens,
 * recv_rank_ids, recv_lens, data_format, group, async_op) */
static PyObject *py_neighbor_exchange_v2(ARGS)
{
    NARGS("neighbor_exchange_v2", 10);
    static const char fn[] = "NeighborExchangeV2";
    struct nbr n;
    size_t od[4];
    int async_;
    if (nbr_args(a + 2, &n, od, fn) < 0)
        return NULL;
    fpy_group *grp = group_async(a[8], a[9], &async_, fn);
    fbuf bo, bi;
    if (!grp || shaped_bufs(a[0], a[1], elems(n.dims, 4), elems(od, 4), &bo,
                            &bi, fn) < 0)
        return NULL;
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_neighbor_exchange_v2(
                       bi.ptr, n.dims, 4, bo.ptr, n.sid, n.slen, n.rid,
                       n.rlen, bi.dtype, grp->g, async_ ? &req : NULL));
    return done(rc, grp, async_, req, &bo, &bi, fn);
}

/* ---- AlltoAll(split_count, split_dim, concat_dim) ---- */

static int a2a_args(PyObject *const *a, size_t *dims, size_t *nd,
                    long *v3, size_t *out, const char *fn)
{
    static const char *const what[3] = {"split_count", "split_dim",
                                        "concat_dim"};
    if (shape_arg(a[0], dims, nd, fn) < 0)
        return -1;
    for (int i = 0; i < 3; i++) {
        if (fpy_int_arg(a[1 + i], &v3[i], fn, what[i]) < 0)
            return -1;
        if (v3[i] < INT32_MIN || v3[i] > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "For '%s', the '%s' %ld is out of "
                         "range", fn, what[i], v3[i]);
            return -1;
        }
    }
    int rc = fccl_all_to_all_dims_shape(dims, *nd, (int)v3[0], (int)v3[1],
                                        (int)v3[2], out);
    return rc < 0 ? (fpy_raise(rc, fn), -1) : 0;
}

/* all_to_all_dims_shape(shape, split_count, split_dim, concat_dim) */
static PyObject *py_all_to_all_dims_shape(ARGS)
{
    NARGS("all_to_all_dims_shape", 4);
    size_t dims[FCCL_COLL_MAX_DIMS], out[FCCL_COLL_MAX_DIMS], nd;
    long v[3];
    if (a2a_args(a, dims, &nd, v, out, "AlltoAll") < 0)
        return NULL;
    return shape_tuple(out, nd);
}

/* all_to_all_dims(output, input, shape, split_count, split_dim,
 * concat_dim, group, async_op) */
static PyObject *py_all_to_all_dims(ARGS)
{
    NARGS("all_to_all_dims", 8);
    static const char fn[] = "AlltoAll";
    size_t dims[FCCL_COLL_MAX_DIMS], out[FCCL_COLL_MAX_DIMS], nd;
    long v[3];
    int async_;
    if (a2a_args(a + 2, dims, &nd, v, out, fn) < 0)
        return NULL;
    fpy_group *grp = group_async(a[6], a[7], &async_, fn);
    fbuf bo, bi;
    size_t total = elems(dims, nd);
    if (!grp || shaped_bufs(a[0], a[1], total, total, &bo, &bi, fn) < 0)
        return NULL;
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_all_to_all_dims(bi.ptr, bo.ptr, dims, nd,
                                             (int)v[0], (int)v[1], (int)v[2],
                                             bi.dtype, grp->g,
                                             async_ ? &req : NULL));
    return done(rc, grp, async_, req, &bo, &bi, fn);
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, \
                 "See fccl.coll."}
PyMethodDef fpy_shaped_methods[] = {
    M(neighbor_exchange_v2), M(neighbor_exchange_v2_shape),
    M(all_to_all_dims), M(all_to_all_dims_shape),
    {NULL, NULL, 0, NULL},
};
