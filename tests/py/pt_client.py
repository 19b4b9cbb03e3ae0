"""PyTorch's TCPStore client (1.13's speaks the legacy dialect; 2.x's
classic client, the one a torch without libuv has, the modern one)
against a server given as HOST:PORT, for tests/test_pytorch_compat.c and
test_torch_jobs.py.

  pt_client.py ADDR ops      every client operation, results asserted;
                             expects the key "from_c" set by the C side to
                             b"C\\x00side", leaves keys for the C side to read
  pt_client.py ADDR get KEY  print the value of KEY as hex
  pt_client.py ADDR set KEY HEX
  pt_client.py ADDR idle SEC join with a world size of 2, stay idle SEC
                             seconds (its callback connection never sends
                             anything), print "cpu S" (its CPU seconds
                             over the idle time), then set and get
Exit status 0 when every check held; a failed check prints why, exits 1."""
import datetime
import resource
import sys
import time

from tstore import tcp_store


def connect(addr, world_size=None, timeout_s=10):
    host, port = addr.rsplit(":", 1)
    # With a world size, a non-master client joins with ADD("init/", 1).
    return tcp_store(host, port, world_size, False, timeout_s,
                     world_size is not None)


def check(cond, what):
    if not cond:
        print("FAILED:", what, flush=True)
        sys.exit(1)


def ops(addr):
    s = connect(addr)
    check(s.get("from_c") == b"C\x00side", "get of a key set by our client")
    s.set("a", "alpha")
    check(s.get("a") == b"alpha", "set/get")
    s.set("bin", bytes(range(256)))
    check(s.get("bin") == bytes(range(256)), "binary value")
    s.set("empty", b"")
    check(s.get("empty") == b"", "empty value")
    check(s.add("cnt", 5) == 5, "add to a missing key")
    check(s.add("cnt", -7) == -2, "add a negative delta")
    check(s.get("cnt") == b"-2", "ADD stores decimal text")
    s.wait(["a", "cnt"])
    s.wait(["a"], datetime.timedelta(seconds=5))
    check(s.compare_set("cs", "", "v1") == b"v1", "cas creates")
    check(s.compare_set("cs", "v1", "v2") == b"v2", "cas swaps")
    check(s.compare_set("cs", "bad", "v3") == b"v2", "cas mismatch")
    check(s.compare_set("nokey", "x", "y") == b"x", "cas missing key")
    s.set("gone", "x")
    check(s.delete_key("gone") is True, "delete existing")
    check(s.delete_key("gone") is False, "delete missing")
    # from_c a bin empty cnt cs
    n = s.num_keys()
    check(n == 6, "num_keys %d, want 6" % n)  # nokey was not created
    # A second client with a world size sends ADD(init/, 1) when joining.
    s2 = connect(addr, world_size=2)
    check(s2.num_keys() == 7, "init/ counted after a join")
    check(s2.get("cs") == b"v2", "second connection sees the same data")
    # A wait that times out raises; a fresh store object works after.
    s3 = connect(addr, timeout_s=1)
    try:
        s3.wait(["never"], datetime.timedelta(milliseconds=300))
        check(False, "wait of a missing key returned")
    except RuntimeError as e:
        check("imeout" in str(e) or "timed out" in str(e), "wait error: %s" % e)
    print("OK", flush=True)


def main():
    addr, cmd = sys.argv[1], sys.argv[2]
    if cmd == "ops":
        ops(addr)
    elif cmd == "get":
        print(connect(addr).get(sys.argv[3]).hex(), flush=True)
    elif cmd == "set":
        connect(addr).set(sys.argv[3], bytes.fromhex(sys.argv[4]))
    elif cmd == "idle":
        s = connect(addr, world_size=2)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(float(sys.argv[3]))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        print("cpu %.3f" % (r1.ru_utime + r1.ru_stime - r0.ru_utime -
                            r0.ru_stime), flush=True)
        s.set("after_idle", "yes")
        check(s.get("after_idle") == b"yes", "set/get after idling")
        print("OK", flush=True)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
