"""One process of test_torch_reconf.py (and bench/reconf.py): it holds a
ReconfigurableProcessGroup (or, with argv[1] "gloo", torchft's way with
Gloo: a ProcessGroupGloo over a PrefixStore(TCPStore) made again at each
configuration) and runs the commands its driver writes on stdin, one JSON
list per line, answering each with one JSON object per line on stdout
({"ok": true, ...} or {"ok": false, "err": "..."}):

  ["configure", ADDR, RANK, SIZE]   configure; answers t0/t1 (monotonic s)
  ["check", SEED]                   every collective, checked against
                                    references computed here
  ["ft", NAME]                      torchft's run_NAME_test (ported)
  ["allreduce_sum", N]              all_reduce of full(4, rank + 1): sum N?
  ["ft_shrink_broadcast"]           broadcast of 42 from rank 0
  ["sendrecv_ring"]                 PyTorch's send/recv ring case
  ["pending"]                       start a 4 MiB all_reduce, keep its Work
  ["pending_recv", SRC]             start a recv from SRC, keep its Work
  ["abort"]                         abort(), then wait the pending Work:
                                    answers the seconds until it raised
  ["wait_pending"]                  wait the pending Work (must raise)
  ["errored"]                       errored() as text (or null)
  ["set_timeout", SECONDS]
  ["shutdown"]
  ["exit"]
Every rank computes every rank's input from (seed, rank), so each result
is checked independently of the backend.
"""
import json
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions,
                                        AllreduceCoalescedOptions,
                                        AllreduceOptions, AllToAllOptions,
                                        BarrierOptions, BroadcastOptions,
                                        ReduceOp, ReduceScatterOptions)

import fccl.torch

torch.set_num_threads(1)
KIND = sys.argv[1] if len(sys.argv) > 1 else "fccl"
TIMEOUT = timedelta(seconds=float(sys.argv[2]) if len(sys.argv) > 2 else 60)


class GlooReconf:
    """torchft's ProcessGroupGloo.configure on torch 1.13: a new
    ProcessGroupGloo over PrefixStore(prefix, TCPStore client)."""

    def __init__(self, timeout):
        self.timeout, self.pg = timeout, None

    def configure(self, addr, rank, size):
        host, _, rest = addr.partition(":")
        port, _, prefix = rest.partition("/")
        self.pg = None
        st = dist.TCPStore(host, int(port), is_master=False,
                           wait_for_workers=False, timeout=self.timeout)
        self.pg = dist.ProcessGroupGloo(dist.PrefixStore(prefix, st), rank,
                                        size, self.timeout)

    def __getattr__(self, name):
        return getattr(self.pg, name)


pg = (GlooReconf(TIMEOUT) if KIND == "gloo"
      else fccl.torch.ReconfigurableProcessGroup(timeout=TIMEOUT))
pending = None


def data(seed, r, count, dtype=torch.float32):
    g = torch.Generator().manual_seed(1000 * seed + 17 * r + 5)
    return torch.randint(-8, 9, (count,), generator=g).to(dtype)


def eq(got, want, what):
    if not torch.equal(got, want):
        raise AssertionError(f"{what}: got {got.tolist()[:8]} want "
                             f"{want.tolist()[:8]}")


def check(seed):
    """Each collective of the contract, on sizes 0, 1, 7, 1025 and one past
    the inline limit (the asynchronous path)."""
    me, n = pg.rank(), pg.size()
    for count in (0, 1, 7, 1025, 70000):
        ins = [data(seed, r, count) for r in range(n)]
        t = ins[me].clone()
        pg.allreduce([t], AllreduceOptions()).wait()
        eq(t, torch.stack(ins).sum(0), f"allreduce {count}")
        t = ins[me].clone()
        pg.allreduce([t], ReduceOp.MAX).wait()
        eq(t, torch.stack(ins).amax(0), f"allreduce max {count}")
        outs = [torch.empty(count) for _ in range(n)]
        pg.allgather([outs], [ins[me].clone()], AllgatherOptions()).wait()
        for r in range(n):
            eq(outs[r], ins[r], f"allgather {count} from {r}")
        o = BroadcastOptions()
        o.rootRank = n - 1
        t = ins[me].clone()
        pg.broadcast([t], o).wait()
        eq(t, ins[n - 1], f"broadcast {count}")
        # alltoall_base, even: rank r's block k goes to rank k
        blocks = [data(seed + 1, r, n * count) for r in range(n)]
        out = torch.empty(n * count)
        pg.alltoall_base(out, blocks[me].clone(), [], [],
                         AllToAllOptions()).wait()
        want = torch.cat([blocks[r][me * count:(me + 1) * count]
                          for r in range(n)])
        eq(out, want, f"alltoall_base {count}")
        # reduce_scatter: one input per rank, this rank gets block me
        lists = [[data(seed + 2 + k, r, count) for k in range(n)]
                 for r in range(n)]
        out = torch.empty(count)
        pg.reduce_scatter([out], [[x.clone() for x in lists[me]]],
                          ReduceScatterOptions()).wait()
        eq(out, torch.stack([lists[r][me] for r in range(n)]).sum(0),
           f"reduce_scatter {count}")
    pg.barrier(BarrierOptions()).wait()
    if n > 1:  # send/recv around the ring
        x = data(seed + 9, me, 33)
        s = pg.send([x], (me + 1) % n, 5)
        y = torch.empty(33)
        pg.recv([y], (me - 1) % n, 5).wait()
        s.wait()
        eq(y, data(seed + 9, (me - 1) % n, 33), "send/recv")
    return {}


# ---- ports of torchft's process_group_test.py collective checks (the
# expected values are torchft's; the code is this project's) ----

def ft(name):
    me, n = pg.rank(), pg.size()
    t = torch.tensor([me + 1])
    if name == "allgather":
        outs = [torch.zeros(2, dtype=t.dtype) for _ in range(n)]
        pg.allgather([outs], [torch.cat([t, t + 1])],
                     AllgatherOptions()).wait()
        for r in range(n):
            eq(outs[r], torch.tensor([r + 1, r + 2]), "allgather")
    elif name == "allgather_into_tensor_coalesced":
        o0, o1 = torch.zeros(n, dtype=t.dtype), torch.zeros(n, dtype=t.dtype)
        pg.allgather_into_tensor_coalesced(
            [o0, o1], [torch.tensor([me + 1]), torch.tensor([me + 10])],
            AllgatherOptions()).wait()
        eq(o0, torch.arange(1, n + 1), "coalesced 0")
        eq(o1, torch.arange(10, n + 10), "coalesced 1")
    elif name == "allreduce":
        x = t.clone()
        pg.allreduce([x], ReduceOp.SUM).wait()
        eq(x, torch.tensor([n * (n + 1) // 2]), "allreduce")
    elif name == "allreduce_coalesced":
        a, b = t.clone(), t.clone() + 1
        pg.allreduce_coalesced([a, b], AllreduceCoalescedOptions()).wait()
        eq(a, torch.tensor([sum(r + 1 for r in range(n))]), "coalesced a")
        eq(b, torch.tensor([sum(r + 2 for r in range(n))]), "coalesced b")
    elif name == "alltoall_base":
        x = torch.arange(me * n + 1, me * n + 1 + n)
        out = torch.empty(n, dtype=x.dtype)
        pg.alltoall_base(out, x, [1] * n, [1] * n, AllToAllOptions()).wait()
        eq(out, torch.tensor([k * n + me + 1 for k in range(n)]), "alltoall")
    elif name == "barrier":
        pg.barrier(BarrierOptions()).wait()
    elif name == "broadcast":
        x = t.clone() if me == 0 else torch.zeros_like(t)
        pg.broadcast([x], BroadcastOptions()).wait()
        eq(x, torch.tensor([1]), "broadcast")
    elif name == "broadcast_one":
        x = t.clone() if me == 0 else torch.zeros_like(t)
        pg.broadcast_one(x, 0).wait()
        eq(x, torch.tensor([1]), "broadcast_one")
    elif name == "reduce_scatter":
        # torchft skips it on CPU (Gloo has none); fccl has it
        rows = [torch.arange(r * n + 1, r * n + n + 1).float()
                for r in range(n)]
        out = torch.zeros(n)
        o = ReduceScatterOptions()
        o.reduceOp = ReduceOp.SUM
        pg.reduce_scatter([out], [rows], o).wait()
        eq(out, rows[me] * n, "reduce_scatter")
    elif name == "reduce_scatter_tensor_coalesced":
        m0 = torch.stack([torch.arange(r * n + 1, r * n + n + 1).float()
                          for r in range(n)])
        m1 = torch.stack([torch.arange(r * n + 100, r * n + 100 + n).float()
                          for r in range(n)])
        o0, o1 = torch.zeros(n), torch.zeros(n)
        o = ReduceScatterOptions()
        o.reduceOp = ReduceOp.SUM
        pg.reduce_scatter_tensor_coalesced([o0, o1], [m0, m1], o).wait()
        eq(o0, m0[me] * n, "rs coalesced 0")
        eq(o1, m1[me] * n, "rs coalesced 1")
    elif name == "send/recv":
        if n >= 2 and me == 0:
            pg.send([t.clone()], 1, 0).wait()
        elif n >= 2 and me == 1:
            x = torch.zeros_like(t)
            pg.recv([x], 0, 0).wait()
            eq(x, torch.tensor([1]), "recv")
    else:
        raise ValueError(name)
    return {}


def sendrecv_ring():
    """PyTorch's test_reconfigure_then_send_recv: even ranks send first."""
    me, n = pg.rank(), pg.size()
    dst, src = (me + 1) % n, (me - 1) % n
    x, y = torch.full((4,), me + 1.0), torch.zeros(4)
    if me % 2 == 0:
        s, r = pg.send([x], dst, 0), pg.recv([y], src, 0)
    else:
        r, s = pg.recv([y], src, 0), pg.send([x], dst, 0)
    s.wait()
    r.wait()
    eq(y, torch.full((4,), src + 1.0), "ring")
    return {}


def run(cmd):
    global pending
    op = cmd[0]
    if op == "configure":
        t0 = time.monotonic()
        pg.configure(cmd[1], cmd[2], cmd[3])
        return {"t0": t0, "t1": time.monotonic()}
    if op == "check":
        return check(cmd[1])
    if op == "ft":
        return ft(cmd[1])
    if op == "allreduce_sum":
        x = torch.full((4,), pg.rank() + 1.0)
        pg.allreduce([x], AllreduceOptions()).wait()
        eq(x, torch.full((4,), float(cmd[1])), "allreduce_sum")
        return {"rank": pg.rank(), "size": pg.size()}
    if op == "ft_shrink_broadcast":
        x = torch.full((4,), 42.0) if pg.rank() == 0 else torch.zeros(4)
        pg.broadcast([x], BroadcastOptions()).wait()
        eq(x, torch.full((4,), 42.0), "broadcast 42")
        return {}
    if op == "sendrecv_ring":
        return sendrecv_ring()
    if op == "pending":
        pending = pg.allreduce([torch.ones(1 << 20)], AllreduceOptions())
        return {"completed": pending.is_completed()}
    if op == "pending_recv":
        pending = pg.recv([torch.empty(4)], cmd[1], 7)
        return {"completed": pending.is_completed()}
    if op == "abort":
        t0 = time.monotonic()
        pg.abort()
        return wait_pending(t0)
    if op == "wait_pending":
        return wait_pending(time.monotonic())
    if op == "errored":
        e = pg.errored()
        return {"errored": None if e is None else f"{type(e).__name__}: {e}"}
    if op == "set_timeout":
        pg.set_timeout(timedelta(seconds=cmd[1]))
        return {}
    if op == "shutdown":
        pg.shutdown()
        return {}
    raise ValueError(f"unknown command {cmd!r}")


def wait_pending(t0):
    global pending
    w, pending = pending, None
    if w is None:
        return {"raised": None}
    try:
        w.wait()
    except RuntimeError as e:
        return {"raised": time.monotonic() - t0, "msg": str(e)}
    return {"raised": None}


def main():
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd[0] == "exit":
            break
        try:
            res = run(cmd)
            res["ok"] = True
        except Exception as e:  # noqa: BLE001 - the driver judges it
            res = {"ok": False, "err": f"{type(e).__name__}: {e}",
                   "tb": traceback.format_exc()[-2000:]}
        print(json.dumps(res), flush=True)
    if KIND != "gloo":
        pg.shutdown()


main()
