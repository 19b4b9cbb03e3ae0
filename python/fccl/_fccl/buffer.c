/*
 * Array arguments -> (pointer, element count, fccl dtype, first dimension).
 *
 * Two kinds of objects are accepted:
 *  - any object with the buffer protocol that can export a C-contiguous
 *    view with a format (NumPy arrays, bytearray, memoryview, array.array,
 *    ...): the format's kind and item size give the dtype;
 *  - a torch CPU tensor (torch has no buffer protocol, and NumPy no
 *    bfloat16): its data_ptr(), dtype, numel() and shape.  torch is never
 *    imported here: a tensor can only exist once the program imported it.
 * An output must be writable.  Messages name the call and the argument.
 */
#include "fcclpy.h"

#include <string.h>

static const char *const dtype_names[FCCL_NUM_DTYPES] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64", "bool", "int16",
};

const char *fpy_dtype_name(fccl_dtype_t t)
{
    return (unsigned)t < FCCL_NUM_DTYPES ? dtype_names[t] : "?";
}

/* The dtype of a struct-module format with item size `size`, or -1. */
static int dtype_of_format(const char *f, Py_ssize_t size)
{
    if (!f)
        return FCCL_UINT8; /* no format: unsigned bytes */
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    else if (*f == '>' || *f == '!')
        return -1; /* big-endian data on a little-endian host */
    if (!f[0] || f[1])
        return -1; /* structs, arrays of structs */
    int sgn;
    switch (*f) {
    case 'b': return size == 1 ? FCCL_INT8 : -1;
    case 'h': return size == 2 ? FCCL_INT16 : -1;
    case 'B': case 'c': return size == 1 ? FCCL_UINT8 : -1;
    case '?': return size == 1 ? FCCL_BOOL : -1;
    case 'e': return size == 2 ? FCCL_FLOAT16 : -1;
    case 'f': return size == 4 ? FCCL_FLOAT32 : -1;
    case 'd': return size == 8 ? FCCL_FLOAT64 : -1;
    case 'i': case 'l': case 'q': case 'n': sgn = 1; break;
    case 'I': case 'L': case 'Q': case 'N': sgn = 0; break;
    default: return -1;
    }
    if (size == 4)
        return sgn ? FCCL_INT32 : FCCL_UINT32;
    if (size == 8)
        return sgn ? FCCL_INT64 : FCCL_UINT64;
    return -1;
}

/* ---- torch tensors ---- */

static PyObject *torch_tensor_type; /* torch.Tensor, once seen */
static PyObject *torch_dtypes;      /* {torch.dtype: fccl dtype} */

/* torch.Tensor if torch is imported, else NULL (no exception). */
static PyObject *torch_type(void)
{
    if (torch_tensor_type)
        return torch_tensor_type;
    PyObject *name = PyUnicode_FromString("torch");
    if (!name)
        return NULL;
    PyObject *torch = PyImport_GetModule(name);
    Py_DECREF(name);
    if (!torch) {
        PyErr_Clear();
        return NULL;
    }
    static const struct { const char *name; fccl_dtype_t t; } map[] = {
        {"int8", FCCL_INT8}, {"uint8", FCCL_UINT8}, {"int16", FCCL_INT16},
        {"int32", FCCL_INT32},
        {"int64", FCCL_INT64}, {"float16", FCCL_FLOAT16},
        {"bfloat16", FCCL_BFLOAT16}, {"float32", FCCL_FLOAT32},
        {"float64", FCCL_FLOAT64}, {"bool", FCCL_BOOL},
        {"uint32", FCCL_UINT32}, {"uint64", FCCL_UINT64},
    };
    PyObject *d = PyDict_New();
    PyObject *type = PyObject_GetAttrString(torch, "Tensor");
    for (size_t i = 0; d && type && i < sizeof map / sizeof map[0]; i++) {
        PyObject *dt = PyObject_GetAttrString(torch, map[i].name);
        if (!dt) { /* torch 1.13 has no uint32/uint64 */
            PyErr_Clear();
            continue;
        }
        PyObject *v = PyLong_FromLong(map[i].t);
        if (!v || PyDict_SetItem(d, dt, v) < 0)
            Py_CLEAR(d);
        Py_XDECREF(v);
        Py_DECREF(dt);
    }
    Py_DECREF(torch);
    if (!d || !type) {
        Py_XDECREF(d);
        Py_XDECREF(type);
        PyErr_Clear();
        return NULL;
    }
    torch_dtypes = d;
    torch_tensor_type = type;
    return type;
}

static int is_torch(PyObject *obj)
{
    PyObject *t = torch_type();
    return t && PyObject_TypeCheck(obj, (PyTypeObject *)t);
}

/* Call obj.name() and return the result (new reference). */
static PyObject *call0(PyObject *obj, const char *name)
{
    return PyObject_CallMethod(obj, name, NULL);
}

static int torch_get(PyObject *obj, fbuf *b, const char *fn, const char *what)
{
    PyObject *dev = PyObject_GetAttrString(obj, "device");
    PyObject *devtype = dev ? PyObject_GetAttrString(dev, "type") : NULL;
    Py_XDECREF(dev);
    if (!devtype)
        return -1;
    int cpu = PyUnicode_Check(devtype) &&
              PyUnicode_CompareWithASCIIString(devtype, "cpu") == 0;
    Py_DECREF(devtype);
    if (!cpu) {
        PyErr_Format(PyExc_ValueError, "For %s, %s must be a CPU tensor", fn,
                     what);
        return -1;
    }
    PyObject *r = call0(obj, "is_contiguous");
    if (!r)
        return -1;
    int contig = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (contig <= 0) {
        if (contig == 0)
            PyErr_Format(PyExc_ValueError, "For %s, %s is not contiguous "
                         "(call .contiguous() first)", fn, what);
        return -1;
    }
    PyObject *dt = PyObject_GetAttrString(obj, "dtype");
    if (!dt)
        return -1;
    PyObject *code = PyDict_GetItemWithError(torch_dtypes, dt);
    if (!code) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "For %s, %s has dtype %R, which "
                         "fccl does not carry", fn, what, dt);
        Py_DECREF(dt);
        return -1;
    }
    Py_DECREF(dt);
    b->dtype = (fccl_dtype_t)PyLong_AsLong(code);
    PyObject *ptr = call0(obj, "data_ptr");
    PyObject *numel = ptr ? call0(obj, "numel") : NULL;
    PyObject *dim = numel ? call0(obj, "dim") : NULL;
    if (!dim) {
        Py_XDECREF(ptr);
        Py_XDECREF(numel);
        return -1;
    }
    b->ptr = PyLong_AsVoidPtr(ptr);
    b->count = PyLong_AsSize_t(numel);
    b->ndim = (int)PyLong_AsLong(dim);
    Py_DECREF(ptr);
    Py_DECREF(numel);
    Py_DECREF(dim);
    if (PyErr_Occurred())
        return -1;
    b->dim0 = 1;
    if (b->ndim > 0) {
        PyObject *sz = PyObject_CallMethod(obj, "size", "i", 0);
        if (!sz)
            return -1;
        b->dim0 = PyLong_AsSsize_t(sz);
        Py_DECREF(sz);
        if (b->dim0 < 0 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* ---- buffer protocol ---- */

/* Say why obj could not export the view asked for: not contiguous or
 * read-only (a ValueError), else keep the exporter's error. */
static void explain_view_error(PyObject *obj, int writable, const char *fn,
                               const char *what)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_STRIDES | PyBUF_FORMAT) == 0) {
        int contig = PyBuffer_IsContiguous(&v, 'C');
        int ro = v.readonly;
        PyBuffer_Release(&v);
        if (!contig || (writable && ro)) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            PyErr_Format(PyExc_ValueError, contig ?
                         "For %s, %s is read-only" :
                         "For %s, %s is not C-contiguous (copy it first, "
                         "e.g. numpy.ascontiguousarray)", fn, what);
            return;
        }
    } else {
        PyErr_Clear();
    }
    PyErr_Restore(et, ev, tb);
}

int fbuf_get(PyObject *obj, fbuf *b, int writable, const char *fn,
             const char *what)
{
    b->has_view = 0;
    b->obj = NULL;
    if (PyObject_CheckBuffer(obj)) {
        int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                    (writable ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(obj, &b->view, flags) < 0) {
            explain_view_error(obj, writable, fn, what);
            return -1;
        }
        int t = dtype_of_format(b->view.format, b->view.itemsize);
        if (t < 0) {
            PyErr_Format(PyExc_TypeError, "For %s, %s has element format "
                         "'%s' (%zd bytes), which fccl does not carry", fn,
                         what, b->view.format ? b->view.format : "B",
                         b->view.itemsize);
            PyBuffer_Release(&b->view);
            return -1;
        }
        b->has_view = 1;
        b->dtype = (fccl_dtype_t)t;
        b->ptr = b->view.buf;
        b->count = (size_t)(b->view.len / b->view.itemsize);
        b->ndim = b->view.ndim;
        b->dim0 = b->view.ndim > 0 && b->view.shape ? b->view.shape[0] :
                  (b->view.ndim > 0 ? (Py_ssize_t)b->count : 1);
    } else if (is_torch(obj)) {
        if (torch_get(obj, b, fn, what) < 0)
            return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "For %s, the %s must be tensor (a NumPy "
                     "array, a buffer-protocol object or a torch CPU tensor), "
                     "but got %s", fn, what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    b->nbytes = b->count * fccl_dtype_size(b->dtype);
    b->row = b->dim0 > 0 ? b->count / (size_t)b->dim0 : 0;
    if (b->ndim <= 1)
        b->row = 1;
    b->obj = Py_NewRef(obj);
    return 0;
}

void fbuf_release(fbuf *b)
{
    if (b->has_view) {
        PyBuffer_Release(&b->view);
        b->has_view = 0;
    }
    Py_CLEAR(b->obj);
}

int fbuf_same_dtype(const fbuf *a, const fbuf *b, const char *fn)
{
    if (a->dtype == b->dtype)
        return 0;
    PyErr_Format(PyExc_TypeError, "For %s, the output dtype should be %s, but "
                 "got %s.", fn, fpy_dtype_name(a->dtype),
                 fpy_dtype_name(b->dtype));
    return -1;
}

int fbuf_is_array(PyObject *obj)
{
    return PyObject_CheckBuffer(obj) || is_torch(obj);
}
