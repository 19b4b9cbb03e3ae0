#!/usr/bin/python3
"""bench/net_report.py: parsing and the markdown report of bench/net.sh.

  net_report.py parse SYS LAYOUT OP ROUND LOG   rows for OUT/all.tsv
  net_report.py ceil ROUND LOGPREFIX            rows for OUT/ceil.tsv
  net_report.py report OUT "SYS..."             the markdown report

all.tsv: layout op sys round size time_us b2b_us busbw algo.  LOG is
fccl-bench --csv output (lines may carry fccl-run's "[RANK] " prefix) or
cli/bench/mpi_coll.c's table.
"""
import collections
import json
import os
import re
import statistics
import sys


def parse(sysname, layout, op, rnd, path):
    rows = []
    for line in open(path, errors="replace"):
        line = re.sub(r"^\[\d+\]\s?", "", line.strip())
        f = line.split(",")
        if len(f) == 15 and f[2].isdigit():  # fccl-bench --csv
            rows.append((f[2], f[7], f[10], f[9], f[14]))
            continue
        t = line.split()
        if len(t) >= 8 and t[0].isdigit() and t[1].isdigit():  # mpi_coll
            rows.append((t[0], t[4], t[5], t[7], "-"))
    for r in rows:
        print("\t".join((layout, op, sysname, rnd) + r))


def first_data_line(path):
    """fi_pingpong: the line after the header (bytes #sent #ack total time
    MB/sec usec/xfer Mxfers/sec)."""
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return None
    for i, l in enumerate(lines):
        if l.startswith("bytes") and i + 1 < len(lines):
            t = lines[i + 1].split()
            return t if len(t) >= 8 else None
    return None


def ceil(rnd, prefix):
    out = []
    try:
        d = json.load(open(prefix + ".iperf3.json"))
        out.append(("iperf3_GBs", d["end"]["sum_received"]["bits_per_second"] / 8e9))
        cpu = d["end"].get("cpu_utilization_percent", {})
        out.append(("iperf3_cpu_sender_pct", cpu.get("host_total", float("nan"))))
        out.append(("iperf3_cpu_receiver_pct", cpu.get("remote_total", float("nan"))))
    except (OSError, ValueError, KeyError):
        pass
    t = first_data_line(prefix + ".pingpong-8")
    if t:
        out.append(("pingpong_8B_oneway_us", float(t[6])))
    t = first_data_line(prefix + ".pingpong-4194304")
    if t:
        out.append(("pingpong_4MiB_oneway_us", float(t[6])))
        out.append(("pingpong_4MiB_GBs", float(t[5]) / 1e3))
    for k, v in out:
        print("%s\t%s\t%.4f" % (rnd, k, v))


# ---- report ----

def size_name(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def size_val(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    return int(s[:-1]) * m[s[-1].upper()] if s[-1].upper() in m else int(s)


def med(v):
    return statistics.median(v) if v else None


def cell(v, prec=1, spread=True):
    """median (min-max) of a list of values."""
    if not v:
        return "-"
    m = statistics.median(v)
    if len(v) == 1 or not spread:
        return "%.*f" % (prec, m)
    return "%.*f (%.*f-%.*f)" % (prec, m, prec, min(v), prec, max(v))


def tprec(x):
    return 0 if x >= 1000 else 1


def report(out, systems):
    systems = systems.split()
    fccls = [s for s in systems if s.startswith("fccl")]
    mpis = [s for s in systems if not s.startswith("fccl")]
    R = collections.defaultdict(lambda: collections.defaultdict(list))
    by_round = {}  # (layout, op, system, size, round) -> time
    algo = {}
    for line in open(os.path.join(out, "all.tsv")):
        f = line.rstrip("\n").split("\t")
        if len(f) != 9:
            continue
        lay, op, s, rnd, size, t, b2b, bw, al = f
        try:
            R[(lay, op, s)][int(size)].append((float(t), float(b2b), float(bw)))
            by_round[(lay, op, s, int(size), rnd)] = float(t)
        except ValueError:
            continue
        algo[(lay, op, s, int(size))] = al
    C = collections.defaultdict(list)
    for line in open(os.path.join(out, "ceil.tsv")):
        f = line.split("\t")
        if len(f) == 3:
            C[f[1]].append(float(f[2]))
    show = os.environ.get("SHOW") or "8 64 512 4K 32K 256K 1M 4M 16M 64M"
    show = None if show == "all" else [size_val(x) for x in show.split()]

    def vals(lay, op, s, size, i):
        return [x[i] for x in R.get((lay, op, s), {}).get(size, [])]

    def tmed(lay, op, s, size):
        return med(vals(lay, op, s, size, 0))

    def best_mpi(lay, op, size):
        """(time, system) of the fastest MPI by median time."""
        c = [(tmed(lay, op, m, size), m) for m in mpis]
        c = [x for x in c if x[0] is not None]
        return min(c) if c else (None, None)

    def paired(lay, op, s, size):
        """Per round, best MPI time / fccl time of that round (the systems of
        one round run back to back, so they share the machine's state): the
        median ratio and how many rounds fccl won, as text."""
        rs = []
        for (l2, o2, s2, z, rnd), t in by_round.items():
            if (l2, o2, s2, z) != (lay, op, s, size) or t <= 0:
                continue
            b = [by_round.get((lay, op, m, size, rnd)) for m in mpis]
            b = [x for x in b if x is not None]
            if b:
                rs.append(min(b) / t)
        if not rs:
            return "-"
        return "%.2f (%d/%d)" % (med(rs), sum(r >= 1 for r in rs), len(rs))

    # ceilings
    print("### Ceilings (host 1 -> host 2, every round)\n")
    print("| measure | median (min-max) |")
    print("|---|---:|")
    names = [("iperf3_GBs", "iperf3 single stream, GB/s", 3),
             ("iperf3_cpu_sender_pct", "iperf3 sender CPU, % of a core", 0),
             ("iperf3_cpu_receiver_pct", "iperf3 receiver CPU, % of a core", 0),
             ("pingpong_8B_oneway_us", "fi_pingpong tcp;ofi_rxm 8 B one-way, us", 1),
             ("pingpong_4MiB_oneway_us", "fi_pingpong tcp;ofi_rxm 4 MiB one-way, us", 0),
             ("pingpong_4MiB_GBs", "fi_pingpong tcp;ofi_rxm 4 MiB, GB/s", 3)]
    for k, label, p in names:
        print("| %s | %s |" % (label, cell(C.get(k, []), p)))
    print()

    # path check
    pth = os.path.join(out, "path.tsv")
    if os.path.exists(pth) and os.path.getsize(pth) > 0:
        print("### Path check: bytes into host 1 over its veth, one 4 MiB "
              "all_gather sweep (11 operations)\n")
        print("| layout | system | exit | MB received | least possible MB | ratio |")
        print("|---|---|---:|---:|---:|---:|")
        for line in open(pth):
            lay, s, rc, pc, m, rx = line.split()
            least = 11 * int(pc) * (int(m) - 1) / int(m)
            print("| %s | %s | %s | %.1f | %.1f | %.2f |" % (
                lay, s, rc, int(rx) / 1e6, least / 1e6, int(rx) / least))
        print("\nA ratio below 1 would mean data went another way "
              "(shared memory between namespaces).\n")

    # per layout and op
    layouts = []
    ops = []
    for (lay, op, s) in R:
        if lay not in layouts:
            layouts.append(lay)
        if op not in ops:
            ops.append(op)
    for lay in layouts:
        m, r = lay.split("x")
        print("### %s hosts x %s rank%s\n" % (m, r, "s" if r != "1" else ""))
        for op in ops:
            have = [s for s in systems if (lay, op, s) in R]
            sizes = sorted({z for s in have for z in R[(lay, op, s)]})
            if show:
                sizes = [z for z in sizes if z in show]
            if not sizes:
                continue
            fh = [s for s in have if s.startswith("fccl")]
            print("#### %s, %s: time (us) and busbw (GB/s), median over rounds "
                  "(min-max); last columns best MPI time / fccl time (> 1: fccl "
                  "faster)\n" % (lay, op))
            hdr = ["size"] + ["%s us" % s for s in have] + \
                  (["fccl algo"] if fh else []) + ["%s GB/s" % s for s in have] + \
                  ["best MPI / %s" % s for s in fh]
            print("| " + " | ".join(hdr) + " |")
            print("|---:|" + "---:|" * (len(hdr) - 1))
            for z in sizes:
                row = [size_name(z)]
                for s in have:
                    v = vals(lay, op, s, z, 0)
                    row.append(cell(v, tprec(med(v) or 0)))
                if fh:
                    row.append(", ".join(sorted({algo.get((lay, op, s, z), "-")
                                                 for s in fh})))
                for s in have:
                    row.append(cell(vals(lay, op, s, z, 2), 3))
                bt, bs = best_mpi(lay, op, z)
                for s in fh:
                    ft = tmed(lay, op, s, z)
                    row.append("%.2f (%s)" % (bt / ft, bs) if bt and ft else "-")
                print("| " + " | ".join(row) + " |")
            print()

    # CPU and bytes per sweep
    sw = collections.defaultdict(list)
    for line in open(os.path.join(out, "sweeps.tsv")):
        f = line.rstrip("\n").split("\t")
        if len(f) == 10:
            lay, op, s, rnd, rc, wall, u, y, rx, tx = f
            sw[(lay, op, s)].append((float(wall), float(u) + float(y), int(rx)))
    if sw:
        ncpu = os.cpu_count() or 1
        swsys = [s for s in systems if any(k[2] == s for k in sw)]
        print("### CPU per sweep (all launches of one system, layout and op): "
              "CPU seconds of every process it started / (wall seconds x %d "
              "cores), median over rounds; MB into host 1\n" % ncpu)
        print("| layout | op | " + " | ".join("%s CPU %%" % s for s in swsys) +
              " | " + " | ".join("%s wall s" % s for s in swsys) + " | " +
              " | ".join("%s MB in" % s for s in swsys) + " |")
        print("|---|---|" + "---:|" * (3 * len(swsys)))
        for lay in layouts:
            for op in ops:
                row = [lay, op]
                if not any((lay, op, s) in sw for s in swsys):
                    continue
                for i in (0, 1, 2):
                    for s in swsys:
                        v = sw.get((lay, op, s))
                        if not v:
                            row.append("-")
                        elif i == 0:
                            c = [c / (w * ncpu) * 100 for w, c, _ in v if c == c and w > 0]
                            row.append("%.0f" % med(c) if c else "-")
                        elif i == 1:
                            row.append("%.1f" % med([w for w, _, _ in v]))
                        else:  # 2147483647: mawk's %d clamped it (older runs)
                            x = med([x / 1e6 for _, _, x in v])
                            row.append(">= 2147" if x >= 2147.48 else "%.0f" % x)
                print("| " + " | ".join(row) + " |")
        print()

    # targets
    print("### Targets (issue 11)\n")
    print("Value and reference are medians over rounds; \"per round\" is the median of "
          "each round's own ratio against the best MPI of that round (rounds fccl won).\n")
    print("| target | layout | system | value | reference | ratio | met | per round |")
    print("|---|---|---|---:|---:|---:|---|---:|")

    def judge(name, lay, s, val, ref, ratio, want, higher=True, unit="",
              per_round="-"):
        if val is None or ref is None or ratio is None:
            print("| %s | %s | %s | - | - | - | ? | - |" % (name, lay, s))
            return
        ok = ratio >= want if higher else ratio <= want
        print("| %s | %s | %s | %.2f%s | %.2f%s | %.2f | %s | %s |" % (
            name, lay, s, val, unit, ref, unit, ratio, "yes" if ok else "NO",
            per_round))

    def ran(s, lay, op=None):
        return any(k[0] == lay and k[2] == s and (op is None or k[1] == op) for k in R)

    for s in fccls:
        for lay in layouts:
            for op in ops:
                if not ran(s, lay, op):
                    continue
                for z in (1 << 20, 64 << 20):
                    ft = tmed(lay, op, s, z)
                    bt, bs = best_mpi(lay, op, z)
                    if ft is None and bt is None:
                        continue
                    judge("%s %s >= 1.0x best MPI (%s), time us" % (op, size_name(z), bs),
                          lay, s, ft, bt, bt / ft if ft and bt else None, 1.0,
                          per_round=paired(lay, op, s, z))
        for lay in layouts:
            if not ran(s, lay, "all_reduce"):
                continue
            ft = tmed(lay, "all_reduce", s, 8)
            bt, bs = best_mpi(lay, "all_reduce", 8)
            if ft is not None or bt is not None:
                judge("all_reduce 8 B no slower than best MPI (%s), us" % bs, lay, s,
                      ft, bt, bt / ft if ft and bt else None, 1.0,
                      per_round=paired(lay, "all_reduce", s, 8))
        ip = med(C.get("iperf3_GBs", []))
        if ran(s, "2x1", "all_reduce"):
            bw = med(vals("2x1", "all_reduce", s, 64 << 20, 2))
            judge("all_reduce 64 MiB busbw >= 50% of iperf3, GB/s", "2x1", s, bw, ip,
                  bw / ip if bw and ip else None, 0.5)
            peak = max((med(vals("2x1", "all_reduce", s, z, 2)) or 0, z)
                       for z in R.get(("2x1", "all_reduce", s), {0: 0}))
            if peak[0]:
                judge("(info) all_reduce peak busbw (%s) / iperf3, GB/s" % size_name(peak[1]),
                      "2x1", s, peak[0], ip, peak[0] / ip if ip else None, 0.5)
        pp = med(C.get("pingpong_8B_oneway_us", []))
        if ran(s, "2x2", "all_reduce"):
            t8 = tmed("2x2", "all_reduce", s, 8)
            judge("all_reduce 8 B <= 4x fi_pingpong 8 B one-way, us", "2x2", s, t8, pp,
                  t8 / pp if t8 and pp else None, 4.0, higher=False)
    print()
    fp = os.path.join(out, "notes.txt")
    if os.path.exists(fp) and os.path.getsize(fp) > 0:
        print("Launches ended after their output was complete (MPICH hanging in "
              "MPI_Finalize, see bench/net.sh):\n")
        for line in open(fp):
            print("- " + line.strip())
        print()
    fp = os.path.join(out, "failed.txt")
    if os.path.exists(fp):
        print("Failed launches:\n")
        for line in open(fp):
            print("- " + line.strip())
        print()


def main():
    a = sys.argv[1:]
    if a and a[0] == "parse" and len(a) == 6:
        parse(*a[1:])
    elif a and a[0] == "ceil" and len(a) == 3:
        ceil(*a[1:])
    elif a and a[0] == "report" and len(a) == 3:
        report(*a[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
