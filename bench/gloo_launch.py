"""Start N copies of a Gloo benchmark script on loopback, as torchrun would.

Used by gloo_coll.py and moe_gloo.py: spawn(n, argv, script) runs `script`
with argv minus its `--spawn N`, in N processes with MASTER_ADDR/PORT,
RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE set, and returns the first
non-zero exit status (124 when BENCH_TIMEOUT, default 900 s, ran out).
gloo_init_barrier.py uses its free_port and wait_all.
"""
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(n, argv, script):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n), OMP_NUM_THREADS="1")
    i = argv.index("--spawn")
    args = [sys.executable, os.path.abspath(script)] + argv[:i] + argv[i + 2:]
    procs = [subprocess.Popen(args, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(n)]
    return wait_all(procs, "900")


def wait_all(procs, default_timeout):
    """The first non-zero exit status of procs (124 when BENCH_TIMEOUT,
    default default_timeout seconds, ran out); the others are killed then."""
    deadline = time.time() + float(os.environ.get("BENCH_TIMEOUT",
                                                  default_timeout))
    rc = 0
    for p in procs:
        try:
            prc = p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            prc = 124
        if prc and not rc:
            rc = prc
            for q in procs:
                q.kill()
    return rc
