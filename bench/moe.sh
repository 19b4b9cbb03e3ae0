#!/usr/bin/env bash
# bench/moe.sh: the MoE layer of issue 13, fccl against PyTorch Gloo.
#
#   bench/moe.sh [BUILD]                (BUILD: a build dir, default build)
#
# BS = 256 tokens per rank, H = 4096, K = 8, 16 routed experts, 4 ranks,
# bfloat16, shm.  ROUNDS times (default 3), interleaved:
#   fccl-run -n 4 fccl-moe-bench ...   (fused, unfused, combine paths,
#                                        interleaved iteration by iteration)
#   /usr/bin/python3 bench/moe_gloo.py --spawn 4 ...   (torch 1.13 + Gloo)
# then one fccl-moe-bench -c 1 pass (every output checked) and the
# single-core memcpy bandwidth (cli/bench/memcpy_bw.c) for the floor.
# Environment: ROUNDS, ITERS (20), GLOO_ITERS (5), NP (4), ARGS (the layer
# options, default "-b 256 -H 4096 -k 8 -E 16 -d bfloat16"), FCCL_PREFIX
# (prefixes the fccl runs only, e.g. "chrt -f 10": real-time priority on a
# shared machine.  Not for the Gloo runs: torch's spinning worker threads
# at SCHED_FIFO keep the threads they wait for off the CPU, and the run
# never ends).
set -u
BUILD=${1:-build}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-20}
GLOO_ITERS=${GLOO_ITERS:-5}
NP=${NP:-4}
ARGS=${ARGS:--b 256 -H 4096 -k 8 -E 16 -d bfloat16}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
GARGS=$(echo "$ARGS" | sed 's/-d bfloat16//')

echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    echo "## round $r"
    FCCL_PROVIDER=shm timeout 600 ${FCCL_PREFIX:-} "$BUILD/bin/fccl-run" \
        -n "$NP" "$BUILD/bin/fccl-moe-bench" $ARGS -n "$ITERS" -w 3
    timeout 900 $PY "$HERE/moe_gloo.py" --spawn "$NP" $GARGS -n "$GLOO_ITERS" -w 1
done
echo "## checked pass"
FCCL_PROVIDER=shm timeout 900 "$BUILD/bin/fccl-run" -n "$NP" \
    "$BUILD/bin/fccl-moe-bench" $ARGS -n 3 -w 1 -c 1 | tail -1
echo "## memcpy"
"$BUILD/bench/memcpy_bw" 64 10
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
