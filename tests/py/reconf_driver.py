"""Drives torch_reconf_rank.py processes: start them, send each a command,
read the answers (test_torch_reconf.py, bench/reconf.py).  Every process
it started is killed and reaped by close(), and the /dev/shm files a
killed rank's shm endpoints left behind are removed."""
import glob
import json
import os
import select
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torch_reconf_rank.py")


class Proc:
    """One worker process."""

    def __init__(self, env, kind="fccl", timeout_s=60):
        self.p = subprocess.Popen(
            [sys.executable, WORKER, kind, str(timeout_s)], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None if os.environ.get("FCCL_TEST_VERBOSE") else
            subprocess.DEVNULL, text=True)
        self.pid = self.p.pid

    def send(self, *cmd):
        self.p.stdin.write(json.dumps(list(cmd)) + "\n")
        self.p.stdin.flush()

    def answer(self, timeout=120):
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        line = self.p.stdout.readline() if ready else ""
        if not line:
            raise AssertionError(f"worker {self.pid} gave no answer "
                                 f"(exit {self.p.poll()})")
        return json.loads(line)

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            os.kill(self.pid, sig)


class Driver:
    """A set of workers; env_extra goes into every worker's environment."""

    def __init__(self, env_extra=None, kind="fccl", timeout_s=60):
        self.env = dict(os.environ, **(env_extra or {}))
        self.kind, self.timeout_s = kind, timeout_s
        self.procs = []

    def start(self, n):
        new = [Proc(self.env, self.kind, self.timeout_s) for _ in range(n)]
        self.procs += new
        for p in new:
            assert p.answer()["ready"]
        return new

    def all(self, procs, cmd_of, timeout=120):
        """Send cmd_of(i, proc) to each (None: skip), then read the answers
        in order; a failed answer raises naming the worker."""
        sent = []
        for i, p in enumerate(procs):
            cmd = cmd_of(i, p)
            if cmd is not None:
                p.send(*cmd)
                sent.append((i, p, cmd))
        out = {}
        for i, p, cmd in sent:
            a = p.answer(timeout)
            if not a.get("ok"):
                raise AssertionError(f"worker {i} (pid {p.pid}) {cmd}: "
                                     f"{a.get('err')}\n{a.get('tb', '')}")
            out[i] = a
        return out

    def configure(self, procs, addr, ranks=None):
        """configure every proc on addr (ranks[i] for procs[i], default i);
        returns the reconfiguration time in seconds: from the first
        configure call to the last return (one host: one monotonic
        clock)."""
        ranks = list(range(len(procs))) if ranks is None else ranks
        n = len(procs)
        res = self.all(procs, lambda i, p: ["configure", addr, ranks[i], n])
        return (max(a["t1"] for a in res.values()) -
                min(a["t0"] for a in res.values()))

    def close(self):
        for p in self.procs:
            try:
                if p.p.poll() is None:
                    p.send("exit")
                    p.p.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 20
        for p in self.procs:
            try:
                p.p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.p.kill()
                p.p.wait()
            p.p.stdout.close()
            if p.p.returncode != 0:  # no finalize: its shm files stay
                for f in glob.glob(f"/dev/shm/{p.pid}:*"):
                    os.unlink(f)
        self.procs = []
