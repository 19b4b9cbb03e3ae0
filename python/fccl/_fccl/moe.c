/*
 * MoeConfig: the MoE config of fccl/moe.h (fccl_moe_new) and its three
 * operators, dispatch, combine and the fused combine + add + RMSNorm.
 *
 * The caller (fccl/moe.py) allocates every output with the sizes of
 * info(); here each buffer is checked for dtype and size before the
 * library call, which runs with the GIL released and the EP (and TP)
 * group marked as blocked (Ctrl-C aborts them).
 */
#include "fcclpy.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    fccl_moe_t *moe;
    fpy_group *ep, *tp; /* new references; tp may be NULL */
    fccl_moe_info_t info;
    fccl_dtype_t dtype;
    size_t hidden;
    int k;
    fccl_moe_mask_t mask_type; /* of the dispatch being made */
} fpy_moe;

static int moe_init(fpy_moe *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ep_group", "tp_group", "moe_expert_num",
                             "shared_expert_num", "shared_expert_rank_num",
                             "bs", "global_bs", "k", "hidden", "dtype",
                             "norm_eps", "token_nums_type", "expert_buffer",
                             NULL};
    PyObject *ep, *tp = Py_None;
    fccl_moe_opts_t o;
    fccl_moe_opts_init(&o);
    const char *dtype = "bfloat16";
    Py_ssize_t hidden = 0;
    int tnt = 0, ebuf = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "OOiiiiiin|sfip", kwlist, &ep, &tp, &o.moe_expert_num,
            &o.shared_expert_num, &o.shared_expert_rank_num, &o.bs,
            &o.global_bs, &o.k, &hidden, &dtype, &o.norm_eps, &tnt, &ebuf))
        return -1;
    int dt = fccl_dtype_parse(dtype);
    if (dt != FCCL_FLOAT32 && dt != FCCL_BFLOAT16 && dt != FCCL_FLOAT16) {
        PyErr_Format(PyExc_TypeError, "MoeConfig: dtype must be 'float32', "
                     "'bfloat16' or 'float16', not %s", dtype);
        return -1;
    }
    if (hidden < 1) {
        PyErr_SetString(PyExc_ValueError, "MoeConfig: hidden must be >= 1");
        return -1;
    }
    fpy_group *epg = fpy_group_arg(ep, "MoeConfig");
    fpy_group *tpg = tp == Py_None ? NULL : fpy_group_arg(tp, "MoeConfig");
    if (!epg || (tp != Py_None && !tpg))
        return -1;
    o.ep = epg->g;
    o.tp = tpg ? tpg->g : NULL;
    o.hidden = (size_t)hidden;
    o.dtype = (fccl_dtype_t)dt;
    o.token_nums_type = tnt ? FCCL_MOE_TOKEN_NUMS_COUNT
                            : FCCL_MOE_TOKEN_NUMS_CUMSUM;
    o.expert_buffer = ebuf;
    fccl_moe_t *m = NULL;
    int rc;
    fpy_enter(epg);
    Py_BEGIN_ALLOW_THREADS rc = fccl_moe_new(&o, &m);
    Py_END_ALLOW_THREADS
    fpy_leave(epg);
    if (rc < 0) {
        fpy_raise(rc, "MoeConfig");
        return -1;
    }
    fccl_moe_get_info(m, &self->info);
    self->moe = m;
    self->ep = (fpy_group *)Py_NewRef(epg);
    self->tp = tpg ? (fpy_group *)Py_NewRef(tpg) : NULL;
    self->dtype = o.dtype;
    self->hidden = o.hidden;
    self->k = o.k;
    return 0;
}

static void moe_dealloc(fpy_moe *self)
{
    if (self->moe && !fpy_forked && !self->ep->destroyed) {
        fccl_moe_t *m = self->moe;
        Py_BEGIN_ALLOW_THREADS fccl_moe_destroy(m);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(self->ep);
    Py_XDECREF(self->tp);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static fccl_moe_t *live(fpy_moe *self)
{
    if (!self->moe)
        PyErr_SetString(PyExc_ValueError, "MoeConfig: not initialized");
    else if (self->ep->destroyed || (self->tp && self->tp->destroyed))
        PyErr_SetString(PyExc_RuntimeError, "MoeConfig: its group was "
                        "destroyed");
    else if (fpy_check_usable(1) == 0)
        return self->moe;
    return NULL;
}

static PyObject *moe_info(fpy_moe *self, PyObject *unused)
{
    (void)unused;
    const fccl_moe_info_t *i = &self->info;
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:n,s:n,s:i,s:n,s:i,s:s}",
        "ep_rank", i->ep_rank, "ep_size", i->ep_size, "tp_rank", i->tp_rank,
        "tp_size", i->tp_size, "is_shared_rank", i->is_shared_rank,
        "local_expert_num", i->local_expert_num, "first_expert",
        i->first_expert, "routed_local_expert_num",
        i->routed_local_expert_num, "expand_rows", (Py_ssize_t)i->expand_rows,
        "assist_len", (Py_ssize_t)i->assist_len, "slots", i->slots, "hidden",
        (Py_ssize_t)self->hidden, "k", self->k, "dtype",
        fccl_dtype_name(self->dtype));
}

/* One buffer argument: dtype `dt` (-1: any 1-byte type), at least `need`
 * elements.  None allowed when `optional`. */
typedef struct {
    const char *name;
    int dt;
    size_t need;
    int writable, optional;
} spec;

static int get_bufs(PyObject *const *a, const spec *sp, int n, fbuf *bs,
                    void **ptrs, const char *fn)
{
    int i;
    for (i = 0; i < n; i++) {
        memset(&bs[i], 0, sizeof bs[i]);
        ptrs[i] = NULL;
        if (a[i] == Py_None && sp[i].optional)
            continue;
        if (fbuf_get(a[i], &bs[i], sp[i].writable, fn, sp[i].name) < 0)
            goto fail;
        int ok = sp[i].dt < 0 ? fccl_dtype_size(bs[i].dtype) == 1
                              : (int)bs[i].dtype == sp[i].dt;
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "For %s, %s must be %s, not %s", fn,
                         sp[i].name, sp[i].dt < 0 ? "uint8 or bool" :
                         fpy_dtype_name(sp[i].dt),
                         fpy_dtype_name(bs[i].dtype));
            i++;
            goto fail;
        }
        if (bs[i].count < sp[i].need) {
            PyErr_Format(PyExc_ValueError, "For %s, %s has %zu elements, but "
                         "%zu are needed", fn, sp[i].name, bs[i].count,
                         sp[i].need);
            i++;
            goto fail;
        }
        ptrs[i] = bs[i].ptr;
    }
    return 0;
fail:
    while (i-- > 0)
        fbuf_release(&bs[i]);
    return -1;
}

static void put_bufs(fbuf *bs, int n)
{
    for (int i = 0; i < n; i++)
        fbuf_release(&bs[i]);
}

static int run(fpy_moe *self, int (*call)(fpy_moe *, void **, size_t,
                                          size_t *),
               void **p, size_t bs, size_t *rows, const char *fn)
{
    int rc;
    fpy_enter(self->ep);
    if (self->tp)
        fpy_enter(self->tp);
    Py_BEGIN_ALLOW_THREADS rc = call(self, p, bs, rows);
    Py_END_ALLOW_THREADS
    if (self->tp)
        fpy_leave(self->tp);
    fpy_leave(self->ep);
    if (rc < 0)
        fpy_raise(rc, fn);
    return rc;
}

static int bs_arg(PyObject *v, size_t *bs)
{
    Py_ssize_t n = PyLong_AsSsize_t(v);
    if (n < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "bs must be >= 0");
        return -1;
    }
    *bs = (size_t)n;
    return 0;
}

static int do_dispatch(fpy_moe *self, void **p, size_t bs, size_t *rows)
{
    fccl_moe_dispatch_out_t o = {p[4], p[5], p[6], p[7], p[8], p[9], 0};
    int rc = fccl_moe_dispatch_mask(self->moe, p[0], p[1], p[2], p[3],
                                    self->mask_type, bs, &o);
    *rows = o.rows;
    return rc;
}

/* dispatch(x, expert_ids, expert_scales, x_active_mask, bs, expand_x,
 * expand_scales, expert_token_nums, ep_recv_counts, tp_recv_counts,
 * assist_info, mask_routes) -> rows; mask_routes: the mask is [bs, k]
 * (newer CANN), else [bs] */
static PyObject *moe_dispatch(fpy_moe *self, PyObject *const *a,
                              Py_ssize_t na)
{
    static const char fn[] = "moe_distribute_dispatch";
    if (na != 12)
        return PyErr_Format(PyExc_TypeError, "dispatch takes 12 arguments");
    if (!live(self))
        return NULL;
    size_t bs;
    int routes = fpy_bool_arg(a[11], "mask_routes");
    if (routes < 0 || bs_arg(a[4], &bs) < 0)
        return NULL;
    const fccl_moe_info_t *in = &self->info;
    size_t H = self->hidden, K = (size_t)self->k;
    spec sp[10] = {
        {"x", self->dtype, bs * H, 0, 0},
        {"expert_ids", FCCL_INT32, bs * K, 0, 0},
        {"expert_scales", FCCL_FLOAT32, bs * K, 0, 0},
        {"x_active_mask", -1, routes ? bs * K : bs, 0, 1},
        {"expand_x", self->dtype, in->expand_rows * H, 1, 0},
        {"expand_scales", FCCL_FLOAT32, in->expand_rows, 1, 0},
        {"expert_token_nums", FCCL_INT64, (size_t)in->local_expert_num, 1, 0},
        {"ep_recv_counts", FCCL_INT64,
         (size_t)in->local_expert_num * in->ep_size, 1, 0},
        {"tp_recv_counts", FCCL_INT64, 2, 1, 1},
        {"assist_info", FCCL_INT32, in->assist_len, 1, 0},
    };
    PyObject *const args[10] = {a[0], a[1], a[2], a[3], a[5],
                                a[6], a[7], a[8], a[9], a[10]};
    fbuf b[10];
    void *p[10];
    if (get_bufs(args, sp, 10, b, p, fn) < 0)
        return NULL;
    self->mask_type = routes ? FCCL_MOE_MASK_ROUTES : FCCL_MOE_MASK_TOKENS;
    size_t rows = 0;
    int rc = run(self, do_dispatch, p, bs, &rows, fn);
    put_bufs(b, 10);
    return rc < 0 ? NULL : PyLong_FromSize_t(rows);
}

static int do_combine(fpy_moe *self, void **p, size_t bs, size_t *rows)
{
    (void)rows;
    fccl_moe_combine_in_t in = {p[0], p[1], p[2], p[3], p[4], p[5], bs};
    if (!p[7])
        return fccl_moe_combine(self->moe, &in, p[6]);
    return fccl_moe_combine_add_rms_norm(self->moe, &in, p[6], p[7], p[8],
                                         p[9], p[10]);
}

/* combine(expand_x, assist_info, ep_send_counts, tp_send_counts,
 *         expert_scales, shared_expert_x, bs, x)
 * combine(..., bs, residual_x, gamma, y_out, rstd_out, x_out): fused */
static PyObject *moe_combine(fpy_moe *self, PyObject *const *a, Py_ssize_t na)
{
    int fused = na == 12;
    const char *fn = fused ? "moe_distribute_combine_add_rms_norm"
                           : "moe_distribute_combine";
    if (na != 8 && na != 12)
        return PyErr_Format(PyExc_TypeError, "combine takes 8 or 12 "
                            "arguments");
    if (!live(self))
        return NULL;
    size_t bs;
    if (bs_arg(a[6], &bs) < 0)
        return NULL;
    const fccl_moe_info_t *in = &self->info;
    size_t H = self->hidden, K = (size_t)self->k;
    spec sp[11] = {
        {"expand_x", self->dtype, 0, 0, 0},
        {"assist_info", FCCL_INT32, in->assist_len, 0, 0},
        {"ep_send_counts", FCCL_INT64,
         (size_t)in->local_expert_num * in->ep_size, 0, 0},
        {"tp_send_counts", FCCL_INT64, 2, 0, 1},
        {"expert_scales", FCCL_FLOAT32, bs * K, 0, 0},
        {"shared_expert_x", self->dtype, bs * H, 0, 1},
        {fused ? "residual_x" : "x", self->dtype, bs * H, !fused, 0},
        {"gamma", self->dtype, H, 0, 0},
        {"y_out", self->dtype, bs * H, 1, 0},
        {"rstd_out", FCCL_FLOAT32, bs, 1, 0},
        {"x_out", self->dtype, bs * H, 1, 0},
    };
    PyObject *const args[11] = {a[0], a[1], a[2], a[3], a[4], a[5], a[7],
                                fused ? a[8] : NULL, fused ? a[9] : NULL,
                                fused ? a[10] : NULL, fused ? a[11] : NULL};
    int n = fused ? 11 : 7;
    fbuf b[11];
    void *p[11] = {0};
    if (get_bufs(args, sp, n, b, p, fn) < 0)
        return NULL;
    if (fused && b[10].ptr == b[6].ptr) /* x_out in place of residual_x */
        p[6] = p[10];
    int rc = run(self, do_combine, p, bs, NULL, fn);
    put_bufs(b, n);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *moe_times(fpy_moe *self, PyObject *unused)
{
    (void)unused;
    fccl_moe_times_t t;
    if (!self->moe || fccl_moe_last_times(self->moe, &t) < 0)
        return fpy_raise(FCCL_ERR_INVALID, "MoeConfig.last_times");
    return Py_BuildValue("{s:K,s:K,s:K,s:K}", "check_ns",
                         (unsigned long long)t.check_ns, "comm_ns",
                         (unsigned long long)t.comm_ns, "math_ns",
                         (unsigned long long)t.math_ns, "total_ns",
                         (unsigned long long)t.total_ns);
}

static PyMethodDef moe_methods[] = {
    {"info", (PyCFunction)moe_info, METH_NOARGS, "sizes (fccl_moe_get_info)"},
    {"dispatch", (PyCFunction)(void (*)(void))moe_dispatch, METH_FASTCALL,
     "dispatch(x, expert_ids, expert_scales, x_active_mask, bs, expand_x, "
     "expand_scales, expert_token_nums, ep_recv_counts, tp_recv_counts, "
     "assist_info, mask_routes) -> rows"},
    {"combine", (PyCFunction)(void (*)(void))moe_combine, METH_FASTCALL,
     "combine(expand_x, assist_info, ep_send_counts, tp_send_counts, "
     "expert_scales, shared_expert_x, bs, x) or, fused, (..., bs, "
     "residual_x, gamma, y_out, rstd_out, x_out)"},
    {"last_times", (PyCFunction)moe_times, METH_NOARGS,
     "where the last call's time went (ns)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MoeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fccl._fccl.MoeConfig",
    .tp_basicsize = sizeof(fpy_moe),
    .tp_dealloc = (destructor)moe_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The MoE config of fccl/moe.h (collective over the EP and TP "
              "groups); see fccl.MoeConfig.",
    .tp_methods = moe_methods,
    .tp_init = (initproc)moe_init,
    .tp_new = PyType_GenericNew,
};

int fpy_moe_add_types(PyObject *m)
{
    if (PyType_Ready(&MoeType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "MoeConfig", (PyObject *)&MoeType);
}
