"""The torch layer's door (issue 35 item 4; bench/RESULTS.md): in one
process, rounds of 3,000 back-to-back dist.all_reduce of 2 float32 on
"fccl", alternating between fccl.torch's own allreduce binding (a CPython
door for dist.all_reduce's form) and torch's binding of
ProcessGroup.allreduce (swapped in on the group's class), plus the library's
C loop; rank 0 prints the medians.  Same process, interleaved rounds: the
difference does not depend on this machine's speed of the minute.

    PYTHONPATH=build/python build/bin/fccl-run -n 2 /usr/bin/python3 \\
        bench/torch_door.py [ROUNDS]"""
import statistics
import sys
import time

import torch
import torch.distributed as dist

import fccl.torch  # noqa: F401  (registers the backend)
from fccl import _fccl

torch.set_num_threads(1)
dist.init_process_group("fccl")
x = torch.ones(2)
pg = dist.distributed_c10d._get_default_group()
cls = type(pg)
torchs = dist.ProcessGroup.allreduce
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 12
n = 3000
res = {"door": [], "torch's binding": [], "C loop": []}


def timed():
    for _ in range(100):
        dist.all_reduce(x)
    dist.barrier()
    t = time.perf_counter()
    for _ in range(n):
        dist.all_reduce(x)
    return (time.perf_counter() - t) / n * 1e6


for _ in range(rounds):
    res["door"].append(timed())
    cls.allreduce = torchs
    try:
        res["torch's binding"].append(timed())
    finally:
        del cls.allreduce
    dist.barrier()
    res["C loop"].append(_fccl.c_loop(x, n, None) / n * 1e6)
if dist.get_rank() == 0:
    print("torch", torch.__version__)
    for k, v in res.items():
        print("%-16s median %.2f us  min %.2f" % (k, statistics.median(v),
                                                  min(v)))
    d = [a - b for a, b in zip(res["door"], res["torch's binding"])]
    print("door - torch's binding, per round: median %.2f us" %
          statistics.median(d))
dist.destroy_process_group()
