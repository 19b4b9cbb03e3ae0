"""fccl.TCPStore against the C server (tcpstore-server), against PyTorch
1.13's TCPStore (its client on our server, its server with our client),
and TCPStore(is_master=True) with wait_for_workers."""
import os
import signal
import socket
import threading
import time
from datetime import timedelta

import pytest

import fccl


def store(s, **kw):
    kw.setdefault("timeout", timedelta(seconds=5))
    return fccl.TCPStore(s.host, s.port, **kw)


def test_set_get_add_delete(server):
    st = store(server)
    st.set("k", "value")
    st.set("b", b"\x00\xffbin")
    assert st.get("k") == b"value"
    assert st.get("b") == b"\x00\xffbin"
    assert st.add("n", 5) == 5
    assert st.add("n", -7) == -2
    assert st.num_keys() == 3
    assert st.delete_key("k") is True
    assert st.delete_key("k") is False
    assert st.num_keys() == 2
    st.close()


def test_get_times_out_then_works(server):
    st = store(server, timeout=timedelta(seconds=0.3))
    t0 = time.monotonic()
    with pytest.raises(fccl.TimeoutError) as e:
        st.get("missing")
    assert 0.25 < time.monotonic() - t0 < 3
    assert isinstance(e.value, RuntimeError)  # the seed's type
    assert isinstance(e.value, TimeoutError)
    assert "missing" in str(e.value)
    st.set("later", "x")  # the handle is still usable
    assert st.get("later") == b"x"


def test_get_waits_for_a_later_set(server):
    st, other = store(server), store(server)
    threading.Timer(0.2, other.set, ("soon", b"v")).start()
    assert st.get("soon") == b"v"


def test_extended_verbs(server):
    st = store(server)
    assert st.compare_set("c", "", "one") == b"one"
    assert st.compare_set("c", "one", "two") == b"two"
    assert st.compare_set("c", "nope", "three") == b"two"
    assert st.check(["c"]) and not st.check(["c", "absent"])
    st.wait(["c"], timedelta(seconds=1))
    with pytest.raises(fccl.TimeoutError):
        st.wait(["absent"], timedelta(seconds=0.2))
    st.multi_set(["m1", "m2"], ["a", b"b"])
    assert st.multi_get(["m1", "m2"]) == [b"a", b"b"]
    st.append("ap", "x")
    st.append("ap", b"y")
    assert st.get("ap") == b"xy"
    assert sorted(st.list_keys("m")) == ["m1", "m2"]
    st.queue_push("q", "first")
    st.queue_push("q", b"second")
    assert st.queue_len("q") == 2
    assert st.queue_pop("q") == b"first"
    assert st.queue_pop("q", block=False) == b"second"
    assert st.queue_pop("q", block=False) is None
    with pytest.raises(fccl.TimeoutError):
        st.queue_pop("q", timeout=timedelta(seconds=0.2))
    assert st.ping() > 0


def test_argument_errors():
    with pytest.raises(TypeError):
        fccl.TCPStore(1, 2)
    with pytest.raises(TypeError):
        fccl.TCPStore("127.0.0.1", "2")
    with pytest.raises(TypeError):
        fccl.TCPStore("127.0.0.1", 2, is_master=1)
    with pytest.raises(TypeError):
        fccl.TCPStore("127.0.0.1", 2, timeout=5)
    with pytest.raises(TypeError):
        fccl.TCPStore("127.0.0.1", 2, wait_for_workers="y")
    with pytest.raises(TypeError):
        fccl.TCPStore("127.0.0.1", 2, world_size="2")
    with pytest.raises(ValueError):
        fccl.TCPStore("127.0.0.1", 70000)
    with pytest.raises(ValueError):
        fccl.TCPStore("127.0.0.1", 2, world_size=0)


def test_method_argument_errors(server):
    st = store(server)
    for call in (lambda: st.set(1, "v"), lambda: st.set("k", 1),
                 lambda: st.get(b"k"), lambda: st.add("k", "1"),
                 lambda: st.add(3, 1), lambda: st.delete_key(None)):
        with pytest.raises(TypeError):
            call()


def test_connect_failure_is_an_error():
    with pytest.raises(fccl.Error):
        fccl.TCPStore("127.0.0.1", 1, timeout=timedelta(seconds=0.3))


def test_ctrl_c_ends_a_waiting_get(server):
    st = store(server, timeout=timedelta(seconds=30))
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Timer(0.3, interrupt).start()
    with pytest.raises(KeyboardInterrupt):
        st.get("never")
    # within a second, not the 30 s timeout (a loaded CI core delays the signal)
    assert time.monotonic() - sent[0] < 1.0
    st.set("after", "ok")
    assert st.get("after") == b"ok"


# ---- PyTorch (1.13, 2.x) ----

def test_pytorch_client_on_our_server(server):
    pytest.importorskip("torch.distributed")
    from tstore import tcp_store_class
    pt = tcp_store_class()(server.host, server.port, None, False,
                           timedelta(seconds=5), False)
    st = store(server)
    pt.set("from_pt", "hello")
    assert st.get("from_pt") == b"hello"
    st.set("from_fccl", b"\x01\x02")
    assert pt.get("from_fccl") == b"\x01\x02"
    assert pt.add("ctr", 2) == 2
    assert st.add("ctr", 3) == 5
    assert pt.add("ctr", 0) == 5
    assert st.num_keys() == pt.num_keys()
    assert pt.delete_key("from_fccl")
    assert not st.check(["from_fccl"])


def test_our_client_on_pytorch_server(pt_server):
    # torch 1.x's server speaks the legacy dialect, 2.x's the modern one
    from tstore import TORCH_2
    st = fccl.TCPStore(pt_server.host, pt_server.port,
                       timeout=timedelta(seconds=5),
                       dialect="modern" if TORCH_2 else "legacy")
    st.set("k", "v")
    assert st.get("k") == b"v"
    assert st.add("n", 4) == 4
    assert st.compare_set("k", "v", "w") == b"w"
    assert st.check(["k", "n"])
    st.wait(["k"], timedelta(seconds=1))
    assert st.num_keys() >= 2
    assert st.delete_key("k")


# ---- is_master and wait_for_workers ----

def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def start_master(world_size, made, seconds=10):
    port = free_port()

    def master():
        try:
            made["m"] = fccl.TCPStore("127.0.0.1", port,
                                      world_size=world_size, is_master=True,
                                      timeout=timedelta(seconds=seconds))
            made["t"] = time.monotonic()
        except BaseException as e:
            made["error"] = e
    th = threading.Thread(target=master)
    th.start()
    return th, port


def test_master_waits_for_workers(master_impl):
    made = {}
    th, port = start_master(3, made)
    time.sleep(0.3)
    assert not made, "the master returned before any worker joined"
    t_join = time.monotonic()
    w1 = fccl.TCPStore("127.0.0.1", port, world_size=3,
                       timeout=timedelta(seconds=5))
    time.sleep(0.3)
    assert not made, "the master returned with 2 of 3 users"
    w2 = fccl.TCPStore("127.0.0.1", port, world_size=3,
                       timeout=timedelta(seconds=5))
    th.join(10)
    assert "m" in made and made["t"] >= t_join, made
    m = made["m"]
    assert m.port == port
    w1.set("x", "1")
    assert m.get("x") == b"1" and w2.get("x") == b"1"
    m.close()


def test_master_times_out_without_workers(master_impl):
    t0 = time.monotonic()
    with pytest.raises(fccl.TimeoutError) as e:
        fccl.TCPStore("127.0.0.1", 0, world_size=2, is_master=True,
                      timeout=timedelta(seconds=0.5))
    assert 0.4 < time.monotonic() - t0 < 5
    assert "1 of 2" in str(e.value)


def test_master_with_a_pytorch_worker(master_impl):
    pytest.importorskip("torch.distributed")
    from tstore import tcp_store_class
    made = {}
    th, port = start_master(2, made)
    time.sleep(0.3)
    assert not made
    pt = tcp_store_class()("127.0.0.1", port, 2, False, timedelta(seconds=5),
                           True)  # joins with ADD init/ 1, as PyTorch does
    th.join(10)
    assert "m" in made, made
    pt.set("pt", "yes")
    assert made["m"].get("pt") == b"yes"
    made["m"].close()


def test_master_without_world_size_returns_at_once(master_impl):
    m = fccl.TCPStore("127.0.0.1", 0, is_master=True,
                      timeout=timedelta(seconds=5))
    c = fccl.TCPStore("127.0.0.1", m.port, timeout=timedelta(seconds=5))
    c.set("a", "b")
    assert m.get("a") == b"b"
    m.close()
