"""ReconfigurableProcessGroup: a torch process group rebuilt on a new
member set without restarting processes, with torchft's process-group
contract (torchft/process_group.py: configure, abort, errored, shutdown).

    pg = fccl.torch.ReconfigurableProcessGroup(timeout=timedelta(seconds=60))
    pg.configure("10.0.0.1:29500/quorum_7", rank, world_size)
    pg.allreduce([t], AllreduceOptions()).wait()
    ...                                   # a member died:
    pg.abort()                            # pending work fails at once
    pg.configure("10.0.0.1:29500/quorum_8", new_rank, new_world_size)

Each configure() ends the previous configuration and bootstraps a fresh
fccl world over the TCPStore at host:port, with the prefix as the world's
key namespace (fccl_init_opts_t.job_id): the old world is torn down with
fccl_finalize, after an abort when it failed (so finalize skips its world
barrier), else after a barrier bounded by DRAIN_MS; then fccl_init makes
the new world and a ProcessGroupFccl over it runs the collectives.  So a
configuration costs one fccl_init (the transport's endpoints, three store
requests per rank, a log2 exchange over the fabric and a barrier) and no
process start.

fccl's world is process-global: a process that uses a
ReconfigurableProcessGroup must not use fccl's world for anything else
(no dist.init_process_group("fccl"), no fccl.init_process_group, one
ReconfigurableProcessGroup).  configure() refuses a world it did not make.

Threads.  configure() and shutdown() are serialised with each other;
abort() and errored() may be called from any thread at any time and never
block (abort is fccl_group_abort, one atomic store).  The collectives may
run on any thread while no configure() or shutdown() runs; a configure()
that starts while a collective call is still inside the library aborts a
failed world first, then waits for that call to return before it frees
the world.  An abort() during configure()'s bootstrap makes configure()
raise once the bootstrap has returned (fccl_init has no abort; it ends by
the timeout at the latest).
"""
import atexit
import hashlib
import os
import threading
import weakref
from datetime import timedelta

import torch
from torch._C import _distributed_c10d as _c10d

from .. import _fccl
from . import _work
from ._pg import ProcessGroupFccl

__all__ = ["ReconfigurableProcessGroup", "DRAIN_MS"]

# The old world's last barrier at a reconfiguration is bounded by this (or
# the group timeout, if shorter): a member that left the quorum alive
# must not hold the others for the whole timeout.
DRAIN_MS = 2000

_live = weakref.WeakSet()  # configured objects, shut down at exit


def _at_exit():
    for pg in list(_live):
        try:
            pg.shutdown()
        except Exception:  # noqa: BLE001 - exiting: nothing to report to
            pass


atexit.register(_at_exit)


def _parse_addr(store_addr):
    """("host", port, "prefix") of "host:port/prefix" ("[v6]:port/p" too)."""
    if not isinstance(store_addr, str):
        raise TypeError(f"fccl: store_addr must be a str 'host:port/prefix', "
                        f"not {type(store_addr).__name__}")
    hostport, _, prefix = store_addr.partition("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"fccl: store_addr {store_addr!r} is not "
                         "'host:port/prefix'")
    return host, int(port), prefix


def _job_id(prefix):
    """The world's key namespace for a prefix (fccl keeps 127 bytes)."""
    if not prefix:
        return "reconf"
    if len(prefix) <= 100:
        return prefix
    return "reconf-" + hashlib.sha1(prefix.encode()).hexdigest()


def _ms(timeout):
    if not isinstance(timeout, timedelta):
        raise TypeError(f"fccl: timeout must be a timedelta, not "
                        f"{type(timeout).__name__}")
    if timeout.total_seconds() <= 0:
        raise ValueError(f"fccl: timeout must be positive, not {timeout}")
    return max(1, int(timeout.total_seconds() * 1000))


def _configure_args(args, kwargs):
    """(rank, world_size) of configure's two forms: (rank, world_size), and
    torchft's (replica_id, rank, world_size, quorum_id=None,
    group_rank=None, group_world_size=None, global_ranks=None), whose
    extra arguments a whole-world fccl group has no use for."""
    optional = ()
    if (args and isinstance(args[0], str)) or "replica_id" in kwargs:
        kwargs.pop("replica_id", None)
        args = args[1:] if args and isinstance(args[0], str) else args
        optional = ("quorum_id", "group_rank", "group_world_size",
                    "global_ranks")
    names = ["rank", "world_size"]
    vals = list(args[:2])
    for n in names[len(vals):]:
        if n not in kwargs:
            raise TypeError(f"fccl: configure() needs {n}")
        vals.append(kwargs.pop(n))
    extra = [k for k in kwargs if k not in optional]
    if extra or len(args) > 2 + len(optional):
        raise TypeError(f"fccl: configure(): unexpected arguments "
                        f"{extra or list(args[2:])}")
    rank, size = vals
    for n, v in zip(names, vals):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"fccl: configure(): {n} must be an int, not "
                            f"{type(v).__name__}")
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"fccl: configure(): rank {rank} is not in a world "
                         f"of {size}")
    return rank, size


def _as_opts(opts, cls, what):
    """torch's option object for opts (None, the options, or a ReduceOp as
    torchft passes to allreduce)."""
    if opts is None:
        return cls()
    if isinstance(opts, cls):
        return opts
    if isinstance(opts, (torch.distributed.ReduceOp,
                         getattr(torch.distributed.ReduceOp, "RedOpType",
                                 ()))) and hasattr(cls(), "reduceOp"):
        o = cls()
        o.reduceOp = opts
        return o
    raise TypeError(f"fccl: {what}: options of type {type(opts).__name__}")


class ReconfigurableProcessGroup(_c10d.ProcessGroup):
    """A torch ProcessGroup that configure() rebuilds on a new member set
    (torchft's contract); the collectives take torch's option objects and
    return Work objects, as ProcessGroupFccl's do.

    Args:
        timeout (timedelta): bounds configure()'s bootstrap and each
            operation (default 60 s, torchft's).
        provider (str, optional): the libfabric provider ("shm",
            "tcp;ofi_rxm", ...); default FCCL_PROVIDER, else automatic.
        dialect (str, optional): the store's TCPStore dialect, "modern" or
            "legacy"; default TCPSTORE_DIALECT, else "legacy" on torch
            < 2.1 (whose own server speaks only that; tcpstore-server
            speaks both), else "modern".
    """

    def __init__(self, timeout=timedelta(seconds=60), provider=None,
                 dialect=None):
        _c10d.ProcessGroup.__init__(self, 0, 1)
        self._timeout_ms = _ms(timeout)
        self._timeout = timeout
        self._provider = provider
        self._dialect = dialect
        self._mu = threading.Condition(threading.Lock())  # state below
        self._cfg = threading.Lock()  # configure/shutdown, one at a time
        self._pg = None       # ProcessGroupFccl of the live configuration
        self._q = None        # its TorchQueue
        self._live = False    # our fccl world exists (abort may touch it)
        self._inflight = 0    # collective calls inside the library now
        self._error = None    # what broke the current configuration
        self._abort_req = False
        self._rank = self._size = None
        self._prefix = None
        self._stores = {}     # (host, port) -> store client, kept across
        self._used = set()    # (host, port, prefix) configured on before
        self._closed = False

    # ---- torchft's contract ----

    def configure(self, store_addr, *args, **kwargs):
        """configure(store_addr, rank, world_size): end the current
        configuration (if any) and join a new one of world_size ranks at
        store_addr "host:port/prefix" (a TCPStore server: tcpstore-server
        or PyTorch's; a prefix never used before).  torchft's form
        configure(store_addr, replica_id, rank, world_size, quorum_id,
        group_rank, group_world_size, global_ranks) is accepted too (the
        extra arguments are not needed here).

        Blocks until every rank of the new world called it (up to the
        timeout).  Raises ValueError/TypeError for bad arguments,
        ValueError for a prefix this object was configured on before,
        RuntimeError when the bootstrap fails (timed out, store
        unreachable, fccl's world in use by something else, aborted
        meanwhile); the object may be configured again afterwards.
        """
        rank, size = _configure_args(args, dict(kwargs))
        host, port, prefix = _parse_addr(store_addr)
        with self._cfg:
            if (host, port, prefix) in self._used:
                raise ValueError(f"fccl: configure(): prefix {prefix!r} on "
                                 f"{host}:{port} was already used (each "
                                 "configuration needs a fresh one)")
            self._used.add((host, port, prefix))
            self._teardown(abort=False)
            with self._mu:
                self._error = None
                self._abort_req = False
                self._closed = False
            if _fccl.is_initialized():
                raise RuntimeError(
                    "fccl: configure(): fccl's world is in use by something "
                    "else in this process (dist.init_process_group('fccl') "
                    "or fccl.init_process_group); a ReconfigurableProcessGroup"
                    " needs it to itself")
            self._bootstrap(host, port, prefix, rank, size)

    def abort(self):
        """Fail every pending and later operation of this configuration at
        once (on this rank; the peers learn of it by their own timeouts or
        failures).  Never blocks; any thread.  configure() again, or
        shutdown()."""
        with self._mu:
            self._abort_req = True
            if self._error is None:
                self._error = RuntimeError(
                    f"fccl: process group aborted (configuration "
                    f"{self._prefix!r})")
            if self._live:
                _fccl.abort(None)

    def errored(self):
        """None, or the exception that broke the current configuration
        (abort(), a dead or failed member named by its rank, a timeout).
        Never blocks."""
        with self._mu:
            if self._error is None and self._live:
                r = _fccl.get_group(None).failed_rank
                if r is not None:
                    self._error = RuntimeError(
                        f"fccl: process group failed: rank {r} of "
                        f"configuration {self._prefix!r} (size {self._size}) "
                        "died, failed or timed out")
            return self._error

    def shutdown(self):
        """End the current configuration at once: abort it (no barrier with
        the peers, so it never waits for them), then free the world.  The
        object may be configured again."""
        with self._cfg:
            self._teardown(abort=True)
            with self._mu:
                self._closed = True
            for st in self._stores.values():
                st.close()
            self._stores.clear()

    def set_timeout(self, timeout):
        """The timeout of later configurations and of later operations of
        the current one (torchft's set_timeout)."""
        ms = _ms(timeout)
        with self._mu:
            self._timeout, self._timeout_ms = timeout, ms
            if self._live:
                _fccl.set_timeout(None, ms)

    def getBackendName(self):
        return "fccl"

    def rank(self):
        self._need()
        return self._rank

    def size(self):
        self._need()
        return self._size

    def __repr__(self):
        if self._pg is None:
            return "<ReconfigurableProcessGroup (not configured)>"
        return (f"<ReconfigurableProcessGroup {self._prefix!r} rank "
                f"{self._rank} of {self._size}>")

    # ---- configurations ----

    def _store(self, host, port):
        st = self._stores.get((host, port))
        if st is None:
            dialect = self._dialect
            if dialect is None:
                dialect = os.environ.get("TCPSTORE_DIALECT") or (
                    "legacy" if _torch_version() < (2, 1) else "modern")
            h = f"[{host}]" if ":" in host and not host.startswith("[") \
                else host
            st = _fccl.Store(f"{h}:{port}", self._timeout_ms, dialect)
            self._stores[(host, port)] = st
        return st

    def _bootstrap(self, host, port, prefix, rank, size):
        ms = self._timeout_ms
        st = self._store(host, port)
        try:
            _fccl.init(None, st, size, rank, ms, self._provider,
                       _job_id(prefix))
        except BaseException:
            # a store that broke is connected afresh next time
            self._stores.pop((host, port), None)
            st.close()
            raise
        try:
            from . import INLINE_BYTES
            q = _fccl.TorchQueue(None, f"reconf:{prefix}", _work.complete_fn,
                                 ms, INLINE_BYTES)
            pg = ProcessGroupFccl(q, rank, size, f"reconf:{prefix}",
                                  timedelta(milliseconds=ms))
        except BaseException:
            _fccl.abort(None)
            _fccl.finalize()
            raise
        with self._mu:
            self._pg, self._q, self._live = pg, q, True
            self._rank, self._size, self._prefix = rank, size, prefix
            _live.add(self)
            aborted = self._abort_req
        if aborted:
            self._teardown(abort=True)
            raise RuntimeError(f"fccl: configure(): aborted while joining "
                               f"{prefix!r}")

    def _teardown(self, abort):
        """Free the current world: abort it when asked or when it failed,
        else bound its last barrier by DRAIN_MS; wait for collective calls
        still inside the library; then close the queue and finalize."""
        with self._mu:
            if not self._live:
                return
            failed = (self._error is not None or
                      _fccl.get_group(None).failed_rank is not None)
            if abort or failed:
                _fccl.abort(None)
            else:
                _fccl.set_timeout(None, min(DRAIN_MS, self._timeout_ms))
            while self._inflight:
                self._mu.wait()
            self._live = False
            q, self._q, self._pg = self._q, None, None
            _live.discard(self)
        try:
            q.close()
        finally:
            _fccl.finalize()

    def _need(self):
        if self._pg is None:
            raise RuntimeError(
                "fccl: ReconfigurableProcessGroup is " +
                ("shut down" if self._closed else "not configured") +
                " (call configure first)")

    def _call(self, name, *args):
        """pg.name(*args) on the live configuration, counted in flight so
        that a configure() does not free the world under it."""
        with self._mu:
            pg = self._pg
            if pg is None:
                self._need()
            self._inflight += 1
        try:
            return getattr(pg, name)(*args)
        finally:
            with self._mu:
                self._inflight -= 1
                if not self._inflight:
                    self._mu.notify_all()

    # ---- collectives (torch's ProcessGroup methods) ----

    def allreduce(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        return self._call("allreduce", tensors,
                          _as_opts(opts, _c10d.AllreduceOptions, "allreduce"))

    def allreduce_coalesced(self, tensors, opts=None):
        return self._call("allreduce_coalesced", tensors,
                          _as_opts(opts, _c10d.AllreduceCoalescedOptions,
                                   "allreduce_coalesced"))

    def reduce(self, tensors, opts=None):
        return self._call("reduce", tensors,
                          _as_opts(opts, _c10d.ReduceOptions, "reduce"))

    def broadcast(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        return self._call("broadcast", tensors,
                          _as_opts(opts, _c10d.BroadcastOptions, "broadcast"))

    def broadcast_one(self, tensor, root):
        """torchft's broadcast of one tensor from group rank root."""
        o = _c10d.BroadcastOptions()
        o.rootRank = root
        return self.broadcast([tensor], o)

    def allgather(self, output_lists, inputs, opts=None):
        return self._call("allgather", output_lists, inputs,
                          _as_opts(opts, _c10d.AllgatherOptions, "allgather"))

    def _allgather_base(self, output, input, opts=None):
        return self._call("_allgather_base", output, input,
                          _as_opts(opts, _c10d.AllgatherOptions,
                                   "_allgather_base"))

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        return self._call("allgather_coalesced", output_lists, inputs,
                          _as_opts(opts, _c10d.AllgatherOptions,
                                   "allgather_coalesced"))

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        """torch 2.x's coalesced all_gather_into_tensor: outputs[i] gets
        every rank's inputs[i], in rank order (one allgather_coalesced)."""
        n = self.size()
        if len(outputs) != len(inputs):
            raise RuntimeError("fccl: allgather_into_tensor_coalesced: "
                               f"{len(outputs)} outputs for {len(inputs)} "
                               "inputs")
        for o, i in zip(outputs, inputs):
            if not o.is_contiguous() or o.numel() != n * i.numel():
                raise RuntimeError(
                    "fccl: allgather_into_tensor_coalesced: each output must "
                    f"be contiguous with group size {n} x its input's "
                    "elements")
        lists = [[o.view(n, -1)[r].view(i.shape) for o, i in
                  zip(outputs, inputs)] for r in range(n)]
        return self.allgather_coalesced(lists, list(inputs), opts)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        return self._call("reduce_scatter", outputs, input_lists,
                          _as_opts(opts, _c10d.ReduceScatterOptions,
                                   "reduce_scatter"))

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._call("_reduce_scatter_base", output, input,
                          _as_opts(opts, _c10d.ReduceScatterOptions,
                                   "_reduce_scatter_base"))

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        """torch 2.x's coalesced reduce_scatter_tensor: outputs[i] gets this
        rank's block of the reduction of inputs[i] (one reduce_scatter of
        the blocks packed per rank; the results are copied out when the
        returned Work completes)."""
        n = self.size()
        if len(outputs) != len(inputs) or not outputs:
            raise RuntimeError("fccl: reduce_scatter_tensor_coalesced: "
                               f"{len(outputs)} outputs for {len(inputs)} "
                               "inputs")
        for o, i in zip(outputs, inputs):
            if i.numel() != n * o.numel() or i.dtype != o.dtype:
                raise RuntimeError(
                    "fccl: reduce_scatter_tensor_coalesced: each input must "
                    f"have group size {n} x its output's elements, same "
                    "dtype")
        blocks = torch.cat([i.reshape(n, -1) for i in inputs], 1)
        flat = torch.empty(blocks.shape[1], dtype=blocks.dtype)
        inner = self._reduce_scatter_base(flat, blocks.reshape(-1), opts)
        src, off = [], 0
        for o in outputs:
            src.append(flat[off:off + o.numel()].view(o.shape))
            off += o.numel()
        return _chain(inner, list(outputs), list(outputs), src, [blocks],
                      "reduce_scatter_tensor_coalesced")

    def alltoall_base(self, output, input, output_split_sizes,
                      input_split_sizes, opts=None):
        return self._call("alltoall_base", output, input,
                          list(output_split_sizes or []),
                          list(input_split_sizes or []),
                          _as_opts(opts, _c10d.AllToAllOptions,
                                   "alltoall_base"))

    def alltoall(self, outputs, inputs, opts=None):
        return self._call("alltoall", outputs, inputs,
                          _as_opts(opts, _c10d.AllToAllOptions, "alltoall"))

    def gather(self, output_lists, inputs, opts=None):
        return self._call("gather", output_lists, inputs,
                          _as_opts(opts, _c10d.GatherOptions, "gather"))

    def scatter(self, outputs, input_lists, opts=None):
        return self._call("scatter", outputs, input_lists,
                          _as_opts(opts, _c10d.ScatterOptions, "scatter"))

    def barrier(self, opts=None):
        return self._call("barrier",
                          _as_opts(opts, _c10d.BarrierOptions, "barrier"))

    def send(self, tensors, dst_rank, tag=0):
        return self._call("send", tensors, dst_rank, tag)

    def recv(self, tensors, src_rank, tag=0):
        return self._call("recv", tensors, src_rank, tag)

    def recv_anysource(self, tensors, tag=0):
        return self._call("recv_anysource", tensors, tag)


def _chain(inner, outputs, dst, src, keep, what):
    """A Work that completes when inner does, copying src[i] into dst[i]
    first (results that need a copy after the operation)."""
    w = _work.Work(outputs, dst, src, keep, what)

    def done(fut):
        try:
            fut.wait()
        except Exception as e:  # noqa: BLE001 - handed to the Work
            _work.complete(w, -1, str(e))
            return
        _work.complete(w, 0)

    inner.get_future().add_done_callback(done)
    return w


def _torch_version():
    v = torch.__version__.split("+")[0].split(".")[:2]
    return tuple(int(x) for x in v if x.isdigit())
