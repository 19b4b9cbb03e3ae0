"""gloo_coll: PyTorch 1.13 Gloo baseline for bench/coll.sh.

Times all_reduce, all_gather and all_to_all on float32 (sum) the way
cli/bench/mpi_coll.c does, with the same output columns:

  /usr/bin/python3 bench/gloo_coll.py --spawn N [-o OP] [-b MIN] [-e MAX]
                                      [-f FACTOR] [-n ITERS] [-w WARMUP] [-c]

--spawn N starts N copies of this script with torchrun's variables
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
OMP_NUM_THREADS=1); it also runs under torchrun without --spawn.

Sizes follow nccl-tests (all_gather: whole receive buffer; all_to_all:
whole send buffer).  Per size: warm-up, ITERS x { barrier; t0; op; t1 },
the slowest rank's time (reduce MAX), median over iterations; then ITERS
back-to-back ops averaged.  Gloo 1.13 has no list all_to_all ("ProcessGroup
gloo does not support alltoall") and no all_gather_into_tensor, so
all_to_all is all_to_all_single and all_gather fills a list of views of
one output tensor.
"""
import os
import statistics
import sys
import time

from gloo_launch import spawn

import torch
import torch.distributed as dist

OPS = ("all_reduce", "all_gather", "all_to_all")


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1].upper(), 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def parse_args(argv):
    cfg = dict(op="all_reduce", minb=8, maxb=64 << 20, factor=2, iters=20,
               warmup=5, check=False, spawn=0)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-c":
            cfg["check"] = True
            i += 1
            continue
        v = argv[i + 1]
        i += 2
        if a == "--spawn":
            cfg["spawn"] = int(v)
        elif a == "-o":
            if v not in OPS:
                raise SystemExit("gloo_coll: unknown op %s" % v)
            cfg["op"] = v
        elif a == "-b":
            cfg["minb"] = parse_size(v)
        elif a == "-e":
            cfg["maxb"] = parse_size(v)
        elif a == "-f":
            cfg["factor"] = int(v)
        elif a == "-n":
            cfg["iters"] = int(v)
        elif a == "-w":
            cfg["warmup"] = int(v)
        else:
            raise SystemExit("gloo_coll: unknown option %s" % a)
    return cfg


class Bench:
    def __init__(self, cfg):
        self.cfg = cfg
        self.rank = dist.get_rank()
        self.n = dist.get_world_size()

    def count_for(self, nbytes):
        elems = nbytes // 4
        return elems if self.cfg["op"] == "all_reduce" else elems // self.n

    def make(self, count):
        """Inputs are small integers, so float sums are exact in any order."""
        total = count * self.n if self.cfg["op"] == "all_to_all" else count
        idx = torch.arange(total, dtype=torch.int64)
        x = ((idx * 7 + self.rank * 13) % 101).to(torch.float32)
        out_len = count if self.cfg["op"] == "all_reduce" else count * self.n
        return x, torch.empty(out_len, dtype=torch.float32)

    def expected(self, count):
        op = self.cfg["op"]
        if op == "all_reduce":
            idx = torch.arange(count, dtype=torch.int64)
            return sum(((idx * 7 + r * 13) % 101) for r in range(self.n)).float()
        blocks = []
        for src in range(self.n):
            base = self.rank * count if op == "all_to_all" else 0
            idx = torch.arange(base, base + count, dtype=torch.int64)
            blocks.append(((idx * 7 + src * 13) % 101).float())
        return torch.cat(blocks)

    def run(self, x, out, count):
        op = self.cfg["op"]
        if op == "all_reduce":
            # all_reduce is in place in torch; out is the working buffer.
            out.copy_(x) if self.cfg["check"] else None
            dist.all_reduce(out, op=dist.ReduceOp.SUM)
        elif op == "all_gather":
            dist.all_gather(list(out.split(count)), x)
        else:
            dist.all_to_all_single(out, x)

    def slowest(self, dt):
        t = torch.tensor([dt], dtype=torch.float64)
        dist.reduce(t, 0, op=dist.ReduceOp.MAX)
        return t.item()

    def time_median(self, x, out, count, iters):
        samples = []
        for _ in range(iters):
            dist.barrier()
            t0 = time.perf_counter()
            self.run(x, out, count)
            samples.append(self.slowest(time.perf_counter() - t0))
        return statistics.median(samples)

    def time_avg(self, x, out, count, iters):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            self.run(x, out, count)
        return self.slowest((time.perf_counter() - t0) / iters)

    def check(self, x, out, count):
        out.zero_()
        saved = self.cfg["check"]
        self.cfg["check"] = True
        self.run(x, out, count)
        self.cfg["check"] = saved
        bad = torch.tensor([0 if torch.equal(out, self.expected(count)) else 1])
        dist.all_reduce(bad, op=dist.ReduceOp.MAX)
        return bad.item()

    def sweep(self):
        c = self.cfg
        factor = 2.0 * (self.n - 1) / self.n if c["op"] == "all_reduce" \
            else (self.n - 1) / self.n
        if self.rank == 0:
            print("# gloo_coll %s float32 sum, %d ranks" % (c["op"], self.n))
            print("#%11s %12s %7s %5s %11s %11s %9s %9s %6s" % (
                "size(B)", "count", "type", "redop", "time(us)", "avg(us)",
                "algbw", "busbw", "check"))
        failed = 0
        nbytes = c["minb"]
        while nbytes <= c["maxb"]:
            count = self.count_for(nbytes)
            nbytes *= c["factor"]
            if count == 0:
                continue
            real = count * 4 * (1 if c["op"] == "all_reduce" else self.n)
            iters = min(c["iters"], max(5, (256 << 20) // real))
            x, out = self.make(count)
            for _ in range(min(iters, c["warmup"])):
                self.run(x, out, count)
            ck = "-"
            if c["check"]:
                bad = self.check(x, out, count)
                failed |= bad
                ck = "WRONG" if bad else "ok"
            med = self.time_median(x, out, count, iters)
            avg = self.time_avg(x, out, count, iters)
            if self.rank == 0:
                algbw = real / med / 1e9
                print("%12d %12d %7s %5s %11.2f %11.2f %9.3f %9.3f %6s" % (
                    real, count, "float", "sum", med * 1e6, avg * 1e6, algbw,
                    algbw * factor, ck), flush=True)
        return failed


def main():
    argv = sys.argv[1:]
    cfg = parse_args(argv)
    if cfg["spawn"]:
        return spawn(cfg["spawn"], argv, __file__)
    torch.set_num_threads(1)
    dist.init_process_group(backend="gloo", init_method="env://")
    rc = Bench(cfg).sweep()
    dist.barrier()
    dist.destroy_process_group()
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
