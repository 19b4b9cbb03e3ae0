#!/usr/bin/python3
"""Draw the README's performance plots from the benchmarks' data files.

    /usr/bin/python3 bench/plot.py DATA_DIR OUT_DIR

DATA_DIR holds what bench/plot_data.sh collects:
  coll.tsv     bench/coll.sh's raw table: sys np op size time_us avg_us busbw
               (several repetitions of a cell: the median is drawn)
  store.csv    tcpstore-bench's "csv," lines: label,addr,dialect,clients,
               bytes,op,n,seconds,ops_per_s,p50_us,p99_us
  startup.tsv  system<TAB>n<TAB>seconds (one line per launch; medians drawn)
Writes OUT_DIR/coll-<op>.png, store.png and startup.png (what is missing
from DATA_DIR is skipped, with a line saying so).
"""
import collections
import csv
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

NAMES = {
    "fccl-shm": "fccl (shm)",
    "fccl-tcp": "fccl (tcp;ofi_rxm)",
    "ompi": "Open MPI 4.1 (vader)",
    "mpich": "MPICH 4.0",
    "gloo": "Gloo (torch 1.13)",
}
STYLE = {"fccl-shm": "-o", "fccl-tcp": "-.o", "ompi": "--s", "mpich": "--^",
         "gloo": ":d"}


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%g %s" % (n / div, unit)
    return "%d B" % n


def coll_plots(path, out):
    cells = collections.defaultdict(list)
    for line in open(path):
        f = line.split("\t")
        if len(f) < 7:
            continue
        try:
            size, bw = int(f[3]), float(f[6])
        except ValueError:
            continue
        if bw == bw:  # not NaN
            cells[(f[2], int(f[1]), f[0], size)].append(bw)
    ops = sorted({k[0] for k in cells})
    for op in ops:
        nps = sorted({k[1] for k in cells if k[0] == op})
        fig, axes = plt.subplots(1, len(nps), figsize=(6 * len(nps), 4.2),
                                 squeeze=False)
        for ax, n in zip(axes[0], nps):
            systems = sorted({k[2] for k in cells if k[0] == op and k[1] == n},
                             key=lambda s: list(NAMES).index(s)
                             if s in NAMES else 99)
            for s in systems:
                pts = sorted((k[3], statistics.median(v))
                             for k, v in cells.items()
                             if k[0] == op and k[1] == n and k[2] == s)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts],
                            STYLE.get(s, "-"), label=NAMES.get(s, s),
                            markersize=3)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title("%s, %d ranks, one host" % (op, n))
            ax.set_xlabel("bytes per rank")
            ax.set_ylabel("bus bandwidth, GB/s")
            ticks = [1 << e for e in range(3, 27, 3)]
            ax.set_xticks(ticks)
            ax.set_xticklabels([human(t) for t in ticks], rotation=30)
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        name = os.path.join(out, "coll-%s.png" % op)
        fig.savefig(name, dpi=110)
        plt.close(fig)
        print("wrote", name)


def store_plot(path, out):
    rows = collections.defaultdict(list)
    for r in csv.reader(open(path)):
        if len(r) < 11 or r[0] != "csv" or r[1] == "label":
            continue
        try:
            rows[(r[1], int(r[4]), r[6])].append(float(r[9]))
        except ValueError:
            continue
    labels = sorted({k[0] for k in rows})
    groups = sorted({(k[1], k[2]) for k in rows})
    fig, ax = plt.subplots(figsize=(9, 4.2))
    w = 0.8 / max(1, len(labels))
    for i, lab in enumerate(labels):
        ys = [statistics.median(rows[(lab, c, op)]) if (lab, c, op) in rows
              else 0 for c, op in groups]
        ax.bar([g + i * w for g in range(len(groups))], ys, w, label=lab)
    ax.set_xticks([g + w * (len(labels) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels(["%s, %d client%s" % (op, c, "s" if c > 1 else "")
                        for c, op in groups], rotation=20)
    top = max((max(v) for v in rows.values()), default=1)
    ax.set_ylim(0, top * 1.3)  # room for the legend above the bars
    ax.set_ylabel("operations per second")
    ax.set_title("store operations, 100-byte values, loopback")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", ncol=len(labels))
    fig.tight_layout()
    name = os.path.join(out, "store.png")
    fig.savefig(name, dpi=110)
    plt.close(fig)
    print("wrote", name)


def startup_plot(path, out):
    runs = collections.defaultdict(list)
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 3:
            try:
                runs[(f[0], int(f[1]))].append(float(f[2]))
            except ValueError:
                pass
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for s in sorted({k[0] for k in runs}):
        pts = sorted((n, statistics.median(v)) for (t, n), v in runs.items()
                     if t == s)
        ax.plot([p[0] for p in pts], [p[1] for p in pts],
                "-o" if s == "fccl" else "--s", label=s, markersize=3)
    ax.set_xscale("log", base=2)
    # Gloo is 10-70x the others: on a linear axis they would be one line.
    ax.set_yscale("log")
    ax.set_xticks(sorted({k[1] for k in runs}))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel("ranks (one host)")
    ax.set_ylabel("launch to finish, s (init + barrier + exit)")
    ax.set_title("job start-up")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = os.path.join(out, "startup.png")
    fig.savefig(name, dpi=110)
    plt.close(fig)
    print("wrote", name)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py DATA_DIR OUT_DIR")
    data, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    for name, fn in (("coll.tsv", coll_plots), ("store.csv", store_plot),
                     ("startup.tsv", startup_plot)):
        path = os.path.join(data, name)
        if os.path.exists(path):
            fn(path, out)
        else:
            print("plot.py: no %s, skipped" % path)


if __name__ == "__main__":
    main()
