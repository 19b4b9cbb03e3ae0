"""DistributedDataParallel on fccl: an unchanged torch program except for
`import fccl.torch` and the backend name.

    build/bin/fccl-run -n 2 /usr/bin/python3 python/torch_train.py

or with torchrun's variables set by hand (or by torchrun itself), one
process per rank:

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 \\
        /usr/bin/python3 python/torch_train.py &
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 \\
        /usr/bin/python3 python/torch_train.py
"""
import os
import sys

# the in-tree build (an installed fccl needs no such line)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "build", "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import fccl.torch  # noqa: F401,E402  registers the backend "fccl"

dist.init_process_group("fccl")            # env://, as with "gloo"
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)                       # the same initial model everywhere
model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.Generator().manual_seed(rank)  # each rank its own batches
for step in range(50):
    x = torch.randn(16, 32, generator=data)
    y = x.sum(1, keepdim=True)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()                        # gradients all_reduced by fccl
    opt.step()
    if step % 10 == 0 and rank == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
w = next(model.parameters()).detach().clone()
dist.all_reduce(w, op=dist.ReduceOp.MAX)   # the replicas stayed identical
assert torch.equal(w, next(model.parameters()).detach())
if rank == 0:
    print(f"done: {world} ranks, replicas identical")
dist.destroy_process_group()
