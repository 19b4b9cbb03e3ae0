"""The package outside the tree: `make install` into a scratch prefix, and
`pip install --no-build-isolation --target DIR ./python` (Debian's
setuptools, no index) against that installed libfccl; each result runs a
1-rank job under fccl-run."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BIN

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
JOB = ("import fccl, numpy as np; fccl.init_process_group(); "
       "x = np.ones(3, np.float32); fccl.all_reduce(x); "
       "assert (x == 1).all(); print('from', fccl.__file__); "
       "fccl.destroy_process_group()")


def run_job(pythonpath):
    env = dict(os.environ, PYTHONPATH=pythonpath)
    out = subprocess.run([os.path.join(BIN, "fccl-run"), "-n", "1",
                          sys.executable, "-c", JOB], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    pfx = tmp_path_factory.mktemp("prefix")
    build = os.path.relpath(os.path.dirname(BIN.rstrip("/")), ROOT)
    subprocess.run(["make", "-s", "-C", ROOT, f"BUILD={build}", "install",
                    f"PREFIX={pfx}"], check=True, capture_output=True,
                   timeout=600)
    yield pfx
    shutil.rmtree(pfx)


@pytest.mark.slow  # about 13 s (a whole `make install`)
def test_make_install(prefix):
    site = os.path.join(prefix, "lib", f"python{sys.version_info[0]}."
                        f"{sys.version_info[1]}", "dist-packages")
    assert os.path.isfile(os.path.join(site, "fccl", "__init__.py"))
    assert f"from {site}/fccl/__init__.py" in run_job(site)


@pytest.mark.slow  # about 15 s: `make test` runs it, `make check` not
def test_pip_install_target(prefix, tmp_path):
    src, site = tmp_path / "src", tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                  "__pycache__"))
    env = dict(os.environ,
               PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    out = subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                          "--no-build-isolation", "--no-index",
                          "--target", str(site), str(src)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"from {site}/fccl/__init__.py" in run_job(str(site))
    assert os.path.isfile(site / "fccl" / "__init__.pyi")
    assert os.path.isfile(site / "fccl" / "torch" / "__init__.pyi")
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    # fccl.torch with its C++ Work, built against this torch
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([os.path.join(BIN, "fccl-run"), "-n", "2",
                          sys.executable, os.path.join(
                              ROOT, "tests", "py", "torch_plain_job.py"),
                          "fccl"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[1] ok fccl 1 2" in out.stdout, out.stdout
