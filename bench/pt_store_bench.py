"""PyTorch 1.13's Python TCPStore client as a load generator, for
bench/tcpstore.sh: P processes (one store connection each) run N requests
per op of 100-byte set/get/add against ADDR and print, per op, one
"csv,LABEL,ADDR,legacy,P,100,OP,REQUESTS,SECONDS,OPS_PER_S,P50_US,P99_US"
line (the columns of tcpstore-bench).  usage: pt_store_bench.py ADDR N P LABEL"""
import datetime
import multiprocessing as mp
import sys
import time

import torch.distributed as dist


def worker(addr, n, idx, op, start, q):
    host, port = addr.rsplit(":", 1)
    s = dist.TCPStore(host, int(port), None, False,
                      datetime.timedelta(seconds=300), False)
    val = b"v" * 100
    key = "bench/py%d" % idx
    s.set(key, val)
    s.set(key + "/ctr", "0")
    lat = []
    start.wait()
    t0 = time.perf_counter()
    for _ in range(n):
        a = time.perf_counter_ns()
        if op == "set":
            s.set(key, val)
        elif op == "get":
            s.get(key)
        else:
            s.add(key + "/ctr", 1)
        lat.append(time.perf_counter_ns() - a)
    if op == "set":
        s.num_keys()  # a round trip: every set was processed
    q.put((t0, time.perf_counter(), lat))


def main():
    addr, n, procs, label = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    ctx = mp.get_context("fork")
    for op in ("set", "get", "add"):
        start = ctx.Barrier(procs)
        q = ctx.Queue()
        ps = [ctx.Process(target=worker, args=(addr, n // procs, i, op, start, q))
              for i in range(procs)]
        for p in ps:
            p.start()
        res = [q.get() for _ in ps]
        for p in ps:
            p.join()
        t0 = min(r[0] for r in res)
        t1 = max(r[1] for r in res)
        lat = sorted(x for r in res for x in r[2])
        secs = t1 - t0
        p50 = lat[len(lat) // 2] / 1e3
        p99 = lat[int(0.99 * (len(lat) - 1))] / 1e3
        print("csv,%s,%s,legacy,%d,100,%s,%d,%.4f,%.0f,%.1f,%.1f" %
              (label, addr, procs, op, len(lat), secs, len(lat) / secs, p50, p99),
              flush=True)


if __name__ == "__main__":
    main()
