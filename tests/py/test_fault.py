"""A rank killed mid-job: the others raise fccl.PeerError naming its world
rank, on each provider.  The job is launched here, not by fccl-run (which
would stop the survivors as soon as one rank dies)."""
import glob
import os
import subprocess
import sys

import pytest

from conftest import tcpstore_server

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
        # each survivor reports, then waits for its stdin to close, so no
        # survivor's exit is seen by another as a second failure
        outs = [p.stdout.readline() for p in procs[:-1]]
        for p in procs:
            p.stdin.close()
            p.wait(60)
    finally:
        for p in procs:
            p.stdout.close()
            if p.poll() is None:
                p.kill()
                p.wait()
        srv.stop()
        # what the ranks' shm endpoints left behind: the killed rank's,
        # and the survivors', which leave with os._exit (no finalize)
        for p in procs:
            for f in glob.glob(f"/dev/shm/{p.pid}:*"):
                os.unlink(f)
    assert procs[-1].returncode == -9
    for r in range(n - 1):
        assert outs[r].startswith(f"peer-error {n - 1} "), (r, outs[r])
