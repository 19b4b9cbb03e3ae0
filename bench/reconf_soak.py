"""Kills during a torch reconfiguration (issue 37 item 6), the randomized
loop of bench/ft_soak.sh for fccl.torch.ReconfigurableProcessGroup.

    PYTHONPATH=build/python /usr/bin/python3 bench/reconf_soak.py
        [--rounds R] [--build build] [--provider shm]

Each round: 4 workers (tests/py/torch_reconf_rank.py) configured and
checked on a fresh prefix; then all 4 start configure() on the next
prefix and a random one is SIGKILLed at a random moment in it (0-60 ms
after the calls went out).  Every survivor must answer within the
worker's timeout (10 s), either configured or with an error: a hang
fails the round.  The 3 survivors then configure on a third prefix and
check every collective (results against references computed in each
worker), and a newcomer joins them in a 4-rank configuration, checked
too.  /dev/shm must hold no file of a worker when the round ends.
Prints one line per round and a summary; exits 1 if any round failed.
"""
import argparse
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
from reconf_driver import Driver  # noqa: E402
from reconf import start_store  # noqa: E402  (bench/reconf.py)

WORKER_TIMEOUT_S = 10


def killed_configure(ps, addr, rng):
    """configure all of ps on addr, SIGKILL one at a random moment;
    returns (victim index, survivors' answers)."""
    victim = rng.randrange(len(ps))
    for i, p in enumerate(ps):
        p.send("configure", addr, i, len(ps))
    time.sleep(rng.uniform(0, 0.06))
    ps[victim].kill()
    ps[victim].p.wait()
    answers = {}
    for i, p in enumerate(ps):
        if i != victim:
            # the worker's own timeout bounds configure(); twice that
            # and it hung
            answers[i] = p.answer(timeout=2 * WORKER_TIMEOUT_S + 5)
    return victim, answers


def shm_files(pids):
    # a worker's shm endpoints are named after its pid (reconf_driver)
    return [f for f in os.listdir("/dev/shm")
            if any(f.startswith(f"{pid}:") or f"-{pid}-" in f
                   for pid in pids)]


def one_round(store, env, rng, r):
    drv = Driver(env, timeout_s=WORKER_TIMEOUT_S)
    try:
        ps = drv.start(4)
        drv.configure(ps, f"{store}/r{r}a")
        drv.all(ps, lambda i, p: ["check", r])
        victim, answers = killed_configure(ps, f"{store}/r{r}b", rng)
        ok = sum(1 for a in answers.values() if a.get("ok"))
        surv = [p for i, p in enumerate(ps) if i != victim]
        t = drv.configure(surv, f"{store}/r{r}c")
        drv.all(surv, lambda i, p: ["check", 100 + r])
        four = surv + drv.start(1)
        drv.configure(four, f"{store}/r{r}d")
        drv.all(four, lambda i, p: ["check", 200 + r])
        return (f"victim {victim}, {ok} of 3 configured before the kill "
                f"was seen, survivors reconfigured in {t * 1e3:.1f} ms, "
                "grown to 4")
    finally:
        pids = [p.pid for p in drv.procs]
        drv.close()
        left = shm_files(pids)
        if left:
            raise AssertionError(f"left in /dev/shm: {left}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--build", default="build")
    ap.add_argument("--provider", default="shm")
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    env = {"FCCL_PROVIDER": a.provider, "LOCAL_WORLD_SIZE": "4"}
    server, store = start_store("tcpstore-server", a.build)
    bad = 0
    try:
        for r in range(a.rounds):
            try:
                print(f"round {r}: ok: {one_round(store, env, rng, r)}",
                      flush=True)
            except AssertionError as e:
                bad += 1
                print(f"round {r}: FAILED: {e}", flush=True)
    finally:
        server.kill()
        server.wait()
    print(f"reconf soak: {a.rounds - bad} of {a.rounds} rounds passed "
          f"(provider {a.provider}, seed {seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
