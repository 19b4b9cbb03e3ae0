#!/usr/bin/python3
"""bench/scaling_model.py: the alpha-beta model behind bench/SCALING.md.

Prints markdown tables: bootstrap, barrier and all_reduce (8 B, 1 MiB,
1 GiB) at 64 .. 131,072 ranks, 8 ranks per host, on 100 and 400 Gb/s,
flat and hierarchical, plus what the store must sustain.  Every input is a
flag, so the tables can be recomputed from new measurements:

  --a-shm US      per-message cost between two ranks of one host (fccl, shm)
  --b-shm GBS     shm copy bandwidth between two ranks (fccl point-to-point)
  --a-net US      per-message cost across hosts (software + wire)
  --gamma GBS     reduction rate of one core (sum of two float32 arrays)
  --store-us US   store server CPU per rank at start-up (tcpstore-bench
                  --pattern fccl: server CPU seconds / ranks)
  --store-rtt US  one store request, client side (loopback round trip)
  --fabric-s S    opening the libfabric endpoints (fccl_init's tp_open)
  --rec B         one rank's bootstrap record
"""
import argparse
import math


def log2c(n):
    return max(0, math.ceil(math.log2(n))) if n > 1 else 0


def model(a):
    us = 1e-6
    a_shm, a_net = a.a_shm * us, a.a_net * us
    b_shm = 1 / (a.b_shm * 1e9)
    gam = 1 / (a.gamma * 1e9)
    L = 8  # ranks per host

    def nic(gbps):
        return gbps / 8 * 1e9  # bytes/s per host

    def bootstrap(n, bw):
        # store: 3 requests per rank, server CPU serialised over all ranks
        store = 3 * a.store_rtt * us + n * a.store_us * us
        rounds = 0
        a_ = 1
        while 2 * a_ + 1 < n:
            rounds += 1
            a_ *= 2
        # each round: a size and a payload message; every rank receives n
        # records in all, 8 ranks per host share the NIC
        gather = rounds * 2 * a_net + n * a.rec * L / bw
        return a.fabric_s + store + gather + barrier_flat(n)

    def barrier_flat(n):
        return log2c(n) * a_net

    def barrier_hier(n):
        # local shared-memory barrier in and out, dissemination over hosts
        return 2 * log2c(L) * a_shm + log2c(n / L) * a_net

    def ar_flat(n, s, bw):
        if s <= 4096:  # recursive doubling, whole vector each step
            return log2c(n) * (a_net + s * L / bw + s * gam)
        # Rabenseifner: halving then doubling; steps at distance >= 8 cross
        # hosts with all 8 ranks of a host sending at once: S per phase
        # through the NIC; the 3 on-host steps move 7/8 S by shm
        rab = (2 * log2c(n) * a_net + 2 * s / bw + 2 * 0.875 * s * b_shm
               + s * gam)
        ring = 2 * (n - 1) * (a_net + s / n / bw) + s * gam
        return min(rab, ring)

    def ar_hier(n, s, bw):
        # fccl's hier: binomial reduce to the host leader, leaders
        # all_reduce (rd or Rabenseifner), binomial broadcast on the host
        local = 2 * log2c(L) * (a_shm + s * b_shm) + log2c(L) * s * gam
        h = n // L
        if h <= 1:
            return local
        if s <= 4096:
            inter = log2c(h) * (a_net + s / bw + s * gam)
        else:
            inter = 2 * log2c(h) * a_net + 2 * s / bw + s * gam
        return local + inter

    return bootstrap, barrier_flat, barrier_hier, ar_flat, ar_hier, nic


def fmt(t):
    if t < 1e-3:
        return "%.1f us" % (t * 1e6)
    if t < 1:
        return "%.2f ms" % (t * 1e3)
    return "%.2f s" % t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--a-shm", type=float, default=0.45)
    p.add_argument("--b-shm", type=float, default=9.0)
    p.add_argument("--a-net", type=float, default=5.0)
    p.add_argument("--gamma", type=float, default=7.5)
    p.add_argument("--store-us", type=float, default=51.0)
    p.add_argument("--store-rtt", type=float, default=16.0)
    p.add_argument("--fabric-s", type=float, default=0.2)
    p.add_argument("--rec", type=float, default=250.0)
    a = p.parse_args()
    boot, bfl, bhi, arf, arh, nic = model(a)
    ns = [64, 1024, 16384, 131072]
    print("Inputs: a_shm %.2f us, shm %.1f GB/s, a_net %.1f us, reduce %.1f "
          "GB/s, store %.0f us CPU/rank, store RTT %.0f us, fabric open "
          "%.2f s, record %d B; 8 ranks per host.\n"
          % (a.a_shm, a.b_shm, a.a_net, a.gamma, a.store_us, a.store_rtt,
             a.fabric_s, a.rec))
    for gbps in (100, 400):
        bw = nic(gbps)
        print("#### %d Gb/s per host\n" % gbps)
        print("| ranks | bootstrap | barrier flat | barrier hier | "
              "all_reduce 8 B flat / hier | 1 MiB flat / hier | "
              "1 GiB flat / hier |")
        print("|---|---|---|---|---|---|---|")
        for n in ns:
            row = [str(n), fmt(boot(n, bw)), fmt(bfl(n)), fmt(bhi(n))]
            for s in (8, 1 << 20, 1 << 30):
                row.append("%s / %s" % (fmt(arf(n, s, bw)),
                                        fmt(arh(n, s, bw))))
            print("| " + " | ".join(row) + " |")
        print()
    print("#### The store during start-up\n")
    print("| ranks | connections | requests | bytes in+out | server CPU "
          "(serial) | requests/s if ranks arrive within 10 s |")
    print("|---|---|---|---|---|---|")
    for n in ns:
        reqs = 3 * n
        byts = n * 1050  # measured per rank by test_boot_scale's proxy
        print("| %d | %d | %d | %.1f MB | %s | %.0f |"
              % (n, n, reqs, byts / 1e6, fmt(n * a.store_us * 1e-6),
                 reqs / 10.0))


if __name__ == "__main__":
    main()
