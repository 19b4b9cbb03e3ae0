"""Fixtures of the single-process suites: a tcpstore-server child on a free
port, PyTorch's own TCPStore server, and the stand-in that puts a
tcpstore-server child behind TCPStore(is_master=True) when libfccl has no
embeddable server (fccl/server.h) yet."""
import glob
import os
import re
import signal
import subprocess
import sys

import pytest

BIN = os.environ.get("FCCL_BIN", os.path.join(os.path.dirname(__file__),
                                              "..", "..", "build", "bin"))
HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_configure(config):
    # Cases over about 10 s: `make test` runs them, the quick tier (`make
    # check`, tests/py/run.sh with FCCL_TEST_QUICK=1) leaves them out.
    config.addinivalue_line("markers", "slow: over 10 s; not in make check")


class Child:
    """A server child that prints "listening on HOST:PORT" when ready."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (\S+):(\d+)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"{argv[0]} did not start: {line!r}")
        self.host, self.port = m.group(1), int(m.group(2))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


def tcpstore_server(*args):
    return Child([os.path.join(BIN, "tcpstore-server"), "--host",
                  "127.0.0.1", "--port", "0", *args])


@pytest.fixture
def server():
    s = tcpstore_server()
    yield s
    s.stop()


@pytest.fixture
def pt_server():
    s = Child([sys.executable, os.path.join(HERE, "pt_server.py")])
    yield s
    s.stop()


class ChildServer:
    """What fccl._server.start returns, backed by a tcpstore-server child."""

    def __init__(self, host, port, timeout_ms):
        self._c = Child([os.path.join(BIN, "tcpstore-server"), "--host",
                         host or "127.0.0.1", "--port", str(port)])
        self.port = self._c.port

    def stop(self):
        self._c.stop()


@pytest.fixture(params=["embedded", "child"])
def master_impl(request, monkeypatch):
    """Run is_master=True on the library's server when it has one, and on
    a tcpstore-server child in any case."""
    import fccl._server
    if request.param == "embedded":
        if not fccl._server.available():
            pytest.skip("libfccl has no embeddable server (fccl/server.h)")
    else:
        monkeypatch.setattr(fccl._server, "start", ChildServer)
    return request.param


def survivors_report(procs):
    """A job whose last rank was killed: each survivor's line, then their
    stdin closed so they leave together (no survivor's exit is seen by
    another as a second failure)."""
    outs = [p.stdout.readline() for p in procs[:-1]]
    for p in procs:
        p.stdin.close()
        p.wait(60)
    return outs


def killed_rank_job(n, argv, **env):
    """n ranks of argv (rank n - 1 is the one the program kills) over a
    tcpstore-server of their own, env added to each rank's: the survivors'
    lines, once the killed rank was seen to die of SIGKILL."""
    srv = tcpstore_server()
    procs = []
    try:
        for r in range(n):
            renv = dict(os.environ, MASTER_ADDR=srv.host,
                        MASTER_PORT=str(srv.port), RANK=str(r),
                        WORLD_SIZE=str(n), **env)
            procs.append(subprocess.Popen(
                argv, env=renv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True))
        outs = survivors_report(procs)
    finally:
        end_job(procs, srv)
    assert procs[-1].returncode == -9
    return outs


def end_job(procs, srv):
    """Kill what still runs of the ranks, stop the store, and remove what
    the ranks' shm endpoints left in /dev/shm: the killed rank's, and the
    survivors', which leave with os._exit (no finalize)."""
    for p in procs:
        p.stdout.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    srv.stop()
    for p in procs:
        for f in glob.glob(f"/dev/shm/{p.pid}:*"):
            os.unlink(f)
