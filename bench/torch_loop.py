"""The torch layer's per-call time measured the plainest way (issue 35
item 4; bench/RESULTS.md, "Lead's measurements after the merges"): under
fccl-run, 500 warm-up calls, then 3 rounds of 5,000 back-to-back
dist.all_reduce of 2 float32 on "fccl"; rank 0 prints the process group's
classes and its wall us/call per round.

    PYTHONPATH=build/python build/bin/fccl-run -n 2 /usr/bin/python3 \\
        bench/torch_loop.py

bench/torch.sh (torch_coll.py --overhead) times the same call with a
barrier and the slowest rank per round; the two disagree about the old
Python process group (see RESULTS)."""
import time

import torch
import torch.distributed as dist

import fccl.torch  # noqa: F401  (registers the backend)

torch.set_num_threads(1)
dist.init_process_group("fccl")
x = torch.ones(2)
for _ in range(500):
    dist.all_reduce(x)
rounds = []
for _ in range(3):
    dist.barrier()
    t = time.perf_counter()
    for _ in range(5000):
        dist.all_reduce(x)
    rounds.append((time.perf_counter() - t) / 5000 * 1e6)
pg = dist.distributed_c10d._get_default_group()
if dist.get_rank() == 0:
    print(type(pg).__mro__[:3], [round(b, 2) for b in rounds])
dist.destroy_process_group()
