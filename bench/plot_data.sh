#!/usr/bin/env bash
# bench/plot_data.sh: collect the data the README's plots are drawn from
# (bench/plot.py), into bench/data/ (or DATA).  Slow (about 20 minutes
# here) and meant for a quiet machine; `make plots` only draws what is
# there, `make plot-data` runs this first.
#
#   bench/plot_data.sh [BUILD]
#
#   coll.tsv     bench/coll.sh's raw table, one host: SYSTEMS (default
#                fccl-shm ompi mpich gloo), NPS (2 4), OPS (all_reduce
#                all_gather all_to_all), 8 B to MAXB (64M), REPEAT (3)
#   store.csv    tcpstore-bench set/get/add, 100-byte values, 1 and 50
#                clients, against tcpstore-server and PyTorch 1.13's own
#                TCPStore server (legacy dialect)
#   startup.tsv  (tab-separated) launch to exit of an init + barrier job at N ranks (NS,
#                default 2 8 32 64), fccl-run against mpirun (Open MPI,
#                MPICH) and torch's Gloo spawned directly (RUNS, default 3)
# SKIP_COLL=1 keeps coll.tsv as it is and measures the other two.
# Needs FCCL_BENCH_DEPS=1 scripts/install-deps.sh (the MPIs).
set -u
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DATA=${DATA:-$HERE/data}
PY=/usr/bin/python3
NS=${NS:-2 8 32 64}
RUNS=${RUNS:-3}
mkdir -p "$DATA"
. "$HERE/scratch.sh" # SCRATCH, pids, the clean-up on exit
tmp=$SCRATCH
ROOTFLAG=""
[ "$(id -u)" -eq 0 ] && ROOTFLAG="--allow-run-as-root"

if [ -z "${SKIP_COLL:-}" ]; then
    echo "plot_data: collectives (bench/coll.sh)" >&2
    OUT=$tmp/coll SYSTEMS=${SYSTEMS:-fccl-shm ompi mpich gloo} \
        REPEAT=${REPEAT:-3} COMPACT_ONLY=1 "$HERE/coll.sh" "$BUILD" >/dev/null
    cp "$tmp/coll/all.tsv" "$DATA/coll.tsv"
fi

echo "plot_data: store operations" >&2
: >"$DATA/store.csv"
start_server() { # command... (in this shell, so its pid is ours to kill)
    : >"$tmp/srv.out"
    "$@" >"$tmp/srv.out" 2>"$tmp/srv.err" &
    srv_pid=$!
    pids+=("$srv_pid")
    port=""
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$tmp/srv.out" | head -n 1)
        [ -n "$port" ] && return
        sleep 0.1
    done
    echo "plot_data: server did not start: $*" >&2
    exit 1
}
store_runs() { # label port dialect
    for c in 1 50; do
        "$BUILD/bin/tcpstore-bench" --addr "127.0.0.1:$2" --dialect "$3" \
            -c "$c" -t set,get,add -n $((c == 1 ? 20000 : 100000)) \
            --label "$1" 2>/dev/null | grep '^csv,' >>"$DATA/store.csv"
    done
}
start_server "$BUILD/bin/tcpstore-server" --host 127.0.0.1 --port 0
store_runs "tcpstore-server" "$port" modern
kill "$srv_pid"
start_server $PY "$ROOT/tests/py/pt_server.py"
store_runs "PyTorch TCPStore" "$port" legacy
kill "$srv_pid"

echo "plot_data: start-up" >&2
: >"$DATA/startup.tsv"
mpicc.openmpi -O2 -o "$tmp/mpi_ib.ompi" "$ROOT/cli/bench/mpi_init_barrier.c"
mpicc.mpich -O2 -o "$tmp/mpi_ib.mpich" "$ROOT/cli/bench/mpi_init_barrier.c"
timed() { # system n command...
    local sys=$1 n=$2 t0 t1
    shift 2
    t0=$(date +%s%N)
    timeout 300 "$@" >/dev/null 2>&1 || { echo "plot_data: $sys n=$n failed" >&2; return; }
    t1=$(date +%s%N)
    printf '%s\t%s\t%s\n' "$sys" "$n" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')" \
        >>"$DATA/startup.tsv"
}
for _ in $(seq "$RUNS"); do
    for n in $NS; do
        timed fccl "$n" "$BUILD/bin/fccl-run" -n "$n" "$BUILD/bench/init_barrier"
        timed "Open MPI" "$n" mpirun.openmpi $ROOTFLAG --oversubscribe -n "$n" "$tmp/mpi_ib.ompi"
        timed MPICH "$n" mpirun.mpich -n "$n" "$tmp/mpi_ib.mpich"
        timed "Gloo (spawned)" "$n" $PY "$HERE/gloo_init_barrier.py" --spawn "$n"
    done
done
echo "plot_data: wrote $DATA/coll.tsv store.csv startup.tsv" >&2
