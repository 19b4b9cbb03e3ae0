#!/usr/bin/python3
"""Hostile and heavy clients for tcpstore-server load figures (issue 9).

    store_hostile.py HOST:PORT MODE [N] [SIZE]

Modes (each runs until killed unless it says otherwise):
  idle N         N connections that send VALIDATE and then nothing, from
                 source addresses 127.0.1.1, .2, ... (1,000 each)
  slowloris N    N connections that start a SET of a 1000-byte value and
                 send one more byte every 5 s
  nonreader N    N connections that pipeline GETs of /nr (SIZE bytes, set
                 first) and never read a reply
  cycles N       connect, VALIDATE, PING, close, N times; prints the rate
  keys N         store N keys /k/<i> with 16-byte values (MULTI_SETs of 1,000)
                 and exit
  bigset SIZE    SET /bigv to SIZE bytes over and over
  list N         LIST_PREFIX "/" N times in a row, prints seconds per call
Wire bytes follow PROTOCOL.md (modern dialect).
"""
import resource
import socket
import struct
import sys
import time

VALIDATE = b"\x00" + struct.pack("<I", 0x3C85F7CE)


def s(b):
    return struct.pack("<Q", len(b)) + b


def conn(addr, src=None):
    host, port = addr.rsplit(":", 1)
    c = socket.create_connection((host, int(port)),
                                 source_address=(src, 0) if src else None)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.sendall(VALIDATE)
    return c


def read_exact(c, n):
    buf = b""
    while len(buf) < n:
        part = c.recv(n - len(buf))
        if not part:
            raise EOFError("server closed")
        buf += part
    return buf


def ping(c):
    c.sendall(b"\x0d" + struct.pack("<I", 7))
    read_exact(c, 4)


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def hold(conns):
    print("holding %d connections" % len(conns), flush=True)
    while True:
        time.sleep(3600)


def main():
    addr, mode = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 1 << 20
    raise_nofile()
    if mode == "idle":
        # 1,000 per source address (127.0.1.x): the server's default cap
        # is 1,024 connections per client IP
        hold([conn(addr, "127.0.1.%d" % (1 + i // 1000)) for i in range(n)])
    elif mode == "slowloris":
        cs = [conn(addr) for _ in range(n)]
        for c in cs:
            c.sendall(b"\x01" + s(b"/slow") + struct.pack("<Q", 1000))
        print("slowloris %d" % n, flush=True)
        while True:
            time.sleep(5)
            for c in list(cs):
                try:
                    c.sendall(b"x")
                except OSError:
                    cs.remove(c)
    elif mode == "nonreader":
        c0 = conn(addr)
        c0.sendall(b"\x01" + s(b"/nr") + s(b"n" * size))
        ping(c0)
        cs = [conn(addr) for _ in range(n)]
        get = b"\x03" + s(b"/nr")
        for c in cs:
            c.setblocking(False)
            try:
                c.send(get * 64)
            except OSError:
                pass
        print("nonreaders %d" % n, flush=True)
        hold(cs + [c0])
    elif mode == "cycles":
        t0 = time.time()
        for _ in range(n):
            c = conn(addr)
            ping(c)
            c.close()
        dt = time.time() - t0
        print("cycles %d in %.2f s: %.0f/s" % (n, dt, n / dt), flush=True)
    elif mode == "keys":
        c = conn(addr)
        batch = 1000  # a 10,000-key MULTI_SET is itself ~20-40 ms of work
        for start in range(0, n, batch):
            m = min(batch, n - start)
            req = [b"\x0b", struct.pack("<Q", m)]
            for i in range(start, start + m):
                req.append(s(b"/k/%d" % i))
                req.append(s(b"v" * 16))
            c.sendall(b"".join(req))
        ping(c)
        print("keys %d stored" % n, flush=True)
    elif mode == "bigset":
        c = conn(addr)
        val = s(b"b" * size)
        frame = b"\x01" + s(b"/bigv") + val
        k = 0
        while True:
            c.sendall(frame)
            ping(c)
            k += 1
            if k % 4 == 0:
                print("bigset %d done" % k, flush=True)
    elif mode == "list":
        c = conn(addr)
        for _ in range(n):
            t0 = time.time()
            c.sendall(b"\x80" + s(b"/"))
            cnt = struct.unpack("<Q", read_exact(c, 8))[0]
            for _ in range(cnt):
                ln = struct.unpack("<Q", read_exact(c, 8))[0]
                read_exact(c, ln)
            print("list %d keys in %.3f s" % (cnt, time.time() - t0),
                  flush=True)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
