"""One rank of a job that test_torch_jobs.py launches itself (not under
the pytest sessions of torch/mr_*.py).  argv[1] is the mode:

  store INIT_METHOD  init_process_group("fccl", init_method=INIT_METHOD),
                     or with store=TCPStore(HOST, PORT) (a client) for
                     "client:HOST:PORT" (RANK, WORLD_SIZE from the
                     environment), an all_reduce
                     and a subgroup checked, prints "ok RANK"
  kill [recv]        (a TCPStore client of MASTER_ADDR:MASTER_PORT)
                     the last rank kills itself after a barrier; the others
                     print "raised SECONDS MESSAGE" from their next
                     collectives (with "recv": a receive from it; torch
                     2.x's "funcol": functional all_reduce; "mesh": a
                     DeviceMesh dimension's group), or what happened
                     instead
  env BACKEND        under fccl-run: torch's env:// with BACKEND; prints
                     the torchrun variables and "ok RANK"
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import fccl.torch  # noqa: F401
from tstore import tcp_store

mode = sys.argv[1]
r, n = int(os.environ.get("RANK", "-1")), int(os.environ.get("WORLD_SIZE",
                                                               "-1"))
if mode == "store":
    td = datetime.timedelta(seconds=60)
    if sys.argv[2].startswith("client:"):  # a TCPStore client object
        host, port = sys.argv[2][7:].rsplit(":", 1)
        st = tcp_store(host, port, n, False, 60)
        dist.init_process_group("fccl", store=st, rank=r, world_size=n,
                                timeout=td)
    else:
        dist.init_process_group("fccl", init_method=sys.argv[2], rank=r,
                                world_size=n, timeout=td)
    x = torch.full((5,), float(r + 1))
    dist.all_reduce(x)
    assert x.tolist() == [n * (n + 1) / 2] * 5, x
    g = dist.new_group(list(range(0, n, 2)), backend="fccl")
    if r % 2 == 0:
        y = torch.ones(1)
        dist.all_reduce(y, group=g)
        assert y.item() == len(range(0, n, 2))
    dist.barrier()
    dist.destroy_process_group()
    print("ok", r, flush=True)
elif mode == "kill":
    st = tcp_store(os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], n)
    dist.init_process_group("fccl", store=st, rank=r, world_size=n,
                            timeout=datetime.timedelta(seconds=60))
    dist.barrier()
    if r == n - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    try:
        how = sys.argv[2] if len(sys.argv) > 2 else "coll"
        if how == "recv":
            dist.recv(torch.zeros(4), n - 1)  # a p2p wait on the dead rank
        elif how in ("funcol", "mesh"):
            import torch.distributed._functional_collectives as fc
            from torch.distributed.device_mesh import init_device_mesh
            g = dist.group.WORLD
            if how == "mesh":
                g = init_device_mesh("cpu", (n,)).get_group()
            for _ in range(100000):
                fc.wait_tensor(fc.all_reduce(torch.ones(1024), "sum", g))
        else:
            for _ in range(100000):
                dist.all_reduce(torch.ones(1024))
        print("no error", flush=True)
    except RuntimeError as e:
        print(f"raised {time.monotonic() - t0:.1f} {e}".replace("\n", " "),
              flush=True)
    sys.stdin.read()  # stay until every survivor reported
    os._exit(0)       # the world is broken: no final barrier
elif mode == "env":
    names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
             "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME",
             "ROLE_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
             "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
             "TORCHELASTIC_USE_AGENT_STORE", "MASTER_ADDR", "MASTER_PORT",
             "USE_LIBUV", "TCPSTORE_ADDR", "FCCL_STORE_ADDRS"]
    print("env", " ".join(f"{k}={os.environ.get(k, '')}" for k in names),
          flush=True)
    dist.init_process_group(sys.argv[2])
    x = torch.ones(3)
    dist.all_reduce(x)
    assert x.tolist() == [float(dist.get_world_size())] * 3
    dist.barrier()
    dist.destroy_process_group()
    print("ok", dist.get_rank() if dist.is_initialized() else r, flush=True)
