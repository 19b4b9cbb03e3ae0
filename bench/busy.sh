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
# each iteration, slowest rank, median) as bench/cells.sh.  Writes one
# line per run to OUT/raw.tsv (round, load|idle, op, ranks, size, system,
# us) and prints the tables of bench/busy_report.py.
set -u
NEW=${1:?new bin dir} OLD=${2:?old bin dir}
ROUNDS=${ROUNDS:-3}
OPS=${OPS:-all_reduce all_gather all_to_all broadcast}
NPS=${NPS:-2 4}
SIZES=${SIZES:-8 1M 64M}
SPINS=${SPINS:-5 200 5000}
LOAD_JOBS=${LOAD_JOBS:-$(nproc)}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
ROOTFLAG=""
[ "$(id -u)" -eq 0 ] && ROOTFLAG="--allow-run-as-root"
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-300}
mpicc.openmpi -O2 -o "$OUT/mpi_coll.openmpi" "$HERE/../cli/bench/mpi_coll.c" || exit 1
mpicc.mpich -O2 -o "$OUT/mpi_coll.mpich" "$HERE/../cli/bench/mpi_coll.c" || exit 1

iters_for() { case $1 in 8) echo 100 ;; 64M) echo 10 ;; *) echo 50 ;; esac; }

one() { # system op n size -> time in us
    local args="-o $2 -b $4 -e $4 -n $(iters_for "$4") -w 3" dir=$NEW spin=""
    case $1 in
    new|old|spin*)
        [ "$1" = old ] && dir=$OLD
        case $1 in spin*) spin=${1#spin} ;; esac
        setsid -w env ${spin:+FCCL_SPIN_US=$spin} timeout 180 "$dir/fccl-run" -n "$3" \
            --provider shm --no-prefix "$dir/fccl-bench" -d float32 -r sum \
            $args --csv 2>/dev/null | awk -F, '/^[a-z_]+,[0-9]/ {print $8; exit}' ;;
    ompi) setsid -w timeout 180 mpirun.openmpi $ROOTFLAG --oversubscribe -n "$3" \
              --mca btl self,vader "$OUT/mpi_coll.openmpi" $args 2>/dev/null |
              awk '!/^#/ && NF >= 6 {print $5; exit}' ;;
    mpich) setsid -w timeout 180 mpirun.mpich -n "$3" "$OUT/mpi_coll.mpich" $args \
               2>/dev/null | awk '!/^#/ && NF >= 6 {print $5; exit}' ;;
    esac
}

# every busy loop and every system measured (one()) in a session of its
# own: rounds.sh says why
. "$HERE/rounds.sh" # load_on, load_off
trap 'load_off' EXIT INT TERM

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
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$2" "$1" "$op" "$n" "$s" \
                "$sys" "$(one "$sys" "$op" "$n" "$s")" >> "$OUT/raw.tsv"
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
