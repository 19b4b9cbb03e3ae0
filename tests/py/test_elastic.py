"""examples/elastic_train.py (torch): 4 ranks under fccl-run --respawn 1,
rank 1 SIGKILLed at a random step, the survivors shrink, go on, and grow
its respawned process back in; every rank's final parameters must be
bitwise equal to a fault-free run's (the example prints their bits)."""
import os
import random
import subprocess
import sys

import pytest

from conftest import BIN

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "elastic_train.py")
N, STEPS = 4, 24


def finals(kill_step, respawn):
    env = dict(os.environ, FCCL_PROVIDER="shm", FCCL_TIMEOUT="60",
               FCCL_PEER_TIMEOUT="3")
    argv = [os.path.join(BIN, "fccl-run")] + \
        (["--respawn", "1"] if respawn else []) + \
        ["-n", str(N), sys.executable, EXAMPLE, str(STEPS), str(kill_step)]
    p = subprocess.run(argv, env=env, capture_output=True, text=True,
                       timeout=240)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    got = {}
    for ln in p.stdout.splitlines():
        if " FINAL " in ln:
            rank = int(ln.split("] R")[1].split()[0])
            got[rank] = ln.split(" FINAL ")[1]
    assert sorted(got) == list(range(N)), out
    return got, out


def test_killed_rank_taken_back_in_bitwise_equal():
    ref, _ = finals(-1, respawn=False)
    assert len(set(ref.values())) == 1, ref
    kill = random.randrange(1, STEPS - 4)
    got, out = finals(kill, respawn=True)
    assert f"step {kill}: rank 1 lost" in out, out
    assert f"step {kill + 3}: grown to [0, 2, 3, 1]" in out, out
    for r in range(N):
        assert got[r] == ref[0], (f"kill at step {kill}: rank {r}'s final "
                                  f"parameters differ\n{out}")
