"""The store server that ``TCPStore(..., is_master=True)`` runs inside this
process: libfccl's embeddable server (fccl/server.h) on its own thread.

``start`` is the one place that knows how the server is made, so a test can
put another server behind ``is_master=True`` (tests/py/ replace it with a
``tcpstore-server`` child when the library lacks fccl/server.h).
"""
from . import _fccl


class _Embedded:
    """A running in-process server; `port` is where it listens."""

    def __init__(self, host, port, timeout_ms):
        opts = {"host": host or "0.0.0.0", "port": str(port)}
        self._srv = _fccl.Server(opts)
        self.port = self._srv.port

    def stop(self):
        self._srv.stop()


def available():
    """True when this build of libfccl has the embeddable server."""
    return hasattr(_fccl, "Server")


def start(host, port, timeout_ms):
    """Start a store server bound to `host`:`port` (0: a free port) and
    return an object with `port` and `stop()`.

    Raises:
        RuntimeError: this libfccl has no embeddable server (fccl/server.h);
            run ``tcpstore-server`` and connect with ``is_master=False``.
    """
    if not available():
        raise _fccl.Error(
            "TCPStore(is_master=True) needs libfccl's embeddable server "
            "(fccl/server.h), which this build lacks: run tcpstore-server "
            "and connect with is_master=False")
    return _Embedded(host, port, timeout_ms)
