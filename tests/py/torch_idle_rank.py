"""One rank of a torch job that sits idle, for test_torch_idle_cpu.py.

  torch_idle_rank.py job BACKEND SEC   init_process_group(BACKEND) from
                                       env:// (fccl-run's variables), idle
                                       SEC, then a barrier
  torch_idle_rank.py client ADDR WS SEC  a bare PyTorch TCPStore client
                                       (WS "none": no world size, so it
                                       sends nothing at connect), idle SEC,
                                       then set/get; ADDR "env": the store
                                       fccl-run hosts ($TCPSTORE_ADDR)
Prints "cpu SECONDS" (this process's CPU, every thread, over the idle
time) and "ok" once the store or the group still works after it."""
import os
import resource
import sys
import time

import torch.distributed as dist

from tstore import tcp_store


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def idle(sec):
    t0 = cpu_s()
    time.sleep(sec)
    print("cpu %.3f" % (cpu_s() - t0), flush=True)


def job(backend, sec):
    if backend == "fccl":
        import fccl.torch  # noqa: F401 (registers the backend)
    dist.init_process_group(backend)
    idle(sec)
    dist.barrier()
    dist.destroy_process_group()


def client(addr, ws, sec):
    if addr == "env":
        addr = os.environ["TCPSTORE_ADDR"]
    host, port = addr.rsplit(":", 1)
    ws = None if ws == "none" else int(ws)
    s = tcp_store(host, port, ws, False, 30, ws is not None)
    idle(sec)
    s.set("after_idle", "yes")
    if s.get("after_idle") != b"yes":
        sys.exit("set/get after idling failed")


def main():
    if sys.argv[1] == "job":
        job(sys.argv[2], float(sys.argv[3]))
    else:
        client(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    print("ok", flush=True)


if __name__ == "__main__":
    main()
