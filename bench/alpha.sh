#!/usr/bin/env bash
# bench/alpha.sh: fccl's per-operation cost on one host against Open MPI's
# shared-memory path (issue 12, item 5), interleaved.
#
#   bench/alpha.sh [FCCL_BIN ...]    (folders holding fccl-run and fccl-bench;
#                                     default build/bin)
#
# Each of ROUNDS (5) rounds runs, for each rank count in NPS (2 4): every
# fccl build given, then Open MPI (mpirun --mca btl self,vader,
# cli/bench/mpi_coll.c), each once over the sizes in SIZES (8 1M) of OP
# (all_reduce, float32 sum).
# Both report per size the median over ITERS (200) of { barrier; op }, slowest
# rank.  Prints per cell each system's median over the rounds and its
# min..max, and the median of the per-round ratios to Open MPI.
# Then PINGS (5) interleaved pairs of 8-byte ping-pongs on the shm provider:
# fi_pingpong -p shm -e rdm -S 8 -I 10000 (libfabric alone; its usec/xfer)
# and tests/tp_pingpong -p shm -S 8 -I 10000 (the same through fccl's
# transport: tp_isend/tp_irecv/tp_waitall, half round trip), and the
# difference of the medians: our transport's per-message software cost.
# TP_PINGPONG names the tp_pingpong binary (build/tests/tp_pingpong).
# PREFIX goes before every launch (e.g. "chrt -f 10"); wrap the whole script
# in `flock /tmp/fccl-bench.lock` on a shared machine.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CBENCH="$HERE/../cli/bench" # the C sources of the benchmark helpers
[ $# -gt 0 ] || set -- build/bin
ROUNDS=${ROUNDS:-5}
NPS=${NPS:-2 4}
SIZES=${SIZES:-8 1M}
OP=${OP:-all_reduce}
ITERS=${ITERS:-200}
WARMUP=${WARMUP:-20}
PREFIX=${PREFIX:-}
PINGS=${PINGS:-5}
TP_PINGPONG=${TP_PINGPONG:-build/tests/tp_pingpong}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
ROOTFLAG=""
[ "$(id -u)" -eq 0 ] && ROOTFLAG="--allow-run-as-root"
MPI_BIN="$OUT/mpi_coll.openmpi"
mpicc.openmpi -O2 -o "$MPI_BIN" "$CBENCH/mpi_coll.c" || exit 1

bytes() { numfmt --from=iec "$1"; }

# one size per launch keeps the sizes independent of each other's order
fccl_one() { # bin n size -> us (the run's output is kept in $OUT/log)
    timeout -k 5 120 $PREFIX "$1/fccl-run" -n "$2" --provider shm --no-prefix \
        "$1/fccl-bench" -o "$OP" -d float32 -r sum -b "$3" -e "$3" \
        -n "$ITERS" -w "$WARMUP" --csv 2>&1 | tee -a "$OUT/log" |
        awk -F, '/^[a-z_]+,[0-9]/ {print $8; exit}'
}

ompi_one() { # n size -> us
    timeout -k 5 120 $PREFIX mpirun.openmpi $ROOTFLAG --oversubscribe -n "$1" \
        --mca btl self,vader "$MPI_BIN" -o "$OP" -b "$2" -e "$2" \
        -n "$ITERS" -w "$WARMUP" 2>/dev/null |
        awk -v b="$(bytes "$2")" '$1 == b {print $5; exit}'
}

for r in $(seq "$ROUNDS"); do
    for n in $NPS; do for s in $SIZES; do
        i=0
        for bin in "$@"; do
            v=$(fccl_one "$bin" "$n" "$s")
            echo "$v" >>"$OUT/fccl$i-$n-$s"
            [ -n "$v" ] || echo "fccl $bin, $n ranks, $s, round $r: no result" |
                tee -a "$OUT/failed" >&2
            i=$((i + 1))
        done
        v=$(ompi_one "$n" "$s")
        echo "$v" >>"$OUT/ompi-$n-$s"
        [ -n "$v" ] || echo "ompi, $n ranks, $s, round $r: no result" |
            tee -a "$OUT/failed" >&2
    done; done
    echo "round $r done" >&2
done

fi_pp() { # -> usec/xfer of 8-byte messages
    local port
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    timeout 60 $PREFIX fi_pingpong -B "$port" -p shm -e rdm -S 8 -I 10000 \
        >/dev/null 2>&1 &
    local spid=$!
    sleep 0.3
    timeout 60 $PREFIX fi_pingpong -P "$port" -p shm -e rdm -S 8 -I 10000 \
        localhost 2>/dev/null | awk '$1 == 8 {print $7}'
    wait "$spid"
}

tp_pp() { # -> half round trip of 8-byte messages, us
    timeout 60 $PREFIX "$TP_PINGPONG" -p shm -S 8 -I 10000 -B 8 -r 1 |
        sed -n 's/.*8 B half-RTT \([0-9.]*\) us.*/\1/p'
}

for r in $(seq "$PINGS"); do
    echo "$(fi_pp)" >>"$OUT/pp-fi"
    echo "$(tp_pp)" >>"$OUT/pp-tp"
done

/usr/bin/python3 - "$OUT" "$NPS" "$SIZES" "$@" <<'PYEOF'
import statistics, sys
out, nps, sizes, bins = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4:]
def vals(name):
    try:
        return [float(x) for x in open("%s/%s" % (out, name)).read().split()]
    except (OSError, ValueError):
        return []
def cell(v):
    return "-" if not v else "%.2f (%.2f..%.2f)" % (statistics.median(v), min(v), max(v))
names = ["fccl %s" % b for b in bins]
print("| ranks | size | " + " | ".join(names) + " | Open MPI vader | " +
      " | ".join("%s / ompi, median of rounds (min..max)" % n for n in names) + " |")
print("|---:|---:|" + "---:|" * (2 * len(bins) + 1))
for n in nps:
    for s in sizes:
        o = vals("ompi-%s-%s" % (n, s))
        row = [cell(vals("fccl%d-%s-%s" % (i, n, s))) for i in range(len(bins))]
        row.append(cell(o))
        for i in range(len(bins)):
            f = vals("fccl%d-%s-%s" % (i, n, s))
            rat = [a / b for a, b in zip(f, o) if b > 0]
            row.append(cell(rat))
        print("| %s | %s | " % (n, s) + " | ".join(row) + " |")
fi, tp = vals("pp-fi"), vals("pp-tp")
if fi and tp:
    print("\n8-byte ping-pong on shm, one way, us, median (min..max) of %d runs: "
          "fi_pingpong %s, fccl transport (tp_pingpong) %s; difference of the "
          "medians %.2f us" % (len(fi), cell(fi), cell(tp),
                               statistics.median(tp) - statistics.median(fi)))
PYEOF
[ -s "$OUT/failed" ] && { echo; echo "Runs without a result:"; sed 's/^/- /' "$OUT/failed"; }
echo "raw values: $OUT" >&2
