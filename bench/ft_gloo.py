"""One rank of bench/ft.sh's torch Gloo case: all_reduce in a loop until
a rank is SIGKILLed, then destroy_process_group and init_process_group of
the survivors (world n - 1; the killed rank must be the last), and one
checked all_reduce.  Prints "R<rank> ERR <us>" and "R<rank> OK <us>"
(wall-clock microseconds) like cli/bench/ft_recover.c.

    ft_gloo.py PORT1 PORT2   (RANK, WORLD_SIZE from fccl-run)"""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def us():
    return time.time_ns() // 1000


r, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
# fccl-run's store is not the one this case measures: rank 0 hosts
# torch's own TCPStore at each init (the flag would make every rank a
# client of the launcher's)
os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
p1, p2 = sys.argv[1], sys.argv[2]
to = timedelta(seconds=60)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{p1}",
                        rank=r, world_size=n, timeout=to)
dist.barrier()
print(f"R{r} pid {os.getpid()} looping", flush=True)
x = torch.ones(8)
try:
    while True:
        x.fill_(r + 1)
        dist.all_reduce(x)
except RuntimeError:
    print(f"R{r} ERR {us()}", flush=True)
dist.destroy_process_group()
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{p2}",
                        rank=r, world_size=n - 1, timeout=to)
x.fill_(r + 1)
dist.all_reduce(x)
assert (x == sum(range(1, n))).all(), x
print(f"R{r} OK {us()}", flush=True)
dist.destroy_process_group()
os._exit(0)
