#!/usr/bin/python3
"""Python's per-call overhead over the C call, for a blocking all_reduce.

    build/bin/fccl-run -n N /usr/bin/python3 bench/py_overhead.py [BYTES] [ITERS]

Every rank times ITERS calls of fccl.all_reduce on a float32 NumPy array
of BYTES bytes (default 8) from Python (timeit, best of 5), then ITERS
calls of fccl_all_reduce in a C loop inside the extension (_fccl.c_loop,
same process, same group), and rank 0 prints both per-call times and
their difference.  With one rank the collective itself is nearly free,
so the difference is the Python layer alone."""
import os
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "build", "python"))
import numpy as np  # noqa: E402

import fccl  # noqa: E402

nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 8
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
fccl.init_process_group()
x = np.zeros(max(1, nbytes // 4), np.float32)
ar = fccl.all_reduce
for _ in range(200):
    ar(x)
py, c = [], []
for _ in range(5):
    fccl.barrier()
    py.append(timeit.timeit(lambda: ar(x), number=iters) / iters)
    fccl.barrier()
    c.append(fccl._fccl.c_loop(x, iters, None) / iters)
fccl.barrier()
# timeit's lambda adds a Python call; measure it to take it out
empty = min(timeit.repeat(lambda: None, number=iters, repeat=5)) / iters
if fccl.get_rank() == 0:
    p, cc = min(py) - empty, min(c)
    print(f"all_reduce {nbytes} B on {fccl.get_world_size()} rank(s): "
          f"python {p * 1e6:.3f} us, C {cc * 1e6:.3f} us, "
          f"overhead {(p - cc) * 1e6:.3f} us per call "
          f"(lambda {empty * 1e9:.0f} ns taken out)")
fccl.destroy_process_group()
