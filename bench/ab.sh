#!/usr/bin/env bash
# bench/ab.sh: the same fccl-bench cells on two builds, interleaved, to
# show that a change costs nothing (the library-shape issue's check).
#
#   bench/ab.sh BEFORE_BIN AFTER_BIN      (folders holding fccl-run, fccl-bench)
#
# For each round (ROUNDS, default 5), for each op (OPS), rank count (NPS)
# and size (SIZES), runs `fccl-run -n N --provider shm fccl-bench -o OP -b S
# -e S -n ITERS` with the before build, then the after build, and records
# the time column (us).  AB_PREFIX prefixes each launch (e.g. "chrt -f 10",
# real-time priority for both builds alike on a machine shared with other
# work).  Prints per cell the median of each build, the
# median of the per-round after/before ratios, and its min..max.
set -u
B=${1:?before bin dir} A=${2:?after bin dir}
ROUNDS=${ROUNDS:-5}
OPS=${OPS:-all_reduce all_gather all_to_all}
NPS=${NPS:-2 4}
SIZES=${SIZES:-8 1M 64M}
ITERS=${ITERS:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/rounds.sh" # each_cell, run_rounds, MEDIAN_AWK
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

one() { # dir op n size -> time in us (the time column of the one size)
    timeout 300 ${AB_PREFIX:-} "$1/fccl-run" -n "$3" --provider shm --no-prefix \
        "$1/fccl-bench" -o "$2" -b "$4" -e "$4" -n "$ITERS" --csv 2>/dev/null |
        awk -F, '/^[a-z_]+,[0-9]/ {print $8; exit}'
}

measure() { # op n size: one run of each build
    local key="$1-$2-$3"
    echo "$(one "$B" "$1" "$2" "$3")" >> "$OUT/$key.before"
    echo "$(one "$A" "$1" "$2" "$3")" >> "$OUT/$key.after"
}

row() { # op n size: the cell's line of the table
    local key="$1-$2-$3"
    paste "$OUT/$key.before" "$OUT/$key.after" | awk -v op="$1" -v n="$2" -v s="$3" "$MEDIAN_AWK"'
        $1 > 0 && $2 > 0 { k++; b[k] = $1; a[k] = $2; q[k] = $1 / $2 }
        END {
            if (!k) { printf "| %s | %d | %s | - | - | - |\n", op, n, s; exit }
            span(q, k)
            printf "| %s | %d | %s | %.2f | %.2f | %.2f (%.2f..%.2f) |\n",
                   op, n, s, med(b, k), med(a, k), med(q, k), lo, hi
        }'
}

run_rounds measure
echo "| op | ranks | size | before us (median) | after us (median) | after/before speed, median of rounds (min..max) |"
echo "|---|---:|---:|---:|---:|---:|"
each_cell row
