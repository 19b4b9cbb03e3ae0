"""PyTorch's own TCPStore server (the legacy dialect with torch 1.13; 2.x's classic server) on a
free port of 127.0.0.1, for the compatibility tests and the benchmark.
Prints "listening on 127.0.0.1:PORT" once it accepts connections and runs
until SIGTERM/SIGINT."""
import signal
import sys
import time

from tstore import tcp_store

port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
store = tcp_store("127.0.0.1", port, None, True, 300, False)
print("listening on 127.0.0.1:%d" % store.port, flush=True)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
try:
    while True:
        time.sleep(3600)
except KeyboardInterrupt:
    pass
