"""Reconfiguration time of fccl.torch.ReconfigurableProcessGroup against
torchft's way with Gloo (a new ProcessGroupGloo over a
PrefixStore(TCPStore client) per configuration), in the same run.

    PYTHONPATH=build/python /usr/bin/python3 bench/reconf.py [--rounds R]
        [--store tcpstore-server|pytorch] [--build build]

Each round, for fccl and then for Gloo: 4 ranks are configured on a fresh
prefix and checked (an all_reduce), one is SIGKILLed, the 3 survivors
abort() and configure again on a fresh prefix ("survivors 3", the number
issue 37 bounds by 100 ms), check, then a newcomer process joins them in
a 4-rank configuration ("grow 4 cold": the newcomer's first bootstrap
included, its libfabric start); then the newcomer is killed, the 3
reconfigure (a second "survivors 3" sample), and a new newcomer that first configured a 1-rank world of
its own joins them ("grow 4 warm").  A time is from the first member's
configure() call to the last member's return (one host: one monotonic
clock).  Prints every sample, then min / median / max per kind.
FCCL_PROVIDER and the other fccl variables pass through; LOCAL_WORLD_SIZE
is 4 (one host: no network endpoints), as under fccl-run.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
from reconf_driver import Driver  # noqa: E402


def start_store(kind, build):
    if kind == "pytorch":
        argv = [sys.executable, os.path.join(ROOT, "tests", "py",
                                             "pt_server.py")]
    else:
        argv = [os.path.join(ROOT, build, "bin", "tcpstore-server"),
                "--host", "127.0.0.1", "--port", "0"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"listening on (\S+):(\d+)", p.stdout.readline())
    if not m:
        p.kill()
        raise SystemExit(f"{argv[0]} did not start")
    return p, f"{m.group(1)}:{m.group(2)}"


def one_round(kind, addr, tag, times):
    d = Driver({"LOCAL_WORLD_SIZE": "4"}, kind=kind)
    try:
        ps = d.start(4)
        d.configure(ps, f"{addr}/{tag}/a")
        d.all(ps, lambda i, p: ["allreduce_sum", 10])
        ps[3].kill()
        ps[3].p.wait()
        surv = ps[:3]
        if kind == "fccl":  # torchft aborts a broken group, then configures
            d.all(surv, lambda i, p: ["abort"])
        t3 = d.configure(surv, f"{addr}/{tag}/b")
        d.all(surv, lambda i, p: ["allreduce_sum", 6])
        new = d.start(1)
        t4 = d.configure(surv + new, f"{addr}/{tag}/c")
        d.all(surv + new, lambda i, p: ["allreduce_sum", 10])
        # again with a newcomer that bootstrapped once before (alone)
        new[0].kill()
        new[0].p.wait()
        if kind == "fccl":
            d.all(surv, lambda i, p: ["abort"])
        t3b = d.configure(surv, f"{addr}/{tag}/d")
        new = d.start(1)
        d.configure(new, f"{addr}/{tag}/solo")
        t4w = d.configure(surv + new, f"{addr}/{tag}/e")
        d.all(surv + new, lambda i, p: ["allreduce_sum", 10])
    finally:
        d.close()
    times.setdefault((kind, "survivors 3"), []).extend([t3, t3b])
    times.setdefault((kind, "grow 4 cold"), []).append(t4)
    times.setdefault((kind, "grow 4 warm"), []).append(t4w)
    print(f"{tag} {kind}: survivors 3 {t3 * 1e3:.1f} and {t3b * 1e3:.1f} "
          f"ms, grow 4 cold "
          f"{t4 * 1e3:.1f} ms, warm {t4w * 1e3:.1f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--store", choices=["tcpstore-server", "pytorch"],
                    default="tcpstore-server")
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    srv, addr = start_store(a.store, a.build)
    times = {}
    try:
        for r in range(a.rounds):
            for kind in ("fccl", "gloo"):
                one_round(kind, addr, f"r{r}{kind}", times)
    finally:
        srv.terminate()
        srv.wait()
    print(f"store {a.store}, FCCL_PROVIDER="
          f"{os.environ.get('FCCL_PROVIDER', '(auto)')}, load "
          f"{os.getloadavg()[0]:.1f}")
    for (kind, what), ts in sorted(times.items()):
        ms = sorted(t * 1e3 for t in ts)
        print(f"{kind:5s} {what:12s} min {ms[0]:7.1f}  median "
              f"{statistics.median(ms):7.1f}  max {ms[-1]:7.1f} ms  "
              f"(n={len(ms)})")


if __name__ == "__main__":
    main()
