"""ProcessGroupFccl: torch.distributed's ProcessGroup over libfccl.

torch hands every method **group** ranks (it translates global ranks
itself), which are exactly the ranks of the fccl group under the queue, so
the C API is called with them as they come (never fccl's Python
functions, whose ranks are global).

Each method checks and prepares its tensors here (contiguous scratch for
non-contiguous ones, complex as real views, lists packed into one buffer)
and hands one operation to the group's TorchQueue (_fccl/torchq.c), which
runs it inline when it is small and nothing is queued, else starts it
and completes its Work from the queue's progress thread.  The Work
(_work.cpp) copies scratch results back into the caller's tensors before
it completes, so waiters and future callbacks see final values.
"""
import torch

from .. import _fccl
from . import _compat as C
from . import _work

_Work = _work.Work
_retain = _work.retain

_DT = {}
for _n, _c in _fccl.dtypes().items():
    if hasattr(torch, _n) and isinstance(getattr(torch, _n), torch.dtype):
        _DT[getattr(torch, _n)] = _c
_FLOATS = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
_BITWISE = {"BAND", "BOR", "BXOR"}


def _fail(what, msg):
    raise RuntimeError(f"fccl: {what}: {msg}")


def _check(t, what):
    """t as fccl can send it: a CPU dense tensor of an fccl dtype, complex
    as its real view.  Returns (tensor, dtype code)."""
    if not isinstance(t, torch.Tensor):
        _fail(what, f"expected a tensor, got {type(t).__name__}")
    if not t.is_cpu:
        _fail(what, f"only CPU tensors are supported, got one on {t.device}")
    if t.layout != torch.strided:
        _fail(what, f"only dense tensors are supported, got {t.layout}")
    if t.is_complex():
        t = torch.view_as_real(t)
    dt = _DT.get(t.dtype)
    if dt is None:
        _fail(what, f"unsupported dtype {t.dtype}")
    return t, dt


def _src(t):
    """A contiguous tensor to read t from."""
    return t if t.is_contiguous() else t.contiguous()


def _dst(t, dst, src, init=False):
    """A contiguous tensor to write t's result into; a scratch one (copied
    back into t by the Work) when t is not contiguous (init: start from
    t's values, for in-place operations)."""
    if t.is_contiguous():
        return t
    b = t.contiguous() if init else torch.empty(t.shape, dtype=t.dtype)
    dst.append(t)
    src.append(b)
    return b


def _same(tensors, what):
    """Check a list of tensors of one dtype; returns (list, dtype)."""
    out, dt = [], None
    for t in tensors:
        t, d = _check(t, what)
        if dt is not None and d != dt:
            _fail(what, f"tensors of different dtypes ({tensors[0].dtype} and "
                  f"{t.dtype})")
        dt = d
        out.append(t)
    return out, dt


def _one(tensors, what):
    if len(tensors) != 1:
        _fail(what, f"takes exactly one tensor per rank, got {len(tensors)} "
              "(multi-device lists are for GPU backends)")
    return tensors[0]


def _flat(ts):
    """One contiguous 1-d tensor holding ts in order."""
    if len(ts) == 1:
        return _src(ts[0]).view(-1)
    return torch.cat([t.reshape(-1) for t in ts])


def _unpack(flat, ts, dst, src, base=0):
    """Copy-back pairs from consecutive pieces of flat into ts."""
    off = base
    for t in ts:
        n = t.numel()
        dst.append(t)
        src.append(flat[off:off + n].view(t.shape))
        off += n
    return off


class ProcessGroupFccl(C.ProcessGroupBase):
    """A torch.distributed process group whose operations run on an fccl
    group (the world for the default group, a new fccl group for each
    torch subgroup)."""

    def __init__(self, queue, rank, size, group_id, timeout):
        C.pg_init(self, rank, size)
        self._q = queue
        self._id = group_id
        self._timeout = timeout
        self._ms = max(1, int(timeout.total_seconds() * 1000))
        self._names = {}  # op -> "op on group 'ID' (fccl name)", for Works
        self._attach(queue, _fccl.torchq_hot,
                     f" on group {group_id!r} ({queue.fccl_name})")

    def getBackendName(self):
        return "fccl"

    def __repr__(self):
        return (f"<ProcessGroupFccl group {self._id!r} ({self._q.fccl_name}) "
                f"rank {self.rank()} of {self.size()}>")

    @property
    def fccl_name(self):
        """fccl's name of the group under this one."""
        return self._q.fccl_name

    # ---- helpers ----

    def _red(self, opts, what, dt):
        if opts is None:
            return 0
        code, name = C.redop(opts.reduceOp)
        if name in _BITWISE and dt in _FLOAT_CODES:
            _fail(what, f"{name} is not defined on floating types")
        if name == "AVG" and dt == _BOOL:
            _fail(what, "AVG is not defined on bool")
        return code

    def _name(self, what):
        n = self._names.get(what)
        if n is None:
            n = self._names[what] = (f"{what} on group {self._id!r} "
                                     f"({self._q.fccl_name})")
        return n

    def _coll(self, op, what, outputs, dst, src, keep, s, r, count, dt,
              red=0, root=0, c1=None, c2=None):
        w = _Work(outputs, dst, src, keep, self._name(what))
        self._q.coll(op, _retain(w), 0 if s is None else s.data_ptr(),
                     0 if r is None else r.data_ptr(), count, dt, red, root,
                     c1, c2)
        return w

    def _root(self, opts, what):
        root = 0 if opts is None else opts.rootRank
        if not 0 <= root < self.size():
            _fail(what, f"root {root} is not a rank of the group (size "
                  f"{self.size()})")
        return root

    # ---- reductions ----

    # allreduce, broadcast, _allgather_base and _reduce_scatter_base are
    # ProcessGroupCpp's (_work.cpp), which sends what its hot path does
    # not take to _allreduce_list and the *_py methods here

    def _allreduce_list(self, tensors, opts, what="allreduce"):
        """Several tensors (Gloo's semantics: all ranks' and all tensors'
        values reduced, the result in every tensor) or a non-contiguous,
        complex or otherwise unusual one (the errors are raised here)."""
        if not tensors:
            _fail(what, "no tensor given")
        ts, dt = _same(tensors, what)
        red = self._red(opts, what, dt)
        name = "SUM" if opts is None else C.redop(opts.reduceOp)[1]
        if tensors[0].is_complex() and name not in ("SUM", "AVG"):
            _fail(what, f"{name} is not defined on complex tensors (SUM and "
                  "AVG are)")
        shape = ts[0].shape
        if any(t.shape != shape for t in ts):
            _fail(what, "tensors of different shapes")
        dst, src = [], []
        if len(ts) == 1:
            buf = _dst(ts[0], dst, src, init=True)
        else:
            buf = _local_reduce(ts, name).contiguous()
            for t in ts:
                dst.append(t)
                src.append(buf)
        return self._coll(_fccl.TQ_ALL_REDUCE, what, list(tensors), dst, src,
                          [], buf, buf, buf.numel(), dt, red)

    def allreduce_coalesced(self, tensors, opts=None):
        what = "allreduce_coalesced"
        if not tensors:
            _fail(what, "no tensor given")
        ts, dt = _same(tensors, what)
        red = self._red(opts, what, dt)
        flat = _flat(ts)
        if len(ts) == 1 and flat.data_ptr() == ts[0].data_ptr():
            dst, src = [], []
        else:
            flat = flat.clone() if len(ts) == 1 else flat
            dst, src = [], []
            _unpack(flat, ts, dst, src)
        return self._coll(_fccl.TQ_ALL_REDUCE, what, list(tensors), dst, src,
                          [], flat, flat, flat.numel(), dt, red)

    def reduce(self, tensors, opts=None):
        what = "reduce"
        t, dt = _check(_one(tensors, what), what)
        red = self._red(opts, what, dt)
        root = self._root(opts, what)
        dst, src = [], []
        buf = _dst(t, dst, src, init=True)
        recv = buf if self.rank() == root else None
        if recv is None:
            dst, src = [], []  # non-roots keep their input as it was
        return self._coll(_fccl.TQ_REDUCE, what, list(tensors), dst, src,
                          [buf], buf, recv, buf.numel(), dt, red, root)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        what = "reduce_scatter"
        out, dt = _check(_one(outputs, what), what)
        ins = _one(input_lists, what)
        n = self.size()
        if len(ins) != n:
            _fail(what, f"needs {n} input tensors (one per rank), got "
                  f"{len(ins)}")
        ins, idt = _same(ins, what)
        if idt != dt:
            _fail(what, "inputs and output of different dtypes")
        red = self._red(opts, what, dt)
        me = self.rank()
        if ins[me].numel() != out.numel():
            _fail(what, f"output has {out.numel()} elements, input {me} "
                  f"{ins[me].numel()}")
        flat = _flat(ins)
        dst, src = [], []
        buf = _dst(out, dst, src)
        counts = [t.numel() for t in ins]
        if all(c == counts[0] for c in counts):
            return self._coll(_fccl.TQ_REDUCE_SCATTER, what, list(outputs),
                              dst, src, [flat], flat, buf, counts[0], dt, red)
        return self._coll(_fccl.TQ_REDUCE_SCATTER_V, what, list(outputs), dst,
                          src, [flat], flat, buf, 0, dt, red, 0, counts)

    def _reduce_scatter_base_py(self, output, input, opts=None):
        what = "reduce_scatter_tensor"
        out, dt = _check(output, what)
        inp, idt = _check(input, what)
        if idt != dt:
            _fail(what, "input and output of different dtypes")
        if inp.numel() != out.numel() * self.size():
            _fail(what, f"input has {inp.numel()} elements, not group size "
                  f"{self.size()} x output's {out.numel()}")
        red = self._red(opts, what, dt)
        s = _src(inp)
        dst, src = [], []
        buf = _dst(out, dst, src)
        return self._coll(_fccl.TQ_REDUCE_SCATTER, what, [output], dst, src,
                          [s], s, buf, out.numel(), dt, red)

    # ---- data movement ----

    def _broadcast_py(self, tensors, opts=None):
        what = "broadcast"
        if len(tensors) != 1:
            _fail(what, f"takes exactly one tensor per rank, got "
                  f"{len(tensors)}")
        t, dt = _check(tensors[0], what)
        root = self._root(opts, what)
        dst, src = [], []
        buf = _dst(t, dst, src, init=True)
        return self._coll(_fccl.TQ_BROADCAST, what, list(tensors), dst, src,
                          [], None, buf, buf.numel(), dt, 0, root)

    def allgather(self, output_lists, inputs, opts=None):
        what = "allgather"
        inp, dt = _check(_one(inputs, what), what)
        outs = _one(output_lists, what)
        n = self.size()
        if len(outs) != n:
            _fail(what, f"needs {n} output tensors (one per rank), got "
                  f"{len(outs)}")
        outs, odt = _same(outs, what)
        if odt != dt:
            _fail(what, "input and outputs of different dtypes")
        me = self.rank()
        if outs[me].numel() != inp.numel():
            _fail(what, f"output {me} has {outs[me].numel()} elements, the "
                  f"input {inp.numel()}")
        s = _src(inp)
        counts = [t.numel() for t in outs]
        flat = torch.empty(sum(counts), dtype=s.dtype)
        dst, src = [], []
        _unpack(flat, outs, dst, src)
        if all(c == counts[0] for c in counts):
            return self._coll(_fccl.TQ_ALL_GATHER, what, list(outs), dst, src,
                              [s], s, flat, s.numel(), dt)
        return self._coll(_fccl.TQ_ALL_GATHER_V, what, list(outs), dst, src,
                          [s], s, flat, s.numel(), dt, 0, 0, counts)

    def _allgather_base_py(self, output, input, opts=None):
        what = "all_gather_into_tensor"
        out, dt = _check(output, what)
        inp, idt = _check(input, what)
        if idt != dt:
            _fail(what, "input and output of different dtypes")
        if out.numel() != inp.numel() * self.size():
            _fail(what, f"output has {out.numel()} elements, not group size "
                  f"{self.size()} x input's {inp.numel()}")
        s = _src(inp)
        dst, src = [], []
        buf = _dst(out, dst, src)
        return self._coll(_fccl.TQ_ALL_GATHER, what, [output], dst, src, [s],
                          s, buf, s.numel(), dt)

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        what = "allgather_coalesced"
        n = self.size()
        if len(output_lists) != n:
            _fail(what, f"needs {n} output lists (one per rank), got "
                  f"{len(output_lists)}")
        ins, dt = _same(inputs, what)
        flat_in = _flat(ins)
        per = flat_in.numel()
        flat = torch.empty(per * n, dtype=flat_in.dtype)
        dst, src = [], []
        for r, outs in enumerate(output_lists):
            outs, odt = _same(outs, what)
            if odt != dt or [t.numel() for t in outs] != [
                    t.numel() for t in ins]:
                _fail(what, f"output list {r} does not match the inputs")
            _unpack(flat, outs, dst, src, r * per)
        return self._coll(_fccl.TQ_ALL_GATHER, what,
                          [t for ol in output_lists for t in ol], dst, src,
                          [flat_in], flat_in, flat, per, dt)

    def _outs_flat(self, outputs, what):
        """Contiguous 1-d views to write outputs through, and the copy-back
        pairs of scratch ones (non-contiguous outputs), to run last."""
        views, late_dst, late_src = [], [], []
        for t in outputs:
            b = _dst(t, late_dst, late_src)
            views.append(b.view(-1))
        return views, late_dst, late_src

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        """Several all_gather_into_tensor as one all_gather: every rank's
        inputs packed into one block, each output's rank-r chunk unpacked
        from block r (torch 2.x's coalescing manager and functional
        all_gather_tensor call this)."""
        what = "all_gather_into_tensor_coalesced"
        n = self.size()
        if len(outputs) != len(inputs):
            _fail(what, f"{len(outputs)} outputs for {len(inputs)} inputs")
        ins, dt = _same(inputs, what)
        outs, odt = _same(outputs, what)
        if ins and odt != dt:
            _fail(what, "inputs and outputs of different dtypes")
        for i, (o, t) in enumerate(zip(outs, ins)):
            if o.numel() != t.numel() * n:
                _fail(what, f"output {i} has {o.numel()} elements, not group "
                      f"size {n} x input's {t.numel()}")
        if not ins:
            return self.barrier()
        flat_in = _flat(ins)
        per = flat_in.numel()
        flat = torch.empty(per * n, dtype=flat_in.dtype)
        views, late_dst, late_src = self._outs_flat(outs, what)
        dst, src = [], []
        for r in range(n):
            off = r * per
            for v, t in zip(views, ins):
                k = t.numel()
                dst.append(v[r * k:(r + 1) * k])
                src.append(flat[off:off + k])
                off += k
        return self._coll(_fccl.TQ_ALL_GATHER, what, list(outputs),
                          dst + late_dst, src + late_src, [flat_in], flat_in,
                          flat, per, dt)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        """Several reduce_scatter_tensor as one reduce_scatter: block r of
        the packed input holds every input's rank-r chunk."""
        what = "reduce_scatter_tensor_coalesced"
        n = self.size()
        if len(outputs) != len(inputs):
            _fail(what, f"{len(outputs)} outputs for {len(inputs)} inputs")
        ins, dt = _same(inputs, what)
        outs, odt = _same(outputs, what)
        if ins and odt != dt:
            _fail(what, "inputs and outputs of different dtypes")
        for i, (o, t) in enumerate(zip(outs, ins)):
            if t.numel() != o.numel() * n:
                _fail(what, f"input {i} has {t.numel()} elements, not group "
                      f"size {n} x output's {o.numel()}")
        if not ins:
            return self.barrier()
        red = self._red(opts, what, dt)
        flat_in = torch.cat([_src(t).view(-1)[r * o.numel():
                                              (r + 1) * o.numel()]
                             for r in range(n) for t, o in zip(ins, outs)])
        per = flat_in.numel() // n
        flat = torch.empty(per, dtype=flat_in.dtype)
        views, late_dst, late_src = self._outs_flat(outs, what)
        dst, src, off = [], [], 0
        for v in views:
            dst.append(v)
            src.append(flat[off:off + v.numel()])
            off += v.numel()
        return self._coll(_fccl.TQ_REDUCE_SCATTER, what, list(outputs),
                          dst + late_dst, src + late_src, [flat_in], flat_in,
                          flat, per, dt, red)

    def gather(self, output_lists, inputs, opts=None):
        what = "gather"
        inp, dt = _check(_one(inputs, what), what)
        root = self._root(opts, what)
        s = _src(inp)
        n = self.size()
        dst, src, outs = [], [], []
        flat = None
        if self.rank() == root:
            outs = _one(output_lists, what)
            if len(outs) != n:
                _fail(what, f"needs {n} output tensors on the root, got "
                      f"{len(outs)}")
            outs, odt = _same(outs, what)
            if odt != dt or any(t.numel() != s.numel() for t in outs):
                _fail(what, "every output must match the input")
            flat = torch.empty(s.numel() * n, dtype=s.dtype)
            _unpack(flat, outs, dst, src)
        elif output_lists and any(output_lists):
            _fail(what, "output tensors are only given on the root")
        return self._coll(_fccl.TQ_GATHER, what, list(outs), dst, src, [s], s,
                          flat, s.numel(), dt, 0, root)

    def scatter(self, outputs, input_lists, opts=None):
        what = "scatter"
        out, dt = _check(_one(outputs, what), what)
        root = self._root(opts, what)
        n = self.size()
        flat = None
        if self.rank() == root:
            ins = _one(input_lists, what)
            if len(ins) != n:
                _fail(what, f"needs {n} input tensors on the root, got "
                      f"{len(ins)}")
            ins, idt = _same(ins, what)
            if idt != dt or any(t.numel() != out.numel() for t in ins):
                _fail(what, "every input must match the output")
            flat = _flat(ins)
        elif input_lists and any(input_lists):
            _fail(what, "input tensors are only given on the root")
        dst, src = [], []
        buf = _dst(out, dst, src)
        return self._coll(_fccl.TQ_SCATTER, what, list(outputs), dst, src,
                          [] if flat is None else [flat], flat, buf,
                          out.numel(), dt, 0, root)

    def alltoall_base(self, output, input, output_split_sizes,
                      input_split_sizes, opts=None):
        what = "all_to_all_single"
        out, dt = _check(output, what)
        inp, idt = _check(input, what)
        if idt != dt:
            _fail(what, "input and output of different dtypes")
        n = self.size()
        s = _src(inp)
        dst, src = [], []
        buf = _dst(out, dst, src)
        if not output_split_sizes and not input_split_sizes:
            if inp.numel() != out.numel() or inp.numel() % n:
                _fail(what, f"input ({inp.numel()}) and output "
                      f"({out.numel()}) must have the same number of "
                      f"elements, divisible by the group size {n}")
            return self._coll(_fccl.TQ_ALL_TO_ALL, what, [output], dst, src,
                              [s], s, buf, inp.numel() // n, dt)
        sc = _splits(input_split_sizes, inp, n, what, "input")
        rc = _splits(output_split_sizes, out, n, what, "output")
        return self._coll(_fccl.TQ_ALL_TO_ALL_V, what, [output], dst, src,
                          [s], s, buf, 0, dt, 0, 0, sc, rc)

    def alltoall(self, outputs, inputs, opts=None):
        what = "all_to_all"
        n = self.size()
        if len(outputs) != n or len(inputs) != n:
            _fail(what, f"needs {n} input and {n} output tensors, got "
                  f"{len(inputs)} and {len(outputs)}")
        ins, dt = _same(inputs, what)
        outs, odt = _same(outputs, what)
        if odt != dt:
            _fail(what, "inputs and outputs of different dtypes")
        flat_in = _flat(ins)
        rc = [t.numel() for t in outs]
        flat = torch.empty(sum(rc), dtype=flat_in.dtype)
        dst, src = [], []
        _unpack(flat, outs, dst, src)
        return self._coll(_fccl.TQ_ALL_TO_ALL_V, what, list(outputs), dst,
                          src, [flat_in], flat_in, flat, 0, dt, 0, 0,
                          [t.numel() for t in ins], rc)

    def barrier(self, opts=None):
        return self._coll(_fccl.TQ_BARRIER, "barrier", [], [], [], [], None,
                          None, 0, 0)

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """Gloo's monitored barrier: rank 0 waits up to `timeout` for every
        other rank and raises RuntimeError naming those that did not
        arrive (all of them with wait_all_ranks, else the first)."""
        ms = self._ms
        if timeout is not None and timeout.total_seconds() > 0:
            ms = max(1, int(timeout.total_seconds() * 1000))
        self._q.monitored_barrier(ms, bool(wait_all_ranks))

    # ---- point to point ----

    def _p2p(self, tensors, peer, tag, send, what):
        t, dt = _check(_one(tensors, what), what)
        if peer is not None and not (0 <= peer < self.size()) or \
                peer == self.rank():
            _fail(what, f"peer {peer} is not another rank of the group "
                  f"(size {self.size()}, this rank {self.rank()})")
        if tag < 0:
            _fail(what, f"tag {tag} is negative")
        dst, src = [], []
        keep = []
        if send:
            buf = _src(t)
            keep.append(buf)
        else:
            buf = _dst(t, dst, src)
        peer_s = "any rank" if peer is None else f"rank {peer}"
        w = _Work(list(tensors), dst, src, keep,
                  self._name(f"{what} {'to' if send else 'from'} {peer_s} "
                             f"(tag {tag})"))
        self._q.p2p(send, _retain(w), buf.data_ptr(), buf.numel(), dt,
                    -1 if peer is None else peer, tag)
        return w

    def send(self, tensors, dst_rank, tag=0):
        return self._p2p(tensors, dst_rank, tag, True, "send")

    def recv(self, tensors, src_rank, tag=0):
        return self._p2p(tensors, src_rank, tag, False, "recv")

    def recv_anysource(self, tensors, tag=0):
        return self._p2p(tensors, None, tag, False, "recv_anysource")

    # ---- lifetime ----

    def _close(self):
        self._q.close()


_FLOAT_CODES = {_DT[t] for t in _FLOATS if t in _DT}
_BOOL = _DT[torch.bool]


def _set_codes():
    """The hot path's tables (_work.set_codes): fccl's dtype code by
    at::ScalarType, fccl's reduction code by torch's RedOpType."""
    by_st = {_work.scalar_type(torch.empty(0, dtype=t)): c
             for t, c in _DT.items()}
    dtype = [by_st.get(i, -1) for i in range(max(by_st) + 1)]
    redop = [C.RED_CODES.get(i, -1) for i in range(16)]
    _work.set_codes(dtype, redop)


_set_codes()


def _splits(sizes, t, n, what, which):
    """Per-rank element counts of an uneven all_to_all from split sizes
    along dim 0 (empty: even)."""
    rows = t.shape[0] if t.dim() else 1
    per = t.numel() // rows if rows else 0
    if not sizes:
        if rows % n:
            _fail(what, f"{which} has {rows} rows, not divisible by {n}")
        return [rows // n * per] * n
    if len(sizes) != n or sum(sizes) != rows or min(sizes) < 0:
        _fail(what, f"{which} split sizes {list(sizes)} do not split its "
              f"{rows} rows into {n}")
    return [s * per for s in sizes]


def _local_reduce(ts, name):
    """The reduction of several local tensors (Gloo's multi-tensor
    allreduce), before the reduction across ranks."""
    acc = ts[0].clone()
    for t in ts[1:]:
        if name in ("SUM", "AVG"):
            acc = acc + t if acc.dtype != torch.bool else acc | t
        elif name == "PRODUCT":
            acc = acc * t if acc.dtype != torch.bool else acc & t
        elif name == "MAX":
            acc = torch.maximum(acc, t)
        elif name == "MIN":
            acc = torch.minimum(acc, t)
        elif name == "BAND":
            acc = acc & t
        elif name == "BOR":
            acc = acc | t
        else:
            acc = acc ^ t
    if name == "AVG":  # the cross-rank AVG divides by ranks only
        acc = acc / len(ts) if acc.is_floating_point() else acc // len(ts)
    return acc
