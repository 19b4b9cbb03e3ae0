#!/usr/bin/python3
"""elastic_train.py: examples/elastic_train.c in Python, the model in torch:
data-parallel training that survives losing a rank and takes its
replacement back in, with final parameters bitwise equal to a run without
the failure.

    fccl-run --respawn 1 -n 4 /usr/bin/python3 examples/elastic_train.py \\
        STEPS KILL_STEP

The model is a torch.nn.Sequential (Linear 8 -> 16, tanh, Linear 16 -> 1),
trained by plain gradient descent on samples made from their index alone.
Every step's global batch is cut into SHARDS fixed shards of SHARD_N
samples; the gradient of shard s (torch autograd over the same samples, one
thread) is the same bits whichever rank computes it.  The members share the
shards out (shard s to member s mod n), all_gather every member's (SHARDS,
P) table of shard gradients (its own rows filled), take each shard's row
from its owner, and add the rows in shard order 0..SHARDS-1: the reduction
order is fixed by the shards, not by who is alive or by the collective's
algorithm (an all_reduce's order follows its algorithm and member count).

Rank 1 (KILL_STEP >= 0) SIGKILLs itself at the start of step KILL_STEP; the
others' all_gather raises fccl.PeerError, they shrink their group
(fccl.shrink_group) and redo the step without it, go on for REGROW_AFTER
steps, then grow the group by one (fccl.grow_group).  fccl-run --respawn 1
has meanwhile started rank 1 again with FCCL_REJOIN set: its
init_process_group returns with the grown group as its world, and the grown
group's first member broadcasts the step and the parameters to it.  At the
end every rank prints the parameters' bits: "R<rank> FINAL <hex>...".  A
run with KILL_STEP -1 is the reference (tests/py/test_elastic.py compares
the two).
"""
import os
import signal
import sys

import numpy as np
import torch

import fccl

SHARDS, SHARD_N, REGROW_AFTER, VICTIM, LR = 8, 16, 3, 1, 0.05


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 1))


def shard_data(step, s):
    """Shard s of step `step`: (x, y), from the sample indices alone."""
    i = torch.arange(SHARD_N, dtype=torch.float64) + \
        (step * SHARDS + s) * SHARD_N
    k = torch.arange(1, 9, dtype=torch.float64)
    x = torch.sin(i[:, None] * 0.37 + k[None, :] * 1.3)
    y = (x * k * 0.1).sum(1, keepdim=True) + 0.01 * torch.cos(i[:, None])
    return x.float(), y.float()


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def shard_grad(model, step, s):
    model.zero_grad()
    x, y = shard_data(step, s)
    ((model(x) - y) ** 2).sum().backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def train_step(model, group, step):
    """One step on `group`; raises fccl.PeerError if a member died."""
    members = fccl.get_process_group_ranks(group)
    n, me = len(members), members.index(fccl.get_rank())
    nparam = flat_params(model).numel()
    mine = np.zeros((SHARDS, nparam), np.float32)
    for s in range(me, SHARDS, n):
        mine[s] = shard_grad(model, step, s).numpy()
    every = np.empty((n, SHARDS, nparam), np.float32)
    fccl.all_gather_into_tensor(every, mine, group=group)
    g = every[0, 0].copy()  # shard 0 is member 0's
    for s in range(1, SHARDS):
        g = g + every[s % n, s]
    flat = flat_params(model).numpy() - np.float32(LR / (SHARDS * SHARD_N)) * g
    torch.nn.utils.vector_to_parameters(torch.from_numpy(flat),
                                        model.parameters())


def send_state(model, group, step):
    """The group's first member's step and parameters to every member (a
    newcomer has neither)."""
    root = fccl.get_process_group_ranks(group)[0]
    state = np.concatenate([[np.float32(step)],
                            flat_params(model).numpy()]).astype(np.float32)
    fccl.broadcast(state, root, group=group)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(state[1:].copy()),
                                        model.parameters())
    return int(state[0])


def main():
    steps, kill_step = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(1)
    rejoining = fccl.is_rejoining()
    fccl.init_process_group()
    rank = fccl.get_rank()
    group = fccl.GlobalComm.WORLD_COMM_GROUP
    model = make_model()
    step, grow_at = 0, -1
    if rejoining:  # the world is the grown group: take the state
        step = send_state(model, group, step)
    while step < steps:
        if rank == VICTIM and step == kill_step and not rejoining:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            train_step(model, group, step)
        except fccl.PeerError as e:
            print(f"R{rank} step {step}: rank {e.rank} lost, shrinking",
                  flush=True)
            group = fccl.shrink_group(group)
            grow_at = step + REGROW_AFTER
            continue  # the same step again, on the survivors
        step += 1
        if step == grow_at:
            group = fccl.grow_group(group, 1)
            print(f"R{rank} step {step}: grown to "
                  f"{fccl.get_process_group_ranks(group)}", flush=True)
            step = send_state(model, group, step)
    bits = flat_params(model).numpy().view(np.uint32)
    print(f"R{rank} FINAL " + " ".join(f"{b:08x}" for b in bits), flush=True)
    fccl.destroy_process_group()


if __name__ == "__main__":
    main()
