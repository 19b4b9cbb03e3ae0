"""gloo_init_barrier: PyTorch's side of the job start-up benchmark.

Every rank calls init_process_group(backend="gloo") through env://, runs one
barrier and destroys the group; the launcher's wall time (bench/bootstrap.sh)
is the number that counts.  Two ways to launch it:

  torchrun (what bootstrap.sh times):
    /usr/bin/python3 -m torch.distributed.run --standalone \
        --redirects 2 --tee 2 --nproc_per_node N bench/gloo_init_barrier.py [-v]
    (--redirects/--tee must be non-zero: torch 1.13's Std.from_str("0")
    returns None on Python 3.11, which crashes torchrun's defaults)

  self-spawned, without torchrun's agent (a lower bound for Gloo):
    /usr/bin/python3 bench/gloo_init_barrier.py --spawn N [-v]
    starts N copies of itself with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE
    set; rank 0 hosts the TCPStore, as torch's env:// does.

With -v, rank 0 prints: time from the latest rank's arrival (just before
init_process_group) to the latest rank's init done, rank 0's init and
barrier times, and the slowest rank's process start -> torch imported.
"""
import os
import subprocess
import sys
import time

from gloo_launch import free_port, wait_all

T_ENTER = time.time()


def process_start_epoch():
    """Process start time (10 ms ticks): /proc/self/stat field 22 + btime."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[19])
    with open("/proc/stat") as f:
        btime = next(int(l.split()[1]) for l in f if l.startswith("btime"))
    return btime + ticks / os.sysconf("SC_CLK_TCK")


T_START = process_start_epoch()
import torch  # noqa: E402  (timed on purpose)
import torch.distributed as dist  # noqa: E402

T_IMPORTED = time.time()


def spawn(n, verbose):
    """Launcher mode: N ranks with torchrun's variables, first failure wins."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n))
    args = [sys.executable, os.path.abspath(__file__)] + (["-v"] if verbose else [])
    procs = []
    for r in range(n):
        env_r = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen(args, env=env_r))
    return wait_all(procs, "300")


def report(t_arrive, t_init, t_bar):
    """After the barrier (not timed): gather arrival/done times to rank 0."""
    mine = torch.tensor([t_arrive, t_init, T_IMPORTED - T_START], dtype=torch.float64)
    parts = [torch.zeros(3, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, mine)
    if dist.get_rank() != 0:
        return
    allt = torch.stack(parts)
    last_arrive = allt[:, 0].max().item()
    last_done = allt[:, 1].max().item()
    print("gloo rank0: last arrival -> last init done %.3f s; rank0 init %.3f s, "
          "barrier %.3f s; slowest start -> torch imported %.3f s"
          % (last_done - last_arrive, t_init - t_arrive, t_bar - t_init,
             allt[:, 2].max().item()), flush=True)


def worker(verbose):
    t_arrive = time.time()
    dist.init_process_group(backend="gloo", init_method="env://")
    t_init = time.time()
    dist.barrier()
    t_bar = time.time()
    if verbose:
        report(t_arrive, t_init, t_bar)
    dist.destroy_process_group()
    return 0


def main():
    argv = sys.argv[1:]
    verbose = "-v" in argv
    if "--spawn" in argv:
        return spawn(int(argv[argv.index("--spawn") + 1]), verbose)
    return worker(verbose)


if __name__ == "__main__":
    sys.exit(main())
