"""fccl.torch jobs launched here rather than by one pytest session per
rank: bootstraps over PyTorch's own TCPStore server, over tcpstore-server
and over a FileStore; a killed rank raising RuntimeError naming it on
every survivor (each provider); and fccl-run as a torchrun (its
variables, and a Gloo job on its store, which failed before with
"Address already in use")."""
import os
import subprocess
import sys
import tempfile

import pytest

from conftest import BIN, end_job, survivors_report, tcpstore_server

pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
RANK = os.path.join(HERE, "torch_job_rank.py")


def run_job(n, args, env_extra=None, timeout=120):
    procs = []
    try:
        for r in range(n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n),
                       FCCL_JOB_ID=f"ptjob{os.getpid()}", **(env_extra or {}))
            procs.append(subprocess.Popen([sys.executable, RANK] + args,
                                          env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, (r, out, err[-3000:])
        assert f"ok {r}" in out, (r, out)


def test_job_on_pytorch_tcpstore_server(pt_server):
    run_job(3, ["store", f"client:{pt_server.host}:{pt_server.port}"])


def test_job_on_tcpstore_server(server):
    run_job(3, ["store", f"client:{server.host}:{server.port}"])


def test_tcp_init_method_on_tcpstore_server(server):
    # tcp:// makes rank 0 the store's server unless the agent store is
    # used, as under torchrun and fccl-run
    run_job(2, ["store", f"tcp://{server.host}:{server.port}"],
            {"TORCHELASTIC_USE_AGENT_STORE": "True",
             "TORCHELASTIC_RESTART_COUNT": "0"})


def test_env_with_torchrun_variables_by_hand():
    # env:// as torchrun's variables give it: rank 0 serves torch's TCPStore
    s = __import__("socket").socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    run_job(2, ["store", "env://"], {"MASTER_ADDR": "127.0.0.1",
                                     "MASTER_PORT": str(port)})


def test_job_on_file_store():
    with tempfile.TemporaryDirectory() as d:
        run_job(2, ["store", f"file://{d}/store"])


@pytest.mark.parametrize("provider,wait", [("shm", "coll"),
                                           ("tcp;ofi_rxm", "coll"),
                                           ("shm", "recv")])
def test_killed_rank_raises_on_survivors(provider, wait):
    n = 3
    srv = tcpstore_server()
    procs = []
    try:
        for r in range(n):
            env = dict(os.environ, MASTER_ADDR=srv.host,
                       MASTER_PORT=str(srv.port), RANK=str(r),
                       WORLD_SIZE=str(n), FCCL_PROVIDER=provider,
                       FCCL_PEER_TIMEOUT="5", TORCHELASTIC_USE_AGENT_STORE=
                       "True", TORCHELASTIC_RESTART_COUNT="0",
                       FCCL_JOB_ID=f"ptfault{os.getpid()}")
            procs.append(subprocess.Popen(
                [sys.executable, RANK, "kill", wait], env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True))
        outs = survivors_report(procs)
    finally:
        end_job(procs, srv)
    assert procs[-1].returncode == -9
    for r in range(n - 1):
        words = outs[r].split()
        assert words and words[0] == "raised", (r, outs[r])
        assert float(words[1]) < 30, outs[r]  # FCCL_PEER_TIMEOUT, not 60 s
        assert f"rank {n - 1}" in outs[r], outs[r]
        assert ("all_reduce" if wait == "coll" else "recv from rank") in \
            outs[r], outs[r]


@pytest.mark.parametrize("backend", ["gloo", "fccl"])
def test_fccl_run_is_a_torchrun(backend):
    """Under fccl-run, torch's env:// works with any backend: the ranks
    connect to fccl-run's store (TORCHELASTIC_USE_AGENT_STORE) instead of
    rank 0 binding MASTER_PORT."""
    env = dict(os.environ)
    for k in ("TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    p = subprocess.run([os.path.join(BIN, "fccl-run"), "-n", "2",
                        "--job-id", "tjob", sys.executable, RANK, "env",
                        backend], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr[-3000:])
    for r in range(2):
        assert f"[{r}] ok {r}" in p.stdout, p.stdout
        line = next(x for x in p.stdout.splitlines()
                    if x.startswith(f"[{r}] env "))
        kv = dict(w.split("=", 1) for w in line.split()[2:])
        assert kv["RANK"] == kv["ROLE_RANK"] == kv["LOCAL_RANK"] == str(r)
        assert kv["WORLD_SIZE"] == kv["ROLE_WORLD_SIZE"] == "2"
        assert kv["LOCAL_WORLD_SIZE"] == "2" and kv["GROUP_RANK"] == "0"
        assert kv["GROUP_WORLD_SIZE"] == "1" and kv["ROLE_NAME"] == "default"
        assert kv["TORCHELASTIC_RUN_ID"] == "tjob"
        assert kv["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert kv["TORCHELASTIC_MAX_RESTARTS"] == "0"
        assert kv["TORCHELASTIC_USE_AGENT_STORE"] == "True"
