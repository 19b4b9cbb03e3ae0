"""Everything fccl.torch takes from torch that differs between versions,
in one place.  Tested on torch 1.13 (Debian 12) and 2.6 (Debian 13).

Both: a backend is a ``ProcessGroup`` subclass (Python) returned by the
creator of ``Backend.register_backend(name, creator, extended_api=True)``;
the creator gets a ``_DistributedBackendOptions`` (store, group_rank,
group_size, timeout, group_id, global_ranks_in_group) and the pg_options.
Its base, ``_work.ProcessGroupCpp`` (C++, _work.cpp), runs the hot
collectives itself and sends every other virtual method to the Python
subclass, so C++ callers (DDP's reducer, functional collectives'
``group->allreduce``) reach the same code as Python ones.

torch 2.x differs in three ways, all handled here:
- ``register_backend`` takes ``devices``: ["cpu"].
- ProcessGroup became a dispatcher over per-device ``Backend`` objects
  and keeps the group's name in them: ``pg.group_name`` (which functional
  collectives, DeviceMesh and DTensor resolve groups by) raises
  "ProcessGroup name not set" on a ProcessGroup with no backend, which
  is why they refused "fccl".  A Python Backend is impossible:
  ``torch._C._distributed_c10d.Backend`` has no Python constructor in 2.6
  ("No constructor defined").  But ``getGroupName``/``setGroupName``
  (and the description's) are virtual, so ``ProcessGroupCpp`` keeps them
  itself (the one ``#if TORCH_VERSION_MAJOR`` block of _work.cpp, with
  the two coalesced collectives only 2.x has).  (Registering torch's
  do-nothing ``FakeProcessGroup`` as the "cpu" backend to hold the name
  was tried and rejected: a call torch sends through the dispatcher, such
  as ``_c10d_functional.all_gather_into_tensor_out``, then returns
  unchanged output silently; with no backend it raises "No backend type
  associated with device type cpu".)
- ``ReduceOp`` is an object with ``.op`` (redop handles both).
"""
import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

from . import _work

VERSION = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]
                if x.isdigit())

ProcessGroup = _c10d.ProcessGroup
ReduceOp = dist.ReduceOp

# torch's RedOpType numbering -> fccl's fccl_redop_t
_RED = {}
for _name, _code in (("SUM", 0), ("PRODUCT", 1), ("MAX", 2), ("MIN", 3),
                     ("AVG", 4), ("BAND", 5), ("BOR", 6), ("BXOR", 7)):
    _t = getattr(ReduceOp.RedOpType, _name, None) if hasattr(
        ReduceOp, "RedOpType") else getattr(ReduceOp, _name, None)
    if _t is not None:
        _RED[int(_t)] = (_code, _name)


# torch's RedOpType number -> fccl's code, for the C++ hot path
RED_CODES = {t: code for t, (code, _) in _RED.items()}


def redop(op):
    """(fccl op code, torch name) of a ReduceOp (object or RedOpType);
    RuntimeError for PREMUL_SUM and anything else fccl has not."""
    t = getattr(op, "op", op)
    try:
        return _RED[int(t)]
    except (KeyError, TypeError, ValueError):
        raise RuntimeError(f"fccl: reduction {t} is not supported (fccl has "
                           "SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR)")


TORCH_2 = VERSION >= (2, 0)


def register(name, creator):
    """Register creator(opts, pg_options) as backend `name`."""
    if TORCH_2:
        dist.Backend.register_backend(name, creator, extended_api=True,
                                      devices=["cpu"])
    else:
        dist.Backend.register_backend(name, creator, extended_api=True)


class ProcessGroupBase(_work.ProcessGroupCpp):
    """What the backend's class derives from: torch's ProcessGroup through
    _work.ProcessGroupCpp, which runs the hot collectives in C++ and keeps
    torch 2.x's group name and description (its one #if block)."""


def creator_args(opts):
    """(store, group_rank, group_size, timeout, group_id, global_ranks) of
    what torch hands the creator ([] global ranks: the default group)."""
    return (opts.store, opts.group_rank, opts.group_size, opts.timeout,
            opts.group_id, list(opts.global_ranks_in_group))


def pg_init(pg, rank, size):
    _work.ProcessGroupCpp.__init__(pg, rank, size)


# torch's option objects, for callers that leave opts out
AllreduceOptions = _c10d.AllreduceOptions
AllreduceCoalescedOptions = _c10d.AllreduceCoalescedOptions
BroadcastOptions = _c10d.BroadcastOptions
ReduceOptions = _c10d.ReduceOptions
AllgatherOptions = _c10d.AllgatherOptions
GatherOptions = _c10d.GatherOptions
ScatterOptions = _c10d.ScatterOptions
ReduceScatterOptions = _c10d.ReduceScatterOptions
AllToAllOptions = _c10d.AllToAllOptions
BarrierOptions = _c10d.BarrierOptions
