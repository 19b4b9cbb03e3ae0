"""One rank of test_fault.py's job (launched without fccl-run, which would
stop the survivors): the last rank kills itself after the first barrier;
the others must get fccl.PeerError naming it from their next collective.
Prints "peer-error RANK" or what happened instead."""
import os
import signal
import sys
import time

import numpy as np

import fccl

fccl.init_process_group()
r, n = fccl.get_rank(), fccl.get_world_size()
fccl.barrier()
if r == n - 1:
    os.kill(os.getpid(), signal.SIGKILL)
t0 = time.monotonic()
try:
    for _ in range(1000):
        fccl.all_reduce(np.ones(1024, np.float32))
    print("no error", flush=True)
except fccl.PeerError as e:
    print(f"peer-error {e.rank} {time.monotonic() - t0:.1f}s {e}", flush=True)
except BaseException as e:  # noqa: B902 - report anything else
    print(f"other {type(e).__name__}: {e}", flush=True)
sys.stdin.read()  # stay alive until every survivor has reported
os._exit(0)  # the world is broken: no final barrier
