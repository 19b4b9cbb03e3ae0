"""TCPStore: the key-value store ranks meet at (PyTorch's TCPStore
protocol), as MindSpore's ``TCPStore`` class, over fccl's C client.

It talks to ``tcpstore-server``, to the server of another ``TCPStore(...,
is_master=True)``, or to PyTorch's own server (``dialect="legacy"`` for
PyTorch <= 2.0).
"""
import time
from datetime import timedelta

from . import _fccl, _server

__all__ = ["TCPStore"]

_INIT_KEY = "init/"  # PyTorch's worker counter


class TCPStore:
    """A TCP key-value store client, optionally hosting the server.

    Args:
        host_name (str): the host (name or IP address) of the server; with
            `is_master`, the address the server binds.
        port (int): the server's port (0..65535; with `is_master`, 0 picks
            a free one, then read `port`).
        world_size (int, optional): the number of store users, the server's
            process included (PyTorch's count).  ``None``: not fixed.
        is_master (bool): run the server inside this process. Default False.
        timeout (timedelta): how long connecting, ``get`` and ``wait`` may
            take. Default 300 s.
        wait_for_workers (bool): with a fixed `world_size`, every user
            counts itself in on construction and the master's constructor
            returns once `world_size` users have (raising
            fccl.TimeoutError at `timeout`). Default True.
        multi_tenant, master_listen_fd, use_libuv: reserved (ignored), as
            in the seed.
        dialect (str, optional): ``"modern"`` (PyTorch >= 2.1 and fccl's
            server) or ``"legacy"`` (PyTorch <= 2.0 servers); default the
            TCPSTORE_DIALECT variable, else modern.
        tls, tls_ca, tls_cert, tls_key, tls_server_name, token_file,
            reconnect: the C client's TLS, token and reconnect options
            (fccl/store.h); unset ones come from the TCPSTORE_* variables.

    Raises:
        TypeError: an argument of the wrong type.
        ValueError: a port or world size out of range.
        RuntimeError: cannot connect (fccl.Error) or the workers did not
            join in time (fccl.TimeoutError).
    """

    def __init__(self, host_name, port, world_size=None, is_master=False,
                 timeout=timedelta(seconds=300), wait_for_workers=True,
                 multi_tenant=False, master_listen_fd=None, use_libuv=True,
                 *, dialect=None, tls=False, tls_ca=None, tls_cert=None,
                 tls_key=None, tls_server_name=None, token_file=None,
                 reconnect=None):
        def need(name, value, types, what):
            if not isinstance(value, types) or (
                    types is int and isinstance(value, bool)):
                raise TypeError(
                    f"For 'TCPStore', the argument '{name}' must be type of "
                    f"{what}, but got '{name}' type : {type(value)}.")
        need("host_name", host_name, str, "string")
        need("port", port, int, "int")
        need("is_master", is_master, bool, "bool")
        need("timeout", timeout, timedelta, "timedelta")
        need("wait_for_workers", wait_for_workers, bool, "bool")
        if world_size is not None:
            need("world_size", world_size, int, "int")
        if port < 0 or port > 65535:
            raise ValueError("For 'TCPStore', the argument 'port' must be "
                             f"legal, but got {port}.")
        if world_size is not None and world_size <= 0:
            raise ValueError("For 'TCPStore', the argument 'world_size' must "
                             f"be legal, but got {world_size}.")
        self.host = host_name
        self.port = port
        self.world_size = world_size
        self.timeout = timeout
        self._server = None
        timeout_ms = max(1, int(timeout.total_seconds() * 1000))
        if is_master:
            self._server = _server.start(host_name, port, timeout_ms)
            self.port = self._server.port
        host = host_name
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        connect_host = host
        if is_master and host_name in ("", "0.0.0.0", "::"):
            connect_host = "127.0.0.1"
        def connect(raw):
            return _fccl.Store(
                f"{connect_host}:{self.port}", timeout_ms, dialect, raw,
                tls, tls_ca, tls_cert, tls_key, tls_server_name, token_file,
                -1 if reconnect is None else int(bool(reconnect)))
        try:
            self.instance = connect(False)
            if world_size is not None and wait_for_workers:
                # PyTorch counts users under the raw key "init/" (no "/"
                # in front, unlike its users' keys)
                raw = connect(True)
                try:
                    self._wait_for_workers(raw, world_size, is_master,
                                           timeout_ms)
                finally:
                    raw.close()
        except BaseException:
            self._stop_server()
            raise

    @staticmethod
    def _wait_for_workers(raw, world_size, is_master, timeout_ms):
        joined = raw.add(_INIT_KEY, 1)
        if not is_master:
            return
        deadline = time.monotonic() + timeout_ms / 1000.0
        while joined < world_size:
            if time.monotonic() >= deadline:
                raise _fccl.TimeoutError(
                    f"TCPStore: {joined} of {world_size} store users joined "
                    f"within {timeout_ms} ms")
            time.sleep(0.01)
            joined = raw.add(_INIT_KEY, 0)

    def _stop_server(self):
        if self._server is not None:
            self._server.stop()
            self._server = None

    @staticmethod
    def _key(fn, key):
        if not isinstance(key, str):
            raise TypeError(
                f"For 'TCPStore.{fn}', the argument 'key' must be type of "
                f"string, but got 'key' type : {type(key)}.")

    @staticmethod
    def _value(fn, value):
        if not isinstance(value, (str, bytes)):
            raise TypeError(
                f"For 'TCPStore.{fn}', the argument 'value' must be type of "
                f"string or bytes, but got 'value' type : {type(value)}.")

    def set(self, key, value):
        """Store `value` (str or bytes) under `key`, replacing an old value.

        Raises:
            TypeError: `key` is not a str, or `value` neither str nor bytes.
        """
        self._key("set", key)
        self._value("set", value)
        self.instance.set(key, value)

    def get(self, key):
        """The value of `key`, as bytes; waits up to the store's timeout
        for the key to be set.

        Raises:
            TypeError: `key` is not a str.
            RuntimeError: fccl.TimeoutError when the key did not appear in
                time.
        """
        self._key("get", key)
        return self.instance.get(key)

    def add(self, key, amount):
        """Add `amount` to the counter `key` (created at `amount` by the
        first add) and return its new value.

        Raises:
            TypeError: `key` is not a str or `amount` not an int.
            RuntimeError: the key holds a value that is not a number (the
                server closes the connection, as PyTorch's does).
        """
        self._key("add", key)
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError(
                "For 'TCPStore.add', the argument 'amount' must be type of "
                f"string or int, but got 'amount' type : {type(amount)}.")
        return self.instance.add(key, amount)

    def delete_key(self, key):
        """Delete `key`.  Returns True if it existed, else False.

        Raises:
            TypeError: `key` is not a str.
        """
        self._key("delete_key", key)
        return self.instance.delete_key(key)

    def num_keys(self):
        """The number of keys on the server (all of them, PyTorch's count)."""
        return self.instance.num_keys()

    def compare_set(self, key, expected_value, desired_value):
        """Set `key` to `desired_value` if it holds `expected_value` (or is
        missing and `expected_value` is empty); return what it holds
        afterwards, as bytes (PyTorch's compare_set)."""
        self._key("compare_set", key)
        self._value("compare_set", expected_value)
        self._value("compare_set", desired_value)
        return self.instance.compare_set(key, expected_value, desired_value)

    def check(self, keys):
        """True if every key of the list `keys` exists now (no waiting)."""
        for k in keys:
            self._key("check", k)
        return self.instance.check(list(keys))

    def wait(self, keys, timeout=None):
        """Wait until every key of the list `keys` exists.

        Args:
            keys (list[str]): the keys.
            timeout (timedelta, optional): default the store's timeout.

        Raises:
            RuntimeError: fccl.TimeoutError naming the keys still missing.
        """
        for k in keys:
            self._key("wait", k)
        ms = -1 if timeout is None else int(timeout.total_seconds() * 1000)
        self.instance.wait(list(keys), ms)

    def multi_get(self, keys):
        """The values of `keys` (a list of bytes), fetched in one request
        once every key exists (up to the store's timeout)."""
        for k in keys:
            self._key("multi_get", k)
        return self.instance.multi_get(list(keys))

    def multi_set(self, keys, values):
        """Set every key of `keys` to the matching item of `values`, in one
        request."""
        for k in keys:
            self._key("multi_set", k)
        for v in values:
            self._value("multi_set", v)
        self.instance.multi_set(list(keys), list(values))

    def append(self, key, value):
        """Append `value` to the value of `key` (creating it)."""
        self._key("append", key)
        self._value("append", value)
        self.instance.append(key, value)

    def list_keys(self, prefix=""):
        """The keys that start with `prefix` (an fccl server extension)."""
        if not isinstance(prefix, str):
            raise TypeError("list_keys: prefix must be a str")
        return self.instance.list_keys(prefix)

    def queue_push(self, key, value):
        """Append `value` to the queue `key` (an fccl server extension)."""
        self._key("queue_push", key)
        self._value("queue_push", value)
        self.instance.queue_push(key, value)

    def queue_pop(self, key, block=True, timeout=None):
        """Take the oldest value of the queue `key`; with `block`, wait for
        one up to `timeout` (default the store's), else return None when the
        queue is empty."""
        self._key("queue_pop", key)
        ms = -1 if timeout is None else int(timeout.total_seconds() * 1000)
        return self.instance.queue_pop(key, bool(block), ms)

    def queue_len(self, key):
        """The number of values in the queue `key`."""
        self._key("queue_len", key)
        return self.instance.queue_len(key)

    def ping(self):
        """One round trip to the server; its time in microseconds."""
        return self.instance.ping()

    def close(self):
        """Close the connection (and stop the server this store hosts)."""
        self.instance.close()
        self._stop_server()

    def __del__(self):
        try:
            self._stop_server()
        except Exception:
            pass

    def __repr__(self):
        return (f"TCPStore({self.host!r}, {self.port}, "
                f"is_master={self._server is not None})")
