"""A rank killed mid-job: the others raise fccl.PeerError naming its world
rank, on each provider.  The job is launched here, not by fccl-run (which
would stop the survivors as soon as one rank dies)."""
import os
import subprocess
import sys

import pytest

from conftest import end_job, survivors_report, tcpstore_server

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("provider", ["shm", "tcp;ofi_rxm"])
def test_killed_rank_raises_peer_error(provider):
    n = 3
    srv = tcpstore_server()
    procs = []
    try:
        for r in range(n):
            env = dict(os.environ, MASTER_ADDR=srv.host,
                       MASTER_PORT=str(srv.port), RANK=str(r),
                       WORLD_SIZE=str(n), FCCL_PROVIDER=provider,
                       FCCL_TIMEOUT="60", FCCL_PEER_TIMEOUT="5",
                       FCCL_JOB_ID=f"pyfault{os.getpid()}")
            procs.append(subprocess.Popen(
                [sys.executable, os.path.join(HERE, "fault_rank.py")],
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True))
        outs = survivors_report(procs)
    finally:
        end_job(procs, srv)
    assert procs[-1].returncode == -9
    for r in range(n - 1):
        assert outs[r].startswith(f"peer-error {n - 1} "), (r, outs[r])
