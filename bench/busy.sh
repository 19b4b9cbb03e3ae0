#!/usr/bin/env bash
# bench/busy.sh: one-host cells on a busy machine (issue 33 item 2), fccl's
# waiting policy against fixed spins and the MPIs, under load and idle,
# interleaved round by round.
#
#   bench/busy.sh NEW_BIN OLD_BIN        (folders holding fccl-run, fccl-bench)
#
# Each round (ROUNDS, default 3) runs every cell (OPS x NPS x SIZES) first
# under load, LOAD_JOBS (default: one per CPU) busy loops at normal
# priority started by this script and killed after the block, then idle.
# Under load: "new" (NEW_BIN, its default policy), "old" (OLD_BIN's
# default), "spinX" (NEW_BIN with FCCL_SPIN_US=X for X in SPINS, default
# "5 200 5000": the same build with that fixed value), Open MPI (vader) and
# MPICH; idle: new, old, Open MPI, MPICH.  MPICH is left out at more
# ranks than CPUs (MPICH_OVERSUB=1 keeps it): its ch4:ucx takes 8-60 ms a
# call there and is never the best MPI.  Iterations: 100 at 8 B, 50 at
# 1 MiB, 10 at 64 MiB, 3 warm-up; the "time" column (a barrier before
# each iteration, slowest rank, median) as bench/cells.sh.  Cells of the
# sizes in LOOP_SIZES (default 8) are also timed back to back, in the same
# block right after their time column: LOOP_ITERS (default 400000; with
# more ranks than CPUs LOOP_ITERS_OVER, default 40000) calls with no
# barrier between them, the median of five passes, slowest rank
# (bench/pair.sh's MODE=loop, which says why the passes are that long), as
# the OSU micro-benchmarks and nccl-tests time latency.  With more ranks
# than CPUs a call under load waits for the scheduler (16-240 us at 4 ranks
# on 2 CPUs), so 40000 calls already last a second a pass, and 400000
# took over the 120 s a run is given.  The time column
# starts each rank's clock at its own exit from a barrier, so at 8 bytes
# it mostly measures which rank the barrier lets out first
# (bench/pair.sh, MODE=stamps).  LOOP_SIZES="" leaves them out.  Writes
# one line per run to OUT/raw.tsv (round, load|idle, op, ranks, size,
# system, us, time|loop) and prints the tables of bench/busy_report.py.
set -u
NEW=${1:?new bin dir} OLD=${2:?old bin dir}
ROUNDS=${ROUNDS:-3}
OPS=${OPS:-all_reduce all_gather all_to_all broadcast}
NPS=${NPS:-2 4}
SIZES=${SIZES:-8 1M 64M}
SPINS=${SPINS:-5 200 5000}
LOOP_SIZES=${LOOP_SIZES-8}
LOOP_ITERS=${LOOP_ITERS:-400000}
LOOP_ITERS_OVER=${LOOP_ITERS_OVER:-40000}
LOAD_JOBS=${LOAD_JOBS:-$(nproc)}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
ROOTFLAG=""
[ "$(id -u)" -eq 0 ] && ROOTFLAG="--allow-run-as-root"
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-300}
mpicc.openmpi -O2 -o "$OUT/mpi_coll.openmpi" "$HERE/../cli/bench/mpi_coll.c" || exit 1
mpicc.mpich -O2 -o "$OUT/mpi_coll.mpich" "$HERE/../cli/bench/mpi_coll.c" || exit 1
if [ -n "$LOOP_SIZES" ]; then
    for v in openmpi mpich; do
        mpicc.$v -O2 -o "$OUT/mpi_barrier_pair.$v" \
            "$HERE/../cli/bench/mpi_barrier_pair.c" || exit 1
    done
    for d in "$NEW" "$OLD"; do
        [ -x "$d/../bench/barrier_pair" ] && continue
        echo "busy.sh: no $d/../bench/barrier_pair (make bench)" >&2; exit 1
    done
fi

iters_for() { case $1 in 8) echo 100 ;; 64M) echo 10 ;; *) echo 50 ;; esac; }

# launch SECS SYSTEM N FCCL_PROG MPI_PROG ARGS...: N ranks of the
# system's program (FCCL_PROG under its build's fccl-run, relative to
# that bin folder, with FCCL_SPIN_US for spinX; MPI_PROG as compiled into
# OUT) under a timeout of SECS, stderr dropped
launch() {
    local secs=$1 sys=$2 n=$3 fprog=$4 mprog=$5 dir=$NEW spin=""
    shift 5
    case $sys in
    new|old|spin*)
        [ "$sys" = old ] && dir=$OLD
        case $sys in spin*) spin=${sys#spin} ;; esac
        setsid -w env ${spin:+FCCL_SPIN_US=$spin} timeout "$secs" \
            "$dir/fccl-run" -n "$n" --provider shm --no-prefix \
            "$dir/$fprog" "$@" 2>/dev/null ;;
    ompi) setsid -w timeout "$secs" mpirun.openmpi $ROOTFLAG --oversubscribe \
              -n "$n" --mca btl self,vader "$OUT/$mprog.openmpi" "$@" 2>/dev/null ;;
    mpich) setsid -w timeout "$secs" mpirun.mpich -n "$n" "$OUT/$mprog.mpich" \
               "$@" 2>/dev/null ;;
    esac
}

one() { # system op n size -> time in us
    local args="-o $2 -b $4 -e $4 -n $(iters_for "$4") -w 3"
    case $1 in
    new|old|spin*)
        launch 180 "$1" "$3" fccl-bench - -d float32 -r sum $args --csv |
            awk -F, '/^[a-z_]+,[0-9]/ {print $8; exit}' ;;
    *) launch 180 "$1" "$3" - mpi_coll $args |
           awk '!/^#/ && NF >= 6 {print $5; exit}' ;;
    esac
}

loop() { # system op n size -> us per call, back to back
    local iters=$LOOP_ITERS
    [ "$3" -le "$(nproc)" ] || iters=$LOOP_ITERS_OVER
    launch 120 "$1" "$3" ../bench/barrier_pair mpi_barrier_pair \
        -o "$2" -b "$4" -n "$iters" -m loop |
        awk '$1 == "loop" {print $5; exit}'
}

# every busy loop and every system measured (one()) in a session of its
# own: rounds.sh says why
. "$HERE/rounds.sh" # load_on, load_off
trap 'load_off' EXIT
trap 'exit 130' INT   # a handler that returned would let the run go on
trap 'exit 143' TERM

block() { # load|idle round
    local systems
    for op in $OPS; do for n in $NPS; do for s in $SIZES; do
        if [ "$1" = load ]; then
            systems="new old"; for x in $SPINS; do systems="$systems spin$x"; done
        else systems="new old"; fi
        systems="$systems ompi"
        [ "$n" -le "$(nproc)" ] || [ "${MPICH_OVERSUB:-0}" = 1 ] &&
            systems="$systems mpich"
        for sys in $systems; do
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\ttime\n' "$2" "$1" "$op" "$n" \
                "$s" "$sys" "$(one "$sys" "$op" "$n" "$s")" >> "$OUT/raw.tsv"
        done
        case " $LOOP_SIZES " in *" $s "*) ;; *) continue ;; esac
        for sys in $systems; do
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\tloop\n' "$2" "$1" "$op" "$n" \
                "$s" "$sys" "$(loop "$sys" "$op" "$n" "$s")" >> "$OUT/raw.tsv"
        done
    done; done; done
}

for r in $(seq "$ROUNDS"); do
    load_on "$LOAD_JOBS"
    block load "$r"
    load_off
    echo "round $r load done ($(uptime | sed 's/.*load/load/'))" >&2
    block idle "$r"
    echo "round $r idle done ($(uptime | sed 's/.*load/load/'))" >&2
done
python3 "$HERE/busy_report.py" "$OUT/raw.tsv"
