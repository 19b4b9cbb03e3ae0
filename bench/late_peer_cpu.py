#!/usr/bin/python3
"""late_peer_cpu: CPU time a rank burns while it waits for a late peer.

    build/bin/fccl-run -n N /usr/bin/python3 bench/late_peer_cpu.py [OP] [BYTES] [LATE]

The last rank sleeps 3 s before the collective (OP: broadcast, all_gather,
all_to_all, all_reduce; default broadcast; BYTES default 8; LATE: the rank
that is late, default the last; broadcast's root is rank 0); every other
rank prints the wall time and the CPU time (user + system, its whole
process, getrusage) the call took.  DESIGN.md: a rank blocked 3 s on a
late peer uses at most 0.05 s of CPU.
"""
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "build", "python"))
import numpy as np  # noqa: E402

import fccl  # noqa: E402

op = sys.argv[1] if len(sys.argv) > 1 else "broadcast"
nbytes = int(sys.argv[2]) if len(sys.argv) > 2 else 8
fccl.init_process_group()
rank, n = fccl.get_rank(), fccl.get_world_size()
late = int(sys.argv[3]) if len(sys.argv) > 3 else n - 1
elems = max(1, nbytes // 4)
x = np.ones(elems, np.float32)
y = np.zeros(elems * n, np.float32)
calls = {
    "broadcast": lambda: fccl.broadcast(x, 0),
    "all_reduce": lambda: fccl.all_reduce(x),
    "all_gather": lambda: fccl.all_gather_into_tensor(y, x),
    "all_to_all": lambda: fccl.all_to_all_single(y, np.ones(elems * n,
                                                            np.float32)),
}
call = calls[op]
call()  # the segment and everything else set up before the timed call
fccl.barrier()
if rank == late:
    time.sleep(3)


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


t0, c0 = time.perf_counter(), cpu()
call()
t1, c1 = time.perf_counter(), cpu()
if rank != late:
    print(f"{op} {nbytes} B, {n} ranks, rank {rank}: waited "
          f"{t1 - t0:.2f} s, CPU {c1 - c0:.3f} s", flush=True)
fccl.barrier()
fccl.destroy_process_group()
