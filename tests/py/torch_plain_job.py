"""An unchanged torch program for test_torch_jobs.py: argv[1] is the
backend; init_process_group(backend) from env:// as the launcher left it,
an all_reduce checked, a barrier; prints "ok BACKEND RANK SIZE"."""
import sys

import torch
import torch.distributed as dist

backend = sys.argv[1]
if backend == "fccl":
    import fccl.torch  # noqa: F401 (registers the backend)
dist.init_process_group(backend)
r, n = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(r + 1)])
dist.all_reduce(t)
assert t.item() == n * (n + 1) / 2, t
dist.barrier()
print("ok", backend, r, n, flush=True)
dist.destroy_process_group()
