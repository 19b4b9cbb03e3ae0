"""Build the fccl extension against an installed libfccl, found with
pkg-config (set PKG_CONFIG_PATH for a libfccl installed under another
prefix).  The extension records libfccl's directory as its run path.

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
setup(ext_modules=[ext])
