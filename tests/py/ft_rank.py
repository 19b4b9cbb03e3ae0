"""One rank of test_ft.py's jobs (under fccl-run --no-kill).  Modes:
kill K: rank K SIGKILLs itself after a barrier; the others get
fccl.PeerError, shrink the world and run a checked all_reduce and
broadcast on the new group.  revoke: rank 0 revokes the world while rank 1
waits in a recv nobody sends and the others in a barrier; each gets
fccl.RevokedError naming rank 0; then all shrink the revoked world.
exclude K: rank K leaves after a barrier; the others shrink without it.
Prints "R<rank> <what>" lines that test_ft.py checks."""
import os
import signal
import sys
import time

import numpy as np

import fccl
from group_checks import check_collectives

fccl.init_process_group()
r, n = fccl.get_rank(), fccl.get_world_size()
mode = sys.argv[1]
print(f"R{r} pid {os.getpid()}", flush=True)
world = fccl.GlobalComm.WORLD_COMM_GROUP


def go_on(exclude=None):
    g = fccl.shrink_group(world, exclude)
    members = fccl.get_process_group_ranks(g)
    failed = fccl.get_failed_ranks(world)
    check_collectives(g, members, r)
    fccl.barrier(group=g)
    print(f"R{r} SHRUNK {g} members {members} failed {failed} ok",
          flush=True)


fccl.barrier()
if mode == "kill":
    if r == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for _ in range(100000):
            fccl.all_reduce(np.ones(16, np.float32))
    except fccl.PeerError as e:
        print(f"R{r} PEER {e.rank}", flush=True)
    go_on()
elif mode == "exclude":
    if r == int(sys.argv[2]):
        os._exit(0)
    go_on([int(sys.argv[2])])
else:
    try:
        if r == 0:
            time.sleep(0.5)
            fccl.revoke_group(world)
            fccl.revoke_group(world)
            fccl.barrier()
        elif r == 1:
            fccl.recv(np.zeros(4, np.int32), src=2)
        else:
            fccl.barrier()
        print(f"R{r} NOT REVOKED", flush=True)
    except fccl.RevokedError as e:
        print(f"R{r} REVOKED {e}", flush=True)
    go_on()
fccl.destroy_process_group()
