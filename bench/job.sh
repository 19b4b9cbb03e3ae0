#!/usr/bin/env bash
# What the collectives cost inside a training job (issue 33): bench/job.py
# under fccl-run for backends "fccl" and "gloo", with torch's default
# thread settings, on an otherwise idle machine and again with two busy
# loops at normal priority (other work keeping every core busy):
#   DDP steps of a communication-heavy MLP (25.2M parameters, batch 8)
#   and a compute-heavy one (8.4M, batch 256), each against the same
#   rank's compute-only step (no_sync); a tensor-parallel step (8x2048 @
#   2048x2048 matmul, then all_reduce of its output) against the matmul.
# Prints a markdown table: step and compute-only times (ms, slowest
# rank's median), what the collectives add, and their share of the step.
#
#   bench/job.sh [BUILD]
#   RANKS="2" LOADS="idle busy" STEPS=10 TP_ITERS=300 BACKENDS="fccl gloo"
#   PARTS="ddp-comm,ddp-compute,tp"
# A backend "fccl:spinN" is fccl with its spin budget fixed at N us
# (FCCL_SPIN_US=N) instead of learned: issue 33's comparison.
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
RANKS=${RANKS:-2} LOADS=${LOADS:-"idle busy"} STEPS=${STEPS:-10}
TP_ITERS=${TP_ITERS:-300} BACKENDS=${BACKENDS:-"fccl gloo"}
PARTS=${PARTS:-ddp-comm,ddp-compute,tp}
export PYTHONPATH="$ROOT/$BUILD/python"
tmp=$(mktemp)
busy=()
stop_busy() {
    [ ${#busy[@]} -gt 0 ] && kill "${busy[@]}" 2>/dev/null
    busy=()
}
trap 'stop_busy; rm -f "$tmp"' EXIT
for load in $LOADS; do
    if [ "$load" = busy ]; then
        for _ in 1 2; do
            # a session of its own, as other users' work (bench/busy.sh)
            setsid sh -c 'while :; do :; done' &
            busy+=($!)
        done
    fi
    for n in $RANKS; do
        for b in $BACKENDS; do
            spin=""
            case $b in *:spin*) spin=${b#*:spin} ;; esac
            env ${spin:+FCCL_SPIN_US=$spin} \
            timeout -k 10 1800 "$ROOT/$BUILD/bin/fccl-run" -n "$n" "$PY" \
                "$ROOT/bench/job.py" --backend "${b%%:*}" --steps "$STEPS" \
                --tp-iters "$TP_ITERS" --parts "$PARTS" 2>/dev/null |
                sed -n "s/^\[0\] RESULT ${b%%:*} /$load $b /p" >>"$tmp" ||
                { echo "job.sh: $b at $n ranks ($load) failed" >&2; exit 1; }
        done
    done
    stop_busy
done
echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, torch $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null), load before $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| load | part | ranks | backend | step ms | compute-only ms | collectives add ms | share of step |"
echo "|---|---|---:|---|---:|---:|---:|---:|"
sort -k3,3 -k1,1r -k4,4n -k2,2 "$tmp" |
    awk '{ printf "| %s | %s | %s | %s | %.2f | %.2f | %.2f | %.0f %% |\n",
                  $1, $3, $4, $2, $5, $6, $7, 100 * $8 }'
