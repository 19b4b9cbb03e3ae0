#!/usr/bin/env bash
# torch.distributed with backend "fccl" against "gloo" (bench/torch_coll.py)
# at 2 and 4 ranks under fccl-run: the collectives at 8 B, 64 KiB, 1 MiB and
# 64 MiB, one DDP step of a ~25M-parameter model, and the torch layer's
# per-call overhead; prints a table and writes it to bench/TORCH.md.
#
#   bench/torch.sh [BUILD]                 the full run (minutes; a quiet machine)
#   SMOKE=1 bench/torch.sh [BUILD]         8 B and 64 KiB, 2 ranks, no DDP: a check
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
export PYTHONPATH="$ROOT/$BUILD/python"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for n in $RANKS; do
    for b in fccl gloo; do
        extra=()
        [ "$b" = fccl ] && extra=(--overhead)
        timeout -k 10 1800 "$ROOT/$BUILD/bin/fccl-run" -n "$n" "$PY" \
            "$ROOT/bench/torch_coll.py" --backend "$b" --sizes "$SIZES" \
            --iters "$ITERS" $DDP "${extra[@]}" 2>/dev/null |
            sed -n 's/^\[0\] RESULT //p' >>"$tmp" ||
            { echo "torch.sh: $b at $n ranks failed" >&2; exit 1; }
    done
done
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
printf '%s\n' "$report"
if [ "$OUT" != /dev/null ]; then
    {
        echo "# torch.distributed: \"fccl\" against \"gloo\" (bench/torch.sh)"
        echo
        echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), torch $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null)."
        echo "Times per call, the slowest rank's, median of 3 rounds (bench/torch_coll.py)."
        echo
        printf '%s\n' "$report"
    } >"$OUT"
fi
