#!/usr/bin/env bash
# bench/init_mpi.sh: job start-up (init + barrier + finalize) of fccl,
# Open MPI and MPICH at the same N, interleaved within each round (issue
# 12's benchmark), plus fccl's per-rank init CPU from init_barrier -v.
#
#   flock /tmp/fccl-bench.lock bench/init_mpi.sh [BUILD]   (default build)
#
# Per N (NS, default "64 128 256") and round (RUNS, default 5), in turn:
#   fccl   $BUILD/bin/fccl-run -n N $BUILD/bench/init_barrier
#   ompi   mpirun.openmpi --allow-run-as-root --oversubscribe --mca pml ob1
#          --mca btl self,vader -n N mpi_init_barrier   (shared memory)
#   mpich  mpirun.mpich -n N mpi_init_barrier
#   fccl-v the fccl job again with -v (not in the wall table): each rank's
#          init CPU, split into pre-main (exec + loading libraries), the
#          libfabric open thread, and the rest (store, neighbours' records,
#          record gather, world, init's barrier), then finalize.
# Wall time and CPU seconds of all ranks (user + system of the launcher
# and its waited-for descendants, GNU time) per job; a job that fails or
# passes TIMEOUT (seconds, default 150) counts as failed and is listed.
# Prints markdown tables (median, min-max) and the raw lines; raw logs in
# OUT (default $BUILD/bench/init-mpi).  SYSTEMS (default "fccl ompi mpich
# fccl-v") picks a subset.  Keep one locked run under 5 minutes: e.g.
# NS=256 RUNS=1 for each round at 256.
set -u
BUILD=${1:-build}
NS=${NS:-64 128 256}
RUNS=${RUNS:-5}
TIMEOUT=${TIMEOUT:-150}
SYSTEMS=${SYSTEMS:-fccl ompi mpich fccl-v}
OUT=${OUT:-$BUILD/bench/init-mpi}
HERE=$(cd "$(dirname "$0")" && pwd)
CBENCH="$HERE/../cli/bench" # the C sources of the benchmark helpers
mkdir -p "$OUT"
RAW=$OUT/raw.txt      # system n wall cpu round (appended across runs)
STATS=$OUT/stats.txt  # fccl-v per-rank lines, prefixed with n and round
ROOTFLAG=""
[ "$(id -u)" -eq 0 ] && ROOTFLAG="--allow-run-as-root"
export FCCL_TIMEOUT=${FCCL_TIMEOUT:-120}

die() { echo "init_mpi.sh: $*" >&2; exit 1; }

build_mpi() {
    [ "$OUT/mpi_init_barrier.openmpi" -nt "$CBENCH/mpi_init_barrier.c" ] ||
        mpicc.openmpi -O2 -o "$OUT/mpi_init_barrier.openmpi" \
            "$CBENCH/mpi_init_barrier.c" || die "mpicc.openmpi failed"
    [ "$OUT/mpi_init_barrier.mpich" -nt "$CBENCH/mpi_init_barrier.c" ] ||
        mpicc.mpich -O2 -o "$OUT/mpi_init_barrier.mpich" \
            "$CBENCH/mpi_init_barrier.c" || die "mpicc.mpich failed"
}

cmd_for() { # system n
    case $1 in
    fccl) echo "$BUILD/bin/fccl-run -n $2 $BUILD/bench/init_barrier" ;;
    fccl-v) echo "$BUILD/bin/fccl-run -n $2 $BUILD/bench/init_barrier -v" ;;
    ompi) echo "mpirun.openmpi $ROOTFLAG --oversubscribe --mca pml ob1" \
        "--mca btl self,vader -n $2 $OUT/mpi_init_barrier.openmpi" ;;
    mpich) echo "mpirun.mpich -n $2 $OUT/mpi_init_barrier.mpich" ;;
    *) die "unknown system $1" ;;
    esac
}

# One job: "wall cpu" on stdout, or nothing if it failed.
one() { # system n round
    local log="$OUT/$1-n$2-r$3.log" tf="$OUT/time.$$"
    # shellcheck disable=SC2046
    /usr/bin/time -o "$tf" -f "%e %U %S" timeout -k 5 "$TIMEOUT" \
        $(cmd_for "$1" "$2") >"$log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] || [ ! -s "$tf" ]; then
        echo "  $1 n=$2 round $3 FAILED (rc $rc, see $log)" >&2
        echo "$1 $2 FAIL FAIL $3" >>"$RAW"
        rm -f "$tf"
        return
    fi
    tail -n 1 "$tf" | awk -v s="$1" -v n="$2" -v r="$3" \
        '{ printf "%s %s %.3f %.3f %s\n", s, n, $1, $2 + $3, r }' >>"$RAW"
    tail -n 1 "$RAW" >&2
    rm -f "$tf"
    if [ "$1" = fccl-v ]; then
        sed -n 's/^\[[0-9]*\] //; s/^stats /&/p' "$log" | grep '^stats ' |
            sed "s/^/$2 $3 /" >>"$STATS"
        sed -n 's/^\[[0-9]*\] //; /^total_cpu /p' "$log" |
            sed "s/^/$2 $3 /" >>"$STATS"
    fi
}

# median (min-max) of a column of numbers on stdin
med() {
    grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) { print "n/a"; exit }
              m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%.3f (%.3f-%.3f)", m, v[1], v[NR] }'
}
median_only() { med | awk '{ print $1 }'; }

print_tables() {
    local n s
    echo "| N | fccl wall s | ompi wall s | mpich wall s | fccl/ompi | fccl/mpich | fccl CPU s | ompi CPU s | mpich CPU s | failed |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for n in $NS; do
        local row="| $n" f o m
        for s in fccl ompi mpich; do
            row="$row | $(awk -v s=$s -v n=$n '$1 == s && $2 == n { print $3 }' "$RAW" | med)"
        done
        f=$(awk -v n=$n '$1 == "fccl" && $2 == n { print $3 }' "$RAW" | median_only)
        o=$(awk -v n=$n '$1 == "ompi" && $2 == n { print $3 }' "$RAW" | median_only)
        m=$(awk -v n=$n '$1 == "mpich" && $2 == n { print $3 }' "$RAW" | median_only)
        row="$row | $(awk -v a="$f" -v b="$o" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }')"
        row="$row | $(awk -v a="$f" -v b="$m" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }')"
        for s in fccl ompi mpich; do
            row="$row | $(awk -v s=$s -v n=$n '$1 == s && $2 == n { print $4 }' "$RAW" | med)"
        done
        row="$row | $(awk -v n=$n '$2 == n && $3 == "FAIL" { printf "%s%s", sep, $1; sep = " " }' "$RAW")"
        echo "$row |"
    done
    [ -s "$STATS" ] || return
    echo
    echo "fccl per-rank CPU (ms), median over all ranks of all -v rounds (max rank in brackets):"
    echo
    echo "| N | pre-main | init total | fabric open thread | init minus fabric | store+neighbours | gather | world | init barrier | whole process (exit) | init wall s |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for n in $NS; do
        # $1 n, $2 round, $3 "stats", $4 rank, $5 N, $6 age, $7 premain,
        # $8 init wall, $9 init cpu, $10 fabric, $11 store, $12 neighbours,
        # $13 gather, $14 world, $15 barrier, $16 bar, $17-18 timestamps
        awk -v n=$n '$1 == n && $3 == "stats" {
                pm[++k] = $7 * 1e3; it[k] = $9 * 1e3; fb[k] = $10 * 1e3
                rest[k] = ($9 - $10) * 1e3; sn[k] = ($11 + $12) * 1e3
                ga[k] = $13 * 1e3; wo[k] = $14 * 1e3; ba[k] = $15 * 1e3
                iw[k] = $8 }
            $1 == n && $3 == "total_cpu" { tc[++t] = $5 * 1e3 }
            function q(a, c,   i, j, x, tmp) {
                for (i = 1; i <= c; i++) tmp[i] = a[i]
                for (i = 2; i <= c; i++) { x = tmp[i]
                    for (j = i - 1; j >= 1 && tmp[j] > x; j--) tmp[j + 1] = tmp[j]
                    tmp[j + 1] = x }
                return c ? sprintf("%.2f [%.1f]", tmp[int((c + 1) / 2)], tmp[c]) : "n/a" }
            END { if (!k) exit
                  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                      n, q(pm, k), q(it, k), q(fb, k), q(rest, k), q(sn, k),
                      q(ga, k), q(wo, k), q(ba, k), q(tc, t), q(iw, k) }' "$STATS"
    done
}

[ -x "$BUILD/bin/fccl-run" ] && [ -x "$BUILD/bench/init_barrier" ] ||
    die "build $BUILD first (make BUILD=$BUILD lib progs benches)"
if [ "${REPORT_ONLY:-0}" = 1 ]; then print_tables; exit 0; fi
build_mpi
echo "init_mpi.sh: NS=\"$NS\" RUNS=$RUNS SYSTEMS=\"$SYSTEMS\" $(date -u '+%H:%M UTC')," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$RUNS"); do
    for n in $NS; do
        for s in $SYSTEMS; do
            one "$s" "$n" "${ROUND_BASE:-0}$r"
        done
    done
done
print_tables
