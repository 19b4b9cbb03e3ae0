/*
 * The collectives of comm_func, each one library call.
 *
 * Every function takes the seed's arguments positionally (the Python
 * wrappers in fccl/coll.py pass them all), checks them in the seed's
 * order with the seed's exception types, then calls the library with the
 * GIL released.  Roots (src, dst) are world ranks, translated to group
 * ranks here.  Sizes are checked before anything is sent: a wrong size is
 * a ValueError (TypeError where the seed says so: the list variants).
 *
 * The tensor forms, here, work in place on the caller's memory; the list
 * forms are in coll_list.c.  The argument checks both use are here too.
 */
#include "fcclpy.h"

#include <string.h>
#include <time.h>

/* ---- shared checks ---- */

static int count_error(const char *fn, const char *what, size_t got,
                       size_t want)
{
    PyErr_Format(PyExc_ValueError, "For %s, %s has %zu elements, but %zu are "
                 "needed", fn, what, got, want);
    return -1;
}

/* group and async_op, in the seed's order (group first). */
fpy_group *fpy_group_async(PyObject *g, PyObject *async_obj, int *async_,
                           const char *fn)
{
    fpy_group *grp = fpy_group_arg(g, fn);
    if (!grp)
        return NULL;
    if ((*async_ = fpy_bool_arg(async_obj, "async_op")) < 0)
        return NULL;
    return grp;
}

/* A list (or tuple) of tensors into bufs (n of them); the seed's
 * TypeErrors for a non-list, a non-tensor, or mixed dtypes. */
fbuf *fpy_list_arg(PyObject *list, Py_ssize_t *n, int writable,
                   const char *fn, const char *what)
{
    static PyObject *empty;
    if (list == Py_None) { /* torch lets non-roots pass None */
        if (!empty && !(empty = PyTuple_New(0)))
            return NULL;
        list = empty;
    }
    if (!PyList_Check(list) && !PyTuple_Check(list)) {
        PyErr_Format(PyExc_TypeError, "Expected list or tuple, but got %s.",
                     Py_TYPE(list)->tp_name);
        return NULL;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(list);
    fbuf *bs = PyMem_RawCalloc(len + 1, sizeof(fbuf));
    if (!bs) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(list, i);
        if (!fbuf_is_array(o)) {
            PyErr_Format(PyExc_TypeError, "Expected tensor, but got %s",
                         Py_TYPE(o)->tp_name);
            goto fail;
        }
        if (fbuf_get(o, &bs[i], writable, fn, what) < 0)
            goto fail;
        if (i > 0 && bs[i].dtype != bs[0].dtype) {
            PyErr_Format(PyExc_TypeError, "tensor_lists dtype must be the "
                         "same, but got %s and %s.",
                         fpy_dtype_name(bs[0].dtype),
                         fpy_dtype_name(bs[i].dtype));
            fbuf_release(&bs[i]);
            goto fail;
        }
        *n = i + 1;
    }
    *n = len;
    return bs;
fail:
    for (Py_ssize_t i = 0; i < len; i++)
        fbuf_release(&bs[i]);
    PyMem_RawFree(bs);
    return NULL;
}

void fpy_list_free(fbuf *bs, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        fbuf_release(&bs[i]);
    PyMem_RawFree(bs);
}

/* The seed's _check_tensor_list: len == group size, every item holds as
 * many elements as `t`, same dtype (TypeError each). */
int fpy_check_list(const fbuf *bs, Py_ssize_t n, const fbuf *t, int size,
                   const char *fn)
{
    if (n != size) {
        PyErr_Format(PyExc_TypeError, "The argument list tensor len must be "
                     "equal to group rank size, but got %zd.", n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (bs[i].dtype != t->dtype) {
            PyErr_Format(PyExc_TypeError, "For %s, the argument list tensor "
                         "type must be equal to tensor type, but got %s.",
                         fn, fpy_dtype_name(bs[i].dtype));
            return -1;
        }
        if (bs[i].count != t->count) {
            PyErr_Format(PyExc_TypeError, "For %s, the argument list tensor "
                         "shape must be equal to tensor shape: item %zd has "
                         "%zu elements, the tensor %zu.", fn, i, bs[i].count,
                         t->count);
            return -1;
        }
    }
    return 0;
}

/* A single-tensor call's end: b (and b2 if given) are moved into the
 * handle or released. */
static PyObject *done2(int rc, fpy_group *grp, int async_,
                       fccl_request_t *req, fbuf *b, fbuf *b2,
                       const char *what)
{
    fbuf bs[2];
    int n = 0;
    bs[n++] = *b;
    if (b2)
        bs[n++] = *b2;
    return fpy_done(rc, grp, async_, req, bs, n, NULL, NULL, NULL, what);
}

/* ---- all_reduce, broadcast, reduce, barrier ---- */

/* all_reduce(tensor, op, group, async_op) -- in place */
static PyObject *py_all_reduce(ARGS)
{
    NARGS("all_reduce", 4);
    static const char fn[] = "all_reduce";
    fbuf b;
    if (!fbuf_is_array(a[0]))
        return PyErr_Format(PyExc_TypeError, "For all_reduce, the input "
                            "tensor must be tensor, but got %s",
                            Py_TYPE(a[0])->tp_name);
    int op = fpy_op_arg(a[1], fn), async_;
    if (op < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[2], a[3], &async_, fn);
    if (!grp || fbuf_get(a[0], &b, 1, fn, "tensor") < 0)
        return NULL;
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_all_reduce(b.ptr, b.ptr, b.count, b.dtype, op,
                                        grp->g, async_ ? &req : NULL));
    if (!async_ && rc == FCCL_OK) { /* the hot path */
        fbuf_release(&b);
        Py_RETURN_NONE;
    }
    return done2(rc, grp, async_, req, &b, NULL, fn);
}

/* broadcast(tensor, src, group, async_op) */
static PyObject *py_broadcast(ARGS)
{
    NARGS("broadcast", 4);
    static const char fn[] = "broadcast";
    if (!fbuf_is_array(a[0]))
        return PyErr_Format(PyExc_TypeError, "For broadcast, the input tensor "
                            "must be tensor, but got %s",
                            Py_TYPE(a[0])->tp_name);
    long src;
    if (fpy_int_arg(a[1], &src, fn, "src") < 0)
        return NULL;
    int async_;
    fpy_group *grp = fpy_group_async(a[2], a[3], &async_, fn);
    if (!grp)
        return NULL;
    int root = fpy_group_rank_of(grp, a[1], fn, "src");
    fbuf b;
    if (root < 0 || fbuf_get(a[0], &b, root != grp->rank, fn, "tensor") < 0)
        return NULL;
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_broadcast(b.ptr, b.count, b.dtype, root, grp->g,
                                       async_ ? &req : NULL));
    return done2(rc, grp, async_, req, &b, NULL, fn);
}

/* reduce(tensor, dst, op, group, async_op) -- in place on dst */
static PyObject *py_reduce(ARGS)
{
    NARGS("reduce", 5);
    static const char fn[] = "reduce";
    if (!fbuf_is_array(a[0]))
        return PyErr_Format(PyExc_TypeError, "For reduce, the input tensor "
                            "must be tensor, but got %s",
                            Py_TYPE(a[0])->tp_name);
    long dst;
    if (fpy_int_arg(a[1], &dst, fn, "dst") < 0)
        return NULL;
    int op = fpy_op_arg(a[2], fn), async_;
    if (op < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[3], a[4], &async_, fn);
    if (!grp)
        return NULL;
    int root = fpy_group_rank_of(grp, a[1], fn, "dst");
    fbuf b;
    if (root < 0 || fbuf_get(a[0], &b, root == grp->rank, fn, "tensor") < 0)
        return NULL;
    fccl_request_t *req = NULL;
    int rc;
    void *recv = root == grp->rank ? b.ptr : NULL;
    FPY_BLOCK(grp, rc = fccl_reduce(b.ptr, recv, b.count, b.dtype, op, root,
                                    grp->g, async_ ? &req : NULL));
    return done2(rc, grp, async_, req, &b, NULL, fn);
}

/* barrier(group, async_op) */
static PyObject *py_barrier(ARGS)
{
    NARGS("barrier", 2);
    int async_;
    fpy_group *grp = fpy_group_async(a[0], a[1], &async_, "barrier");
    if (!grp)
        return NULL;
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_barrier(grp->g, async_ ? &req : NULL));
    return fpy_done(rc, grp, async_, req, NULL, 0, NULL, NULL, NULL,
                    "barrier");
}

/* ---- the tensor forms with an output ---- */

/* out (writable) and in, both tensors, same dtype. */
static int out_in(PyObject *out, PyObject *in, const char *fn)
{
    if (!fbuf_is_array(in)) {
        PyErr_Format(PyExc_TypeError, "For %s, the input tensor must be "
                     "tensor, but got %s", fn, Py_TYPE(in)->tp_name);
        return -1;
    }
    if (!fbuf_is_array(out)) {
        PyErr_Format(PyExc_TypeError, "For %s, the output tensor must be "
                     "tensor, but got %s", fn, Py_TYPE(out)->tp_name);
        return -1;
    }
    return 0;
}

static int get_out_in(PyObject *out, PyObject *in, fbuf *bo, fbuf *bi,
                      int out_writable, const char *fn)
{
    if (fbuf_get(out, bo, out_writable, fn, "output") < 0)
        return -1;
    if (fbuf_get(in, bi, 0, fn, "input") < 0) {
        fbuf_release(bo);
        return -1;
    }
    if (fbuf_same_dtype(bi, bo, fn) < 0) {
        fbuf_release(bo);
        fbuf_release(bi);
        return -1;
    }
    return 0;
}

static PyObject *fail2(fbuf *bo, fbuf *bi)
{
    fbuf_release(bo);
    fbuf_release(bi);
    return NULL;
}

/* all_gather_into_tensor(output, input, group, async_op) */
static PyObject *py_all_gather_into_tensor(ARGS)
{
    NARGS("all_gather_into_tensor", 4);
    static const char fn[] = "all_gather_into_tensor";
    fbuf bo, bi;
    int async_;
    if (out_in(a[0], a[1], fn) < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[2], a[3], &async_, fn);
    if (!grp || get_out_in(a[0], a[1], &bo, &bi, 1, fn) < 0)
        return NULL;
    if (bo.count != bi.count * grp->size) {
        count_error(fn, "output", bo.count, bi.count * grp->size);
        return fail2(&bo, &bi);
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_all_gather(bi.ptr, bo.ptr, bi.count, bi.dtype,
                                        grp->g, async_ ? &req : NULL));
    return done2(rc, grp, async_, req, &bo, &bi, fn);
}

/* Split sizes (rows) -> element counts, checked: n == size. */
static size_t *split_counts(PyObject *splits, int size, size_t row,
                            const char *fn, const char *what)
{
    size_t *s, n;
    if (fpy_sizes_arg(splits, &s, &n, fn, what) < 0)
        return NULL;
    if (n != (size_t)size) {
        PyErr_Format(PyExc_ValueError, "For %s, %s has %zu entries, but the "
                     "group has %d ranks", fn, what, n, size);
        PyMem_Free(s);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        s[i] *= row;
    return s;
}

static size_t sum_of(const size_t *c, size_t n)
{
    size_t t = 0;
    for (size_t i = 0; i < n; i++)
        t += c[i];
    return t;
}

static int is_empty_sizes(PyObject *s)
{
    return s == Py_None ||
           ((PyList_Check(s) || PyTuple_Check(s)) &&
            PySequence_Fast_GET_SIZE(s) == 0);
}

/* all_gather_into_tensor_uneven(output, input, output_split_sizes, group,
 * async_op) */
static PyObject *py_all_gather_into_tensor_uneven(ARGS)
{
    NARGS("all_gather_into_tensor_uneven", 5);
    static const char fn[] = "all_gather_into_tensor_uneven";
    fbuf bo, bi;
    int async_;
    if (out_in(a[0], a[1], fn) < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[3], a[4], &async_, fn);
    if (!grp || get_out_in(a[0], a[1], &bo, &bi, 1, fn) < 0)
        return NULL;
    fccl_request_t *req = NULL;
    int rc;
    if (is_empty_sizes(a[2])) {
        if (bo.count != bi.count * grp->size) {
            count_error(fn, "output", bo.count, bi.count * grp->size);
            return fail2(&bo, &bi);
        }
        FPY_BLOCK(grp, rc = fccl_all_gather(bi.ptr, bo.ptr, bi.count,
                                            bi.dtype, grp->g,
                                            async_ ? &req : NULL));
        return done2(rc, grp, async_, req, &bo, &bi, fn);
    }
    size_t row = bo.row;
    size_t *counts = split_counts(a[2], grp->size, row, fn,
                                  "output_split_sizes");
    if (!counts)
        return fail2(&bo, &bi);
    if (bi.count != counts[grp->rank]) {
        PyErr_Format(PyExc_ValueError, "For %s, the input has %zu elements, "
                     "but output_split_sizes[%d] rows of the output hold %zu",
                     fn, bi.count, grp->rank, counts[grp->rank]);
        PyMem_Free(counts);
        return fail2(&bo, &bi);
    }
    if (bo.count != sum_of(counts, grp->size)) {
        count_error(fn, "output", bo.count, sum_of(counts, grp->size));
        PyMem_Free(counts);
        return fail2(&bo, &bi);
    }
    FPY_BLOCK(grp, rc = fccl_all_gather_v(bi.ptr, bi.count, bo.ptr, counts,
                                          bi.dtype, grp->g,
                                          async_ ? &req : NULL));
    PyMem_Free(counts);
    return done2(rc, grp, async_, req, &bo, &bi, fn);
}

/* reduce_scatter_tensor(output, input, op, group, async_op) */
static PyObject *py_reduce_scatter_tensor(ARGS)
{
    NARGS("reduce_scatter_tensor", 5);
    static const char fn[] = "reduce_scatter_tensor";
    fbuf bo, bi;
    int async_;
    if (out_in(a[0], a[1], fn) < 0)
        return NULL;
    int op = fpy_op_arg(a[2], fn);
    if (op < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[3], a[4], &async_, fn);
    if (!grp || get_out_in(a[0], a[1], &bo, &bi, 1, fn) < 0)
        return NULL;
    if (bi.count != bo.count * grp->size) {
        PyErr_Format(PyExc_ValueError, "For %s, the input has %zu elements: "
                     "it must be the group size (%d) times the output's %zu",
                     fn, bi.count, grp->size, bo.count);
        return fail2(&bo, &bi);
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_reduce_scatter(bi.ptr, bo.ptr, bo.count,
                                            bo.dtype, op, grp->g,
                                            async_ ? &req : NULL));
    return done2(rc, grp, async_, req, &bo, &bi, fn);
}

/* reduce_scatter_tensor_uneven(output, input, input_split_sizes, op, group,
 * async_op) */
static PyObject *py_reduce_scatter_tensor_uneven(ARGS)
{
    NARGS("reduce_scatter_tensor_uneven", 6);
    static const char fn[] = "reduce_scatter_tensor_uneven";
    fbuf bo, bi;
    int async_;
    if (out_in(a[0], a[1], fn) < 0)
        return NULL;
    int op = fpy_op_arg(a[3], fn);
    if (op < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[4], a[5], &async_, fn);
    if (!grp || get_out_in(a[0], a[1], &bo, &bi, 1, fn) < 0)
        return NULL;
    fccl_request_t *req = NULL;
    int rc;
    if (is_empty_sizes(a[2])) {
        if (bi.count != bo.count * grp->size) {
            count_error(fn, "input", bi.count, bo.count * grp->size);
            return fail2(&bo, &bi);
        }
        FPY_BLOCK(grp, rc = fccl_reduce_scatter(bi.ptr, bo.ptr, bo.count,
                                                bo.dtype, op, grp->g,
                                                async_ ? &req : NULL));
        return done2(rc, grp, async_, req, &bo, &bi, fn);
    }
    size_t *counts = split_counts(a[2], grp->size, bi.row, fn,
                                  "input_split_sizes");
    if (!counts)
        return fail2(&bo, &bi);
    if (bi.count != sum_of(counts, grp->size)) {
        count_error(fn, "input", bi.count, sum_of(counts, grp->size));
        PyMem_Free(counts);
        return fail2(&bo, &bi);
    }
    if (bo.count != counts[grp->rank]) {
        PyErr_Format(PyExc_ValueError, "For %s, the output has %zu elements, "
                     "but input_split_sizes[%d] rows hold %zu", fn, bo.count,
                     grp->rank, counts[grp->rank]);
        PyMem_Free(counts);
        return fail2(&bo, &bi);
    }
    FPY_BLOCK(grp, rc = fccl_reduce_scatter_v(bi.ptr, bo.ptr, counts,
                                              bo.dtype, op, grp->g,
                                              async_ ? &req : NULL));
    PyMem_Free(counts);
    return done2(rc, grp, async_, req, &bo, &bi, fn);
}

/* gather_into_tensor(output, input, dst, group, async_op) */
static PyObject *py_gather_into_tensor(ARGS)
{
    NARGS("gather_into_tensor", 5);
    static const char fn[] = "gather_into_tensor";
    fbuf bo, bi;
    int async_;
    if (out_in(a[0], a[1], fn) < 0)
        return NULL;
    long dst;
    if (fpy_int_arg(a[2], &dst, fn, "dst") < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[3], a[4], &async_, fn);
    if (!grp)
        return NULL;
    int root = fpy_group_rank_of(grp, a[2], fn, "dst");
    int me_root = root == grp->rank;
    if (root < 0 || get_out_in(a[0], a[1], &bo, &bi, me_root, fn) < 0)
        return NULL;
    if (me_root && bo.count != bi.count * grp->size) {
        count_error(fn, "output", bo.count, bi.count * grp->size);
        return fail2(&bo, &bi);
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_gather(bi.ptr, me_root ? bo.ptr : NULL,
                                    bi.count, bi.dtype, root, grp->g,
                                    async_ ? &req : NULL));
    return done2(rc, grp, async_, req, &bo, &bi, fn);
}

/* scatter_tensor(output, input, src, group, async_op) */
static PyObject *py_scatter_tensor(ARGS)
{
    NARGS("scatter_tensor", 5);
    static const char fn[] = "scatter_tensor";
    fbuf bo, bi;
    int async_;
    if (out_in(a[0], a[1], fn) < 0)
        return NULL;
    long src;
    if (fpy_int_arg(a[2], &src, fn, "src") < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[3], a[4], &async_, fn);
    if (!grp)
        return NULL;
    int root = fpy_group_rank_of(grp, a[2], fn, "src");
    if (root < 0 || get_out_in(a[0], a[1], &bo, &bi, 1, fn) < 0)
        return NULL;
    int me_root = root == grp->rank;
    if (me_root && bi.count != bo.count * grp->size) {
        count_error(fn, "input", bi.count, bo.count * grp->size);
        return fail2(&bo, &bi);
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_scatter(me_root ? bi.ptr : NULL, bo.ptr,
                                     bo.count, bo.dtype, root, grp->g,
                                     async_ ? &req : NULL));
    return done2(rc, grp, async_, req, &bo, &bi, fn);
}

/* all_to_all_single(output, input, output_split_sizes, input_split_sizes,
 * group, async_op) */
static PyObject *py_all_to_all_single(ARGS)
{
    NARGS("all_to_all_single", 6);
    static const char fn[] = "all_to_all_single";
    fbuf bo, bi;
    int async_;
    if (out_in(a[0], a[1], fn) < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[4], a[5], &async_, fn);
    if (!grp || get_out_in(a[0], a[1], &bo, &bi, 1, fn) < 0)
        return NULL;
    int n = grp->size, rc;
    fccl_request_t *req = NULL;
    int in_even = is_empty_sizes(a[3]), out_even = is_empty_sizes(a[2]);
    if (in_even && bi.dim0 % n) {
        PyErr_Format(PyExc_ValueError, "input shape at dim 0 must be divided "
                     "by world_size, but got %zd and %d.", bi.dim0, n);
        return fail2(&bo, &bi);
    }
    if (out_even && bo.dim0 % n) {
        PyErr_Format(PyExc_ValueError, "output shape at dim 0 must be divided "
                     "by world_size, but got %zd and %d.", bo.dim0, n);
        return fail2(&bo, &bi);
    }
    if (in_even && out_even) {
        if (bo.count != bi.count) {
            count_error(fn, "output", bo.count, bi.count);
            return fail2(&bo, &bi);
        }
        FPY_BLOCK(grp, rc = fccl_all_to_all(bi.ptr, bo.ptr, bi.count / n,
                                            bi.dtype, grp->g,
                                            async_ ? &req : NULL));
        return done2(rc, grp, async_, req, &bo, &bi, fn);
    }
    size_t *sc = NULL, *rcnt = NULL;
    if (in_even) {
        if ((sc = PyMem_Malloc(n * sizeof *sc)))
            for (int i = 0; i < n; i++)
                sc[i] = bi.count / n;
    } else {
        sc = split_counts(a[3], n, bi.row, fn, "input_split_sizes");
    }
    if (out_even) {
        if ((rcnt = PyMem_Malloc(n * sizeof *rcnt)))
            for (int i = 0; i < n; i++)
                rcnt[i] = bo.count / n;
    } else if (sc) {
        rcnt = split_counts(a[2], n, bo.row, fn, "output_split_sizes");
    }
    if (!sc || !rcnt) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    if (sum_of(sc, n) != bi.count) {
        count_error(fn, "input", bi.count, sum_of(sc, n));
        goto fail;
    }
    if (sum_of(rcnt, n) != bo.count) {
        count_error(fn, "output", bo.count, sum_of(rcnt, n));
        goto fail;
    }
    FPY_BLOCK(grp, rc = fccl_all_to_all_v(bi.ptr, sc, bo.ptr, rcnt, bi.dtype,
                                          grp->g, async_ ? &req : NULL));
    PyMem_Free(sc);
    PyMem_Free(rcnt);
    return done2(rc, grp, async_, req, &bo, &bi, fn);
fail:
    PyMem_Free(sc);
    PyMem_Free(rcnt);
    return fail2(&bo, &bi);
}

/* all_to_all_v_c(output, input, send_count_matrix, group, async_op) */
static PyObject *py_all_to_all_v_c(ARGS)
{
    NARGS("all_to_all_v_c", 5);
    static const char fn[] = "all_to_all_v_c";
    fbuf bo, bi;
    int async_;
    if (out_in(a[0], a[1], fn) < 0)
        return NULL;
    fpy_group *grp = fpy_group_async(a[3], a[4], &async_, fn);
    if (!grp)
        return NULL;
    if (!PyList_Check(a[2]))
        return PyErr_Format(PyExc_TypeError, "send_count_matrix must be list, "
                            "but got %s", Py_TYPE(a[2])->tp_name);
    Py_ssize_t len = PyList_GET_SIZE(a[2]);
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *x = PyList_GET_ITEM(a[2], i);
        if (!PyLong_Check(x) || PyBool_Check(x))
            return PyErr_Format(PyExc_TypeError, "send_count_matrix elements "
                                "must be of type int");
    }
    int n = grp->size, me = grp->rank;
    if (len != (Py_ssize_t)n * n)
        return PyErr_Format(PyExc_TypeError, "send_count_matrix must be "
                            "square matrix, but got %zd.", len);
    size_t *m, mn;
    if (fpy_sizes_arg(a[2], &m, &mn, fn, "send_count_matrix") < 0)
        return NULL;
    if (get_out_in(a[0], a[1], &bo, &bi, 1, fn) < 0) {
        PyMem_Free(m);
        return NULL;
    }
    size_t row = bi.row, sent = 0, got = 0;
    for (int j = 0; j < n; j++) {
        sent += m[(size_t)me * n + j];
        got += m[(size_t)j * n + me];
    }
    for (size_t i = 0; i < mn; i++)
        m[i] *= row;
    sent *= row;
    got *= row;
    if (bi.count < sent || bo.count < got) {
        PyErr_Format(PyExc_ValueError, "For %s, this rank sends %zu and "
                     "receives %zu elements, but the input holds %zu and the "
                     "output %zu", fn, sent, got, bi.count, bo.count);
        PyMem_Free(m);
        return fail2(&bo, &bi);
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_all_to_all_v_c(bi.ptr, bo.ptr, m, bi.dtype,
                                            grp->g, async_ ? &req : NULL));
    PyMem_Free(m);
    return done2(rc, grp, async_, req, &bo, &bi, fn);
}

/* c_loop(tensor, iters, group) -> seconds: `iters` blocking all_reduce
 * (sum) calls of the library in a C loop, GIL released: the C cost per
 * call, to set Python's per-call overhead against (bench/py_overhead.py). */
static PyObject *py_c_loop(ARGS)
{
    NARGS("c_loop", 3);
    long iters;
    if (fpy_int_arg(a[1], &iters, "c_loop", "iters") < 0)
        return NULL;
    fpy_group *grp = fpy_group_arg(a[2], "c_loop");
    fbuf b;
    if (!grp || fbuf_get(a[0], &b, 1, "c_loop", "tensor") < 0)
        return NULL;
    int rc = 0;
    struct timespec t0, t1;
    fpy_enter(grp);
    Py_BEGIN_ALLOW_THREADS
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iters && rc == 0; i++)
        rc = fccl_all_reduce(b.ptr, b.ptr, b.count, b.dtype, FCCL_SUM,
                             grp->g, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    Py_END_ALLOW_THREADS
    fpy_leave(grp);
    fbuf_release(&b);
    if (rc < 0)
        return fpy_raise(rc, "c_loop");
    return PyFloat_FromDouble((double)(t1.tv_sec - t0.tv_sec) +
                              (t1.tv_nsec - t0.tv_nsec) * 1e-9);
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, \
                 "See fccl." #name "."}
PyMethodDef fpy_coll_methods[] = {
    M(all_reduce), M(broadcast), M(reduce), M(barrier),
    M(all_gather_into_tensor), M(all_gather_into_tensor_uneven),
    M(reduce_scatter_tensor), M(reduce_scatter_tensor_uneven),
    M(gather_into_tensor), M(scatter_tensor), M(all_to_all_single),
    M(all_to_all_v_c), M(c_loop),
    {NULL, NULL, 0, NULL},
};
