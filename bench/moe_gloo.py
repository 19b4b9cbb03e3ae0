"""moe_gloo: the MoE layer of fccl-moe-bench in PyTorch 1.13 + Gloo.

  /usr/bin/python3 bench/moe_gloo.py --spawn N [-b BS] [-H HIDDEN] [-k K]
                                    [-E EXPERTS] [-n ITERS] [-w WARMUP] [-c]

Same layer, same math as build/bin/fccl-moe-bench (no shared experts, no
TP): dispatch = all_to_all_single of the per-(rank, expert) counts, then of
the rows (sorted by destination rank, expert, token); the experts
(expert e: y = (e+1) x + e, in float32, stored as bfloat16); combine =
all_to_all_single of the rows back, then torch ops: the weighted sum
(index_add_ in float32), the residual add and RMSNorm.  Gloo 1.13 refuses
bfloat16 in all_to_all ("Invalid scalar type", int16 too), so rows travel as uint8
views of the same bytes.

Prints tokens/s (all ranks' tokens / the slowest rank's mean layer time)
and the mean phase times of the slowest rank: dispatch, expert, combine
split into comm (the all_to_all) and math (the torch ops).  -c checks the
output against a dense reference (float64).  --spawn N starts N copies of
this script with torchrun's variables and OMP_NUM_THREADS=1 on loopback.
"""
import os
import sys
import time

from gloo_launch import spawn

import torch
import torch.distributed as dist


def parse(argv):
    cfg = dict(bs=256, H=4096, k=8, E=16, iters=20, warmup=5, check=False,
               spawn=0)
    keys = {"-b": "bs", "-H": "H", "-k": "k", "-E": "E", "-n": "iters",
            "-w": "warmup", "--spawn": "spawn"}
    i = 0
    while i < len(argv):
        if argv[i] == "-c":
            cfg["check"] = True
            i += 1
            continue
        if argv[i] not in keys or i + 1 >= len(argv):
            raise SystemExit("usage: moe_gloo.py --spawn N [-b BS] [-H H] "
                             "[-k K] [-E E] [-n N] [-w N] [-c]")
        cfg[keys[argv[i]]] = int(argv[i + 1])
        i += 2
    return cfg


class Layer:
    def __init__(self, cfg):
        self.c = cfg
        self.rank, self.n = dist.get_rank(), dist.get_world_size()
        self.L = cfg["E"] // self.n
        g = torch.Generator().manual_seed(1234 + self.rank)
        bs, H, k = cfg["bs"], cfg["H"], cfg["k"]
        self.x = ((torch.randint(0, 1024, (bs, H), generator=g) - 512) / 256.0).to(torch.bfloat16)
        self.res = ((torch.randint(0, 1024, (bs, H), generator=g) - 512) / 256.0).to(torch.bfloat16)
        self.gamma = (0.5 + torch.randint(0, 256, (H,), generator=g) / 256.0).to(torch.bfloat16)
        scores = torch.rand(bs, cfg["E"], generator=g)
        self.ids = scores.topk(k, dim=1).indices                  # distinct per token
        self.scales = 0.05 + torch.randint(0, 1000, (bs, k), generator=g) / 1000.0
        # send order: by destination rank, then local expert, then token
        flat = self.ids.reshape(-1)
        key = flat * bs + torch.arange(bs).repeat_interleave(k)
        self.order = key.argsort()
        self.tok = self.order // k                                 # token of each sent row
        self.w = self.scales.reshape(-1)[self.order]
        e_sorted = flat[self.order]
        self.send_ec = torch.bincount(e_sorted, minlength=cfg["E"])  # rows per expert
        self.send_rc = self.send_ec.view(self.n, self.L).sum(1)

    def dispatch(self):
        recv_ec = torch.empty_like(self.send_ec)
        dist.all_to_all_single(recv_ec, self.send_ec)               # [src][local expert]
        self.recv_ec = recv_ec.view(self.n, self.L)
        self.recv_rc = self.recv_ec.sum(1)
        rows = self.x[self.tok]
        out = torch.empty(int(self.recv_rc.sum()), self.c["H"], dtype=torch.bfloat16)
        dist.all_to_all_single(out.view(torch.uint8), rows.view(torch.uint8),
                               self.recv_rc.tolist(), self.send_rc.tolist())
        return out

    def experts(self, rows):
        first = self.rank * self.L
        e = first + torch.arange(self.L).repeat(self.n).repeat_interleave(
            self.recv_ec.reshape(-1))
        ef = e.to(torch.float32)[:, None]
        return (rows.float() * (ef + 1) + ef).to(torch.bfloat16)

    def combine(self, y):
        t0 = time.perf_counter()
        back = torch.empty(len(self.tok), self.c["H"], dtype=torch.bfloat16)
        dist.all_to_all_single(back.view(torch.uint8), y.view(torch.uint8),
                               self.send_rc.tolist(), self.recv_rc.tolist())
        t1 = time.perf_counter()
        comb = torch.zeros(self.c["bs"], self.c["H"], dtype=torch.float32)
        comb.index_add_(0, self.tok, back.float() * self.w[:, None])
        x = comb.to(torch.bfloat16) + self.res
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6)
        yo = (xf * rstd * self.gamma.float()).to(torch.bfloat16)
        t2 = time.perf_counter()
        return x, yo, rstd, t1 - t0, t2 - t1

    def reference(self):
        x = self.x.double()
        e = self.ids.double()
        v = torch.zeros_like(x)
        for j in range(self.c["k"]):
            v += self.scales[:, j:j + 1].double() * ((e[:, j:j + 1] + 1) * x + e[:, j:j + 1])
        xr = v + self.res.double()
        rstd = torch.rsqrt(xr.pow(2).mean(1, keepdim=True) + 1e-6)
        return xr, xr * rstd * self.gamma.double()

    def run(self):
        c, T = self.c, torch.zeros(6, dtype=torch.float64)
        wrong = 0
        for it in range(c["warmup"] + c["iters"]):
            t0 = time.perf_counter()
            rows = self.dispatch()
            t1 = time.perf_counter()
            y = self.experts(rows)
            t2 = time.perf_counter()
            x, yo, rstd, comm, math = self.combine(y)
            t3 = time.perf_counter()
            if it >= c["warmup"]:
                T += torch.tensor([t1 - t0, t2 - t1, t3 - t2, comm, math, t3 - t0])
            if c["check"]:
                xr, yr = self.reference()
                wrong += int(((x.double() - xr).abs() > 0.05 * xr.abs() + 0.05).sum())
                wrong += int(((yo.double() - yr).abs() > 0.05 * yr.abs() + 0.05).sum())
        T /= c["iters"]
        dist.all_reduce(T, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong])
        dist.all_reduce(w)
        if self.rank == 0:
            toks = c["bs"] * self.n
            us = [v * 1e6 for v in T.tolist()]
            print("# moe_gloo (torch %s, gloo): %d ranks, bs %d, H %d, k %d, %d experts, "
                  "bfloat16, %d iterations (+%d warm-up)" % (
                      torch.__version__, self.n, c["bs"], c["H"], c["k"], c["E"],
                      c["iters"], c["warmup"]))
            print("# path      tokens/s      layer   dispatch     expert    combine"
                  "     comm     math  comb.tok/s")
            print("  gloo   %11.0f %10.1f %10.1f %10.1f %10.1f %8.1f %8.1f %11.0f" % (
                toks / T[5].item(), us[5], us[0], us[1], us[2], us[3], us[4],
                toks / T[2].item()))
            if c["check"]:
                print("# %s" % ("WRONG RESULTS (%d)" % w.item() if w.item() else
                                "all results correct"))
        return 1 if w.item() else 0


def main():
    cfg = parse(sys.argv[1:])
    if cfg["spawn"]:
        sys.exit(spawn(cfg["spawn"], sys.argv[1:], __file__))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    if cfg["E"] % dist.get_world_size():
        raise SystemExit("moe_gloo: -E must be a multiple of the ranks")
    rc = Layer(cfg).run()
    dist.destroy_process_group()
    sys.exit(rc)


if __name__ == "__main__":
    main()
