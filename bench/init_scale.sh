#!/usr/bin/env bash
# bench/init_scale.sh: fccl-run init + barrier + finalize, two builds
# interleaved (A then B within each round, so background noise spreads
# over both): wall time and the CPU seconds summed over all ranks (the
# launcher's waited-for children, from GNU time).
#
#   bench/init_scale.sh A_DIR B_DIR      (each with bin/fccl-run and
#                                        bench/init_barrier)
# Environment: NS (default "64 128 256"), RUNS (default 5), TIMEOUT
# (seconds per job, default 300).  Prints one line per job and a median
# table in markdown.  fccl against Open MPI and MPICH, and fccl's per-rank
# init CPU by phase: bench/init_mpi.sh.
set -u
A=${1:?usage: init_scale.sh A_DIR B_DIR}
B=${2:?usage: init_scale.sh A_DIR B_DIR}
NS=${NS:-64 128 256}
RUNS=${RUNS:-5}
TIMEOUT=${TIMEOUT:-300}
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-240}
RAW=$(mktemp)
one() { # label dir n
    local out
    out=$( { /usr/bin/time -f "TIME %e %U %S" timeout "$TIMEOUT" \
        "$2/bin/fccl-run" -n "$3" "$2/bench/init_barrier" >/dev/null; } 2>&1 |
        grep '^TIME' | tail -1)
    set -- "$1" "$2" "$3" $out
    [ $# -eq 7 ] || { echo "run $1 n=$3 failed" >&2; return; }
    echo "$1 $3 $5 $(echo "$6 + $7" | bc)"
}
for r in $(seq 1 "$RUNS"); do
    for n in $NS; do
        for sys in A B; do
            dir=$A; [ $sys = B ] && dir=$B
            line=$(one "$sys" "$dir" "$n")
            [ -n "$line" ] && echo "$line round $r" | tee -a "$RAW" >&2
        done
    done
done
echo "| N | A wall s (median, min-max) | B wall s | A CPU s (all ranks) | B CPU s |"
echo "|---|---|---|---|---|"
for n in $NS; do
    row="| $n"
    for col in 3 4; do
        for sys in A B; do
            vals=$(awk -v s=$sys -v n=$n -v c=$col '$1==s && $2==n {print $c}' "$RAW" | sort -g)
            k=$(echo "$vals" | grep -c .)
            med=$(echo "$vals" | awk -v k=$k 'NR==int((k+1)/2)')
            row="$row | $med ($(echo "$vals" | head -1)-$(echo "$vals" | tail -1))"
        done
    done
    echo "$row |"
done
rm -f "$RAW"
