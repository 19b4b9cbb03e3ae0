"""torch's TCPStore client as the test scripts make it, on torch 1.13 and
2.x: torch 2.x asks for its libuv client by default, which Debian 13's
torch 2.6 (built without libuv) refuses, so there it asks for the classic
one; both speak the same protocol to the server."""
import datetime

import torch
import torch.distributed as dist

TORCH_2 = int(torch.__version__.split(".")[0]) >= 2


def tcp_store(host, port, world_size=None, is_master=False, timeout_s=60,
              wait_for_workers=True):
    """A torch TCPStore (a client unless is_master) at HOST:PORT."""
    kw = {"use_libuv": False} if TORCH_2 else {}
    return dist.TCPStore(host, int(port), world_size, is_master,
                         datetime.timedelta(seconds=timeout_s),
                         wait_for_workers, **kw)


def tcp_store_class():
    """dist.TCPStore with the same arguments, asking for the classic
    client on torch 2.x (see the top)."""
    if not TORCH_2:
        return dist.TCPStore
    return lambda *a, **kw: dist.TCPStore(*a, use_libuv=False, **kw)


def has_libuv():
    """Whether this torch can make a libuv TCPStore (what torch 2.x's
    agent-store path asks for, whatever USE_LIBUV says)."""
    if not TORCH_2:
        return False
    try:
        dist.TCPStore("127.0.0.1", 0, 1, True,
                      datetime.timedelta(seconds=5), use_libuv=True)
        return True
    except Exception:  # "PyTorch was build without libuv support"
        return False
