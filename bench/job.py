#!/usr/bin/python3
"""job: what the collectives cost inside a training job (issue 33).

    build/bin/fccl-run -n N /usr/bin/python3 bench/job.py \\
        --backend fccl|gloo [--steps 10] [--tp-iters 200] [--parts ddp,tp]

torch's default thread settings (no set_num_threads).  Each figure is the
slowest rank's (MAX over ranks) median; a step and its reference are timed
alternately (a barrier before each), so both see the same machine:

  ddp-comm   DDP step (forward, backward with DDP's gradient all_reduce,
             SGD step) of a communication-heavy MLP (about 26M float32
             parameters, batch 8), against the same rank's compute-only
             step (the same step inside ddp.no_sync(): no all_reduce)
  ddp-compute  the same for a compute-heavy MLP (about 8.4M, batch 256)
  tp         a tensor-parallel step: y = x @ W (8x2048 @ 2048x2048), then
             all_reduce(y); against the matmul alone

Prints on rank 0 "RESULT backend part ranks step_ms compute_ms added_ms
share" lines (share: the part of the step the collectives add)."""
import argparse
import os
import statistics
import sys
import time

# PYTHONPATH names the build (bench/job.sh sets it); the tree's own
# build/python otherwise
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "build", "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

MODELS = {  # name: (layer widths, batch)
    "ddp-comm": ([1024, 4096, 4096, 1024], 8),       # 25.2M parameters
    "ddp-compute": ([1024, 2048, 2048, 1024], 256),  # 8.4M
}


def mlp(widths):
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def slowest(x):
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def paired_medians(full_fn, alone_fn, n, warm=1):
    """Time full_fn and alone_fn alternately, n times each (after warm
    calls of each), so that both see the same machine: their medians."""
    for _ in range(warm):
        full_fn()
        alone_fn()
    full, alone = [], []
    for _ in range(n):
        for fn, ts in ((full_fn, full), (alone_fn, alone)):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return statistics.median(full), statistics.median(alone)


def ddp_part(name, steps):
    widths, batch = MODELS[name]
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(mlp(widths))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, widths[0])

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    def compute_only():
        with model.no_sync():
            step()

    full, alone = paired_medians(step, compute_only, steps)
    return slowest(full), slowest(alone)


def tp_part(iters):
    torch.manual_seed(dist.get_rank())
    x, w = torch.randn(8, 2048), torch.randn(2048, 2048)

    def matmul():
        return x @ w

    def step():
        dist.all_reduce(x @ w)

    full, alone = paired_medians(step, matmul, iters, warm=5)
    return slowest(full), slowest(alone)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="fccl")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--tp-iters", type=int, default=300)
    ap.add_argument("--parts", default="ddp-comm,ddp-compute,tp")
    a = ap.parse_args()
    if a.backend == "fccl":
        import fccl.torch  # noqa: F401
    dist.init_process_group(a.backend)
    n = dist.get_world_size()
    for part in a.parts.split(","):
        if part == "tp":
            full, alone = tp_part(a.tp_iters)
        else:
            full, alone = ddp_part(part, a.steps)
        if dist.get_rank() == 0:
            added = full - alone
            print("RESULT %s %s %d %.3f %.3f %.3f %.3f" % (
                a.backend, part, n, full * 1e3, alone * 1e3, added * 1e3,
                added / full if full > 0 else 0.0), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
