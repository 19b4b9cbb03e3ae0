"""Groups with global-rank roots, object collectives, argument errors, the
GIL, timeouts, Ctrl-C, fork and MoE, on the world launched by fccl-run
(1 to 4 ranks).  Run by tests/py/run.sh after mr_coll.py."""
import atexit
import ctypes
import hashlib
import os
import pickle
import signal
import threading
import time
from datetime import timedelta

import numpy as np
import pytest

import fccl
from mrutil import moe_rows


def members_of(size):
    """Odd world ranks ({1, 3} on 4 ranks), or [0] alone."""
    return list(range(1, size, 2)) or [0]


def expected_name(ranks):
    s = "_".join(map(str, sorted(ranks)))
    return f"fccl_{len(ranks)}_{hashlib.sha1(s.encode()).hexdigest()}"


# ---- groups ----

def test_world_names(rank, size):
    assert fccl.new_group() == "fccl_world_group"
    assert fccl.get_backend() == "fccl"
    assert fccl.is_available() and fccl.is_initialized()
    assert fccl.get_process_group_ranks() == list(range(size))
    assert fccl.get_rank("fccl_world_group") == rank
    assert fccl.get_local_rank() == rank  # one host
    assert fccl.get_local_rank_size() == size
    assert fccl.get_global_rank(None, rank) == rank


def test_subgroup_global_roots(rank, size):
    mem = members_of(size)
    name = fccl.new_group(list(reversed(mem)))
    assert name == expected_name(mem)
    assert fccl.new_group(mem) == name  # again: the same group
    assert fccl.get_world_size(name) == len(mem)
    assert fccl.get_process_group_ranks(name) == mem
    if rank not in mem:
        assert fccl.get_rank(name) == -1
        with pytest.raises(RuntimeError):
            fccl.broadcast(np.zeros(2), mem[0], group=name)
        fccl.destroy_process_group(name)
        return
    me = mem.index(rank)
    assert fccl.get_rank(name) == me
    assert fccl.get_local_rank(name) == me
    assert fccl.get_local_rank_size(name) == len(mem)
    for i, w in enumerate(mem):
        assert fccl.get_global_rank(name, i) == w
        assert fccl.get_group_rank(name, w) == i
        assert fccl.get_world_rank_from_group_rank(name, i) == w
        assert fccl.get_group_rank_from_world_rank(w, name) == i
    for src in mem:  # global roots: world rank src's data arrives
        x = np.full(4, 100.0 + rank)
        fccl.broadcast(x, src, group=name)
        assert (x == 100.0 + src).all(), (src, x)
    dst = mem[-1]
    y = np.full(3, rank, np.int64)
    fccl.reduce(y, dst, group=name)
    if rank == dst:
        assert (y == sum(mem)).all()
    out = np.zeros(len(mem), np.int32) if rank == dst else np.zeros(1, np.int32)
    fccl.gather_into_tensor(out, np.array([rank], np.int32), dst, group=name)
    if rank == dst:
        assert out.tolist() == mem
    z = np.full(2, rank, np.int32)
    fccl.all_reduce(z, group=fccl.get_group(name))  # a Group object works
    assert (z == sum(mem)).all()
    if len(mem) > 1:
        with pytest.raises(ValueError):  # world rank 0 is not a member
            fccl.broadcast(np.zeros(2), 0, group=name)
        peer = mem[(me + 1) % len(mem)]
        prev = mem[(me - 1) % len(mem)]
        got = np.zeros(2)
        h = fccl.irecv(got, prev, group=name, tag=9)
        fccl.isend(np.full(2, float(rank)), peer, group=name, tag=9).wait()
        h.wait()
        assert (got == prev).all()
    fccl.destroy_process_group(name)
    with pytest.raises(ValueError):
        fccl.all_reduce(z, group=name)


def test_create_group_user_name(rank, size):
    mem = members_of(size)
    fccl.create_group("py_user_group", mem)
    with pytest.raises(ValueError):
        fccl.create_group("py_user_group", mem)
    assert fccl.get_world_size("py_user_group") == len(mem)
    if rank in mem:
        assert fccl.get_rank("py_user_group") == mem.index(rank)
        x = np.ones(5, np.uint8)
        fccl.all_reduce(x, group="py_user_group")
        assert (x == len(mem)).all()
    else:
        assert fccl.get_rank("py_user_group") == -1
    fccl.destroy_group("py_user_group")
    assert fccl.get_rank("py_user_group") == -1


def test_named_group_in_the_library(rank, size):
    mem = members_of(size)
    fccl.create_group("py_named.a", mem)
    if rank in mem:
        g = fccl.get_group("py_named.a")
        assert g.fccl_name == "py_named.a"  # the library's name, not hashed
        forced = os.environ.get("FCCL_PROVIDER", "")
        want = "tcp;ofi_rxm" if forced.startswith("tcp") else forced
        if len(mem) == 1:
            assert g.providers == ""
        elif want:
            assert g.providers == want, (g.providers, forced)
    else:
        assert fccl.get_group("py_named.a").providers is None
    for bad in ("fccl_mine", "bad name", "a/b", ""):
        with pytest.raises(ValueError):
            fccl.create_group(bad, mem)
    fccl.destroy_group("py_named.a")


def test_new_group_none_is_the_world(rank, size):
    assert fccl.new_group(None) == "fccl_world_group"
    assert fccl.get_rank(fccl.new_group(None)) == rank


def test_local_rank_from_the_library(rank, size):
    assert fccl.get_local_rank() == int(os.environ["LOCAL_RANK"])
    assert fccl.get_local_rank_size() == int(os.environ["LOCAL_WORLD_SIZE"])
    mem = members_of(size)
    name = fccl.new_group(mem)
    if rank in mem:  # one host: the local view is the group's
        assert fccl.get_local_rank(name) == mem.index(rank)
        assert fccl.get_local_rank_size(name) == len(mem)
    else:
        assert fccl.get_local_rank(name) == -1
        assert fccl.get_local_rank_size(name) == -1


def test_group_argument_errors(rank, size):
    with pytest.raises(TypeError):
        fccl.new_group([0, 0])
    with pytest.raises(TypeError):
        fccl.new_group((0,))
    with pytest.raises(ValueError):
        fccl.new_group([size])
    with pytest.raises(TypeError):
        fccl.get_rank(1)
    with pytest.raises(TypeError):
        fccl.get_world_size(1.5)
    with pytest.raises(TypeError):
        fccl.get_backend(3)
    with pytest.raises(TypeError):
        fccl.get_global_rank(None, "0")
    with pytest.raises(TypeError):
        fccl.get_group_rank(None, 0.5)
    with pytest.raises(RuntimeError):
        fccl.get_group_rank(None, size)
    with pytest.raises(TypeError):
        fccl.destroy_process_group(7)
    with pytest.raises(TypeError):
        fccl.create_group(5, [0])
    with pytest.raises(RuntimeError):
        fccl.init_process_group()
    assert fccl.get_rank("no_such_group") == -1


# ---- objects ----

def test_all_gather_object(rank, size):
    objs = [None] * size
    fccl.all_gather_object(objs, {"rank": rank, "set": {rank, 1j},
                                  "text": "x" * rank * 50})
    for q in range(size):
        assert objs[q] == {"rank": q, "set": {q, 1j}, "text": "x" * q * 50}


@pytest.mark.parametrize("root", [0, 1, 2, 3])
def test_broadcast_object_list(root, rank, size):
    if root >= size:
        pytest.skip("root beyond the world")
    lst = ["test", 12, {1: 2}, list(range(root))] if rank == root \
        else [None] * 4
    fccl.broadcast_object_list(lst, root)
    assert lst == ["test", 12, {1: 2}, list(range(root))]


def test_gather_scatter_object(rank, size):
    dst = size - 1
    got = [None] * size if rank == dst else None
    fccl.gather_object(("r", rank, b"\0" * rank), got, dst)
    if rank == dst:
        assert got == [("r", q, b"\0" * q) for q in range(size)]
    out = [None]
    src_list = [{"to": q, "pad": "y" * (q * 31)} for q in range(size)]
    fccl.scatter_object_list(out, src_list if rank == 0 else None, 0)
    assert out[0] == {"to": rank, "pad": "y" * (rank * 31)}


def test_object_unpickling_restricted(rank, size):
    lst = [threading.Lock.__name__, fccl.ReduceOp] if rank == 0 else [None] * 2
    if rank == 0 or size == 1:
        fccl.broadcast_object_list(lst, 0)
    else:
        with pytest.raises(pickle.UnpicklingError):
            fccl.broadcast_object_list(lst, 0)


def test_object_argument_errors(rank, size):
    with pytest.raises(TypeError):
        fccl.all_gather_object([None] * (size + 1), 1)
    with pytest.raises(TypeError):
        fccl.broadcast_object_list([], 0)
    with pytest.raises(TypeError):
        fccl.broadcast_object_list([1], "0")
    with pytest.raises(TypeError):
        fccl.gather_object(1, None, rank)  # every rank is its own dst
    with pytest.raises(TypeError):
        fccl.scatter_object_list([], [1] * size, 0)
    with pytest.raises(TypeError):
        fccl.all_gather_object([None] * size, 1, group=3)


# ---- argument errors of the collectives (each raises before sending) ----

def test_collective_argument_errors(rank, size):
    x = np.zeros(4, np.float32)
    bad = [
        (TypeError, lambda: fccl.all_reduce([1, 2])),
        (TypeError, lambda: fccl.all_reduce(x, "bad")),
        (TypeError, lambda: fccl.all_reduce(x, 1)),
        (TypeError, lambda: fccl.all_reduce(x, group=1)),
        (TypeError, lambda: fccl.all_reduce(x, async_op=1)),
        (ValueError, lambda: fccl.all_reduce(x, group="nope")),
        (TypeError, lambda: fccl.all_reduce(np.zeros(3, np.longdouble))),
        (TypeError, lambda: fccl.all_reduce(np.zeros(3, np.complex64))),
        (ValueError, lambda: fccl.all_reduce(np.zeros((4, 4))[:, 1])),
        (ValueError, lambda: fccl.all_reduce(b"abcd")),
        (TypeError, lambda: fccl.all_gather_into_tensor(
            np.zeros(4 * size, np.int32), x)),
        (ValueError, lambda: fccl.all_gather_into_tensor(
            np.zeros(4 * size + 1, np.float32), x)),
        (ValueError, lambda: fccl.reduce_scatter_tensor(
            x, np.zeros(4 * size + 2, np.float32))),
        (ValueError, lambda: fccl.all_gather_into_tensor_uneven(
            np.zeros((3, 1), np.float32), np.zeros((1, 1), np.float32),
            [1] * (size + 1))),
        (TypeError, lambda: fccl.broadcast(x, "0")),
        (ValueError, lambda: fccl.broadcast(x, size)),
        (TypeError, lambda: fccl.reduce(x, 0.0)),
        (ValueError, lambda: fccl.send(x, rank)),
        (ValueError, lambda: fccl.send(x, size + 3)),
        (ValueError, lambda: fccl.isend(x, (rank + 1) % size or size, tag=-1)),
        (TypeError, lambda: fccl.recv(x, (rank + 1) % size, tag="a")),
        (TypeError, lambda: fccl.all_gather([x] * (size + 1), x)),
        (TypeError, lambda: fccl.all_gather("no list", x)),
        (TypeError, lambda: fccl.reduce_scatter(
            x, [np.zeros(5, np.float32)] * size)),
        (TypeError, lambda: fccl.all_to_all_v_c(x, x, (0,) * size * size)),
        (TypeError, lambda: fccl.all_to_all_v_c(x, x, [0] * (size + 1))),
        (TypeError, lambda: fccl.all_to_all_v_c(x, x, [0.0] * size * size)),
        (TypeError, lambda: fccl.all_to_all_single("x", x)),
        (TypeError, lambda: fccl.P2POp("send", x, 0)),
        (TypeError, lambda: fccl.P2POp(print, x, 0)),
        (TypeError, lambda: fccl.P2POp("isend", "x", 0)),
        (TypeError, lambda: fccl.P2POp("isend", x, "1")),
        (TypeError, lambda: fccl.batch_isend_irecv([])),
        (TypeError, lambda: fccl.batch_isend_irecv([1])),
        (TypeError, lambda: fccl.batch_isend_irecv(
            [fccl.P2POp("isend", x, 0), fccl.P2POp("irecv", x, 0, "g")])),
        (ValueError, lambda: fccl.batch_isend_irecv(
            [fccl.P2POp("isend", x, rank)])),
        (TypeError, lambda: fccl.barrier(group=2)),
        (TypeError, lambda: fccl.barrier(async_op="yes")),
    ]
    if size > 1:
        bad.append((ValueError, lambda: fccl.all_to_all_single(
            np.zeros(size + 1), np.zeros(size + 1))))
    ro = np.zeros(4, np.float32)
    ro.setflags(write=False)
    bad.append((ValueError, lambda: fccl.all_reduce(ro)))
    for i, (exc, call) in enumerate(bad):
        with pytest.raises(exc):
            call()
            pytest.fail(f"case {i} raised nothing")
    fccl.barrier()  # nothing was sent: the world is still in step


def test_torch_argument_errors(rank, size):
    torch = pytest.importorskip("torch")
    t = torch.zeros(4, 4)
    with pytest.raises(ValueError):
        fccl.all_reduce(t[:, 1])  # not contiguous
    with pytest.raises(TypeError):
        fccl.all_reduce(torch.zeros(3, dtype=torch.complex64))
    with pytest.raises(TypeError):
        fccl.all_gather_into_tensor(torch.zeros(4 * size), torch.zeros(
            4, dtype=torch.bfloat16))


# ---- the GIL, timeouts, Ctrl-C ----

def test_gil_released_while_blocked(rank, size):
    if size == 1:
        pytest.skip("needs a peer to wait for")
    fccl.barrier()  # everyone is here: rank 0's delay below is the wait
    if rank == 0:
        time.sleep(1.0)  # the others wait in the barrier meanwhile
        fccl.barrier()
        return
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    before, t0 = count[0], time.monotonic()
    fccl.barrier()
    after, took = count[0], time.monotonic() - t0
    stop.set()
    t.join()
    assert took > 0.3, took
    assert after - before > 10000, (before, after)


def learn(group, limit_s=15):
    """Poll until this rank knows the group failed (a member's notice,
    read by the library's heartbeat thread); the failed world rank."""
    g = fccl.get_group(group)
    end = time.monotonic() + limit_s
    while g.failed_rank is None and time.monotonic() < end:
        time.sleep(0.01)
    return g.failed_rank


def check_failure(e, group, rank, want):
    """The error of a call on a failed group: a TimeoutError where it timed
    out, else a PeerError whose rank is the group's failed rank; both
    name the rank, the operation and the timeout."""
    g = fccl.get_group(group)
    assert want in str(e), (want, str(e))
    if isinstance(e, fccl.TimeoutError):
        assert isinstance(e, TimeoutError) and isinstance(e, RuntimeError)
        assert g.failed_rank == rank
    else:
        assert isinstance(e, fccl.PeerError), type(e)
        assert e.rank is not None and e.rank == g.failed_rank, (e.rank, e)


def recreate_works(group, size):
    fccl.barrier()
    fccl.destroy_group(group)
    fccl.create_group(group, list(range(size)))
    x = np.ones(4, np.int32)
    fccl.all_reduce(x, group=group)
    assert (x == size).all()
    fccl.destroy_group(group)


def test_timeout_fails_the_group(rank, size):
    if size == 1:
        pytest.skip("needs a rank that stays away")
    fccl.create_group("py_timeout", list(range(size)))
    fccl.set_timeout("py_timeout", 0.5)
    want = "timed out after 500 ms in barrier"
    t0 = time.monotonic()
    if rank != 0:
        with pytest.raises(fccl.Error) as e:
            fccl.barrier(group="py_timeout")
        check_failure(e.value, "py_timeout", rank, want)
    else:  # never calls: learns of it, within the timeout and a margin
        assert learn("py_timeout") not in (None, 0)
    assert time.monotonic() - t0 < 5
    t1 = time.monotonic()
    with pytest.raises(fccl.Error) as e:  # the failure sticks, everywhere
        fccl.barrier(group="py_timeout")
    assert time.monotonic() - t1 < 0.5
    check_failure(e.value, "py_timeout", rank, want)
    recreate_works("py_timeout", size)


def test_per_call_timeout(rank, size):
    x = np.ones(4, np.int32)
    with pytest.raises(ValueError):
        fccl.all_reduce(x, timeout=0)
    with pytest.raises(TypeError):
        fccl.all_reduce(x, timeout="1")
    fccl.all_reduce(x, timeout=timedelta(seconds=60))  # does not run out
    assert (x == size).all()
    if size == 1:
        return
    fccl.create_group("py_percall", list(range(size)))
    late = size - 1
    want = "timed out after 400 ms in all_reduce"
    if rank != late:
        with pytest.raises(fccl.Error) as e:
            fccl.all_reduce(x, group="py_percall", timeout=0.4)
        check_failure(e.value, "py_percall", rank, want)
    else:
        assert learn("py_percall") not in (None, late)
        with pytest.raises(fccl.PeerError) as e:  # at once, not in 60 s
            fccl.all_reduce(x, group="py_percall", timeout=60)
        check_failure(e.value, "py_percall", rank, want)
    recreate_works("py_percall", size)


def test_handle_wait_timeout_fails_the_group(rank, size):
    if size == 1:
        pytest.skip("needs a rank that stays away")
    fccl.create_group("py_wait", list(range(size)))
    want = "timed out after 300 ms in all_reduce"
    x = np.ones(8, np.float32)
    if rank != 0:
        h = fccl.all_reduce(x, group="py_wait", async_op=True)
        with pytest.raises(fccl.Error) as e:
            h.wait(timeout=0.3)
        check_failure(e.value, "py_wait", rank, want)
        with pytest.raises(fccl.Error):
            fccl.all_reduce(x, group="py_wait")
    else:
        assert learn("py_wait") not in (None, 0)
    recreate_works("py_wait", size)


def test_ctrl_c_interrupts_a_blocked_call(rank, size):
    if size == 1:
        pytest.skip("needs a rank that stays away")
    fccl.create_group("py_sigint", list(range(size)))
    if rank != 0:
        assert fccl._fccl.sigint_install()
        sent = []

        def interrupt():
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
        threading.Timer(0.3, interrupt).start()
        with pytest.raises(KeyboardInterrupt):
            fccl.barrier(group="py_sigint")
        took = time.monotonic() - sent[0]
        assert took < 1.0, took  # not the group's timeout; a loaded core delays it
        with pytest.raises(fccl.Error):  # the group is failed
            fccl.barrier(group="py_sigint")
    fccl.barrier()
    fccl.destroy_group("py_sigint")


# ---- fork ----

def test_fork_after_init(rank, size):
    pid = os.fork()
    if pid == 0:  # the child: must neither use nor tear down the world
        code = 0
        try:
            assert not fccl.is_initialized()
            try:
                fccl.all_reduce(np.zeros(2))
                code = 3
            except RuntimeError:
                pass
            assert np.arange(5).sum() == 10
            atexit._run_exitfuncs()  # what a normal exit runs ...
        except BaseException:
            code = 4
        ctypes.CDLL(None).exit(code)  # ... and the C library's exit
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    x = np.full(3, rank, np.int64)
    fccl.all_reduce(x)
    assert (x == size * (size - 1) // 2).all()
    fccl.barrier()


def test_dataloader_workers(rank, size):
    torch = pytest.importorskip("torch")
    ds = torch.utils.data.TensorDataset(torch.arange(8.0))
    dl = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=2)
    assert sum(float(b[0].sum()) for b in dl) == 28.0
    x = torch.full((4,), float(rank))
    fccl.all_reduce(x)
    assert x.tolist() == [float(size * (size - 1) // 2)] * 4


# ---- MoE ----

def moe_reference(size, bs, k, hidden, experts, seed):
    """Every rank's tokens, routes and weights, and the combine of an
    identity expert (the weighted sum of a token's own row)."""
    rows = [moe_rows(np.random.default_rng(seed + r), bs, k, hidden, experts)
            for r in range(size)]
    xs, ids, scales = (list(t) for t in zip(*rows))
    return xs, ids, scales


def test_moe_float32(rank, size):
    if size < 2:
        pytest.skip("MoE needs an EP group of 2 or more")
    bs, k, hidden, experts = 4, 2, 16, 2 * size
    cfg = fccl.MoeConfig(None, experts, bs, k, hidden, dtype="float32")
    xs, ids, scales = moe_reference(size, bs, k, hidden, experts, 40)
    d = cfg.dispatch(xs[rank], ids[rank], scales[rank])
    assert 0 <= d.rows <= cfg.info["expand_rows"]
    y = np.zeros_like(d.expand_x)
    y[:d.rows] = d.expand_x[:d.rows] * 2  # the experts: doubling
    out = cfg.combine(y, d, scales[rank])
    want = xs[rank] * 2 * scales[rank].sum(1, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    res = np.ones((bs, hidden), np.float32)
    gamma = np.full(hidden, 0.5, np.float32)
    yo, rstd, xo = cfg.combine_add_rms_norm(y, d, scales[rank], res, gamma)
    xw = want + res
    rs = 1 / np.sqrt((xw ** 2).mean(1) + 1e-6)
    np.testing.assert_allclose(xo, xw, rtol=1e-6)
    np.testing.assert_allclose(rstd, rs, rtol=1e-5)
    np.testing.assert_allclose(yo, xw * rs[:, None] * gamma, rtol=1e-5)


def test_moe_torch_bfloat16(rank, size):
    torch = pytest.importorskip("torch")
    if size < 2:
        pytest.skip("MoE needs an EP group of 2 or more")
    bs, k, hidden, experts = 3, 1, 8, size
    cfg = fccl.MoeConfig(None, experts, bs, k, hidden, dtype="bfloat16")
    xs, ids, scales = moe_reference(size, bs, k, hidden, experts, 50)
    x = torch.tensor(xs[rank]).to(torch.bfloat16)
    d = cfg.dispatch(x, torch.tensor(ids[rank]), torch.tensor(scales[rank]))
    assert d.expand_x.dtype == torch.bfloat16
    out = cfg.combine(d.expand_x, d, torch.tensor(scales[rank]))
    want = xs[rank] * scales[rank].sum(1, keepdims=True)
    np.testing.assert_allclose(out.float().numpy(), want, rtol=1e-2)
