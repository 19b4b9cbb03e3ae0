"""The checks ft_rank.py and grow_rank.py run on a group a shrink or a
grow made: an all_reduce and a broadcast from its last member, each
checked against values this rank computes alone."""
import numpy as np

import fccl


def check_collectives(group, members, r):
    """r is this process's global rank; members the group's global ranks
    in group order."""
    x = np.full(7, r + 1, np.int64)
    fccl.all_reduce(x, group=group)
    want = sum(m + 1 for m in members)
    assert (x == want).all(), (x, want)
    root = members[-1]
    y = np.arange(5, dtype=np.float64) + (r if r == root else -100)
    fccl.broadcast(y, root, group=group)
    assert (y == np.arange(5, dtype=np.float64) + root).all(), y
