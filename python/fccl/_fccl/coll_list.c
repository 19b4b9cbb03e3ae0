/*
 * The collectives of comm_func on lists of tensors (all_gather,
 * reduce_scatter, gather, scatter, all_to_all), each one library call
 * checked as coll.c says.  They go through one temporary block that is
 * packed before the call or unpacked after it (by the handle's finish
 * step when asynchronous); all_to_all of lists uses neighbor_exchange on
 * the list's own buffers.
 */
#include "fcclpy.h"

#include <string.h>

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
        fpy_list_free(bs, n);
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
    fbuf *bs = fpy_list_arg(a[0], &n, 1, fn, "tensor_list");
    if (!bs)
        return NULL;
    int async_;
    fpy_group *grp = NULL;
    if (!fbuf_is_array(a[1])) {
        PyErr_Format(PyExc_TypeError, "For all_gather, the input tensor must "
                     "be tensor, but got %s", Py_TYPE(a[1])->tp_name);
        goto fail;
    }
    if (!(grp = fpy_group_async(a[2], a[3], &async_, fn)))
        goto fail;
    if (fbuf_get(a[1], &t, 0, fn, "tensor") < 0)
        goto fail;
    if (fpy_check_list(bs, n, &t, grp->size, fn) < 0) {
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
    fpy_list_free(bs, n);
    return NULL;
}

/* reduce_scatter(output, input_list, op, group, async_op) */
static PyObject *py_reduce_scatter(ARGS)
{
    NARGS("reduce_scatter", 5);
    static const char fn[] = "reduce_scatter";
    Py_ssize_t n = 0;
    fbuf t;
    fbuf *bs = fpy_list_arg(a[1], &n, 0, fn, "input_list");
    if (!bs)
        return NULL;
    int async_, op;
    fpy_group *grp = NULL;
    if (!fbuf_is_array(a[0])) {
        PyErr_Format(PyExc_TypeError, "For reduce_scatter, the output tensor "
                     "must be tensor, but got %s", Py_TYPE(a[0])->tp_name);
        goto fail;
    }
    if (!(grp = fpy_group_async(a[3], a[4], &async_, fn)))
        goto fail;
    if ((op = fpy_op_arg(a[2], fn)) < 0)
        goto fail;
    if (fbuf_get(a[0], &t, 1, fn, "output") < 0)
        goto fail;
    if (fpy_check_list(bs, n, &t, grp->size, fn) < 0) {
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
    fpy_list_free(bs, n);
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
    fbuf *bs = fpy_list_arg(a[1], &n, 1, fn, "gather_list");
    if (!bs)
        return NULL;
    long dst;
    int async_, root;
    fpy_group *grp = NULL;
    if (fpy_int_arg(a[2], &dst, fn, "dst") < 0)
        goto fail;
    if (!(grp = fpy_group_async(a[3], a[4], &async_, fn)))
        goto fail;
    if ((root = fpy_group_rank_of(grp, a[2], fn, "dst")) < 0)
        goto fail;
    if (fbuf_get(a[0], &t, 0, fn, "tensor") < 0)
        goto fail;
    int me_root = root == grp->rank;
    if (me_root && fpy_check_list(bs, n, &t, grp->size, fn) < 0) {
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
    fpy_list_free(bs, n);
    return NULL;
}

/* scatter(tensor, scatter_list, src, group, async_op) */
static PyObject *py_scatter(ARGS)
{
    NARGS("scatter", 5);
    static const char fn[] = "scatter";
    Py_ssize_t n = 0;
    fbuf t;
    fbuf *bs = fpy_list_arg(a[1], &n, 0, fn, "scatter_list");
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
    if (!(grp = fpy_group_async(a[3], a[4], &async_, fn)))
        goto fail;
    if ((root = fpy_group_rank_of(grp, a[2], fn, "src")) < 0)
        goto fail;
    if (fbuf_get(a[0], &t, 1, fn, "tensor") < 0)
        goto fail;
    int me_root = root == grp->rank;
    if (me_root && fpy_check_list(bs, n, &t, grp->size, fn) < 0) {
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
    fpy_list_free(bs, n);
    return NULL;
}

/* all_to_all(output_tensor_list, input_tensor_list, group, async_op):
 * neighbor_exchange with every rank, on the lists' own buffers. */
static PyObject *py_all_to_all(ARGS)
{
    NARGS("all_to_all", 4);
    static const char fn[] = "all_to_all";
    int async_;
    fpy_group *grp = fpy_group_async(a[2], a[3], &async_, fn);
    if (!grp)
        return NULL;
    Py_ssize_t ni = 0, no = 0;
    fbuf *bi = fpy_list_arg(a[1], &ni, 0, fn, "input_tensor_list");
    if (!bi)
        return NULL;
    fbuf *bo = fpy_list_arg(a[0], &no, 1, fn, "output_tensor_list");
    if (!bo) {
        fpy_list_free(bi, ni);
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
        fpy_list_free(bi, ni);
    if (bo)
        fpy_list_free(bo, no);
    PyMem_Free(peers);
    PyMem_Free(sb);
    PyMem_Free(rb);
    PyMem_Free(scnt);
    PyMem_Free(rcnt);
    return res;
}

#define M(name) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, \
                 "See fccl." #name "."}
PyMethodDef fpy_coll_list_methods[] = {
    M(all_gather), M(reduce_scatter), M(gather), M(scatter), M(all_to_all),
    {NULL, NULL, 0, NULL},
};
