#!/usr/bin/python3
"""A complete 2-rank fccl job (any rank count works):

    build/bin/fccl-run -n 2 /usr/bin/python3 python/example.py

fccl-run sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT and hosts the
store; PYTHONPATH=build/python when fccl is not installed."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "build", "python"))
import numpy as np  # noqa: E402

import fccl  # noqa: E402

fccl.init_process_group()  # joins every rank; the world group
rank, size = fccl.get_rank(), fccl.get_world_size()

# all_reduce works in place: every rank ends with the sum
x = np.full(4, rank + 1, dtype=np.float32)
fccl.all_reduce(x, op=fccl.ReduceOp.SUM)
assert (x == size * (size + 1) / 2).all()

# src/dst/peer are global ranks; the last rank broadcasts
b = np.arange(3, dtype=np.int64) * (rank + 1)
fccl.broadcast(b, src=size - 1)
assert (b == np.arange(3) * size).all()

# gather every rank's block, asynchronously
out = np.zeros(2 * size, np.int32)
h = fccl.all_gather_into_tensor(out, np.full(2, rank, np.int32),
                                async_op=True)
h.wait()
assert (out == np.repeat(np.arange(size), 2)).all()

# a group of rank 0 alone, named like MindSpore's: fccl_1_<sha1>
g = fccl.new_group([0])
if rank == 0:
    y = np.ones(2)
    fccl.all_reduce(y, group=g)
    assert fccl.get_rank(g) == 0
else:
    assert fccl.get_rank(g) == -1

# point to point: rank 0 sends to rank 1
if size > 1 and rank < 2:
    buf = np.zeros(5, np.float64)
    if rank == 0:
        fccl.send(np.full(5, 3.5), dst=1, tag=7)
    else:
        fccl.recv(buf, src=0, tag=7)
        assert (buf == 3.5).all()

# Python objects
objs = [None] * size
fccl.all_gather_object(objs, {"rank": rank, "pid": os.getpid()})
assert [o["rank"] for o in objs] == list(range(size))

print(f"rank {rank} of {size}: all checks passed")
fccl.destroy_process_group()
