#!/usr/bin/python3
"""busy_report: the tables of bench/busy.sh from its raw.tsv.

    bench/busy_report.py OUT/raw.tsv

Lines: round, load|idle, op, ranks, size, system, us.  Per cell, ratios
are taken within a round (systems interleaved) and their median over
rounds is printed with min..max, as bench/cells.sh does:
  1. under load: each system's median us; best MPI (of the round) / fccl
     for the new policy and each fixed spin (>= 1: fccl at least as fast);
  2. under load against idle: new(load)/new(idle) and best MPI(load)/best
     MPI(idle) (the item asks new within 2x of its idle time wherever the
     best MPI stays within 2x of its own);
  3. idle A/B: old / new (>= 0.95 asked).
"""
import collections
import statistics
import sys

rows = collections.defaultdict(dict)  # (round, state, op, n, size) -> sys -> us
cells = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) < 7 or not f[6]:
        continue
    try:
        us = float(f[6])
    except ValueError:
        continue
    r, state, op, n, size, system = f[:6]
    rows[(r, state, op, n, size)][system] = us
    if (op, n, size) not in cells:
        cells.append((op, n, size))
rounds = sorted({k[0] for k in rows})


def best_mpi(d):
    v = [d[s] for s in ("ompi", "mpich") if s in d]
    return min(v) if v else None


def per_round(state, cell, fn):
    out = []
    for r in rounds:
        d = rows.get((r, state) + cell)
        if d is None:
            continue
        try:
            v = fn(d, r)
        except (KeyError, ZeroDivisionError, TypeError):
            continue
        if v is not None:
            out.append(v)
    return out


def fmt(v):
    if not v:
        return "-"
    m = statistics.median(v)
    return f"{m:.2f} ({min(v):.2f}..{max(v):.2f})" if len(v) > 1 else f"{m:.2f}"


def med(state, cell, system):
    v = per_round(state, cell, lambda d, r: d[system])
    return f"{statistics.median(v):.4g}" if v else "-"


fixed = sorted({s for k in rows for s in rows[k] if s.startswith("spin")},
               key=lambda s: int(s[4:]))
print("### Under load: median us per system\n")
cols = ["new", "old"] + fixed + ["ompi", "mpich"]
print("| op | ranks | size | " + " | ".join(cols) + " |")
print("|---|---:|---:|" + "---:|" * len(cols))
for c in cells:
    print(f"| {c[0]} | {c[1]} | {c[2]} | " +
          " | ".join(med("load", c, s) for s in cols) + " |")

print("\n### Under load: best MPI / fccl, median of rounds (min..max)\n")
cols = ["new", "old"] + fixed
print("| op | ranks | size | " + " | ".join(cols) + " |")
print("|---|---:|---:|" + "---:|" * len(cols))
wins = collections.Counter()
for c in cells:
    vals = []
    for s in cols:
        v = per_round("load", c, lambda d, r, s=s: best_mpi(d) / d[s])
        vals.append(fmt(v))
    print(f"| {c[0]} | {c[1]} | {c[2]} | " + " | ".join(vals) + " |")
    for s in fixed:
        v = per_round("load", c, lambda d, r, s=s: d[s] / d["new"])
        if v and statistics.median(v) >= 1:
            wins[s] += 1
print("\nCells where the new policy's time is at most the fixed spin's "
      "(median of per-round ratios >= 1): " +
      ", ".join(f"{s}: {wins[s]} of {len(cells)}" for s in fixed))

print("\n### Under load against idle (load time / idle time, median of "
      "rounds)\n")
print("| op | ranks | size | fccl new load/idle | best MPI load/idle |")
print("|---|---:|---:|---:|---:|")


def ratio_li(c, fn):
    out = []
    for r in rounds:
        a, b = rows.get((r, "load") + c), rows.get((r, "idle") + c)
        if a and b:
            try:
                out.append(fn(a) / fn(b))
            except (KeyError, TypeError, ZeroDivisionError):
                pass
    return out


for c in cells:
    print(f"| {c[0]} | {c[1]} | {c[2]} | "
          f"{fmt(ratio_li(c, lambda d: d['new']))} | "
          f"{fmt(ratio_li(c, best_mpi))} |")

print("\n### Idle: old / new (speed of new over old; >= 0.95 asked), and "
      "best MPI / new\n")
print("| op | ranks | size | new us | old us | old/new | best MPI / new |")
print("|---|---:|---:|---:|---:|---:|---:|")
for c in cells:
    ab = per_round("idle", c, lambda d, r: d["old"] / d["new"])
    bm = per_round("idle", c, lambda d, r: best_mpi(d) / d["new"])
    print(f"| {c[0]} | {c[1]} | {c[2]} | {med('idle', c, 'new')} | "
          f"{med('idle', c, 'old')} | {fmt(ab)} | {fmt(bm)} |")
