"""fccl.torch: the torch.distributed backend ``"fccl"``.

    import torch.distributed as dist
    import fccl.torch                      # registers the backend
    dist.init_process_group("fccl")        # env://, as under fccl-run or torchrun
    sub = dist.new_group([0, 1], backend="fccl")

The default group bootstraps fccl's world over the store torch hands the
backend (TCPStore, FileStore, or the PrefixStore of the group), or reuses
the world that ``fccl.init_process_group`` made; each torch subgroup is an
fccl group of that world.  Every operation of ProcessGroupGloo is there,
plus what Gloo lacks (reduce_scatter, reduce_scatter_tensor, list
all_to_all, bfloat16 and float16 everywhere, int16, BAND/BOR/BXOR).
Failures raise RuntimeError naming the operation, the group and the rank.

``FCCL_TORCH_INLINE_BYTES`` (default 65536): collectives up to this size
run on the calling thread when nothing of the group is queued (lowest
latency); larger ones run in the background so they overlap Python work.
"""
import atexit as _atexit
import os as _os

from .. import _fccl
from . import _compat
from . import _work
from ._pg import ProcessGroupFccl

__all__ = ["ProcessGroupFccl", "BACKEND", "create_process_group",
           "ReconfigurableProcessGroup"]

BACKEND = "fccl"
INLINE_BYTES = int(_os.environ.get("FCCL_TORCH_INLINE_BYTES", "65536"))

_queues = []          # every group's queue, closed at exit
_own_world = False    # fccl's world was made here (finalized at exit)


def _at_exit():
    global _own_world
    while _queues:
        q = _queues.pop()
        try:
            q.close()
        except Exception:  # noqa: BLE001 - exiting: nothing to report to
            pass
    if _own_world and _fccl.is_initialized():
        _fccl.finalize()
    _own_world = False


def _ensure_world(store, rank, size, ms):
    """fccl's world for torch's default group: reuse one of the same shape,
    else bootstrap it over torch's store."""
    global _own_world
    if _fccl.is_initialized():
        wr, ws = _fccl.get_rank(None), _fccl.get_world_size(None)
        if (wr, ws) != (rank, size):
            raise RuntimeError(
                f"fccl: the fccl world (rank {wr} of {ws}, from "
                f"fccl.init_process_group) is not torch's default group "
                f"(rank {rank} of {size})")
        return
    st = _fccl.store_from_torch(store, "torch store", ms)
    try:
        _fccl.init(None, st, size, rank, ms, None, None)
    finally:
        st.close()
    if not _own_world:
        _atexit.register(_at_exit)
    _own_world = True


def create_process_group(opts, pg_options=None):
    """The creator torch calls (register_backend(..., extended_api=True))."""
    store, rank, size, timeout, gid, granks = _compat.creator_args(opts)
    ms = max(1, int(timeout.total_seconds() * 1000))
    if not granks:
        _ensure_world(store, rank, size, ms)
        q = _fccl.TorchQueue(None, str(gid), _work.complete_fn, ms,
                             INLINE_BYTES)
    else:
        if not _fccl.is_initialized():
            raise RuntimeError("fccl: a subgroup needs the default group "
                               "first (init_process_group)")
        q = _fccl.TorchQueue(sorted(granks), str(gid), _work.complete_fn, ms,
                             INLINE_BYTES)
    if not _queues:
        _atexit.register(_close_queues)
    _queues.append(q)
    return ProcessGroupFccl(q, rank, size, str(gid), timeout)


def _close_queues():
    while _queues:
        try:
            _queues.pop().close()
        except Exception:  # noqa: BLE001
            pass


from ._reconf import ReconfigurableProcessGroup  # noqa: E402,F401

if BACKEND.upper() not in _compat.dist.Backend._plugins:
    _compat.register(BACKEND, create_process_group)
