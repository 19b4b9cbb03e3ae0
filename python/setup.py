"""Build the fccl extension against an installed libfccl, found with
pkg-config (set PKG_CONFIG_PATH for a libfccl installed under another
prefix).  The extension records libfccl's directory as its run path.
fccl.torch's C++ part (fccl/torch/_work.cpp) is built too when torch and
its headers are installed (Debian: python3-torch, libtorch-dev,
pybind11-dev), as the Makefile does; without them fccl.torch is installed
but cannot be imported.

    /usr/bin/python3 -m pip install --no-build-isolation --target DIR ./python
"""
import glob
import os
import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args):
    try:
        out = subprocess.check_output(["pkg-config", *args, "fccl"], text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("fccl: pkg-config cannot find libfccl (install it "
                         "with `make install`, or set PKG_CONFIG_PATH): "
                         f"{e}")
    return shlex.split(out)


cflags = pkg_config("--cflags")
libdir = pkg_config("--variable=libdir")[0]
ext = Extension(
    "fccl._fccl",
    sources=sorted(glob.glob(os.path.join("fccl", "_fccl", "*.c"))),
    include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-fno-strict-aliasing"]
    + [f for f in cflags if not f.startswith("-I")],
    library_dirs=[libdir],
    libraries=["fccl"],
    runtime_library_dirs=[libdir],
    depends=glob.glob(os.path.join("fccl", "_fccl", "*.h")),
)


def torch_ext():
    """fccl.torch._work against the installed torch, or None."""
    try:
        from torch.utils import cpp_extension
    except ImportError:
        return None
    incs = [d for d in cpp_extension.include_paths()
            + ["/usr/include/torch/csrc/api/include"] if os.path.isdir(d)]
    if not any(os.path.isfile(os.path.join(d, "torch", "csrc",
                                           "distributed", "c10d",
                                           "Work.hpp")) for d in incs):
        return None
    libs = [d for d in cpp_extension.library_paths() if os.path.isdir(d)]
    return Extension(
        "fccl.torch._work", sources=[os.path.join("fccl", "torch",
                                                  "_work.cpp")],
        include_dirs=incs, library_dirs=libs, runtime_library_dirs=libs,
        libraries=["torch", "torch_cpu", "c10", "torch_python"],
        extra_compile_args=["-std=c++17"], language="c++",
        depends=[os.path.join("fccl", "_fccl", "torchq_abi.h")])


exts = [ext] + [e for e in [torch_ext()] if e is not None]
setup(ext_modules=exts)
