#!/usr/bin/env bash
# bench/coll.sh: collective performance, fccl against Open MPI, MPICH, Gloo.
#
#   bench/coll.sh [BUILD]               (BUILD: a build dir, default build)
#
# 2 and 4 ranks (NPS), float32 sum, 8 B .. 64 MiB (factor 2), all_reduce,
# all_gather and all_to_all (OPS).  Systems (SYSTEMS):
#   fccl-shm   fccl-run -n N --provider shm  $BUILD/bin/fccl-bench
#   fccl-tcp   fccl-run -n N --provider "tcp;ofi_rxm" ... (reference)
#   fccl-shm-inplace  fccl-bench -i (in place; not in the default list)
#   ompi       mpirun.openmpi --mca btl self,vader (its shared memory path)
#   ompi-ofi   mpirun.openmpi --mca pml cm --mca mtl ofi (Open MPI's default
#              provider filter excludes shm, tcp and udp, so it picks "net")
#   ompi-ofi-tcp  the same with --mca mtl_ofi_provider_include "tcp;ofi_rxm"
#   mpich      mpirun.mpich
#   gloo       /usr/bin/python3 bench/gloo_coll.py --spawn N (torch 1.13)
# MPI and Gloo run cli/bench/mpi_coll.c / bench/gloo_coll.py: per size a
# warm-up, then ITERS x { barrier; op }, slowest rank, median ("time"), and
# ITERS back-to-back ops averaged ("avg"); fccl-bench is asked for the same.
# Also: fi_pingpong -p shm -e rdm -S 8 -I 10000 (8-byte one-way latency,
# median of PINGS runs), single-core memcpy (cli/bench/memcpy_bw.c), and an
# fccl-bench -c pass that checks every result.
#
# COMPACT_ONLY=1 prints only the one-table-per-op summary (0: only the
# full per-size tables; default both).
# Environment: NPS, OPS, SYSTEMS, MAXB (64M), ITERS (20), WARMUP (5),
# REPEAT (3: whole sweeps, interleaved; tables show the median of the
# repetitions), PINGS (5), TIMEOUT (seconds per sweep, 900), OUT (raw logs, default
# $BUILD/bench/coll-results).  Prints markdown to stdout.
set -u
BUILD=${1:-build}
NPS=${NPS:-2 4}
OPS=${OPS:-all_reduce all_gather all_to_all}
SYSTEMS=${SYSTEMS:-fccl-shm fccl-tcp ompi ompi-ofi ompi-ofi-tcp mpich gloo}
MAXB=${MAXB:-64M}
ITERS=${ITERS:-20}
REPEAT=${REPEAT:-3}
WARMUP=${WARMUP:-5}
PINGS=${PINGS:-5}
TIMEOUT=${TIMEOUT:-900}
OUT=${OUT:-$BUILD/bench/coll-results}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
. "$HERE/preamble.sh" # PY, CBENCH, ROOTFLAG, FCCL_TIMEOUT
SWEEP="-b 8 -e $MAXB -f 2 -n $ITERS -w $WARMUP"

die() { echo "coll.sh: $*" >&2; exit 1; }

build_mpi() {
    mpicc.openmpi -O2 -o "$OUT/mpi_coll.openmpi" "$CBENCH/mpi_coll.c" ||
        die "mpicc.openmpi failed"
    mpicc.mpich -O2 -o "$OUT/mpi_coll.mpich" "$CBENCH/mpi_coll.c" ||
        die "mpicc.mpich failed"
}

# Command line of system $1 with $2 ranks for op $3 (extra args $4).
cmd_for() {
    local sys=$1 n=$2 op=$3 extra=${4:-}
    local ompi="mpirun.openmpi $ROOTFLAG --oversubscribe -n $n"
    case $sys in
    fccl-shm) echo "$BUILD/bin/fccl-run -n $n --provider shm" \
        "$BUILD/bin/fccl-bench -o $op -d float32 -r sum $SWEEP $extra" ;;
    fccl-shm-inplace) echo "$BUILD/bin/fccl-run -n $n --provider shm" \
        "$BUILD/bin/fccl-bench -o $op -d float32 -r sum -i $SWEEP $extra" ;;
    fccl-tcp) echo "$BUILD/bin/fccl-run -n $n --provider tcp;ofi_rxm" \
        "$BUILD/bin/fccl-bench -o $op -d float32 -r sum $SWEEP $extra" ;;
    ompi) echo "$ompi --mca btl self,vader $OUT/mpi_coll.openmpi -o $op" \
        "$SWEEP $extra" ;;
    ompi-ofi) echo "$ompi --mca pml cm --mca mtl ofi $OUT/mpi_coll.openmpi" \
        "-o $op $SWEEP $extra" ;;
    ompi-ofi-tcp) echo "$ompi --mca pml cm --mca mtl ofi" \
        "--mca mtl_ofi_provider_include tcp;ofi_rxm" \
        "$OUT/mpi_coll.openmpi -o $op $SWEEP $extra" ;;
    mpich) echo "mpirun.mpich -n $n $OUT/mpi_coll.mpich -o $op $SWEEP $extra" ;;
    gloo) echo "$PY $HERE/gloo_coll.py --spawn $n -o $op $SWEEP $extra" ;;
    *) die "unknown system $sys" ;;
    esac
}

# Reads a sweep log (any of the systems' table formats: a '#' header line
# naming the columns, nccl-tests style, then one numeric row per size) and
# appends "sys np op size time_us avg_us busbw" rows to $OUT/all.tsv.
write_parser() {
    cat >"$OUT/parse.py" <<'PYEOF'
import re, sys
sysname, np_, op, path = sys.argv[1:5]
cols, rows = None, []
for line in open(path, errors="replace"):
    line = re.sub(r"^\[\d+\]\s?", "", line.rstrip("\n"))  # fccl-run prefix
    toks = line.replace(",", " ").split()
    if not toks:
        continue
    if line.lstrip().startswith("#") and any("busbw" in t for t in toks):
        cols = [t.lstrip("#").lower() for t in toks if t != "#"]
        continue
    if cols is None or not re.fullmatch(r"\d+", toks[0]):
        continue
    def col(prefix, nth=0):
        hits = [i for i, c in enumerate(cols) if c.startswith(prefix)]
        return toks[hits[nth]] if len(hits) > nth and hits[nth] < len(toks) else None
    # fccl-bench names its back-to-back column "time" too (the second one).
    avg = col("avg") or col("time", 1) or "nan"
    rows.append((col("size") or "nan", col("time") or "nan", avg,
                 col("busbw") or "nan"))
for r in rows:
    print("\t".join((sysname, np_, op) + r))
PYEOF
}

run_sweeps() {
    local n op sys r
    for r in $(seq 1 "$REPEAT"); do
    for n in $NPS; do
        for op in $OPS; do
            for sys in $SYSTEMS; do
                local log="$OUT/$sys-np$n-$op-r$r.log" t0 rc
                t0=$(date +%s)
                # shellcheck disable=SC2046
                timeout -k 10 "$TIMEOUT" $(cmd_for "$sys" "$n" "$op") >"$log" 2>&1
                rc=$?
                echo "  run $r np=$n $op $sys: exit $rc, $(( $(date +%s) - t0 )) s" >&2
                [ $rc -eq 0 ] || echo "$sys np=$n $op run $r: exit $rc" >>"$OUT/status.txt"
                $PY "$OUT/parse.py" "$sys" "$n" "$op" "$log" >>"$OUT/all.tsv"
            done
        done
    done
    done
}

# fccl-bench -c: every result checked against a reference (not timed).
check_pass() {
    local n op
    for n in $NPS; do
        for op in $OPS; do
            local log="$OUT/check-np$n-$op.log"
            # shellcheck disable=SC2046
            timeout -k 10 "$TIMEOUT" $(cmd_for fccl-shm "$n" "$op") -c 1 -n 2 -w 1 \
                >"$log" 2>&1
            echo "- fccl-bench -c 1, shm, np=$n, $op: exit $?;" \
                "$(grep -hoE 'all results correct|WRONG RESULTS' "$log" | head -n 1)"
        done
    done
}

# The shm provider's own point-to-point rate (fi_pingpong -S SIZE): the
# ceiling for anything built on libfabric shm.  Prints "SIZE usec/xfer MB/s".
pingbw() {
    local sz port
    for sz in 1048576 67108864; do
        port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        timeout 60 fi_pingpong -B "$port" -p shm -e rdm -S "$sz" -I 20 \
            >"$OUT/pingbw-server-$sz.log" 2>&1 &
        local spid=$!
        sleep 0.3
        timeout 60 fi_pingpong -P "$port" -p shm -e rdm -S "$sz" -I 20 localhost \
            >"$OUT/pingbw-$sz.log" 2>&1
        wait "$spid"
        awk -v s="$sz" 'NR == 2 { printf "%s B: %s us one-way, %.2f GB/s\n", s, $7, s / $7 / 1e3 }' \
            "$OUT/pingbw-$sz.log"
    done
}

pingpong() {
    local i port
    for i in $(seq 1 "$PINGS"); do
        port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        timeout 60 fi_pingpong -B "$port" -p shm -e rdm -S 8 -I 10000 \
            >"$OUT/pingpong-server-$i.log" 2>&1 &
        local spid=$!
        sleep 0.3
        timeout 60 fi_pingpong -P "$port" -p shm -e rdm -S 8 -I 10000 localhost \
            >"$OUT/pingpong-$i.log" 2>&1
        wait "$spid"
        awk '$1 == 8 { print $7 }' "$OUT/pingpong-$i.log"
    done
}

summarize() {
    cat >"$OUT/summary.py" <<'PYEOF'
import collections, os, statistics, sys
tsv, pp_path, memcpy_path, systems = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
# (sys, np, op) -> size -> [(time, avg, busbw) per repetition]
R = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(tsv):
    s, n, op, size, t, a, bw = line.split("\t")
    try:
        R[(s, int(n), op)][int(size)].append((float(t), float(a), float(bw)))
    except ValueError:
        pass
# Median over repetitions, per column (time and busbw are both medians).
D = {k: {size: tuple(statistics.median(r[i] for r in runs) for i in range(3))
         for size, runs in v.items()} for k, v in R.items()}
pp = [float(x) for x in open(pp_path).read().split() if x.replace(".", "").isdigit()]
pp_med = statistics.median(pp) if pp else float("nan")
memcpy = float(open(memcpy_path).read().split("best ")[1].split()[0]) \
    if "best " in open(memcpy_path).read() else float("nan")
ours = "fccl-shm"
peers = [s for s in systems if s != ours]
SHOW = [8, 1024, 65536, 1 << 20, 16 << 20, 64 << 20]
nps = sorted({k[1] for k in D})
ops = []
for k in D:
    if k[2] not in ops:
        ops.append(k[2])

def get(s, n, op, size, i):
    v = D.get((s, n, op), {}).get(size)
    return v[i] if v else None

def fmt(x, p=2):
    return "-" if x is None else ("%.*f" % (p, x))

def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else "%.2f" % (a / b)

def size_name(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b

def compact(op, n):
    """One row per system: latency at small sizes, busbw at large ones."""
    cols = [(8, 0, "8 B us"), (1024, 0, "1 KiB us"), (65536, 0, "64 KiB us"),
            (1 << 20, 2, "1 MiB GB/s"), (16 << 20, 2, "16 MiB GB/s"),
            (64 << 20, 2, "64 MiB GB/s")]
    print("#### %s, %d ranks: median time (us) or busbw (GB/s); last columns "
          "ours/theirs\n" % (op, n))
    print("| system | " + " | ".join(c[2] for c in cols) +
          " | 64 MiB b2b GB/s | ours/this 8 B time | 1 MiB bw | 64 MiB bw |")
    print("|---|" + "---:|" * (len(cols) + 4))
    def b2b(s):
        v = D.get((s, n, op), {}).get(64 << 20)
        return v[2] * v[0] / v[1] if v and v[1] > 0 else None
    for s in systems:
        vals = [get(s, n, op, size, i) for size, i, _ in cols]
        rat = [ratio(get(ours, n, op, 8, 0), get(s, n, op, 8, 0)),
               ratio(get(ours, n, op, 1 << 20, 2), get(s, n, op, 1 << 20, 2)),
               ratio(get(ours, n, op, 64 << 20, 2), get(s, n, op, 64 << 20, 2))]
        print("| %s | " % s + " | ".join(fmt(v, 2 if i == 0 else 3) for v, (_, i, _) in
                                         zip(vals, cols)) +
              " | %s | " % fmt(b2b(s), 3) + " | ".join(rat) + " |")
    print()

if os.environ.get("COMPACT_ONLY") != "0":
    for op in ops:
        for n in nps:
            compact(op, n)
if os.environ.get("COMPACT_ONLY") == "1":
    ops = []

for op in ops:
    for n in nps:
        for idx, what in ((0, "time (us): barrier then op, slowest rank, median"),
                          (1, "avg (us): back-to-back ops, nccl-tests style")):
            print("#### %s, %d ranks, %s\n" % (op, n, what))
            print("| size | " + " | ".join(systems) + " | " +
                  " | ".join("%s/%s" % (ours, p) for p in peers) + " |")
            print("|---:|" + "---:|" * (len(systems) + len(peers)))
            for size in SHOW:
                vals = [get(s, n, op, size, idx) for s in systems]
                if all(v is None for v in vals):
                    continue
                o = get(ours, n, op, size, idx)
                print("| %s | " % size_name(size) + " | ".join(fmt(v) for v in vals) +
                      " | " + " | ".join(ratio(o, get(p, n, op, size, idx)) for p in peers) + " |")
            print()
        print("#### %s, %d ranks, busbw (GB/s) and ours/theirs\n" % (op, n))
        print("| size | " + " | ".join(systems) + " | " +
              " | ".join("%s/%s" % (ours, p) for p in peers) + " |")
        print("|---:|" + "---:|" * (len(systems) + len(peers)))
        for size in (1 << 20, 16 << 20, 64 << 20):
            vals = [get(s, n, op, size, 2) for s in systems]
            o = get(ours, n, op, size, 2)
            print("| %s | " % size_name(size) + " | ".join(fmt(v, 3) for v in vals) +
                  " | " + " | ".join(ratio(o, get(p, n, op, size, 2)) for p in peers) + " |")
        print()

print("#### Targets (issue 4), %s\n" % ours)
print("fi_pingpong shm 8 B one-way latency: runs %s us, median %.2f us; "
      "single-core memcpy best %.2f GB/s\n" % (pp, pp_med, memcpy))
print("| check | np | ours | reference | ratio | met |")
print("|---|---:|---:|---:|---:|---|")
def row(name, n, o, ref, want_ratio, higher_better=True):
    """want_ratio None: informational, no pass/fail."""
    if o is None or ref is None or ref == 0:
        print("| %s | %d | %s | %s | - | ? |" % (name, n, fmt(o), fmt(ref)))
        return
    r = o / ref
    if want_ratio is None:
        met = "-"
    elif (r >= want_ratio) if higher_better else (r <= want_ratio):
        met = "yes"
    else:
        met = "NO"
    print("| %s | %d | %.3f | %.3f | %.2f | %s |" % (name, n, o, ref, r, met))
big = 64 << 20
for n in nps:
    o = get(ours, n, "all_reduce", big, 2)
    ompi_best = max([v for v in (get(s, n, "all_reduce", big, 2) for s in
                     ("ompi", "ompi-ofi", "ompi-ofi-tcp")) if v is not None], default=None)
    row("all_reduce 64 MiB busbw >= 1.0x Open MPI best", n, o, ompi_best, 1.0)
    row("all_reduce 64 MiB busbw >= 2x Gloo", n, o, get("gloo", n, "all_reduce", big, 2), 2.0)
    row("all_reduce 64 MiB busbw / memcpy (fraction)", n, o, memcpy, None)
    lat = get(ours, n, "all_reduce", 8, 0)
    row("all_reduce 8 B time <= 2x fi_pingpong one-way (us)", n, lat, pp_med, 2.0, False)
    for p in ("mpich", "gloo", "ompi"):
        row("all_reduce 8 B time < %s (us)" % p, n, lat, get(p, n, "all_reduce", 8, 0), 1.0, False)
    for op in ("all_gather", "all_to_all"):
        for size in (1 << 20, big):
            ref = max([v for v in (get(s, n, op, size, 2) for s in
                       ("ompi", "ompi-ofi", "ompi-ofi-tcp")) if v is not None], default=None)
            row("%s %s busbw >= 1.0x Open MPI best" % (op, size_name(size)), n,
                get(ours, n, op, size, 2), ref, 1.0)
PYEOF
    $PY "$OUT/summary.py" "$OUT/all.tsv" "$OUT/pingpong.txt" "$OUT/memcpy.txt" "$SYSTEMS"
}

machine() {
    echo "Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')," \
        "$(free -g | awk '/^Mem:/ {print $2}') GiB; load before:" \
        "$(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
}

case " $SYSTEMS " in *" fccl-"*)
    [ -x "$BUILD/bin/fccl-bench" ] && [ -x "$BUILD/bin/fccl-run" ] ||
        die "build $BUILD first (make BUILD=$BUILD all)" ;;
esac
build_mpi
write_parser
: >"$OUT/all.tsv"
: >"$OUT/status.txt"
echo "## Collectives run ($(machine))"
echo
MEMCPY="$BUILD/bench/memcpy_bw"
[ -x "$MEMCPY" ] || { cc -O2 -o "$OUT/memcpy_bw" "$CBENCH/memcpy_bw.c" &&
    MEMCPY="$OUT/memcpy_bw"; }
"$MEMCPY" 64 10 >"$OUT/memcpy.txt" 2>&1
pingpong >"$OUT/pingpong.txt"
echo "fi_pingpong -p shm -e rdm -S SIZE -I 20 (one-way time per message, rate):"
pingbw | sed 's/^/- /'
echo
run_sweeps
echo "Failed sweeps: $(tr '\n' ';' <"$OUT/status.txt") (none if empty)."
echo "Ratios are ours/theirs: below 1 is better for times, above 1 for busbw."
echo
summarize
echo
case " $SYSTEMS " in *" fccl-shm "*)
    echo "#### fccl-bench -c (every result checked)"; echo; check_pass ;;
esac
