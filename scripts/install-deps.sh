#!/usr/bin/env bash
# Install what fccl needs to build, test and benchmark, from Debian's
# packages.  Does nothing when everything is already present.
set -euo pipefail

BUILD_PKGS="gcc make pkg-config libevent-dev libssl-dev libfabric-dev libfabric-bin libcriterion-dev libcurl4-openssl-dev libjson-c-dev"
# libtorch-dev and pybind11-dev: fccl.torch's C++ Work (python/fccl/torch/_work.cpp);
# curl and chromium: the status port's tests; systemd: systemd-analyze verify
TEST_PKGS="etcd-server etcd-client python3-torch libtorch-dev pybind11-dev g++ python3-dev python3-numpy python3-pytest valgrind procps iproute2 man-db groff-base curl chromium systemd"
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
