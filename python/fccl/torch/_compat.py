"""Everything fccl.torch takes from torch that differs between versions,
in one place.  Written and tested for torch 1.13 (Debian's python3-torch).

torch 1.13: a backend is a ``ProcessGroup`` subclass built by
``Backend.register_backend(name, creator, extended_api=True)``; the
creator gets a ``_DistributedBackendOptions`` (store, group_rank,
group_size, timeout, group_id, global_ranks_in_group) and the pg_options.

torch 2.x needs instead (see the README, "PyTorch"): subclass
``torch._C._distributed_c10d.Backend`` (no longer ProcessGroup, which
became a dispatcher over backends), register with
``register_backend(name, creator, extended_api=True, devices=["cpu"])``,
and the ProcessGroup wraps the backend itself; ``ReduceOp`` is then
always an object with ``.op``; ``_allgather_base`` and
``_reduce_scatter_base`` keep their names.  Only this module changes.
"""
import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d

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


def redop(op):
    """(fccl op code, torch name) of a ReduceOp (object or RedOpType);
    RuntimeError for PREMUL_SUM and anything else fccl has not."""
    t = getattr(op, "op", op)
    try:
        return _RED[int(t)]
    except (KeyError, TypeError, ValueError):
        raise RuntimeError(f"fccl: reduction {t} is not supported (fccl has "
                           "SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR)")


def register(name, creator):
    """Register creator(opts, pg_options) as backend `name`."""
    dist.Backend.register_backend(name, creator, extended_api=True)


def creator_args(opts):
    """(store, group_rank, group_size, timeout, group_id, global_ranks) of
    what torch hands the creator ([] global ranks: the default group)."""
    return (opts.store, opts.group_rank, opts.group_size, opts.timeout,
            opts.group_id, list(opts.global_ranks_in_group))


def pg_init(pg, rank, size):
    ProcessGroup.__init__(pg, rank, size)


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
