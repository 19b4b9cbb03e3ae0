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
 * The tensor forms work in place on the caller's memory; the list forms
 * (all_gather, reduce_scatter, gather, scatter) go through one temporary
 * block that is packed before the call or unpacked after it (by the
 * handle's finish step when asynchronous); all_to_all of lists uses
 * neighbor_exchange on the list's own buffers.
 */
#include "fcclpy.h"

#include <string.h>
#include <time.h>

#define ARGS PyObject *self, PyObject *const *a, Py_ssize_t na
#define NARGS(fn, k)                                                           \
    do {                                                                       \
        (void)self;                                                            \
        if (na != (k))                                                         \
            return PyErr_Format(PyExc_TypeError, fn " takes %d arguments",    \
                                (int)(k));                                     \
    } while (0)

/* ---- shared checks ---- */

static int count_error(const char *fn, const char *what, size_t got,
                       size_t want)
{
    PyErr_Format(PyExc_ValueError, "For %s, %s has %zu elements, but %zu are "
                 "needed", fn, what, got, want);
    return -1;
}

/* group and async_op, in the seed's order (group first). */
static fpy_group *group_async(PyObject *g, PyObject *async_obj, int *async_,
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
static fbuf *list_arg(PyObject *list, Py_ssize_t *n, int writable,
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

static void list_free(fbuf *bs, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        fbuf_release(&bs[i]);
    PyMem_RawFree(bs);
}

/* The seed's _check_tensor_list: len == group size, every item holds as
 * many elements as `t`, same dtype (TypeError each). */
static int check_list(const fbuf *bs, Py_ssize_t n, const fbuf *t, int size,
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
    fpy_group *grp = group_async(a[2], a[3], &async_, fn);
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
    fpy_group *grp = group_async(a[2], a[3], &async_, fn);
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
    fpy_group *grp = group_async(a[3], a[4], &async_, fn);
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
    fpy_group *grp = group_async(a[0], a[1], &async_, "barrier");
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
    fpy_group *grp = group_async(a[2], a[3], &async_, fn);
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
    fpy_group *grp = group_async(a[3], a[4], &async_, fn);
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
    fpy_group *grp = group_async(a[3], a[4], &async_, fn);
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
    fpy_group *grp = group_async(a[4], a[5], &async_, fn);
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
    fpy_group *grp = group_async(a[3], a[4], &async_, fn);
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
    fpy_group *grp = group_async(a[3], a[4], &async_, fn);
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
    fpy_group *grp = group_async(a[4], a[5], &async_, fn);
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
    fpy_group *grp = group_async(a[3], a[4], &async_, fn);
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

/* ---- the list forms ---- */

/* Move `one` and the n list buffers into a new array (for fpy_done). */
static fbuf *join(fbuf *one, fbuf *bs, Py_ssize_t n)
{
    fbuf *all = PyMem_RawMalloc((n + 1) * sizeof(fbuf));
    if (!all) {
        PyErr_NoMemory();
        return NULL;
    }
    all[0] = *one;
    memcpy(all + 1, bs, n * sizeof(fbuf));
    PyMem_RawFree(bs);
    return all;
}

static PyObject *list_done(int rc, fpy_group *grp, int async_,
                           fccl_request_t *req, fbuf *t, fbuf *bs,
                           Py_ssize_t n, void *tmp, fpy_unpack *u,
                           const char *fn)
{
    fbuf *all = join(t, bs, n);
    if (!all) { /* keep the data safe, then fail */
        if (async_ && rc == 0) {
            Py_BEGIN_ALLOW_THREADS fccl_wait(req, -1);
            Py_END_ALLOW_THREADS
        }
        fbuf_release(t);
        list_free(bs, n);
        PyMem_RawFree(tmp);
        PyMem_RawFree(u);
        return NULL;
    }
    PyObject *r = fpy_done(rc, grp, async_, req, all, (int)n + 1, tmp,
                           u ? fpy_unpack_run : NULL, u, fn);
    PyMem_RawFree(all);
    return r;
}

static void *pack(const fbuf *bs, Py_ssize_t n, size_t each)
{
    char *tmp = PyMem_RawMalloc(n * each > 0 ? n * each : 1);
    if (!tmp) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        memcpy(tmp + i * each, bs[i].ptr, each);
    return tmp;
}

static fpy_unpack *unpack_to(const fbuf *bs, Py_ssize_t n, const void *tmp)
{
    fpy_unpack *u = fpy_unpack_new(n);
    if (!u)
        return NULL;
    u->src = tmp;
    for (Py_ssize_t i = 0; i < n; i++) {
        u->piece[i].dst = bs[i].ptr;
        u->piece[i].len = bs[i].nbytes;
    }
    return u;
}

/* all_gather(tensor_list, tensor, group, async_op) */
static PyObject *py_all_gather(ARGS)
{
    NARGS("all_gather", 4);
    static const char fn[] = "all_gather";
    Py_ssize_t n = 0;
    fbuf t;
    fbuf *bs = list_arg(a[0], &n, 1, fn, "tensor_list");
    if (!bs)
        return NULL;
    int async_;
    fpy_group *grp = NULL;
    if (!fbuf_is_array(a[1])) {
        PyErr_Format(PyExc_TypeError, "For all_gather, the input tensor must "
                     "be tensor, but got %s", Py_TYPE(a[1])->tp_name);
        goto fail;
    }
    if (!(grp = group_async(a[2], a[3], &async_, fn)))
        goto fail;
    if (fbuf_get(a[1], &t, 0, fn, "tensor") < 0)
        goto fail;
    if (check_list(bs, n, &t, grp->size, fn) < 0) {
        fbuf_release(&t);
        goto fail;
    }
    char *tmp = PyMem_RawMalloc(t.nbytes * n > 0 ? t.nbytes * n : 1);
    fpy_unpack *u = tmp ? unpack_to(bs, n, tmp) : NULL;
    if (!u) {
        PyMem_RawFree(tmp);
        fbuf_release(&t);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_all_gather(t.ptr, tmp, t.count, t.dtype, grp->g,
                                        async_ ? &req : NULL));
    return list_done(rc, grp, async_, req, &t, bs, n, tmp, u, fn);
fail:
    list_free(bs, n);
    return NULL;
}

/* reduce_scatter(output, input_list, op, group, async_op) */
static PyObject *py_reduce_scatter(ARGS)
{
    NARGS("reduce_scatter", 5);
    static const char fn[] = "reduce_scatter";
    Py_ssize_t n = 0;
    fbuf t;
    fbuf *bs = list_arg(a[1], &n, 0, fn, "input_list");
    if (!bs)
        return NULL;
    int async_, op;
    fpy_group *grp = NULL;
    if (!fbuf_is_array(a[0])) {
        PyErr_Format(PyExc_TypeError, "For reduce_scatter, the output tensor "
                     "must be tensor, but got %s", Py_TYPE(a[0])->tp_name);
        goto fail;
    }
    if (!(grp = group_async(a[3], a[4], &async_, fn)))
        goto fail;
    if ((op = fpy_op_arg(a[2], fn)) < 0)
        goto fail;
    if (fbuf_get(a[0], &t, 1, fn, "output") < 0)
        goto fail;
    if (check_list(bs, n, &t, grp->size, fn) < 0) {
        fbuf_release(&t);
        goto fail;
    }
    void *tmp = pack(bs, n, t.nbytes);
    if (!tmp) {
        fbuf_release(&t);
        goto fail;
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_reduce_scatter(tmp, t.ptr, t.count, t.dtype, op,
                                            grp->g, async_ ? &req : NULL));
    return list_done(rc, grp, async_, req, &t, bs, n, tmp, NULL, fn);
fail:
    list_free(bs, n);
    return NULL;
}

/* gather(tensor, gather_list, dst, group, async_op) */
static PyObject *py_gather(ARGS)
{
    NARGS("gather", 5);
    static const char fn[] = "gather";
    if (!fbuf_is_array(a[0]))
        return PyErr_Format(PyExc_TypeError, "For gather, the input tensor "
                            "must be tensor, but got %s",
                            Py_TYPE(a[0])->tp_name);
    Py_ssize_t n = 0;
    fbuf t;
    fbuf *bs = list_arg(a[1], &n, 1, fn, "gather_list");
    if (!bs)
        return NULL;
    long dst;
    int async_, root;
    fpy_group *grp = NULL;
    if (fpy_int_arg(a[2], &dst, fn, "dst") < 0)
        goto fail;
    if (!(grp = group_async(a[3], a[4], &async_, fn)))
        goto fail;
    if ((root = fpy_group_rank_of(grp, a[2], fn, "dst")) < 0)
        goto fail;
    if (fbuf_get(a[0], &t, 0, fn, "tensor") < 0)
        goto fail;
    int me_root = root == grp->rank;
    if (me_root && check_list(bs, n, &t, grp->size, fn) < 0) {
        fbuf_release(&t);
        goto fail;
    }
    char *tmp = NULL;
    fpy_unpack *u = NULL;
    if (me_root) {
        tmp = PyMem_RawMalloc(t.nbytes * n > 0 ? t.nbytes * n : 1);
        u = tmp ? unpack_to(bs, n, tmp) : NULL;
        if (!u) {
            PyMem_RawFree(tmp);
            fbuf_release(&t);
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            goto fail;
        }
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_gather(t.ptr, tmp, t.count, t.dtype, root,
                                    grp->g, async_ ? &req : NULL));
    return list_done(rc, grp, async_, req, &t, bs, n, tmp, u, fn);
fail:
    list_free(bs, n);
    return NULL;
}

/* scatter(tensor, scatter_list, src, group, async_op) */
static PyObject *py_scatter(ARGS)
{
    NARGS("scatter", 5);
    static const char fn[] = "scatter";
    Py_ssize_t n = 0;
    fbuf t;
    fbuf *bs = list_arg(a[1], &n, 0, fn, "scatter_list");
    if (!bs)
        return NULL;
    long src;
    int async_, root;
    fpy_group *grp = NULL;
    for (Py_ssize_t i = 1; i < n; i++)
        if (bs[i].count != bs[0].count) {
            PyErr_Format(PyExc_TypeError, "tensor_lists shape must be the "
                         "same, but item %zd has %zu elements and item 0 %zu.",
                         i, bs[i].count, bs[0].count);
            goto fail;
        }
    if (!fbuf_is_array(a[0])) {
        PyErr_Format(PyExc_TypeError, "For scatter_tensor, the output tensor "
                     "must be tensor, but got %s", Py_TYPE(a[0])->tp_name);
        goto fail;
    }
    if (fpy_int_arg(a[2], &src, "scatter_tensor", "src") < 0)
        goto fail;
    if (!(grp = group_async(a[3], a[4], &async_, fn)))
        goto fail;
    if ((root = fpy_group_rank_of(grp, a[2], fn, "src")) < 0)
        goto fail;
    if (fbuf_get(a[0], &t, 1, fn, "tensor") < 0)
        goto fail;
    int me_root = root == grp->rank;
    if (me_root && check_list(bs, n, &t, grp->size, fn) < 0) {
        fbuf_release(&t);
        goto fail;
    }
    void *tmp = NULL;
    if (me_root && !(tmp = pack(bs, n, t.nbytes))) {
        fbuf_release(&t);
        goto fail;
    }
    fccl_request_t *req = NULL;
    int rc;
    FPY_BLOCK(grp, rc = fccl_scatter(tmp, t.ptr, t.count, t.dtype, root,
                                     grp->g, async_ ? &req : NULL));
    return list_done(rc, grp, async_, req, &t, bs, n, tmp, NULL, fn);
fail:
    list_free(bs, n);
    return NULL;
}

/* all_to_all(output_tensor_list, input_tensor_list, group, async_op):
 * neighbor_exchange with every rank, on the lists' own buffers. */
static PyObject *py_all_to_all(ARGS)
{
    NARGS("all_to_all", 4);
    static const char fn[] = "all_to_all";
    int async_;
    fpy_group *grp = group_async(a[2], a[3], &async_, fn);
    if (!grp)
        return NULL;
    Py_ssize_t ni = 0, no = 0;
    fbuf *bi = list_arg(a[1], &ni, 0, fn, "input_tensor_list");
    if (!bi)
        return NULL;
    fbuf *bo = list_arg(a[0], &no, 1, fn, "output_tensor_list");
    if (!bo) {
        list_free(bi, ni);
        return NULL;
    }
    int n = grp->size;
    int *peers = NULL;
    const void **sb = NULL;
    void **rb = NULL;
    size_t *scnt = NULL, *rcnt = NULL;
    PyObject *res = NULL;
    if (ni != n || no != n) {
        PyErr_Format(PyExc_ValueError, "For %s, the lists must hold one "
                     "tensor per rank (%d), but got %zd inputs and %zd "
                     "outputs", fn, n, ni, no);
        goto out;
    }
    if (n > 0 && bi[0].dtype != bo[0].dtype) {
        PyErr_Format(PyExc_TypeError, "all_to_all input dtype must be the "
                     "same, but got %s and %s.", fpy_dtype_name(bi[0].dtype),
                     fpy_dtype_name(bo[0].dtype));
        goto out;
    }
    if (bi[grp->rank].count != bo[grp->rank].count) {
        PyErr_Format(PyExc_ValueError, "For %s, this rank's own input (%zu "
                     "elements) and output (%zu) differ", fn,
                     bi[grp->rank].count, bo[grp->rank].count);
        goto out;
    }
    peers = PyMem_Malloc(n * sizeof *peers);
    sb = PyMem_Malloc(n * sizeof *sb);
    rb = PyMem_Malloc(n * sizeof *rb);
    scnt = PyMem_Malloc(n * sizeof *scnt);
    rcnt = PyMem_Malloc(n * sizeof *rcnt);
    if (!peers || !sb || !rb || !scnt || !rcnt) {
        PyErr_NoMemory();
        goto out;
    }
    for (int i = 0; i < n; i++) {
        peers[i] = i;
        sb[i] = bi[i].ptr;
        scnt[i] = bi[i].count;
        rb[i] = bo[i].ptr;
        rcnt[i] = bo[i].count;
    }
    fccl_request_t *req = NULL;
    int rc;
    fccl_dtype_t dt = bi[0].dtype;
    FPY_BLOCK(grp, rc = fccl_neighbor_exchange(peers, sb, scnt, n, peers, rb,
                                               rcnt, n, dt, grp->g,
                                               async_ ? &req : NULL));
    fbuf *all = PyMem_RawMalloc(2 * n * sizeof(fbuf));
    if (!all) {
        if (async_ && rc == 0) {
            Py_BEGIN_ALLOW_THREADS fccl_wait(req, -1);
            Py_END_ALLOW_THREADS
        }
        PyErr_NoMemory();
        goto out;
    }
    memcpy(all, bi, n * sizeof(fbuf));
    memcpy(all + n, bo, n * sizeof(fbuf));
    PyMem_RawFree(bi);
    PyMem_RawFree(bo);
    bi = bo = NULL;
    res = fpy_done(rc, grp, async_, req, all, 2 * n, NULL, NULL, NULL, fn);
    PyMem_RawFree(all);
out:
    if (bi)
        list_free(bi, ni);
    if (bo)
        list_free(bo, no);
    PyMem_Free(peers);
    PyMem_Free(sb);
    PyMem_Free(rb);
    PyMem_Free(scnt);
    PyMem_Free(rcnt);
    return res;
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
    M(all_to_all_v_c), M(all_gather), M(reduce_scatter), M(gather),
    M(scatter), M(all_to_all), M(c_loop),
    {NULL, NULL, 0, NULL},
};
