#!/usr/bin/env bash
# bench/pair.sh: a barrier and the call after it, timed together back to
# back (cli/bench/barrier_pair.c, cli/bench/mpi_barrier_pair.c), fccl
# against Open MPI (vader) and MPICH, idle and with busy loops,
# interleaved round by round.  The "time" column of fccl-bench and
# mpi_coll starts each rank's clock as it leaves the barrier before the
# call, so it also measures which rank a barrier lets out first; a pair
# measures what a program that synchronizes before each call waits.
#
#   bench/pair.sh BUILD [OLD_BUILD]   (build folders: bin/fccl-run and
#                                      bench/barrier_pair)
#
# ROUNDS (default 5) rounds; in each, for every load in LOADS (default
# "idle busy": busy adds one busy loop per CPU at normal priority, each
# in a session of its own as in bench/busy.sh), every cell OPS x NPS x
# SIZES (default all_reduce all_gather all_to_all broadcast barrier; 2; 8)
# on every system: fccl (BUILD), old (OLD_BUILD, if given), ompi, mpich.
# ITERS (default 20000) pairs a pass, the median of five passes: a pass
# of 2,000 pairs (2 ms) fits between two of the scheduler's slices, so
# under load it would measure whether a pass was interrupted; a run that
# takes over 120 s (over 1.2 ms a pair) is left empty.  Writes
# OUT/raw.tsv (round, load, op, ranks, size, system, us per pair) and
# prints, per cell, each system's median and the best MPI / fccl ratio
# (median of the per-round ratios, min..max; >= 1: fccl at least as fast).
#
# MODE=stamps runs the programs with -m stamps instead (one stamped pass
# of ITERS pairs; see cli/bench/barrier_pair.c): raw.tsv then holds three
# values, time (the "time" column's reading), skew (last exit from the
# barrier minus the first) and crit (last end of the call minus the last
# entry into the barrier), and a table is printed for each.  MODE=loop
# times ITERS calls back to back instead, with no barrier between them (a
# job's run of small collectives: no barrier decides who starts first),
# ITERS defaulting to 400000 there: a call back to back takes 0.1-0.5 us,
# so a pass of 20000 (2-10 ms) could fit in one scheduler slice, and under
# load it measured whether both ranks got one at once (8-byte broadcast,
# Open MPI 0.12-0.13 us busy and idle alike; 0.86-1.41 us over 400000).
set -u
NEW=${1:?build dir} OLD=${2:-}
ROUNDS=${ROUNDS:-5}
LOADS=${LOADS:-idle busy}
OPS=${OPS:-all_reduce all_gather all_to_all broadcast barrier}
NPS=${NPS:-2}
SIZES=${SIZES:-8}
MODE=${MODE:-pairs}
if [ "$MODE" = loop ]; then ITERS=${ITERS:-400000}; else ITERS=${ITERS:-20000}; fi
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
ROOTFLAG=""
[ "$(id -u)" -eq 0 ] && ROOTFLAG="--allow-run-as-root"
for v in openmpi mpich; do
    mpicc.$v -O2 -o "$OUT/mpi_barrier_pair.$v" \
        "$HERE/../cli/bench/mpi_barrier_pair.c" || exit 1
done
SYSTEMS="fccl${OLD:+ old} ompi mpich"

one() { # system op n size -> us per pair
    local args="-o $2 -b $4 -n $ITERS -m $MODE" dir=$NEW
    case $1 in
    fccl|old) [ "$1" = old ] && dir=$OLD
        setsid -w timeout 120 "$dir/bin/fccl-run" -n "$3" --provider shm \
            --no-prefix "$dir/bench/barrier_pair" $args 2>/dev/null ;;
    ompi) setsid -w timeout 120 mpirun.openmpi $ROOTFLAG --oversubscribe \
              -n "$3" --mca btl self,vader "$OUT/mpi_barrier_pair.openmpi" \
              $args 2>/dev/null ;;
    mpich) setsid -w timeout 120 mpirun.mpich -n "$3" \
               "$OUT/mpi_barrier_pair.mpich" $args 2>/dev/null ;;
    esac | awk '$1 == "pair" || $1 == "loop" {print $5; exit}
                $1 == "stamps" {print $5 "\t" $6 "\t" $7; exit}'
}

. "$HERE/rounds.sh" # load_on, load_off, MEDIAN_AWK
trap 'load_off' EXIT
trap 'exit 130' INT   # a handler that returned would let the run go on
trap 'exit 143' TERM

for r in $(seq "$ROUNDS"); do
    for load in $LOADS; do
        [ "$load" = busy ] && load_on "$(nproc)"
        for op in $OPS; do for n in $NPS; do for s in $SIZES; do
            for sys in $SYSTEMS; do
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$load" "$op" \
                    "$n" "$s" "$sys" "$(one "$sys" "$op" "$n" "$s")" \
                    >> "$OUT/raw.tsv"
            done
        done; done; done
        load_off
    done
    echo "round $r done ($(uptime | sed 's/.*load/load/'))" >&2
done

report() { # column of raw.tsv
awk -F'\t' -v systems="$SYSTEMS" -v c="$1" "$MEDIAN_AWK"'
{ k = $2 "|" $3 "|" $4 "|" $5; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
  if ($c != "") { us[k, $6, $1] = $c; rounds[$1] = 1 } }
END {
    ns = split(systems, sys, " ")
    printf "| load | op | ranks | size |"
    for (i = 1; i <= ns; i++) printf " %s us |", sys[i]
    printf " best MPI / fccl |\n|---|---|---:|---:|"
    for (i = 1; i <= ns; i++) printf "---:|"
    printf "---:|\n"
    for (j = 1; j <= nk; j++) {
        k = keys[j]; split(k, f, "|")
        printf "| %s | %s | %s | %s |", f[1], f[2], f[3], f[4]
        for (i = 1; i <= ns; i++) {
            m = 0
            for (r in rounds) if ((k, sys[i], r) in us) v[++m] = us[k, sys[i], r]
            printf m ? " %.3f |" : " - |", m ? med(v, m) : 0
        }
        m = 0
        for (r in rounds) {
            if (!((k, "fccl", r) in us) || us[k, "fccl", r] <= 0) continue
            best = ""
            if ((k, "ompi", r) in us) best = us[k, "ompi", r]
            if ((k, "mpich", r) in us && (best == "" || us[k, "mpich", r] < best))
                best = us[k, "mpich", r]
            if (best != "") { q[++m] = best / us[k, "fccl", r] }
        }
        if (m) { span(q, m); printf " %.2f (%.2f..%.2f) |\n", med(q, m), lo, hi }
        else printf " - |\n"
    }
}' "$OUT/raw.tsv"
}

if [ "$MODE" = stamps ]; then
    echo "crit (us): last end of the call - last entry into the barrier"
    report 9
    echo; echo "time (us): the slowest rank's call from its barrier's exit"
    report 7
    echo; echo "skew (us): last exit from the barrier - first"
    report 8
else
    report 7
fi
