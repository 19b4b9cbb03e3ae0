"""A rank killed mid-job: the others raise fccl.PeerError naming its world
rank, on each provider.  The job is launched here, not by fccl-run (which
would stop the survivors as soon as one rank dies)."""
import os
import sys

import pytest

from conftest import killed_rank_job

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("provider", ["shm", "tcp;ofi_rxm"])
def test_killed_rank_raises_peer_error(provider):
    n = 3
    outs = killed_rank_job(
        n, [sys.executable, os.path.join(HERE, "fault_rank.py")],
        FCCL_PROVIDER=provider, FCCL_TIMEOUT="60", FCCL_PEER_TIMEOUT="5",
        FCCL_JOB_ID=f"pyfault{os.getpid()}")
    for r in range(n - 1):
        assert outs[r].startswith(f"peer-error {n - 1} "), (r, outs[r])
