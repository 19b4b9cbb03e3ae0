"""Every collective of fccl's Python API against NumPy references, on the
world launched by fccl-run (1 to 4 ranks; the provider is the launch's
FCCL_PROVIDER).  Run by tests/py/run.sh."""
import functools

import numpy as np
import pytest

import fccl
from mrutil import DTYPES, SIZES, assert_equal, data, prod_data, reduce_ref

OPS = ["sum", "prod", "max", "min", "avg"]


def inputs(dtype, count, size, op="sum", seed=0):
    if op == "prod" and np.dtype(dtype).kind == "f":
        gen = prod_data
    else:
        gen = functools.partial(data, small=op == "avg")
    return [gen(dtype, count, r, seed) for r in range(size)]


# ---- all_reduce ----

@pytest.mark.parametrize("count", SIZES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce(dtype, op, count, rank, size):
    if dtype == "bool" and op == "avg":
        with pytest.raises(ValueError):
            fccl.all_reduce(np.zeros(max(count, 1), np.bool_), op)
        return
    ins = inputs(dtype, count, size, op)
    x = ins[rank].copy()
    assert fccl.all_reduce(x, op) is None
    assert_equal(x, reduce_ref(ins, op, dtype), dtype, op)


def test_all_reduce_large_uneven(rank, size):
    count = 1_000_003  # about 4 MiB of float32, not a multiple of any size
    ins = inputs("float32", count, size, seed=3)
    x = ins[rank].copy()
    fccl.all_reduce(x, fccl.ReduceOp.SUM)
    assert_equal(x, reduce_ref(ins, "sum", "float32"), "float32")


def test_all_reduce_reduceop_constants(rank, size):
    x = np.full(3, rank + 1, np.int64)
    fccl.all_reduce(x, fccl.ReduceOp.MAX)
    assert (x == size).all()


def test_all_reduce_buffers(rank, size):
    """bytearray, array.array and memoryview work like arrays."""
    import array
    b = bytearray([rank + 1] * 5)
    fccl.all_reduce(b)
    assert list(b) == [size * (size + 1) // 2 % 256] * 5
    a = array.array("d", [float(rank)] * 4)
    fccl.all_reduce(memoryview(a), "max")
    assert list(a) == [float(size - 1)] * 4


def test_all_reduce_2d_and_async(rank, size):
    ins = inputs("float32", 12, size, seed=4)
    x = ins[rank].reshape(3, 4).copy()
    h = fccl.all_reduce(x, async_op=True)
    assert isinstance(h, fccl.CommHandle)
    h.wait()
    assert h.is_completed()
    assert_equal(x.ravel(), reduce_ref(ins, "sum", "float32"), "float32")


# ---- torch tensors ----

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("tdtype", ["bfloat16", "float32", "float16",
                                    "int64", "int8", "uint8", "bool"])
def test_torch_all_reduce(tdtype, rank, size):
    dt = getattr(torch, tdtype)
    ins = [data("int8" if tdtype != "uint8" else "uint8", 9, r, 7, small=True)
           for r in range(size)]
    if tdtype == "bool":
        ins = [a % 2 == 0 for a in ins]
    x = torch.tensor(ins[rank].astype(np.int64)).to(dt)
    fccl.all_reduce(x, "max")
    want = np.max(np.stack([a.astype(np.int64) for a in ins]), 0)
    if tdtype == "bool":
        want = want.astype(bool)
    np.testing.assert_array_equal(x.to(torch.int64).numpy(), want)


def test_torch_bfloat16_sum_and_broadcast(rank, size):
    ins = inputs("float32", 100, size, seed=8)
    x = torch.tensor(ins[rank]).to(torch.bfloat16)
    fccl.all_reduce(x)
    want = reduce_ref(ins, "sum", "float32")
    np.testing.assert_array_equal(x.float().numpy(), want)
    y = torch.full((5,), float(rank), dtype=torch.bfloat16)
    fccl.broadcast(y, size - 1)
    assert (y.float().numpy() == size - 1).all()


def test_torch_all_gather_into_tensor(rank, size):
    out = torch.zeros(size * 3, dtype=torch.bfloat16)
    fccl.all_gather_into_tensor(out, torch.full((3,), float(rank),
                                                dtype=torch.bfloat16))
    assert out.float().tolist() == [float(r) for r in range(size)
                                    for _ in range(3)]


# ---- gathers ----

@pytest.mark.parametrize("count", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather_into_tensor(dtype, count, rank, size):
    ins = inputs(dtype, count, size, seed=1)
    out = np.zeros(size * count, dtype)
    fccl.all_gather_into_tensor(out, ins[rank])
    np.testing.assert_array_equal(out, np.concatenate(ins))


def test_all_gather_into_tensor_2d(rank, size):
    x = np.full((2, 3), rank, np.int32)
    out = np.zeros((2 * size, 3), np.int32)
    fccl.all_gather_into_tensor(out, x)
    np.testing.assert_array_equal(out, np.repeat(np.arange(size), 6)
                                  .reshape(2 * size, 3))


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint64"])
def test_all_gather_into_tensor_uneven(dtype, rank, size):
    rows = [(q * 2) % 3 for q in range(size)]  # includes 0 rows
    ins = [data(dtype, rows[q] * 3, q, 2).reshape(rows[q], 3)
           for q in range(size)]
    out = np.zeros((sum(rows), 3), dtype)
    fccl.all_gather_into_tensor_uneven(out, ins[rank], rows)
    np.testing.assert_array_equal(out, np.concatenate(ins))
    even = np.zeros((2 * size, 3), dtype)
    fccl.all_gather_into_tensor_uneven(even, np.full((2, 3), rank, dtype))
    np.testing.assert_array_equal(even[::2, 0], np.arange(size).astype(dtype))


def test_all_gather_list(rank, size):
    outs = [np.zeros((2, 2), np.float64) for _ in range(size)]
    h = fccl.all_gather(outs, np.full((2, 2), rank + 0.5), async_op=True)
    h.wait()
    for q in range(size):
        assert (outs[q] == q + 0.5).all()


# ---- reduce_scatter ----

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["int32", "float32", "float16", "uint8"])
def test_reduce_scatter_tensor(dtype, op, rank, size):
    count = 7
    ins = inputs(dtype, size * count, size, op, seed=5)
    out = np.zeros(count, dtype)
    fccl.reduce_scatter_tensor(out, ins[rank], op)
    want = reduce_ref(ins, op, dtype)[rank * count:(rank + 1) * count]
    assert_equal(out, want, dtype, op)


def test_reduce_scatter_tensor_uneven(rank, size):
    rows = [(q + 1) % 3 for q in range(size)]
    total = sum(rows)
    ins = inputs("int64", total * 2, size, seed=6)
    out = np.zeros((rows[rank], 2), np.int64)
    fccl.reduce_scatter_tensor_uneven(out, ins[rank].reshape(total, 2), rows)
    ref = reduce_ref(ins, "sum", "int64").reshape(total, 2)
    start = sum(rows[:rank])
    np.testing.assert_array_equal(out, ref[start:start + rows[rank]])


def test_reduce_scatter_list(rank, size):
    ins = [[np.full(4, 10 * r + q, np.int32) for q in range(size)]
           for r in range(size)]
    out = np.zeros(4, np.int32)
    fccl.reduce_scatter(out, ins[rank], fccl.ReduceOp.MAX)
    assert (out == 10 * (size - 1) + rank).all()


# ---- all_to_all ----

def test_all_to_all_single_even(rank, size):
    x = np.arange(size * 3, dtype=np.int32) + 100 * rank
    out = np.zeros(size * 3, np.int32)
    fccl.all_to_all_single(out, x)
    want = np.concatenate([np.arange(rank * 3, rank * 3 + 3) + 100 * p
                           for p in range(size)])
    np.testing.assert_array_equal(out, want)


def test_all_to_all_single_uneven(rank, size):
    def rows(src, dst):
        return (src + 2 * dst) % 3
    send = [rows(rank, p) for p in range(size)]
    recv = [rows(p, rank) for p in range(size)]

    def block(src, dst):
        return np.full((rows(src, dst), 2), 10 * src + dst, np.float64)
    x = np.concatenate([block(rank, p) for p in range(size)])
    out = np.zeros((sum(recv), 2))
    fccl.all_to_all_single(out, x, recv, send)
    np.testing.assert_array_equal(
        out, np.concatenate([block(p, rank) for p in range(size)]))


def test_all_to_all_lists(rank, size):
    def n(src, dst):
        return 1 + (src * 3 + dst) % 4
    ins = [np.full(n(rank, p), rank * 10 + p, np.int64)
           for p in range(size)]
    outs = [np.zeros(n(p, rank), np.int64) for p in range(size)]
    fccl.all_to_all(outs, ins)
    for p in range(size):
        assert (outs[p] == p * 10 + rank).all() and outs[p].size == n(p, rank)


def test_all_to_all_v_c(rank, size):
    m = [(i + 2 * j) % 3 for i in range(size) for j in range(size)]
    send = [m[rank * size + j] for j in range(size)]
    recv = [m[i * size + rank] for i in range(size)]
    x = np.concatenate([np.full((send[j], 2), 10 * rank + j, np.float32)
                        for j in range(size)]).reshape(-1, 2)
    out = np.zeros((sum(recv), 2), np.float32)
    fccl.all_to_all_v_c(out, x, m)
    want = np.concatenate([np.full((recv[i], 2), 10 * i + rank, np.float32)
                           for i in range(size)]).reshape(-1, 2)
    np.testing.assert_array_equal(out, want)


# ---- rooted ----

ROOTS = [0, 1, 2, 3]


@pytest.mark.parametrize("root", ROOTS)
def test_broadcast(root, rank, size):
    if root >= size:
        pytest.skip("root beyond the world")
    ins = inputs("float64", 33, size, seed=11)
    x = ins[rank].copy()
    fccl.broadcast(x, root)
    np.testing.assert_array_equal(x, ins[root])


@pytest.mark.parametrize("op", ["sum", "min"])
@pytest.mark.parametrize("root", ROOTS)
def test_reduce(root, op, rank, size):
    if root >= size:
        pytest.skip("root beyond the world")
    ins = inputs("int32", 9, size, op, seed=12)
    x = ins[rank].copy()
    fccl.reduce(x, root, op)
    if rank == root:
        np.testing.assert_array_equal(x, reduce_ref(ins, op, "int32"))
    else:
        np.testing.assert_array_equal(x, ins[rank])


@pytest.mark.parametrize("root", ROOTS)
def test_gather_scatter_tensor(root, rank, size):
    if root >= size:
        pytest.skip("root beyond the world")
    out = np.zeros(size * 2, np.uint8) if rank == root else np.zeros(1,
                                                                     np.uint8)
    fccl.gather_into_tensor(out, np.full(2, rank, np.uint8), root)
    if rank == root:
        np.testing.assert_array_equal(out, np.repeat(np.arange(size), 2))
    src = np.arange(size * 3, dtype=np.float32) if rank == root \
        else np.zeros(1, np.float32)
    got = np.zeros(3, np.float32)
    fccl.scatter_tensor(got, src, root)
    np.testing.assert_array_equal(got, np.arange(rank * 3, rank * 3 + 3))


@pytest.mark.parametrize("root", ROOTS)
def test_gather_scatter_lists(root, rank, size):
    if root >= size:
        pytest.skip("root beyond the world")
    lst = [np.zeros(3, np.int64) for _ in range(size)] if rank == root \
        else None
    fccl.gather(np.full(3, rank * 7, np.int64), lst, root)
    if rank == root:
        assert [int(a[0]) for a in lst] == [q * 7 for q in range(size)]
    src = [np.full(2, 5 * q, np.int32) for q in range(size)] \
        if rank == root else None
    out = np.zeros(2, np.int32)
    h = fccl.scatter(out, src, root, async_op=True)
    h.wait()
    assert (out == 5 * rank).all()


def test_barrier(size):
    fccl.barrier()
    h = fccl.barrier(async_op=True)
    h.wait()


# ---- point to point ----

def test_send_recv_chain(rank, size):
    if size == 1:
        pytest.skip("needs two ranks")
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    buf = np.zeros(6, np.float32)
    if rank == 0:
        fccl.send(np.full(6, 1.5, np.float32), nxt, tag=3)
        assert fccl.recv(buf, prv, tag=3) == 0
        assert (buf == 1.5 + size - 1).all()
    else:
        fccl.recv(buf, prv, tag=3)
        fccl.send(buf + 1, nxt, tag=3)


def test_isend_irecv_tags(rank, size):
    if size == 1:
        pytest.skip("needs two ranks")
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    a, b = np.zeros(4, np.int64), np.zeros(4, np.int64)
    rb = fccl.irecv(b, prv, tag=2)  # posted in the other order
    ra = fccl.irecv(a, prv, tag=1)
    s1 = fccl.isend(np.full(4, 100 + rank, np.int64), nxt, tag=1)
    s2 = fccl.isend(np.full(4, 200 + rank, np.int64), nxt, tag=2)
    for h in (s1, s2, ra, rb):
        h.wait()
    assert (a == 100 + prv).all() and (b == 200 + prv).all()


def test_batch_isend_irecv(rank, size):
    if size == 1:
        pytest.skip("needs two ranks")
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = np.zeros(3, np.float64)
    ops = [fccl.P2POp("isend", np.full(3, rank + 0.25), nxt),
           fccl.P2POp(fccl.irecv, got, prv)]
    hs = fccl.batch_isend_irecv(ops)
    assert isinstance(hs, list) and len(hs) == 1
    hs[0].wait()
    assert (got == prv + 0.25).all()
