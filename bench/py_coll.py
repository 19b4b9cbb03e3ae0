#!/usr/bin/python3
"""py_coll: collectives timed from Python, fccl's package or mpi4py, the
same way fccl-bench and cli/bench/mpi_coll.c time them in C (issue 23).

    build/bin/fccl-run -n N /usr/bin/python3 bench/py_coll.py fccl [OPTS]
    mpirun.openmpi -n N /usr/bin/python3 bench/py_coll.py mpi4py [OPTS]

    --ops all_reduce,all_gather,all_to_all,broadcast  --sizes 8,64K,1M,64M
    --iters 200 (20 from 16 MiB)  --warmup 5

float32 NumPy arrays, sizes as fccl-bench (all_reduce and broadcast: the
buffer; all_gather: the gathered output; all_to_all: the send buffer).
Per size: warm-up, then per iteration a barrier and the call alone, the
slowest rank's time (a MAX all-reduce outside the timed part), the median
over iterations.  Rank 0 prints "op ranks bytes time_us" rows.  fccl's
calls: all_reduce, all_gather_into_tensor, all_to_all_single, broadcast;
mpi4py's: the buffer forms Allreduce, Allgather, Alltoall, Bcast.
"""
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].isalpha() \
        else int(s)


def args():
    a = {"lib": sys.argv[1] if len(sys.argv) > 1 else "fccl",
         "ops": "all_reduce,all_gather,all_to_all,broadcast",
         "sizes": "8,64K,1M,64M", "iters": 200, "warmup": 5}
    it = iter(sys.argv[2:])
    for k in it:
        a[k.lstrip("-")] = next(it)
    return a


class Fccl:
    def __init__(self):
        sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
        import fccl
        self.f = fccl
        fccl.init_process_group()
        self.rank, self.n = fccl.get_rank(), fccl.get_world_size()

    def fn(self, op, x, y):
        f = self.f
        if op == "all_reduce":
            return lambda: f.all_reduce(x)
        if op == "all_gather":
            return lambda: f.all_gather_into_tensor(y, x)
        if op == "all_to_all":
            return lambda: f.all_to_all_single(y, x)
        return lambda: f.broadcast(x, 0)

    def barrier(self):
        self.f.barrier()

    def slowest(self, dt):
        v = np.array([dt])
        self.f.all_reduce(v, op=self.f.ReduceOp.MAX)
        return float(v[0])

    def close(self):
        self.f.destroy_process_group()


class Mpi4py:
    def __init__(self):
        from mpi4py import MPI
        self.M = MPI
        self.c = MPI.COMM_WORLD
        self.rank, self.n = self.c.Get_rank(), self.c.Get_size()

    def fn(self, op, x, y):
        c, M = self.c, self.M
        if op == "all_reduce":
            return lambda: c.Allreduce(x, y, op=M.SUM)
        if op == "all_gather":
            return lambda: c.Allgather(x, y)
        if op == "all_to_all":
            return lambda: c.Alltoall(x, y)
        return lambda: c.Bcast(x, root=0)

    def barrier(self):
        self.c.Barrier()

    def slowest(self, dt):
        return self.c.allreduce(dt, op=self.M.MAX)

    def close(self):
        pass


def buffers(op, nbytes, n):
    """(input, output) float32 arrays for a size, or None if a rank's
    block would be empty."""
    elems = nbytes // 4
    if op in ("all_reduce", "broadcast"):
        cnt, incnt, outcnt = elems, elems, elems
    else:
        cnt = elems // n
        incnt = cnt if op == "all_gather" else cnt * n
        outcnt = cnt * n
    if cnt == 0:
        return None
    x = np.arange(incnt, dtype=np.float32) % 101
    return x, np.zeros(outcnt, np.float32)


def main():
    a = args()
    lib = Fccl() if a["lib"] == "fccl" else Mpi4py()
    for op in a["ops"].split(","):
        for s in a["sizes"].split(","):
            nbytes = parse_size(s)
            bufs = buffers(op, nbytes, lib.n)
            if bufs is None:
                continue
            call = lib.fn(op, *bufs)
            iters = int(a["iters"]) if nbytes < (16 << 20) else 20
            for _ in range(int(a["warmup"])):
                call()
            ts = []
            for _ in range(iters):
                lib.barrier()
                t0 = time.perf_counter()
                call()
                ts.append(lib.slowest(time.perf_counter() - t0))
            if lib.rank == 0:
                print(f"{op} {lib.n} {nbytes} {statistics.median(ts) * 1e6:.2f}",
                      flush=True)
    lib.close()


main()
