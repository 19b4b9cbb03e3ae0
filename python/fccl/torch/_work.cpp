/*
 * fccl.torch._work: the C++ half of the torch backend: a c10d Work that
 * C++ callers can wait on, and the base of the process group, whose hot
 * collectives run here without entering Python.
 *
 * Why a C++ Work.  torch 1.13 accepts a ProcessGroup written in Python, but
 * not a Work: a Python subclass of Work is seen only by Python callers,
 * while C++ callers (DDP's parameter check, its reducer,
 * _broadcast_coalesced) call the C++ base wait(), which never returns.
 * The Work that torch offers for Python backends
 * (_create_work_from_future) drops the future's error in wait() (a timeout
 * would pass silently), ignores wait's timeout and has no source rank
 * (recv from any source).  FcclWork is the base c10d Work completed
 * through the protected finish(), so the base wait(timeout), isCompleted,
 * isSuccess and exception behave as in torch's own backends, plus a
 * future and the source rank.
 *
 * Why a C++ process group.  A group written in Python costs every call a
 * trip from torch's C++ into Python (the trampoline), a Work built from
 * Python and a call back into C: about 5 us for an 8-byte all_reduce, 20
 * times the collective itself.  ProcessGroupCpp is the base of the Python
 * group (fccl/torch/_pg.py).  Its hot collectives (allreduce, broadcast,
 * _allgather_base, _reduce_scatter_base) take one contiguous CPU tensor
 * each straight to the group's queue (fccl/_fccl/torchq.c, through the
 * one entry of torchq_abi.h) with the GIL released; anything else (lists,
 * non-contiguous or complex tensors, the checks that raise) goes to the
 * Python method of the same job (_allreduce_list, _broadcast_py, ...).
 * Every other virtual method forwards to the Python subclass's method, so
 * C++ callers (DDP, functional collectives) reach it too.  (torch's own
 * trampoline, PyProcessGroup, cannot serve: it looks the Python object up
 * as a ProcessGroup, which a subclass of ProcessGroupCpp is not to
 * pybind.)  allreduce and broadcast
 * are bound here again, in torch's forms: torch 1.13's bindings pass them
 * through its dispatcher first, and dist.all_reduce's form of allreduce
 * (and wait) comes in through a plain CPython door (door_allreduce): an
 * 8-byte dist.all_reduce took 6.4 us through torch's binding and 5.4 us
 * through the door, in one process on a slow day (bench/RESULTS.md).  The
 * rest stays in Python: those calls are rarer and their cost is in
 * packing lists of tensors, which C++ would not make cheaper.  One source
 * for torch 1.13 and 2.x; what only 2.x has is in one #if block.
 *
 * Completion without the GIL.  The queue's progress thread (plain C)
 * finishes queued operations and completes the Work through
 * fccl_work_complete(), handed over in a capsule, without the GIL:
 * copying results back into non-contiguous outputs, marking the future
 * (whose C++ callbacks, DDP's included, then run on that thread) and
 * waking waiters are all GIL-free.
 */
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include <pybind11/chrono.h>

#include "../_fccl/torchq_abi.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Tensors = std::vector<at::Tensor>;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;
using Future = c10::ivalue::Future;

const c10::TypePtr &tensor_list_type()
{
    static const c10::TypePtr t =
        c10::ListType::create(c10::TensorType::get());
    return t;
}

class FcclWork : public c10d::Work {
  public:
    FcclWork(Tensors outputs, Tensors dst, Tensors src, Tensors keep,
             std::string what)
        : FcclWork(std::move(outputs),
                   std::make_shared<const std::string>(std::move(what)))
    {
        dst_ = std::move(dst);
        src_ = std::move(src);
        keep_ = std::move(keep);
    }

    /* The hot path's: no copy-back, a name shared by the group's calls. */
    FcclWork(Tensors outputs, std::shared_ptr<const std::string> what)
        : c10d::Work(-1, c10d::OpType::UNKNOWN), outputs_(std::move(outputs)),
          what_(std::move(what))
    {
    }

    int sourceRank() const override
    {
        int r = src_rank_.load();
        TORCH_CHECK(r >= 0, "fccl: ", *what_, ": no source rank (only a "
                    "finished recv from any source has one)");
        return r;
    }

    Tensors result() override { return outputs_; }

    /* Ended without an error: then wait() has nothing to do. */
    bool ended_well() const { return ok_.load(std::memory_order_acquire); }

    /* Make a Work that ended well and that nobody else holds (the caller
     * checked) a new operation's: its outputs, running.  false if it
     * cannot be (it failed, or has a future that others may hold). */
    bool rearm(const Tensors &outputs,
               const std::shared_ptr<const std::string> &what)
    {
        if (!ended_well() || fut_)
            return false;
        completed_ = false;
        exception_ = nullptr;
        state_ = kRunning;
        src_rank_.store(-1, std::memory_order_relaxed);
        ok_.store(false, std::memory_order_relaxed);
        outputs_ = outputs;
        what_ = what;
        return true;
    }

    /* The base wait, with a timeout that names the operation. */
    bool wait(std::chrono::milliseconds timeout) override
    {
        try {
            return c10d::Work::wait(timeout);
        } catch (const c10::Error &) {
            if (isCompleted())
                throw;
            throw std::runtime_error(
                "fccl: " + *what_ + ": not finished after " +
                std::to_string(timeout.count()) +
                " ms (the wait timed out; the operation goes on and ends "
                "by the group timeout)");
        }
    }

    /* Made on first request (most calls never ask): marked at once if
     * the Work has ended, else by complete(). */
    c10::intrusive_ptr<Future> getFuture() override
    {
        std::lock_guard<std::mutex> g(fut_mu_);
        if (!fut_) {
            fut_ = c10::make_intrusive<Future>(tensor_list_type());
            if (state_ == kOk)
                fut_->markCompleted(c10::IValue(outputs_));
            else if (state_ == kFailed)
                fut_->setError(error_);
        }
        return fut_;
    }

    /* Called once, from any thread, without the GIL. */
    void complete(int rc, const char *msg, int src_rank)
    {
        if (rc >= 0) {
            try {
                for (size_t i = 0; i < dst_.size(); i++)
                    dst_[i].copy_(src_[i]);
            } catch (const std::exception &e) {
                rc = -1;
                copy_error_ = std::string("fccl: ") + *what_ +
                              ": copying the result out failed: " + e.what();
                msg = copy_error_.c_str();
            }
        }
        dst_.clear();
        src_.clear();
        keep_.clear();
        std::exception_ptr e;
        if (rc < 0)
            e = std::make_exception_ptr(std::runtime_error(msg));
        else
            src_rank_.store(src_rank);
        c10::intrusive_ptr<Future> f;
        {
            std::lock_guard<std::mutex> g(fut_mu_);
            state_ = rc < 0 ? kFailed : kOk;
            error_ = e;
            f = fut_;
        }
        if (rc < 0)
            finish(e);
        else
            finish();
        ok_.store(rc >= 0, std::memory_order_release);
        if (f && rc < 0)
            f->setError(e);
        else if (f)
            f->markCompleted(c10::IValue(outputs_));
    }

  private:
    enum { kRunning, kOk, kFailed };
    /* outputs_: the future's value; dst_[i] gets src_[i] (a contiguous
     * scratch) before completion; keep_: inputs borrowed until then */
    Tensors outputs_, dst_, src_, keep_;
    std::shared_ptr<const std::string> what_;
    std::string copy_error_;
    std::atomic<int> src_rank_{-1};
    std::atomic<bool> ok_{false};
    std::mutex fut_mu_; /* fut_, state_, error_ */
    c10::intrusive_ptr<Future> fut_;
    int state_ = kRunning;
    std::exception_ptr error_;
};

/* The C side: complete the Work whose reference retain() took, then drop
 * that reference. */
extern "C" void fccl_work_complete(void *w, int rc, const char *msg,
                                   int src_rank)
{
    auto p = c10::intrusive_ptr<FcclWork>::reclaim(static_cast<FcclWork *>(w));
    p->complete(rc, msg ? msg : "fccl: operation failed", src_rank);
}

/* A reference for the C side, as an address: reclaimed by
 * fccl_work_complete. */
uintptr_t retain(const c10::intrusive_ptr<FcclWork> &w)
{
    return reinterpret_cast<uintptr_t>(
        c10::intrusive_ptr<FcclWork>(w).release());
}

/* The fccl codes of torch's dtypes and reductions, -1 where fccl has
 * none; set once by fccl.torch (_pg.py) from the extension's tables. */
struct Codes {
    std::vector<int> dtype; /* by at::ScalarType */
    std::vector<int> redop; /* by c10d::ReduceOp::RedOpType */
};
Codes codes;

int code_of(const std::vector<int> &table, size_t i)
{
    return i < table.size() ? table[i] : -1;
}

class ProcessGroupCpp : public c10d::ProcessGroup {
  public:
    using c10d::ProcessGroup::ProcessGroup;

    ~ProcessGroupCpp() override
    {
        if ((queue_obj_ || door_work_) && Py_IsInitialized()) {
            py::gil_scoped_acquire gil;
            Py_XDECREF(queue_obj_);
            Py_XDECREF(door_work_);
        }
    }

    /* Attach the group's TorchQueue (kept alive here: C++ callers may
     * hold the group longer than Python does); suffix names the group in
     * messages (" on group 'ID' (fccl name)"). */
    void attach(py::object queue, py::capsule hot, const std::string &suffix)
    {
        py::capsule h = queue.attr("handle");
        void *q = PyCapsule_GetPointer(h.ptr(), TQ_QUEUE_CAPSULE);
        void *fn = PyCapsule_GetPointer(hot.ptr(), TQ_HOT_CAPSULE);
        if (!q || !fn)
            throw py::error_already_set();
        Py_XDECREF(queue_obj_);
        queue_obj_ = queue.release().ptr();
        queue_ = q;
        hot_ = reinterpret_cast<tq_hot_fn>(fn);
        suffix_ = suffix;
        for (int op = 0; op < TQ_NUM_OPS; op++)
            names_[op] = std::make_shared<const std::string>(
                std::string(kNames[op]) + suffix_);
    }

    const std::string getBackendName() const override { return "fccl"; }

    /* ---- the hot path: one contiguous CPU tensor each ---- */

    WorkPtr allreduce(Tensors &tensors,
                      const c10d::AllreduceOptions &opts) override
    {
        tq_hot_args a;
        if (hot_allreduce(tensors, opts, &a))
            return submit(tensors, a);
        return python("_allreduce_list", tensors, opts);
    }

    WorkPtr broadcast(Tensors &tensors,
                      const c10d::BroadcastOptions &opts) override
    {
        int dt;
        if (tensors.size() == 1 && plain(tensors[0], &dt) &&
            opts.rootRank >= 0 && opts.rootRank < getSize()) {
            void *p = tensors[0].data_ptr();
            return submit(tensors, {TQ_BROADCAST, nullptr, p,
                                    count(tensors[0]), dt, 0,
                                    static_cast<int>(opts.rootRank)});
        }
        return python("_broadcast_py", tensors, opts);
    }

    WorkPtr _allgather_base(at::Tensor &out, at::Tensor &in,
                            const c10d::AllgatherOptions &opts) override
    {
        int dt, odt;
        if (plain(in, &dt) && plain(out, &odt) && dt == odt &&
            out.numel() == in.numel() * getSize())
            return submit({out}, {TQ_ALL_GATHER, in.data_ptr(),
                                  out.data_ptr(), count(in), dt, 0, 0});
        return python("_allgather_base_py", out, in, opts);
    }

    WorkPtr _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                                 const c10d::ReduceScatterOptions &opts) override
    {
        int dt, idt, red;
        if (plain(out, &dt) && plain(in, &idt) && dt == idt &&
            in.numel() == out.numel() * getSize() &&
            reduction(opts.reduceOp, out, &red))
            return submit({out}, {TQ_REDUCE_SCATTER, in.data_ptr(),
                                  out.data_ptr(), count(out), dt, red, 0});
        return python("_reduce_scatter_base_py", out, in, opts);
    }

    /* dist.all_reduce's call, from the door (GIL held): allreduce() whose
     * Work, for a small tensor, is the group's previous one again once
     * nobody holds it (a new Work and its Python object are a third of
     * the torch layer's cost of a small call).  The Work then keeps its
     * tensor until the next call, hence the size bound.  Returns a new
     * reference, or nullptr with a Python error set. */
    PyObject *allreduce_door(Tensors &ts, const c10d::AllreduceOptions &opts)
    {
        tq_hot_args a;
        if (!hot_allreduce(ts, opts, &a))
            return py::cast(python("_allreduce_list", ts, opts)).release().ptr();
        if (ts[0].nbytes() > kReuseBytes)
            return py::cast(submit(ts, a)).release().ptr();
        /* taken before run() lets the GIL go: another thread calling
         * meanwhile sees the Work held */
        py::object o;
        c10::intrusive_ptr<FcclWork> w;
        if (door_work_ && Py_REFCNT(door_work_) == 1 &&
            door_ptr_.use_count() == 2 && door_ptr_.weak_use_count() == 1 &&
            door_ptr_->rearm(ts, name(a.op))) {
            o = py::reinterpret_borrow<py::object>(door_work_);
            w = door_ptr_;
        } else {
            w = c10::make_intrusive<FcclWork>(ts, name(a.op));
            o = py::cast(w);
            Py_XDECREF(door_work_);
            door_work_ = py::object(o).release().ptr();
            door_ptr_ = w;
        }
        run(w, a);
        return o.release().ptr();
    }

    /* ---- the rest: the Python subclass's ---- */

    WorkPtr allreduce_coalesced(
        Tensors &tensors, const c10d::AllreduceCoalescedOptions &opts) override
    {
        return python("allreduce_coalesced", tensors, opts);
    }

    WorkPtr reduce(Tensors &tensors, const c10d::ReduceOptions &opts) override
    {
        return python("reduce", tensors, opts);
    }

    WorkPtr allgather(std::vector<Tensors> &outs, Tensors &ins,
                      const c10d::AllgatherOptions &opts) override
    {
        return python("allgather", outs, ins, opts);
    }

    WorkPtr allgather_coalesced(std::vector<Tensors> &outs, Tensors &ins,
                                const c10d::AllgatherOptions &opts) override
    {
        return python("allgather_coalesced", outs, ins, opts);
    }

    WorkPtr gather(std::vector<Tensors> &outs, Tensors &ins,
                   const c10d::GatherOptions &opts) override
    {
        return python("gather", outs, ins, opts);
    }

    WorkPtr scatter(Tensors &outs, std::vector<Tensors> &ins,
                    const c10d::ScatterOptions &opts) override
    {
        return python("scatter", outs, ins, opts);
    }

    WorkPtr reduce_scatter(Tensors &outs, std::vector<Tensors> &ins,
                           const c10d::ReduceScatterOptions &opts) override
    {
        return python("reduce_scatter", outs, ins, opts);
    }

    WorkPtr alltoall_base(at::Tensor &out, at::Tensor &in,
                          std::vector<int64_t> &out_splits,
                          std::vector<int64_t> &in_splits,
                          const c10d::AllToAllOptions &opts) override
    {
        return python("alltoall_base", out, in, out_splits, in_splits, opts);
    }

    WorkPtr alltoall(Tensors &outs, Tensors &ins,
                     const c10d::AllToAllOptions &opts) override
    {
        return python("alltoall", outs, ins, opts);
    }

    WorkPtr send(Tensors &tensors, int dst, int tag) override
    {
        return python("send", tensors, dst, tag);
    }

    WorkPtr recv(Tensors &tensors, int src, int tag) override
    {
        return python("recv", tensors, src, tag);
    }

    WorkPtr recvAnysource(Tensors &tensors, int tag) override
    {
        return python("recv_anysource", tensors, tag);
    }

    WorkPtr barrier(const c10d::BarrierOptions &opts) override
    {
        return python("barrier", opts);
    }

    /* ---- what only torch 2.x has (the one version-dependent part of
     * this file; fccl/torch/_compat.py has Python's) ---- */
#if TORCH_VERSION_MAJOR >= 2
    WorkPtr allgather_into_tensor_coalesced(
        Tensors &outs, Tensors &ins, const c10d::AllgatherOptions &opts) override
    {
        return python("allgather_into_tensor_coalesced", outs, ins, opts);
    }

    WorkPtr reduce_scatter_tensor_coalesced(
        Tensors &outs, Tensors &ins,
        const c10d::ReduceScatterOptions &opts) override
    {
        return python("reduce_scatter_tensor_coalesced", outs, ins, opts);
    }

    /* torch 2.x keeps a group's name in its per-device Backend, which a
     * ProcessGroup subclass has none of ("ProcessGroup name not set" from
     * functional collectives, DeviceMesh, DTensor): kept here.  torch
     * sets them once, after the creator returns. */
    const std::string &getGroupName() const override { return group_name_; }
    void setGroupName(const std::string &n) override { group_name_ = n; }
    const std::string &getGroupDesc() const override { return group_desc_; }
    void setGroupDesc(const std::string &d) override { group_desc_ = d; }
#endif

  private:
    /* allreduce's hot path takes tensors (one plain tensor, a reduction
     * fccl has for its dtype): then *a is its call. */
    static bool hot_allreduce(Tensors &ts, const c10d::AllreduceOptions &opts,
                              tq_hot_args *a)
    {
        int dt, red;
        if (ts.size() != 1 || !plain(ts[0], &dt) ||
            !reduction(opts.reduceOp, ts[0], &red))
            return false;
        void *p = ts[0].data_ptr();
        *a = {TQ_ALL_REDUCE, p, p, count(ts[0]), dt, red, 0};
        return true;
    }

    /* A tensor the hot path takes as it is, with its fccl dtype; anything
     * else goes to Python (which also raises the errors). */
    static bool plain(const at::Tensor &t, int *dt)
    {
        if (!t.defined() || !t.device().is_cpu() ||
            t.layout() != at::kStrided || !t.is_contiguous() ||
            t.is_complex())
            return false;
        *dt = code_of(codes.dtype, static_cast<size_t>(t.scalar_type()));
        return *dt >= 0;
    }

    /* fccl's code of a reduction fccl has and t's dtype allows. */
    static bool reduction(const c10d::ReduceOp &r, const at::Tensor &t,
                          int *red)
    {
        auto op = static_cast<c10d::ReduceOp::RedOpType>(r);
        *red = code_of(codes.redop, static_cast<size_t>(op));
        if (*red < 0)
            return false;
        auto st = t.scalar_type();
        bool bitwise = op == c10d::ReduceOp::BAND ||
                       op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
        if (bitwise && at::isFloatingType(st))
            return false;
        return !(op == c10d::ReduceOp::AVG && st == at::kBool);
    }

    static size_t count(const at::Tensor &t)
    {
        return static_cast<size_t>(t.numel());
    }

    /* "allreduce on group 'ID' (fccl name)", made by attach() */
    const std::shared_ptr<const std::string> &name(int op) const
    {
        return names_[op];
    }

    WorkPtr submit(const Tensors &outputs, const tq_hot_args &a)
    {
        auto w = c10::make_intrusive<FcclWork>(outputs, name(a.op));
        run(w, a);
        return w;
    }

    /* Start (or run) operation a, completing w. */
    void run(const c10::intrusive_ptr<FcclWork> &w, const tq_hot_args &a)
    {
        if (!hot_)
            throw std::runtime_error("fccl: the process group has no queue");
        void *ref = reinterpret_cast<void *>(retain(w));
        char err[1400];
        int rc;
        if (PyGILState_Check()) { /* a caller holding the GIL */
            py::gil_scoped_release nogil;
            rc = hot_(queue_, ref, &a, err, sizeof err);
        } else {
            rc = hot_(queue_, ref, &a, err, sizeof err);
        }
        if (rc == TQ_HOT_UNUSABLE)
            throw std::runtime_error(err);
        if (rc < 0)
            throw std::invalid_argument(err); /* ValueError, as from Python */
    }

    /* The Python subclass's method `name` for the rest of an operation. */
    template <typename... Args>
    WorkPtr python(const char *name, Args &&...args)
    {
        py::gil_scoped_acquire gil;
        py::function f = py::get_override(
            static_cast<const ProcessGroupCpp *>(this), name);
        if (!f)
            throw std::runtime_error(std::string("fccl: ") + name +
                                     " is not supported");
        return f(std::forward<Args>(args)...).template cast<WorkPtr>();
    }

    /* torch's names of the hot operations, for messages */
    static constexpr const char *kNames[TQ_NUM_OPS] = {
        "barrier", "broadcast", "reduce", "allreduce",
        "all_gather_into_tensor", "allgather", "reduce_scatter_tensor",
        "reduce_scatter", "gather", "scatter", "all_to_all_single",
        "all_to_all"};

    /* the largest tensor whose Work the door reuses */
    static constexpr size_t kReuseBytes = 64 * 1024;

    PyObject *queue_obj_ = nullptr;
    /* the door's last Work: its Python object (owned) and the Work */
    PyObject *door_work_ = nullptr;
    c10::intrusive_ptr<FcclWork> door_ptr_;
    void *queue_ = nullptr;
    tq_hot_fn hot_ = nullptr;
    std::string suffix_;
    std::shared_ptr<const std::string> names_[TQ_NUM_OPS];
#if TORCH_VERSION_MAJOR >= 2
    std::string group_name_, group_desc_;
#endif
};

constexpr auto kSum = c10d::ReduceOp::SUM;

/* Doors from Python for the two calls every dist.all_reduce makes.  The
 * common form is read here with the CPython calling convention, skipping
 * pybind11's overload machinery (argument records, the list's conversion:
 * about a third of a microsecond of a 3 us call); every other form goes
 * to the bound overloads behind the door (forms_*), which also raise the
 * errors:
 * - allreduce([tensor], opts), from dist.all_reduce;
 * - wait() on a Work that ended well (then there is nothing to wait for). */
PyObject *forms_allreduce, *forms_wait;

/* The pybind11 types of the door's arguments, set at import
 * (AllreduceOptions on first use: it is torch's). */
PyTypeObject *pg_type, *work_type, *opts_type;

/* The C++ object of o, a pybind11 instance of (a subclass of) type, or
 * nullptr: pybind11's caster less its look-up of the type by name (a hash
 * of the mangled name for each argument of each call). */
template <typename T>
T *unwrap(PyObject *o, PyTypeObject *type)
{
    if (!type || !PyObject_TypeCheck(o, type))
        return nullptr;
    auto vh = reinterpret_cast<py::detail::instance *>(o)
                  ->get_value_and_holder();
    return vh.holder_constructed() ? static_cast<T *>(vh.value_ptr())
                                   : nullptr;
}

const c10d::AllreduceOptions *unwrap_opts(PyObject *o)
{
    if (!opts_type)
        opts_type = reinterpret_cast<PyTypeObject *>(
            py::detail::get_type_handle(typeid(c10d::AllreduceOptions), false)
                .ptr());
    return unwrap<const c10d::AllreduceOptions>(o, opts_type);
}

PyObject *raise_current()
{
    try {
        throw;
    } catch (py::error_already_set &e) {
        e.restore();
    } catch (const std::invalid_argument &e) {
        PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const c10::Error &e) {
        PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    return nullptr;
}

/* The bound overloads: self first, then the arguments as given. */
PyObject *through_forms(PyObject *forms, PyObject *self, PyObject *const *args,
                        Py_ssize_t nargs, PyObject *kwnames)
{
    size_t nkw = kwnames ? static_cast<size_t>(PyTuple_GET_SIZE(kwnames)) : 0;
    std::vector<PyObject *> all(1 + static_cast<size_t>(nargs) + nkw);
    all[0] = self;
    std::copy(args, args + nargs + nkw, all.begin() + 1);
    return PyObject_Vectorcall(forms, all.data(),
                               static_cast<size_t>(nargs) + 1, kwnames);
}

PyObject *door_allreduce(PyObject *self, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *t = nargs == 2 && !kwnames && PyList_CheckExact(args[0]) &&
                          PyList_GET_SIZE(args[0]) == 1
                      ? PyList_GET_ITEM(args[0], 0)
                      : nullptr;
    ProcessGroupCpp *pg;
    const c10d::AllreduceOptions *opts;
    if (t && THPVariable_Check(t) &&
        (pg = unwrap<ProcessGroupCpp>(self, pg_type)) &&
        (opts = unwrap_opts(args[1]))) {
        try {
            Tensors ts{THPVariable_Unpack(t)};
            return pg->allreduce_door(ts, *opts);
        } catch (...) {
            return raise_current();
        }
    }
    return through_forms(forms_allreduce, self, args, nargs, kwnames);
}

PyObject *door_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
    FcclWork *w;
    if (nargs == 0 && !kwnames && (w = unwrap<FcclWork>(self, work_type)) &&
        w->ended_well())
        Py_RETURN_TRUE;
    return through_forms(forms_wait, self, args, nargs, kwnames);
}

template <PyObject *(*Door)(PyObject *, PyObject *const *, Py_ssize_t,
                            PyObject *)>
PyCFunction as_cfunction()
{
    return reinterpret_cast<PyCFunction>(
        reinterpret_cast<void (*)(void)>(Door));
}

PyMethodDef door_allreduce_def = {
    "allreduce", as_cfunction<door_allreduce>(), METH_FASTCALL | METH_KEYWORDS,
    "allreduce(tensors, opts) and torch's other forms (see the base class)"};
PyMethodDef door_wait_def = {
    "wait", as_cfunction<door_wait>(), METH_FASTCALL | METH_KEYWORDS,
    "wait(timeout=None): block until the operation ends (True), raise its "
    "error"};

/* Put the door `def` in front of cls's bound overloads of the same name;
 * returns those overloads (a new reference). */
PyObject *install_door(py::object cls, PyMethodDef *def)
{
    auto *type = reinterpret_cast<PyTypeObject *>(cls.ptr());
    PyObject *bound = PyDict_GetItemString(type->tp_dict, def->ml_name);
    if (!bound || !PyInstanceMethod_Check(bound))
        throw std::runtime_error(std::string("fccl: no bound ") +
                                 def->ml_name + " to put a door on");
    PyObject *forms = PyInstanceMethod_GET_FUNCTION(bound);
    Py_INCREF(forms);
    py::object door = py::reinterpret_steal<py::object>(
        PyDescr_NewMethod(type, def));
    if (!door)
        throw py::error_already_set();
    cls.attr(def->ml_name) = door;
    return forms;
}

} // namespace

PYBIND11_MODULE(_work, m)
{
    m.doc() = "fccl.torch's c10d Work and process group base (_work.cpp)";
    py::class_<FcclWork, c10d::Work, c10::intrusive_ptr<FcclWork>> work_class(
        m, "Work");
    work_class
        .def(py::init<Tensors, Tensors, Tensors, Tensors, std::string>(),
             py::arg("outputs"), py::arg("dst"), py::arg("src"),
             py::arg("keep"), py::arg("what"))
        /* torch's wait, less the GIL's release and retake when the Work
         * has ended already (a small collective run inline) */
        .def("wait",
             [](FcclWork &w, std::chrono::milliseconds timeout) {
                 if (w.ended_well())
                     return true;
                 if (w.isCompleted())
                     return w.wait(timeout);
                 py::gil_scoped_release nogil;
                 return w.wait(timeout);
             },
             py::arg("timeout") = kNoTimeout);
    py::class_<ProcessGroupCpp, c10d::ProcessGroup,
               c10::intrusive_ptr<ProcessGroupCpp>>
        pg_class(m, "ProcessGroupCpp");
    pg_class
        .def(py::init<int, int>(), py::arg("rank"), py::arg("size"))
        .def("_attach", &ProcessGroupCpp::attach, py::arg("queue"),
             py::arg("hot"), py::arg("suffix"),
             "Run the hot collectives on this TorchQueue")
        /* torch 1.13 binds allreduce and broadcast through its dispatcher
         * (c10d::ops) before the virtual method: bound here straight to
         * it, in torch's forms (three of allreduce, two of broadcast: a
         * name defined here hides the base class's overloads). */
        .def("allreduce",
             [](ProcessGroupCpp &pg, Tensors &ts,
                const c10d::AllreduceOptions &opts) {
                 return pg.allreduce(ts, opts);
             },
             py::arg("tensors"), py::arg("opts") = c10d::AllreduceOptions())
        .def("allreduce",
             [](ProcessGroupCpp &pg, Tensors &ts, const c10d::ReduceOp &op) {
                 c10d::AllreduceOptions o;
                 o.reduceOp = op;
                 return pg.allreduce(ts, o);
             },
             py::arg("tensors"), py::arg("op") = c10d::ReduceOp(kSum))
        .def("allreduce",
             [](ProcessGroupCpp &pg, at::Tensor &t, const c10d::ReduceOp &op) {
                 c10d::AllreduceOptions o;
                 o.reduceOp = op;
                 Tensors ts{t};
                 return pg.allreduce(ts, o);
             },
             py::arg("tensor"), py::arg("op") = c10d::ReduceOp(kSum))
        .def("broadcast",
             [](ProcessGroupCpp &pg, Tensors &ts,
                const c10d::BroadcastOptions &opts) {
                 return pg.broadcast(ts, opts);
             },
             py::arg("tensors"), py::arg("opts") = c10d::BroadcastOptions())
        .def("broadcast",
             [](ProcessGroupCpp &pg, at::Tensor &t, int root) {
                 c10d::BroadcastOptions o;
                 o.rootRank = root;
                 Tensors ts{t};
                 return pg.broadcast(ts, o);
             },
             py::arg("tensor"), py::arg("root"));
    pg_type = reinterpret_cast<PyTypeObject *>(pg_class.ptr());
    work_type = reinterpret_cast<PyTypeObject *>(work_class.ptr());
    forms_allreduce = install_door(pg_class, &door_allreduce_def);
    forms_wait = install_door(work_class, &door_wait_def);
    m.def("retain", &retain,
          "A reference to the Work for fccl_work_complete (an address)");
    m.def("complete",
          [](const c10::intrusive_ptr<FcclWork> &w, int rc,
             const std::string &msg, int src) {
              /* for operations finished in Python: same path, GIL free */
              uintptr_t h = retain(w);
              py::gil_scoped_release nogil;
              fccl_work_complete(reinterpret_cast<void *>(h), rc, msg.c_str(),
                                 src);
          },
          py::arg("work"), py::arg("rc"), py::arg("msg") = "",
          py::arg("src") = -1);
    m.def("set_codes",
          [](std::vector<int> dtype, std::vector<int> redop) {
              codes.dtype = std::move(dtype);
              codes.redop = std::move(redop);
          },
          py::arg("dtype"), py::arg("redop"),
          "fccl's dtype codes by at::ScalarType and reduction codes by "
          "RedOpType (-1: none), for the hot path");
    m.def("scalar_type",
          [](const at::Tensor &t) { return static_cast<int>(t.scalar_type()); },
          "A tensor's at::ScalarType as a number (for set_codes)");
    m.attr("complete_fn") = py::capsule(
        reinterpret_cast<void *>(&fccl_work_complete), "fccl_work_complete");
}
