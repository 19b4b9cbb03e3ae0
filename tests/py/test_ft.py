"""Revoke, failed ranks and shrink through the fccl package: 4-rank jobs
under fccl-run --no-kill (tests/py/ft_rank.py) on each provider.  Member
sets and sums are computed here and by each rank alone."""
import glob
import os
import subprocess
import sys

import pytest

from conftest import BIN

HERE = os.path.dirname(os.path.abspath(__file__))
N = 4


def job(provider, *args, peer_timeout="3"):
    env = dict(os.environ, FCCL_PROVIDER=provider, FCCL_TIMEOUT="30",
               FCCL_PEER_TIMEOUT=peer_timeout)
    p = subprocess.run([os.path.join(BIN, "fccl-run"), "--no-kill", "-n",
                        str(N), sys.executable,
                        os.path.join(HERE, "ft_rank.py"), *args],
                       env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def line(out, r, what):
    for ln in out.splitlines():
        if ln.startswith(f"[{r}] R{r} {what}"):
            return ln
    return ""


def expect_shrunk(out, gone):
    left = [r for r in range(N) if r not in gone]
    for r in left:
        ln = line(out, r, "SHRUNK")
        assert f"members {left} failed {sorted(gone)} ok" in ln, out


@pytest.mark.parametrize("provider", ["shm", "tcp;ofi_rxm"])
def test_kill_then_shrink(provider):
    rc, out = job(provider, "kill", "2")
    assert rc == 137, out
    for r in (0, 1, 3):
        assert line(out, r, "PEER 2"), out
    expect_shrunk(out, [2])
    for r in range(N):  # nothing of any rank, the killed one's included
        pid = line(out, r, "pid").split()[-1]
        assert not glob.glob(f"/dev/shm/{pid}:*"), (r, pid)


@pytest.mark.parametrize("provider", ["shm", "tcp;ofi_rxm"])
def test_revoke_releases_every_member(provider):
    rc, out = job(provider, "revoke", peer_timeout="0")
    assert rc == 0, out
    for r in range(N):
        ln = line(out, r, "REVOKED")
        assert "revoked by" in ln and ("world 0" in ln or r == 0), out
    expect_shrunk(out, [])


def test_exclude_a_live_rank():
    rc, out = job("shm", "exclude", "3")
    assert rc == 0, out
    expect_shrunk(out, [3])
