#!/usr/bin/python3
"""busy_report: the tables of bench/busy.sh from its raw.tsv.

    bench/busy_report.py OUT/raw.tsv

Lines: round, load|idle, op, ranks, size, system, us, and the measure
("time", the default for older files without it, or "loop": back to
back).  For each measure, per cell, ratios are taken within a round
(systems interleaved) and their median over rounds is printed with
min..max, as bench/cells.sh does:
  1. under load: each system's median us; best MPI (of the round) / fccl
     for the new policy and each fixed spin (>= 1: fccl at least as fast);
  2. under load against idle: new(load)/new(idle) and best MPI(load)/best
     MPI(idle) (the item asks new within 2x of its idle time wherever the
     best MPI stays within 2x of its own);
  3. idle A/B: old / new (>= 0.95 asked).
Last, the count of cells that meet issue 33 item 2 with each measure, and
with the cells timed back to back judged by that measure (the time column
for the others).
"""
import collections
import statistics
import sys

# (measure, round, state, op, n, size) -> system -> us
rows = collections.defaultdict(dict)
cells = collections.defaultdict(list)  # measure -> [(op, n, size)]
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) < 7 or not f[6]:
        continue
    try:
        us = float(f[6])
    except ValueError:
        continue
    r, state, op, n, size, system = f[:6]
    m = f[7] if len(f) > 7 and f[7] else "time"
    rows[(m, r, state, op, n, size)][system] = us
    if (op, n, size) not in cells[m]:
        cells[m].append((op, n, size))
rounds = sorted({k[1] for k in rows})
fixed = sorted({s for k in rows for s in rows[k] if s.startswith("spin")},
               key=lambda s: int(s[4:]))


def best_mpi(d):
    v = [d[s] for s in ("ompi", "mpich") if s in d]
    return min(v) if v else None


def per_round(m, state, cell, fn):
    out = []
    for r in rounds:
        d = rows.get((m, r, state) + cell)
        if d is None:
            continue
        try:
            v = fn(d)
        except (KeyError, ZeroDivisionError, TypeError):
            continue
        if v is not None:
            out.append(v)
    return out


def ratio_li(m, c, fn):
    """Load time / idle time of fn's system, per round."""
    out = []
    for r in rounds:
        a, b = rows.get((m, r, "load") + c), rows.get((m, r, "idle") + c)
        if a and b:
            try:
                out.append(fn(a) / fn(b))
            except (KeyError, TypeError, ZeroDivisionError):
                pass
    return out


def fmt(v):
    if not v:
        return "-"
    m = statistics.median(v)
    return f"{m:.2f} ({min(v):.2f}..{max(v):.2f})" if len(v) > 1 else f"{m:.2f}"


def med(m, state, cell, system):
    v = per_round(m, state, cell, lambda d: d[system])
    return f"{statistics.median(v):.4g}" if v else "-"


def verdict(m, c):
    """(at or above the best MPI under load, load/idle rule applies,
    load/idle rule met) for cell c by measure m, or None without data."""
    v = per_round(m, "load", c, lambda d: best_mpi(d) / d["new"])
    if not v:
        return None
    mpi_li = ratio_li(m, c, best_mpi)
    new_li = ratio_li(m, c, lambda d: d["new"])
    applies = bool(mpi_li) and statistics.median(mpi_li) <= 2
    met = bool(new_li) and statistics.median(new_li) <= 2
    return statistics.median(v) >= 1, applies, met


def report(m, title):
    print(f"## {title}\n")
    print("### Under load: median us per system\n")
    cols = ["new", "old"] + fixed + ["ompi", "mpich"]
    print("| op | ranks | size | " + " | ".join(cols) + " |")
    print("|---|---:|---:|" + "---:|" * len(cols))
    for c in cells[m]:
        print(f"| {c[0]} | {c[1]} | {c[2]} | " +
              " | ".join(med(m, "load", c, s) for s in cols) + " |")

    print("\n### Under load: best MPI / fccl, median of rounds (min..max)\n")
    cols = ["new", "old"] + fixed
    print("| op | ranks | size | " + " | ".join(cols) + " |")
    print("|---|---:|---:|" + "---:|" * len(cols))
    wins = collections.Counter()
    for c in cells[m]:
        vals = [fmt(per_round(m, "load", c,
                              lambda d, s=s: best_mpi(d) / d[s]))
                for s in cols]
        print(f"| {c[0]} | {c[1]} | {c[2]} | " + " | ".join(vals) + " |")
        for s in fixed:
            v = per_round(m, "load", c, lambda d, s=s: d[s] / d["new"])
            if v and statistics.median(v) >= 1:
                wins[s] += 1
    print("\nCells where the new policy's time is at most the fixed spin's "
          "(median of per-round ratios >= 1): " +
          ", ".join(f"{s}: {wins[s]} of {len(cells[m])}" for s in fixed))

    print("\n### Under load against idle (load time / idle time, median of "
          "rounds)\n")
    print("| op | ranks | size | fccl new load/idle | best MPI load/idle |")
    print("|---|---:|---:|---:|---:|")
    for c in cells[m]:
        print(f"| {c[0]} | {c[1]} | {c[2]} | "
              f"{fmt(ratio_li(m, c, lambda d: d['new']))} | "
              f"{fmt(ratio_li(m, c, best_mpi))} |")

    print("\n### Idle: old / new (speed of new over old; >= 0.95 asked), "
          "and best MPI / new\n")
    print("| op | ranks | size | new us | old us | old/new | best MPI / new |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in cells[m]:
        ab = per_round(m, "idle", c, lambda d: d["old"] / d["new"])
        bm = per_round(m, "idle", c, lambda d: best_mpi(d) / d["new"])
        print(f"| {c[0]} | {c[1]} | {c[2]} | {med(m, 'idle', c, 'new')} | "
              f"{med(m, 'idle', c, 'old')} | {fmt(ab)} | {fmt(bm)} |")
    print()


def count(judge):
    """Prints the item's two counts with judge(cell) -> measure."""
    above = li_cells = li_met = n = 0
    below = []
    for c in cells["time"]:
        v = verdict(judge(c), c)
        if v is None:
            continue
        n += 1
        above += v[0]
        if not v[0]:
            below.append("%s %s %s" % c)
        if v[1]:
            li_cells += 1
            li_met += v[2]
    print(f"- at or above the best MPI under load: {above} of {n}"
          + (f" (below: {', '.join(below)})" if below else ""))
    print(f"- within 2x of its idle time where the best MPI is: "
          f"{li_met} of {li_cells}")


report("time", "Time column (a barrier before each call)")
if cells["loop"]:
    report("loop", "Back to back (no barrier between calls)")
print("## Issue 33 item 2, cell by cell\n")
print("Every cell by its time column:")
count(lambda c: "time")
if cells["loop"]:
    looped = set(cells["loop"])
    print("\nThe cells timed back to back judged back to back, the others "
          "by the time column:")
    count(lambda c: "loop" if c in looped else "time")
