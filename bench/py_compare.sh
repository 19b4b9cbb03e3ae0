#!/usr/bin/env bash
# bench/py_compare.sh: fccl's Python calls against its C calls, mpi4py and
# Open MPI's C calls, interleaved round by round (issue 23).
#
#   bench/py_compare.sh [BUILD]          (BUILD: a build dir, default build)
#
# Per round (ROUNDS, default 5) and rank count (NPS, "2 4"):
#   fccl-c    fccl-run ... fccl-bench -o OP -b S -e S (each op and size)
#   fccl-py   fccl-run ... python3 bench/py_coll.py fccl (all ops, sizes)
#   ompi-c    mpirun.openmpi --mca btl self,vader mpi_coll -o OP -b S -e S
#   mpi4py    mpirun.openmpi --mca btl self,vader python3 bench/py_coll.py mpi4py
# all timed alike: a barrier before each iteration, the slowest rank, the
# median over ITERS iterations (20 from 16 MiB).  OPS (all_reduce
# all_gather all_to_all broadcast), SIZES (8 64K 1M 64M), AB_PREFIX (e.g.
# "chrt -f 10") prefixes every launch.  Prints per cell the median over
# rounds of each, fccl's Python overhead over its C call (py - c),
# mpi4py's over Open MPI's, and the median of the per-round ratios
# mpi4py / fccl-py (>= 1: fccl's Python call at least as fast).
set -u
BUILD=${1:-build}
ROUNDS=${ROUNDS:-5}
NPS=${NPS:-2 4}
OPS=${OPS:-all_reduce all_gather all_to_all broadcast}
SIZES=${SIZES:-8 64K 1M 64M}
ITERS=${ITERS:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/preamble.sh" # PY, ROOTFLAG, FCCL_TIMEOUT
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
P=${AB_PREFIX:-}
OMPI="mpirun.openmpi $ROOTFLAG --oversubscribe --mca btl self,vader"
mpicc.openmpi -O2 -o "$OUT/mpi_coll" "$HERE/../cli/bench/mpi_coll.c" || exit 1
csv_sizes=$(echo $SIZES | tr ' ' ,)
csv_ops=$(echo $OPS | tr ' ' ,)

iters_for() { case $1 in *M) [ "${1%M}" -ge 16 ] && { echo 20; return; } ;; esac; echo "$ITERS"; }
bytes_of() { numfmt --from=iec "$1"; }

for r in $(seq "$ROUNDS"); do
    for n in $NPS; do
        for op in $OPS; do for s in $SIZES; do
            it=$(iters_for "$s")
            t=$(timeout 120 $P "$BUILD/bin/fccl-run" -n "$n" --provider shm --no-prefix \
                "$BUILD/bin/fccl-bench" -o "$op" -b "$s" -e "$s" -n "$it" -w 5 --csv 2>/dev/null |
                awk -F, '/^[a-z_]+,[0-9]/ {print $8; exit}')
            echo "fccl-c $op $n $(bytes_of "$s") ${t:-nan}" >> "$OUT/rows.$r"
            t=$(timeout 120 $P $OMPI -n "$n" "$OUT/mpi_coll" -o "$op" -b "$s" -e "$s" \
                -n "$it" -w 5 2>/dev/null | awk '!/^#/ && NF >= 6 {print $5; exit}')
            echo "ompi-c $op $n $(bytes_of "$s") ${t:-nan}" >> "$OUT/rows.$r"
        done; done
        timeout 600 $P "$BUILD/bin/fccl-run" -n "$n" --provider shm --no-prefix \
            $PY "$HERE/py_coll.py" fccl --ops "$csv_ops" --sizes "$csv_sizes" \
            --iters "$ITERS" 2>/dev/null | sed 's/^/fccl-py /' >> "$OUT/rows.$r"
        timeout 600 $P $OMPI -n "$n" $PY "$HERE/py_coll.py" mpi4py --ops "$csv_ops" \
            --sizes "$csv_sizes" --iters "$ITERS" 2>/dev/null |
            sed 's/^/mpi4py /' >> "$OUT/rows.$r"
    done
    echo "round $r done ($(uptime | sed 's/.*load/load/'))" >&2
done

cat "$OUT"/rows.* > "$OUT/all"
$PY - "$OUT" "$ROUNDS" <<'PYEOF'
import collections, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
d = collections.defaultdict(dict)  # (op, n, bytes) -> {(sys, round): us}
cells = []
for r in range(1, rounds + 1):
    try:
        lines = open(f"{out}/rows.{r}").read().split("\n")
    except OSError:
        continue
    for line in lines:
        f = line.split()
        if len(f) != 5:
            continue
        key = (f[1], int(f[2]), int(f[3]))
        if key not in cells:
            cells.append(key)
        try:
            d[key][(f[0], r)] = float(f[4])
        except ValueError:
            pass
def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"
print("| op | ranks | size | fccl C us | fccl Python us | Open MPI C us | mpi4py us "
      "| fccl py - C | mpi4py - Open MPI | mpi4py / fccl-py, median (min..max) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for key in sorted(cells, key=lambda k: (k[1], k[0], k[2])):
    v = d[key]
    col = {s: med([v.get((s, r), float("nan")) for r in range(1, rounds + 1)])
           for s in ("fccl-c", "fccl-py", "ompi-c", "mpi4py")}
    q = [v[("mpi4py", r)] / v[("fccl-py", r)] for r in range(1, rounds + 1)
         if ("mpi4py", r) in v and ("fccl-py", r) in v]
    qs = f"{statistics.median(q):.2f} ({min(q):.2f}..{max(q):.2f})" if q else "-"
    print(f"| {key[0]} | {key[1]} | {size(key[2])} | {col['fccl-c']:.2f} | "
          f"{col['fccl-py']:.2f} | {col['ompi-c']:.2f} | {col['mpi4py']:.2f} | "
          f"{col['fccl-py'] - col['fccl-c']:+.2f} | {col['mpi4py'] - col['ompi-c']:+.2f} | {qs} |")
PYEOF
