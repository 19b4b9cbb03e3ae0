"""One rank of test_grow.py's job (under fccl-run --respawn 1): rank K
SIGKILLs itself after a barrier; the others get fccl.PeerError, shrink the
world and grow the shrunk group by one; the respawned K's
init_process_group joins through that grow.  Everyone then runs an
all_reduce and a broadcast checked against values each rank computes
alone, on the grown group.  Prints "R<rank> <what>" lines."""
import hashlib
import os
import signal
import sys

import numpy as np

import fccl
from group_checks import check_collectives

victim = int(sys.argv[1])
rejoining = fccl.is_rejoining()
fccl.init_process_group()
r = fccl.get_rank()
print(f"R{r} pid {os.getpid()} rejoining {rejoining}", flush=True)
world = fccl.GlobalComm.WORLD_COMM_GROUP

if rejoining:
    grown = world

else:
    fccl.barrier()
    if r == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for _ in range(100000):
            fccl.all_reduce(np.ones(16, np.float32))
    except fccl.PeerError as e:
        print(f"R{r} PEER {e.rank}", flush=True)
    shrunk = fccl.shrink_group(world)
    grown = fccl.grow_group(shrunk, 1)
members = fccl.get_process_group_ranks(grown)
# the grown group's name, by its member set (sha1 computed here); on the
# newcomer it names the world group too
want_name = "fccl_%d_%s" % (len(members), hashlib.sha1("_".join(
    str(m) for m in sorted(members)).encode()).hexdigest())
assert rejoining or grown == want_name, (grown, want_name)
assert fccl.get_process_group_ranks(want_name) == members
check_collectives(grown, members, r)
print(f"R{r} GROWN {grown if not rejoining else 'world'} rank "
      f"{fccl.get_group_rank(grown, r)} members {members} ok", flush=True)
fccl.destroy_process_group()
