"""Grow through the fccl package: a 4-rank job under fccl-run --respawn 1
(tests/py/grow_rank.py) where a SIGKILLed rank is respawned and taken back
in by the survivors' grow_group, on each provider.  Member lists and sums
are computed here and by each rank alone."""
import glob
import os
import subprocess
import sys

import pytest

from conftest import BIN

HERE = os.path.dirname(os.path.abspath(__file__))
N = 4


def line(out, r, what):
    for ln in out.splitlines():
        if ln.startswith(f"[{r}] R{r} {what}"):
            return ln
    return ""


@pytest.mark.parametrize("provider,victim", [("shm", 1), ("tcp;ofi_rxm", 3)])
def test_respawned_rank_rejoins_through_grow(provider, victim):
    env = dict(os.environ, FCCL_PROVIDER=provider, FCCL_TIMEOUT="30",
               FCCL_PEER_TIMEOUT="3")
    p = subprocess.run([os.path.join(BIN, "fccl-run"), "--respawn", "1",
                        "-n", str(N), sys.executable,
                        os.path.join(HERE, "grow_rank.py"), str(victim)],
                       env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    members = [r for r in range(N) if r != victim] + [victim]
    for r in range(N):
        ln = line(out, r, "GROWN")
        rank = members.index(r)
        assert f"rank {rank} members {members} ok" in ln, out
    assert f"[{victim}] R{victim} pid" in out and "rejoining True" in out, out
    for ln in out.splitlines():  # every process, the killed one's too
        if " pid " in ln:
            pid = ln.split(" pid ")[1].split()[0]
            assert not glob.glob(f"/dev/shm/{pid}:*"), (ln, pid)
