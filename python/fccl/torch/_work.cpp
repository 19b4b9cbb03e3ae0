/*
 * fccl.torch._work: the one piece of the torch backend that Python cannot
 * provide, a c10d Work that C++ callers can wait on.
 *
 * Why C++.  torch 1.13 accepts a ProcessGroup written in Python, but not a
 * Work: a Python subclass of Work is seen only by Python callers, while
 * C++ callers (DDP's parameter check, its reducer, _broadcast_coalesced)
 * call the C++ base wait(), which never returns.  The Work that torch
 * offers for Python backends (_create_work_from_future) works for them but
 * drops the future's error in wait() (a timeout would pass silently),
 * ignores wait's timeout and has no source rank (recv from any source).
 * FcclWork is the base c10d Work completed through the protected
 * finish(), so the base wait(timeout), isCompleted, isSuccess and
 * exception behave as in torch's own backends, plus a future and the
 * source rank.
 *
 * Completion without the GIL.  The extension's progress thread
 * (python/fccl/_fccl/torchq.c, plain C) finishes operations; it completes
 * the Work through fccl_work_complete(), a C function handed over in a
 * capsule, without taking the GIL: copying results back into
 * non-contiguous outputs, marking the future (whose C++ callbacks, DDP's
 * included, then run on that thread) and waking waiters are all GIL-free.
 * So completions never wait for the Python thread to give up the GIL.
 */
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

class FcclWork : public c10d::Work {
  public:
    FcclWork(std::vector<at::Tensor> outputs, std::vector<at::Tensor> dst,
             std::vector<at::Tensor> src, std::vector<at::Tensor> keep,
             std::string what)
        : c10d::Work(-1, c10d::OpType::UNKNOWN), outputs_(std::move(outputs)),
          dst_(std::move(dst)), src_(std::move(src)), keep_(std::move(keep)),
          what_(std::move(what)),
          fut_(c10::make_intrusive<c10::ivalue::Future>(
              c10::ListType::create(c10::TensorType::get())))
    {
    }

    int sourceRank() const override
    {
        int r = src_rank_.load();
        TORCH_CHECK(r >= 0, "fccl: ", what_, ": no source rank (only a "
                    "finished recv from any source has one)");
        return r;
    }

    std::vector<at::Tensor> result() override { return outputs_; }

    /* The base wait, with a timeout that names the operation. */
    bool wait(std::chrono::milliseconds timeout) override
    {
        try {
            return c10d::Work::wait(timeout);
        } catch (const c10::Error &) {
            if (isCompleted())
                throw;
            throw std::runtime_error(
                "fccl: " + what_ + ": not finished after " +
                std::to_string(timeout.count()) +
                " ms (the wait timed out; the operation goes on and ends "
                "by the group timeout)");
        }
    }

    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
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
                copy_error_ = std::string("fccl: ") + what_ +
                              ": copying the result out failed: " + e.what();
                msg = copy_error_.c_str();
            }
        }
        dst_.clear();
        src_.clear();
        keep_.clear();
        if (rc < 0) {
            auto e = std::make_exception_ptr(std::runtime_error(msg));
            finish(e);
            fut_->setError(e);
            return;
        }
        src_rank_.store(src_rank);
        finish();
        fut_->markCompleted(c10::IValue(outputs_));
    }

  private:
    /* outputs_: the future's value; dst_[i] gets src_[i] (a contiguous
     * scratch) before completion; keep_: inputs borrowed until then */
    std::vector<at::Tensor> outputs_, dst_, src_, keep_;
    std::string what_, copy_error_;
    std::atomic<int> src_rank_{-1};
    c10::intrusive_ptr<c10::ivalue::Future> fut_;
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

} // namespace

PYBIND11_MODULE(_work, m)
{
    m.doc() = "fccl.torch's c10d Work (see _work.cpp)";
    py::class_<FcclWork, c10d::Work, c10::intrusive_ptr<FcclWork>>(m, "Work")
        .def(py::init<std::vector<at::Tensor>, std::vector<at::Tensor>,
                      std::vector<at::Tensor>, std::vector<at::Tensor>,
                      std::string>(),
             py::arg("outputs"), py::arg("dst"), py::arg("src"),
             py::arg("keep"), py::arg("what"));
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
    m.attr("complete_fn") = py::capsule(
        reinterpret_cast<void *>(&fccl_work_complete), "fccl_work_complete");
}
