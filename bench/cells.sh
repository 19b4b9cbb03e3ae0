#!/usr/bin/env bash
# bench/cells.sh: chosen cells, fccl against Open MPI and MPICH, the three
# interleaved round by round (issue 28's rule: judge by the median of the
# per-round ratios).
#
#   bench/cells.sh [BUILD]               (BUILD: a build dir, default build)
#
# For each round (ROUNDS, default 5), op (OPS), rank count (NPS) and size
# (SIZES) it runs, one after the other,
#   fccl   BUILD/bin/fccl-run -n N --provider shm BUILD/bin/fccl-bench -o OP -b S -e S
#   ompi   mpirun.openmpi --mca btl self,vader mpi_coll -o OP -b S -e S
#   mpich  mpirun.mpich mpi_coll -o OP -b S -e S
# each -n ITERS (default 200; 20 from 64 MiB) -w 5, and records the "time"
# column: a barrier before each iteration, the slowest rank, the median
# over iterations (cli/bench/mpi_coll.c builds the MPI side, with
# fccl-bench's size convention).  AB_PREFIX prefixes every launch (e.g.
# "chrt -f 10") but MPICH's with more ranks than CPUs: its ranks poll
# without yielding, and at a real-time priority they never let the
# descheduled ones run (a 4-rank run on 2 cores did not end in 10
# minutes); it runs at normal priority then (MPICH_PREFIX, default none).  Prints per cell the median time of each system, the best
# MPI, and the median over rounds of (best MPI of the round / fccl), with
# its min..max: >= 1 means fccl is at least as fast.
set -u
BUILD=${1:-build}
ROUNDS=${ROUNDS:-5}
OPS=${OPS:-all_reduce all_gather all_to_all broadcast reduce_scatter}
NPS=${NPS:-2 4}
SIZES=${SIZES:-8 1M 64M}
ITERS=${ITERS:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/preamble.sh" # ROOTFLAG, FCCL_TIMEOUT
. "$HERE/rounds.sh" # each_cell, run_rounds, MEDIAN_AWK
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

mpicc.openmpi -O2 -o "$OUT/mpi_coll.openmpi" "$HERE/../cli/bench/mpi_coll.c" ||
    exit 1
mpicc.mpich -O2 -o "$OUT/mpi_coll.mpich" "$HERE/../cli/bench/mpi_coll.c" ||
    exit 1

iters_for() { case $1 in *M) [ "${1%M}" -ge 16 ] && { echo 20; return; } ;; esac; echo "$ITERS"; }

one() { # system op n size -> time in us
    local it; it=$(iters_for "$4")
    local args="-o $2 -b $4 -e $4 -n $it -w 5"
    case $1 in
    fccl) timeout 120 ${AB_PREFIX:-} "$BUILD/bin/fccl-run" -n "$3" --provider shm \
              --no-prefix "$BUILD/bin/fccl-bench" -d float32 -r sum $args --csv 2>/dev/null |
              awk -F, '/^[a-z_]+,[0-9]/ {print $8; exit}' ;;
    ompi) timeout 120 ${AB_PREFIX:-} mpirun.openmpi $ROOTFLAG --oversubscribe -n "$3" \
              --mca btl self,vader "$OUT/mpi_coll.openmpi" $args 2>/dev/null |
              awk '!/^#/ && NF >= 6 {print $5; exit}' ;;
    mpich) local pre=${AB_PREFIX:-}
        [ "$3" -gt "$(nproc)" ] && pre=${MPICH_PREFIX:-}
        timeout 120 $pre mpirun.mpich -n "$3" "$OUT/mpi_coll.mpich" \
               $args 2>/dev/null | awk '!/^#/ && NF >= 6 {print $5; exit}' ;;
    esac
}

measure() { # op n size: one run of each system
    local sys
    for sys in fccl ompi mpich; do
        echo "$(one "$sys" "$1" "$2" "$3")" >> "$OUT/$1-$2-$3.$sys"
    done
}

row() { # op n size: the cell's line of the table
    local k="$OUT/$1-$2-$3"
    paste "$k.fccl" "$k.ompi" "$k.mpich" | awk -v op="$1" -v n="$2" -v s="$3" "$MEDIAN_AWK"'
        $1 > 0 && ($2 > 0 || $3 > 0) {
            k++; f[k] = $1; o[k] = $2; m[k] = $3
            best = $2 > 0 && ($3 <= 0 || $2 < $3) ? $2 : $3
            q[k] = best / $1
        }
        END {
            if (!k) { printf "| %s | %d | %s | - | - | - | - |\n", op, n, s; exit }
            span(q, k)
            printf "| %s | %d | %s | %.2f | %.2f | %.2f | %.2f (%.2f..%.2f) |\n",
                   op, n, s, med(f, k), med(o, k), med(m, k), med(q, k), lo, hi
        }'
}

run_rounds measure
echo "| op | ranks | size | fccl us | Open MPI us | MPICH us | best MPI / fccl, median of rounds (min..max) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
each_cell row
