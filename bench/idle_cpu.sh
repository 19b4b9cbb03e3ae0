#!/usr/bin/env bash
# CPU of idle PyTorch clients of our store over a long idle time (issue
# 33): tests/py/test_torch_idle_cpu.py with its idle time raised (default
# 600 s): a bare torch TCPStore client with and without a world size
# against tcpstore-server's defaults, and a 2-rank torch job under
# fccl-run (its hosted store) with backends gloo and fccl, all at once.
# Each process prints its CPU seconds over the idle time.
#   bench/idle_cpu.sh [BUILD [SECONDS]]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SEC=${2:-600}
cd tests/py
PYTHONPATH="$OLDPWD/$BUILD/python" FCCL_BIN="$OLDPWD/$BUILD/bin" \
    FCCL_IDLE_CPU_S="$SEC" PYTHONDONTWRITEBYTECODE=1 \
    timeout $((SEC + 300)) /usr/bin/python3 -m pytest -q -s \
    -p no:cacheprovider test_torch_idle_cpu.py
