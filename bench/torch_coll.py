#!/usr/bin/python3
"""torch_coll: torch.distributed calls with backend "fccl" against "gloo".

    build/bin/fccl-run -n N /usr/bin/python3 bench/torch_coll.py \\
        [--backend fccl|gloo] [--ops all_reduce,...] [--sizes 8,64K,1M,64M]
        [--iters N] [--ddp] [--ddp-params 25M] [--overhead]

Run under fccl-run (or torchrun): env:// meets at the launcher's store
(on one node rank 0 serves torch's store) for either backend.  Per op
and size: warm-up, then a barrier and ITERS back-to-back calls; the time
per call is the slowest rank's (MAX over ranks), median of 3 such rounds.
Ops: all_reduce, all_gather_into_tensor (Gloo 1.13 has none: a list
all_gather into views of one tensor), all_to_all_single, broadcast,
reduce_scatter (reduce_scatter_tensor; absent in Gloo: reported "-").
Sizes are the bytes of each rank's input (float32).

--ddp: one DistributedDataParallel step (forward, backward with the
gradient all_reduce, SGD step) of an MLP of about --ddp-params float32
parameters, median of 10 steps after 3 warm-up steps.
--overhead (fccl only): the 8-byte all_reduce (2 float32) through torch,
--overhead-iters (5000) calls back to back, median of 3 rounds; the same
split into the call (async_op=True) and work.wait(); and the library's
call in a C loop of the extension (_fccl.c_loop on the world group);
dist.all_reduce on a backend that does nothing (torch's own wrapper:
its floor); and fccl.torch's own part (the group's allreduce and wait,
less the C loop).  bench/torch.sh sets the torch time against
fccl-bench's back-to-back average of the same call: what the torch
layer adds per call.

Prints lines "RESULT backend op bytes ranks us_per_call" on rank 0, which
bench/torch.sh collects into a table.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "build", "python"))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

OPS = ["all_reduce", "all_gather_into_tensor", "all_to_all_single",
       "broadcast", "reduce_scatter"]


def size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1].upper(), 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def make_op(op, backend, nbytes, n):
    """A closure running one call of op, or None where the backend lacks
    it."""
    count = max(1, nbytes // 4)
    if op == "all_reduce":
        x = torch.ones(count)
        return lambda: dist.all_reduce(x)
    if op == "all_gather_into_tensor":
        x, out = torch.ones(count), torch.empty(count * n)
        if backend == "gloo":
            views = list(out.split(count))
            return lambda: dist.all_gather(views, x)
        return lambda: dist.all_gather_into_tensor(out, x)
    if op == "all_to_all_single":
        count = max(n, count - count % n)
        x, out = torch.ones(count), torch.empty(count)
        return lambda: dist.all_to_all_single(out, x)
    if op == "broadcast":
        x = torch.ones(count)
        return lambda: dist.broadcast(x, 0)
    if op == "reduce_scatter":
        if backend == "gloo":
            return None
        count = max(n, count - count % n)
        x, out = torch.ones(count), torch.empty(count // n)
        return lambda: dist.reduce_scatter_tensor(out, x)
    raise SystemExit(f"torch_coll: unknown op {op}")


def slowest(seconds):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def round_time(fn, iters):
    """One round: a barrier, iters calls of fn, the slowest rank's mean."""
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return slowest((time.perf_counter() - t0) / iters)


def time_calls(fn, iters):
    for _ in range(max(2, iters // 10)):
        fn()
    return statistics.median(round_time(fn, iters) for _ in range(3))


def iters_for(nbytes, base):
    return max(3, min(base, (256 << 20) // max(nbytes, 1)))


def ddp_step_time(params, steps=10):
    width = 1024
    layers = max(1, round(params / (width * width + width)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width)
                                  for _ in range(layers)])
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(8, width)
    times = []
    for i in range(steps + 3):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
        dt = slowest(time.perf_counter() - t0)
        if i >= 3:
            times.append(dt)
    nparams = sum(p.numel() for p in model.parameters())
    return statistics.median(times), nparams


def split_calls(iters):
    """The 8-byte all_reduce as call and wait apart: per round the mean
    time in dist.all_reduce(async_op=True) and in work.wait(), the
    slowest rank's, median of 3 rounds (the call runs a small collective
    inline, so most of the time is in the call)."""
    x = torch.ones(2)
    clock = time.perf_counter_ns
    for _ in range(max(2, iters // 10)):
        dist.all_reduce(x, async_op=True).wait()
    calls, waits = [], []
    for _ in range(3):
        dist.barrier()
        c = w = 0
        for _ in range(iters):
            t0 = clock()
            work = dist.all_reduce(x, async_op=True)
            t1 = clock()
            work.wait()
            t2 = clock()
            c += t1 - t0
            w += t2 - t1
        calls.append(slowest(c * 1e-9 / iters))
        waits.append(slowest(w * 1e-9 / iters))
    return statistics.median(calls), statistics.median(waits)


def noop_group():
    """A group of a backend that does nothing: its allreduce (a Python
    method) returns a Work that has ended.  dist.all_reduce on it costs
    what torch's own wrapper costs (checks, AllreduceOptions, the wait of
    torch's simplest Work), which no backend can take away."""
    from torch._C._distributed_c10d import _create_work_from_future
    fut = torch.futures.Future()
    fut.set_result([torch.ones(2)])
    done = _create_work_from_future(fut)

    class Noop(dist.ProcessGroup):
        def allreduce(self, tensors, opts=None):
            return done

        def getBackendName(self):
            return "noop"

    dist.Backend.register_backend("noop", lambda st, r, n, t: Noop(r, n))
    return dist.new_group(backend="noop")


def overhead(iters):
    """(torch us, call us, wait us, C loop us, torch's floor us, fccl
    part us) of the 8-byte all_reduce: back to back through torch, the
    same split into call and wait, the library's call in a C loop of the
    extension, dist.all_reduce on a backend that does nothing (noop_group)
    and fccl.torch's own part: the group's allreduce([x], opts).wait()
    less the C loop.  The last three in interleaved rounds of one process,
    so that this machine's speed of the minute cancels out."""
    from fccl import _fccl
    x = torch.ones(2)
    fn = make_op("all_reduce", "fccl", 8, dist.get_world_size())
    torch_t = time_calls(fn, iters)
    call_t, wait_t = split_calls(iters)
    noop = noop_group()
    pg = dist.distributed_c10d._get_default_group()
    opts = dist.AllreduceOptions()
    c, floor, part = [], [], []
    for _ in range(3):
        dist.barrier()
        c.append(slowest(_fccl.c_loop(x, iters, None) / iters))
        floor.append(round_time(lambda: dist.all_reduce(x, group=noop), iters))
        part.append(round_time(lambda: pg.allreduce([x], opts).wait(), iters)
                    - c[-1])
    return (torch_t, call_t, wait_t, statistics.median(c),
            statistics.median(floor), statistics.median(part))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="fccl", choices=["fccl", "gloo"])
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--sizes", default="8,64K,1M,64M")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--ddp-params", default="25M")
    ap.add_argument("--overhead", action="store_true")
    ap.add_argument("--overhead-iters", type=int, default=5000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.backend == "fccl":
        import fccl.torch  # noqa: F401
    dist.init_process_group(a.backend)
    n, me = dist.get_world_size(), dist.get_rank()
    out = (lambda *s: print(*s, flush=True)) if me == 0 else (lambda *s: None)
    for op in [o for o in a.ops.split(",") if o]:
        for s in [size(x) for x in a.sizes.split(",") if x]:
            fn = make_op(op, a.backend, s, n)
            us = "-" if fn is None else "%.2f" % (
                time_calls(fn, iters_for(s, a.iters)) * 1e6)
            out("RESULT", a.backend, op, s, n, us)
    if a.ddp:
        t, p = ddp_step_time(size(a.ddp_params))
        out("RESULT", a.backend, "ddp_step_%dparams" % p, 0, n,
            "%.2f" % (t * 1e6))
    if a.overhead and a.backend == "fccl":
        t, call, wait, c, floor, part = overhead(a.overhead_iters)
        for name, v in (("torch_call", t), ("call_part", call),
                        ("wait_part", wait), ("c_loop", c),
                        ("torch_floor", floor), ("fccl_part", part)):
            out("RESULT", "fccl", "overhead_" + name, 8, n, "%.3f" % (v * 1e6))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
