"""fccl.torch jobs launched here rather than by one pytest session per
rank: bootstraps over PyTorch's own TCPStore server, over tcpstore-server
and over a FileStore; a killed rank raising RuntimeError naming it on
every survivor (each provider); fccl-run as a torchrun (its variables,
and an unchanged torch program, Gloo or fccl, with nothing set by hand:
on torch 2.6 without libuv too); torch's own TCPStore client against
tcpstore-server and fccl-run's hosted store."""
import os
import subprocess
import sys
import tempfile

import pytest

from conftest import BIN, killed_rank_job

pytest.importorskip("torch")
from tstore import has_libuv, TORCH_2  # noqa: E402
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


@pytest.mark.skipif(TORCH_2 and not has_libuv(), reason="torch 2.x's "
                    "agent-store client is a libuv one; this torch has none")
def test_tcp_init_method_on_tcpstore_server(server):
    # tcp:// makes rank 0 the store's server unless the agent store is
    # used, as under torchrun (and fccl-run on several nodes)
    run_job(2, ["store", f"tcp://{server.host}:{server.port}"],
            {"TORCHELASTIC_USE_AGENT_STORE": "True",
             "TORCHELASTIC_RESTART_COUNT": "0"})


def test_env_with_torchrun_variables_by_hand():
    # env:// as torchrun's variables give it: rank 0 serves torch's TCPStore
    s = __import__("socket").socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    # (torch 2.x without libuv needs USE_LIBUV=0 there, as under torchrun)
    run_job(2, ["store", "env://"], {"MASTER_ADDR": "127.0.0.1",
                                     "MASTER_PORT": str(port),
                                     "USE_LIBUV": "0"})


def test_job_on_file_store():
    with tempfile.TemporaryDirectory() as d:
        run_job(2, ["store", f"file://{d}/store"])


@pytest.mark.parametrize("provider,wait", [
    ("shm", "coll"), ("tcp;ofi_rxm", "coll"), ("shm", "recv"),
    pytest.param("shm", "funcol", marks=pytest.mark.skipif(
        not TORCH_2, reason="torch 2.x")),
    pytest.param("shm", "mesh", marks=pytest.mark.skipif(
        not TORCH_2, reason="torch 2.x"))])
def test_killed_rank_raises_on_survivors(provider, wait):
    n = 3
    outs = killed_rank_job(
        n, [sys.executable, RANK, "kill", wait], FCCL_PROVIDER=provider,
        FCCL_PEER_TIMEOUT="5", FCCL_JOB_ID=f"ptfault{os.getpid()}")
    for r in range(n - 1):
        words = outs[r].split()
        assert words and words[0] == "raised", (r, outs[r])
        assert float(words[1]) < 30, outs[r]  # FCCL_PEER_TIMEOUT, not 60 s
        assert f"rank {n - 1}" in outs[r], outs[r]
        assert ("recv from rank" if wait == "recv" else "all_reduce") in \
            outs[r], outs[r]


def clean_env():
    """The environment without anything a launcher or a user might have
    set for torch, so fccl-run's variables are the only ones."""
    env = dict(os.environ)
    for k in ("TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID",
              "USE_LIBUV", "MASTER_ADDR", "MASTER_PORT", "TCPSTORE_ADDR",
              "FCCL_STORE_ADDRS", "RANK", "WORLD_SIZE"):
        env.pop(k, None)
    return env


@pytest.mark.parametrize("backend", ["gloo", "fccl"])
def test_fccl_run_is_a_torchrun(backend):
    """Under fccl-run, torch's env:// works with any backend and any torch
    (1.13; 2.6 without libuv): rank 0 serves torch's store at MASTER_PORT
    (USE_LIBUV=0 for a torch without libuv), fccl's clients keep
    fccl-run's (TCPSTORE_ADDR, FCCL_STORE_ADDRS)."""
    p = subprocess.run([os.path.join(BIN, "fccl-run"), "-n", "2",
                        "--job-id", "tjob", sys.executable, RANK, "env",
                        backend], env=clean_env(), capture_output=True,
                       text=True, timeout=120)
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
        assert kv["TORCHELASTIC_USE_AGENT_STORE"] == ""
        assert kv["USE_LIBUV"] == "0"
        assert kv["FCCL_STORE_ADDRS"] == kv["TCPSTORE_ADDR"]
        assert kv["MASTER_ADDR"] == "127.0.0.1"
        assert kv["TCPSTORE_ADDR"] != f"127.0.0.1:{kv['MASTER_PORT']}"


@pytest.mark.parametrize("backend", ["gloo", "fccl"])
def test_unchanged_program_under_fccl_run(backend):
    """A plain torch program (init_process_group(backend) and nothing
    else) under fccl-run with nothing set by hand, 3 ranks."""
    p = subprocess.run([os.path.join(BIN, "fccl-run"), "-n", "3",
                        sys.executable, os.path.join(HERE,
                                                     "torch_plain_job.py"),
                        backend], env=clean_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr[-3000:])
    for r in range(3):
        assert f"[{r}] ok {backend} {r} 3" in p.stdout, p.stdout


def test_torch_client_on_tcpstore_server(server):
    """torch's own TCPStore client (this torch's, the classic one on a
    torch without libuv) passes pt_client.py's checks of every client
    operation against tcpstore-server."""
    addr = f"{server.host}:{server.port}"
    p = subprocess.run(f"printf 'C\\0side' | {BIN}/tcpstore --addr {addr} "
                       f"set from_c - && {sys.executable} {HERE}/pt_client.py "
                       f"{addr} ops", shell=True, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "OK" in p.stdout, (p.stdout, p.stderr)


def test_torch_client_on_fccl_run_store():
    """The same against the store fccl-run hosts, reached through
    TCPSTORE_ADDR as its ranks reach it."""
    p = subprocess.run([os.path.join(BIN, "fccl-run"), "-n", "1", "sh",
                        "-c", f"printf 'C\\0side' | {BIN}/tcpstore set "
                        f"from_c - && {sys.executable} {HERE}/pt_client.py "
                        '"$TCPSTORE_ADDR" ops'],
                       env=clean_env(), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, (p.stdout, p.stderr[-3000:])
    assert "[0] OK" in p.stdout, p.stdout
