#!/usr/bin/env bash
# Install what fccl needs, from Debian's packages.  Does nothing when
# everything asked for is already present.
#
#   scripts/install-deps.sh           what building and testing need (CI)
#   scripts/install-deps.sh --build   what building needs, only (a plain
#                                     `make`, `make demo`, `make install`)
#
# `make check` and `make test` run it without --build, so the test tools
# (etcd, torch, chromium, ...) come with the first test run, not with the
# first build.  FCCL_BENCH_DEPS, FCCL_FUZZ_DEPS and FCCL_PLOT_DEPS add the
# benchmarks', fuzzing's and the plots' packages.
set -euo pipefail

build_only=0
case "${1:-}" in
--build) build_only=1 ;;
"") ;;
*) echo "usage: $0 [--build]" >&2; exit 2 ;;
esac

# The library, the programs and the Python extension (python3-dev).
BUILD_PKGS="gcc make pkg-config libevent-dev libssl-dev libfabric-dev libcurl4-openssl-dev libjson-c-dev python3-dev"
# Criterion: the C suites; libtorch-dev, pybind11-dev and g++: fccl.torch's
# C++ Work (python/fccl/torch/_work.cpp, built when they are there);
# libfabric-bin: fi_info for the transport tests; curl and chromium: the
# status port's tests; systemd: systemd-analyze verify; python3-pip and
# python3-setuptools: `pip install ./python` (test_install.py)
TEST_PKGS=""
if [ $build_only = 0 ]; then
    TEST_PKGS="libcriterion-dev libfabric-bin etcd-server etcd-client python3-torch libtorch-dev pybind11-dev g++ python3-numpy python3-pytest python3-pip python3-setuptools valgrind procps iproute2 man-db groff-base curl chromium systemd"
fi
# the benchmarks' peers and tools: MPIs (coll.sh, cells.sh, init_mpi.sh), mpi4py
# (py_compare.sh), redis (tcpstore.sh), sockperf and iperf3 (net.sh), hyperfine, bc
BENCH_PKGS="${FCCL_BENCH_DEPS:+openmpi-bin libopenmpi-dev mpich libmpich-dev python3-mpi4py redis-server redis-tools sockperf iperf3 hyperfine bc}"
# clang and its libFuzzer runtime, only for `make fuzz` (FCCL_FUZZ_DEPS=1)
FUZZ_PKGS="${FCCL_FUZZ_DEPS:+clang libclang-rt-dev}"
# matplotlib, only for `make plots` (FCCL_PLOT_DEPS=1)
PLOT_PKGS="${FCCL_PLOT_DEPS:+python3-matplotlib}"

missing=()
for p in $BUILD_PKGS $TEST_PKGS $BENCH_PKGS $FUZZ_PKGS $PLOT_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
