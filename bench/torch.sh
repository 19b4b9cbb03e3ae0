#!/usr/bin/env bash
# torch.distributed with backend "fccl" against "gloo" (bench/torch_coll.py)
# at 2 and 4 ranks under fccl-run: the collectives at 8 B, 64 KiB, 1 MiB and
# 64 MiB, one DDP step of a ~25M-parameter model, and the torch layer's
# per-call overhead; prints a table and writes it to bench/TORCH.md.
#
# The overhead (issue 35): dist.all_reduce of 2 float32, 2 ranks,
# torch.set_num_threads(1), OV_ITERS (5000) calls back to back, median of
# 3 rounds, minus fccl-bench -o all_reduce -b 8 -e 8's back-to-back
# average of OV_ITERS calls in the same run; with the torch call split
# into the call (async_op=True) and work.wait(), and the library's call
# in a C loop of the extension.  Two more, in interleaved rounds of one
# process: torch's floor (dist.all_reduce on a backend that does nothing:
# torch's own wrapper, which no backend avoids) and fccl.torch's own part
# (the group's allreduce and wait, less the C loop).
#
#   bench/torch.sh [BUILD]                 the full run (minutes; a quiet machine)
#   SMOKE=1 bench/torch.sh [BUILD]         8 B and 64 KiB, 2 ranks, no DDP: a check
#   OVERHEAD_ONLY=1 bench/torch.sh [BUILD] the overhead alone (printed, no file)
#   OV_PREFIX="chrt -f 10"                 prefixes the overhead's two launches
#                                          (as py_compare.sh's AB_PREFIX: on a
#                                          loaded machine, both ranks on a core)
#   RANKS="2 4" SIZES=8,64K,1M,64M ITERS=200 OUT=bench/TORCH.md  override
set -u
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
if [ -n "${SMOKE:-}" ]; then
    RANKS=${RANKS:-2} SIZES=${SIZES:-8,64K} ITERS=${ITERS:-50} DDP=${DDP:-}
    OUT=${OUT:-/dev/null}
else
    RANKS=${RANKS:-"2 4"} SIZES=${SIZES:-8,64K,1M,64M} ITERS=${ITERS:-200}
    DDP=${DDP---ddp} OUT=${OUT:-$ROOT/bench/TORCH.md}
fi
OV_ITERS=${OV_ITERS:-5000}
export PYTHONPATH="$ROOT/$BUILD/python"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# the overhead section: fccl-bench, then torch, one after the other
overhead() {
    local b2b t
    b2b=$(timeout -k 10 300 ${OV_PREFIX:-} "$ROOT/$BUILD/bin/fccl-run" -n 2 \
        "$ROOT/$BUILD/bin/fccl-bench" -o all_reduce -b 8 -e 8 \
        -n "$OV_ITERS" --csv 2>/dev/null |
        awk -F, '/^\[0\] all_reduce,/ {print $11}')
    [ -n "$b2b" ] || { echo "torch.sh: fccl-bench failed" >&2; return 1; }
    t=$(timeout -k 10 600 ${OV_PREFIX:-} "$ROOT/$BUILD/bin/fccl-run" -n 2 "$PY" \
        "$ROOT/bench/torch_coll.py" --backend fccl --ops "" --overhead \
        --overhead-iters "$OV_ITERS" 2>/dev/null |
        sed -n 's/^\[0\] RESULT fccl overhead_\([a-z_]*\) 8 2 /\1 /p')
    [ -n "$t" ] || { echo "torch.sh: torch_coll.py --overhead failed" >&2
                     return 1; }
    "$PY" - "$b2b" "$t" <<'PYEOF'
import sys
b2b = float(sys.argv[1])
v = {k: float(x) for k, x in (l.split() for l in sys.argv[2].splitlines())}
print("| torch us/call | call us | wait us | fccl-bench b2b us | "
      "C loop us | torch layer us | torch's floor us | fccl.torch us |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
print("| %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** | %.2f | **%.2f** |" % (
    v["torch_call"], v["call_part"], v["wait_part"], b2b, v["c_loop"],
    v["torch_call"] - b2b, v["torch_floor"], v["fccl_part"]))
PYEOF
}

if [ -n "${OVERHEAD_ONLY:-}" ]; then
    overhead
    exit
fi
for n in $RANKS; do
    for b in fccl gloo; do
        timeout -k 10 1800 "$ROOT/$BUILD/bin/fccl-run" -n "$n" "$PY" \
            "$ROOT/bench/torch_coll.py" --backend "$b" --sizes "$SIZES" \
            --iters "$ITERS" $DDP 2>/dev/null |
            sed -n 's/^\[0\] RESULT //p' >>"$tmp" ||
            { echo "torch.sh: $b at $n ranks failed" >&2; exit 1; }
    done
done
ov=$(overhead) || exit 1
# backend op bytes ranks us -> one row per (op, bytes, ranks)
report=$("$PY" - "$tmp" <<'PYEOF'
import sys
rows = {}
for line in open(sys.argv[1]):
    b, op, nbytes, n, us = line.split()
    rows.setdefault((op, int(nbytes), int(n)), {})[b] = us
print("| op | bytes | ranks | fccl us | gloo us | speed-up |")
print("|---|---:|---:|---:|---:|---:|")
for (op, nbytes, n), v in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
    f, g = v.get("fccl", "-"), v.get("gloo", "-")
    x = "%.1fx" % (float(g) / float(f)) if "-" not in (f, g) else "-"
    print(f"| {op} | {nbytes} | {n} | {f} | {g} | {x} |")
PYEOF
)
printf '%s\n\n%s\n' "$report" "$ov"
if [ "$OUT" != /dev/null ]; then
    {
        echo "# torch.distributed: \"fccl\" against \"gloo\" (bench/torch.sh)"
        echo
        echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), torch $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null)."
        echo "Times per call, the slowest rank's, median of 3 rounds (bench/torch_coll.py)."
        echo
        printf '%s\n' "$report"
        echo
        echo "The torch layer's cost of an 8-byte all_reduce, 2 ranks, $OV_ITERS calls back to back,"
        echo "median of 3 rounds, minus fccl-bench's back-to-back average (call and wait: async_op=True"
        echo "and work.wait(); C loop: the library's call from the extension):"
        echo
        printf '%s\n' "$ov"
    } >"$OUT"
fi
