"""Every operation of the "fccl" torch.distributed backend against a
reference computed with torch on one rank, per dtype, and against Gloo's
result where Gloo has the operation; on the world that fccl-run launched
(2 to 4 ranks; the provider is the launch's FCCL_PROVIDER)."""
import datetime

import pytest
import torch
import torch.distributed as dist

from tutil import (DTYPES, INTS, OPS, assert_equal, data, defined, inputs,
                   red, reduce_ref)

SIZES = [1, 1025]


# ---- all_reduce ----

@pytest.mark.parametrize("count", SIZES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce(dtype, op, count, rank, size):
    if not defined(dtype, op):
        with pytest.raises(RuntimeError, match="not defined"):
            dist.all_reduce(data(dtype, 4, rank), op=red(op))
        return
    ins = inputs(dtype, count, size, op=op)
    x = ins[rank].clone()
    assert dist.all_reduce(x, op=red(op)) is None
    assert_equal(x, reduce_ref(ins, op, dtype), op)


GLOO_DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64,
               torch.float32, torch.float64]


@pytest.mark.parametrize("op", ["SUM", "PRODUCT", "MAX", "MIN", "BAND",
                                "BOR", "BXOR"])
@pytest.mark.parametrize("dtype", GLOO_DTYPES, ids=str)
def test_all_reduce_same_as_gloo(dtype, op, rank, size, gloo):
    if not defined(dtype, op):
        return
    ins = inputs(dtype, 33, size, seed=2, op=op)
    x, y = ins[rank].clone(), ins[rank].clone()
    dist.all_reduce(x, op=red(op))
    dist.all_reduce(y, op=red(op), group=gloo)
    assert torch.equal(x, y)


def test_all_reduce_large_async_and_noncontiguous(rank, size):
    count = 1_000_003  # about 4 MiB of float32: the background path
    ins = inputs(torch.float32, count, size, seed=3)
    x = ins[rank].clone()
    w = dist.all_reduce(x, async_op=True)
    assert w.wait()
    assert w.is_completed() and w.is_success()
    assert_equal(x, reduce_ref(ins, "SUM", torch.float32))
    # column `rank` of a (12, size) tensor: stride size, not contiguous
    base = torch.stack(inputs(torch.int32, 12, size, seed=4)).t().contiguous()
    want = base.sum(1).to(torch.int32)
    nc = base[:, rank]
    assert size == 1 or not nc.is_contiguous()
    dist.all_reduce(nc)
    assert torch.equal(nc, want) and torch.equal(base[:, rank], want)


def test_all_reduce_complex(rank, size):
    ins = inputs(torch.complex64, 9, size, seed=5)
    x = ins[rank].clone()
    dist.all_reduce(x)
    assert_equal(x, reduce_ref(ins, "SUM", torch.complex64))
    # fccl refuses it (torch 2.x's front end already does, ValueError)
    with pytest.raises((RuntimeError, ValueError), match="complex"):
        dist.all_reduce(x, op=dist.ReduceOp.MAX)


def test_all_reduce_tensor_list(rank, size):
    """Gloo's multi-tensor all_reduce: every tensor of every rank."""
    pg = dist.distributed_c10d._get_default_group()
    ts = [torch.full((3,), float(rank + k)) for k in range(2)]
    pg.allreduce(ts).wait()
    want = sum(2.0 * r + 1 for r in range(size))
    for t in ts:
        assert torch.equal(t, torch.full((3,), want))


def test_process_group_call_forms(rank, size):
    """torch's forms of ProcessGroup.allreduce and broadcast, which the
    backend binds itself (a list and options, a list and an op, one
    tensor and an op; a list and options, one tensor and a root), keyword
    arguments, and the TypeError of a form torch does not have."""
    pg = dist.distributed_c10d._get_default_group()
    total = sum(r + 1 for r in range(size))
    top = float(size)

    def mine():
        return torch.full((3,), float(rank + 1))

    def check(x, want):
        assert torch.equal(x, torch.full((3,), float(want))), (x, want)

    o = dist.AllreduceOptions()
    o.reduceOp = dist.ReduceOp.MAX
    x = mine(); pg.allreduce([x], o).wait(); check(x, top)
    x = mine(); pg.allreduce([x]).wait(); check(x, total)
    x = mine(); pg.allreduce([x], dist.ReduceOp.MIN).wait(); check(x, 1)
    x = mine(); pg.allreduce(x, dist.ReduceOp.MAX).wait(); check(x, top)
    x = mine(); pg.allreduce(x).wait(); check(x, total)
    x = mine(); pg.allreduce(tensors=[x], opts=o).wait(); check(x, top)
    x = mine(); pg.allreduce(tensor=x, op=dist.ReduceOp.MIN).wait()
    check(x, 1)
    b = dist.BroadcastOptions()
    b.rootRank = size - 1
    x = mine(); pg.broadcast([x], b).wait(); check(x, size)
    x = mine(); pg.broadcast([x]).wait(); check(x, 1)
    x = mine(); pg.broadcast(x, size - 1).wait(); check(x, size)
    with pytest.raises(TypeError, match="allreduce"):
        pg.allreduce([mine()], "SUM")
    with pytest.raises(TypeError, match="allreduce"):
        pg.allreduce([1.0], o)


def test_work_reused_only_when_nobody_holds_it(rank, size):
    """dist.all_reduce of a small tensor takes the group's previous Work
    again once nobody holds it; a Work someone holds (or whose future was
    taken) is never reused, and each keeps its own result."""
    total = float(sum(r + 1 for r in range(size)))

    def mine():
        return torch.full((4,), float(rank + 1))

    x = mine()
    w1 = dist.all_reduce(x, async_op=True)
    w1.wait()
    first = id(w1)
    del w1
    # a Work held meanwhile: it would take w1's memory had w1 been freed
    held = dist.broadcast(torch.zeros(2), 0, async_op=True)
    y = mine()
    w2 = dist.all_reduce(y, async_op=True)
    assert id(w2) == first and id(held) != first
    held.wait()
    w2.wait()
    assert w2.result()[0] is y and torch.equal(y, torch.full((4,), total))
    z = mine()
    w3 = dist.all_reduce(z, async_op=True)  # w2 is held: a new Work
    w3.wait()
    assert w3 is not w2 and w2.result()[0] is y and w3.result()[0] is z
    f = w3.get_future()
    del w2, w3
    u = mine()
    w4 = dist.all_reduce(u, async_op=True)
    w4.wait()
    assert f.value()[0] is z and w4.get_future().value()[0] is u
    assert torch.equal(u, torch.full((4,), total))


def test_unsupported_dtype_names_it(rank):
    q = torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8)
    with pytest.raises(RuntimeError, match="quint8"):
        dist.all_reduce(q)
    with pytest.raises(RuntimeError, match="quint8"):
        dist.broadcast(q, 0)


def test_all_reduce_coalesced(rank, size):
    ins = [inputs(torch.float32, c, size, seed=6 + c) for c in (3, 1, 5)]
    xs = [i[rank].clone() for i in ins]
    dist.all_reduce_coalesced(xs)
    for x, i in zip(xs, ins):
        assert_equal(x, reduce_ref(i, "SUM", torch.float32))


# ---- rooted ----

@pytest.mark.parametrize("dtype", DTYPES + [torch.complex128], ids=str)
def test_broadcast(dtype, rank, size):
    for root in {0, size - 1}:
        want = data(dtype, 1025, root, seed=7)
        x = want.clone() if rank == root else torch.zeros_like(want)
        dist.broadcast(x, root)
        assert torch.equal(x, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reduce(dtype, rank, size):
    root = size - 1
    for op in ("SUM", "MAX"):
        ins = inputs(dtype, 7, size, seed=8, op=op)
        x = ins[rank].clone()
        dist.reduce(x, root, op=red(op))
        if rank == root:
            assert_equal(x, reduce_ref(ins, op, dtype), op)
        else:
            assert torch.equal(x, ins[rank])  # non-roots keep their input


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_scatter(dtype, rank, size):
    root = size // 2
    mine = data(dtype, 5, rank, seed=9)
    outs = [torch.zeros_like(mine) for _ in range(size)] if rank == root \
        else None
    dist.gather(mine, outs, dst=root)
    if rank == root:
        for r in range(size):
            assert torch.equal(outs[r], data(dtype, 5, r, seed=9))
    out = torch.zeros(6, dtype=dtype)
    ins = [data(dtype, 6, 100 + r, seed=9) for r in range(size)]
    dist.scatter(out, ins if rank == root else None, src=root)
    assert torch.equal(out, data(dtype, 6, 100 + rank, seed=9))


def test_rooted_same_as_gloo(rank, size, gloo):
    root = size - 1
    x = data(torch.float32, 17, rank, seed=10)
    a, b = x.clone(), x.clone()
    dist.reduce(a, root, op=dist.ReduceOp.SUM)
    dist.reduce(b, root, op=dist.ReduceOp.SUM, group=gloo)
    if rank == root:
        assert torch.equal(a, b)
    a, b = x.clone(), x.clone()
    dist.broadcast(a, root)
    dist.broadcast(b, root, group=gloo)
    assert torch.equal(a, b)


# ---- gathers and scatters ----

@pytest.mark.parametrize("dtype", DTYPES + [torch.complex64], ids=str)
def test_all_gather(dtype, rank, size):
    mine = data(dtype, 7, rank, seed=11)
    outs = [torch.zeros_like(mine) for _ in range(size)]
    dist.all_gather(outs, mine)
    for r in range(size):
        assert torch.equal(outs[r], data(dtype, 7, r, seed=11))


def test_all_gather_uneven(rank, size):
    """Gloo refuses outputs of different sizes; fccl gathers them."""
    outs = [torch.zeros(r + 1) for r in range(size)]
    dist.all_gather(outs, torch.full((rank + 1,), float(rank)))
    for r in range(size):
        assert torch.equal(outs[r], torch.full((r + 1,), float(r)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather_into_tensor(dtype, rank, size, gloo):
    mine = data(dtype, 9, rank, seed=12)
    out = torch.zeros(size * 9, dtype=dtype)
    dist.all_gather_into_tensor(out, mine)
    assert torch.equal(out, torch.cat(inputs(dtype, 9, size, seed=12)))
    # a non-contiguous output: copied back into place
    out2 = torch.zeros(9, size, dtype=dtype).t()
    dist.all_gather_into_tensor(out2, mine)
    assert torch.equal(out2.reshape(-1), out)
    if dtype == torch.float32:
        views = [torch.zeros(9) for _ in range(size)]
        dist.all_gather(views, mine, group=gloo)
        assert torch.equal(torch.cat(views), out)


def test_all_gather_coalesced(rank, size):
    ins = [torch.full((2,), float(rank)), torch.full((3,), 10.0 + rank)]
    outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(size)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(size):
        assert torch.equal(outs[r][0], torch.full((2,), float(r)))
        assert torch.equal(outs[r][1], torch.full((3,), 10.0 + r))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reduce_scatter(dtype, op, rank, size):
    if not defined(dtype, op):
        return
    per = 5
    ins = inputs(dtype, per * size, size, seed=13, op=op)
    out = torch.zeros(per, dtype=dtype)
    dist.reduce_scatter_tensor(out, ins[rank].clone(), op=red(op))
    want = reduce_ref(ins, op, dtype)[rank * per:(rank + 1) * per]
    assert_equal(out, want, op)
    out2 = torch.zeros(per, dtype=dtype)
    dist.reduce_scatter(out2, list(ins[rank].clone().split(per)), op=red(op))
    assert_equal(out2, want, op)


def test_reduce_scatter_uneven(rank, size):
    counts = [r + 1 for r in range(size)]
    ins = inputs(torch.float32, sum(counts), size, seed=14)
    out = torch.zeros(counts[rank])
    dist.reduce_scatter(out, list(ins[rank].split(counts)))
    off = sum(counts[:rank])
    assert_equal(out, reduce_ref(ins, "SUM", torch.float32)[off:off +
                                                            counts[rank]])


# ---- all_to_all ----

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_to_all_single_even(dtype, rank, size, gloo):
    per = 3
    x = data(dtype, per * size, rank, seed=15)
    out = torch.zeros(per * size, dtype=dtype)
    dist.all_to_all_single(out, x)
    want = torch.cat([data(dtype, per * size, r, seed=15)[rank * per:
                                                          (rank + 1) * per]
                      for r in range(size)])
    assert torch.equal(out, want)
    if dtype in (torch.float32, torch.int64):
        g = torch.zeros_like(out)
        dist.all_to_all_single(g, x, group=gloo)
        assert torch.equal(g, out)


def test_all_to_all_single_uneven(rank, size, gloo):
    """Rank r sends r + p + 1 rows of width 2 to rank p."""
    insz = [rank + p + 1 for p in range(size)]
    outsz = [r + rank + 1 for r in range(size)]
    x = torch.cat([torch.full((insz[p], 2), 100.0 * rank + p)
                   for p in range(size)])
    out = torch.zeros(sum(outsz), 2)
    dist.all_to_all_single(out, x, outsz, insz)
    want = torch.cat([torch.full((outsz[r], 2), 100.0 * r + rank)
                      for r in range(size)])
    assert torch.equal(out, want)
    g = torch.zeros_like(out)
    dist.all_to_all_single(g, x, outsz, insz, group=gloo)
    assert torch.equal(g, out)


def test_all_to_all_list(rank, size):
    """Gloo 1.13 has no list all_to_all."""
    ins = [torch.full((p + 1,), 10.0 * rank + p) for p in range(size)]
    outs = [torch.zeros(rank + 1) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for r in range(size):
        assert torch.equal(outs[r], torch.full((rank + 1,), 10.0 * r + rank))


# ---- point to point, barrier ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int16,
                                   torch.bool, torch.complex64], ids=str)
def test_send_recv_ring(dtype, rank, size):
    if size == 1:
        return
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    out = torch.zeros(11, dtype=dtype)
    reqs = [dist.isend(data(dtype, 11, rank, seed=16), nxt, tag=3),
            dist.irecv(out, prv, tag=3)]
    for q in reqs:
        q.wait()
    assert torch.equal(out, data(dtype, 11, prv, seed=16))


def test_recv_any_source(rank, size):
    if size == 1:
        return
    if rank == 0:
        got = set()
        for _ in range(size - 1):
            t = torch.zeros(2)
            src = dist.recv(t, tag=5)
            assert torch.equal(t, torch.full((2,), float(src)))
            got.add(src)
        assert got == set(range(1, size))
    else:
        dist.send(torch.full((2,), float(rank)), 0, tag=5)
    dist.barrier()


def test_irecv_before_collective_does_not_block_it(rank, size):
    """An irecv queued ahead of a collective must not hold it back (the
    matching send comes after the collective on the peer)."""
    if size == 1:
        return
    if rank == 0:
        t = torch.zeros(3)
        w = dist.irecv(t, 1, tag=9)
        x = torch.ones(1)
        dist.all_reduce(x)
        w.wait()
        assert torch.equal(t, torch.full((3,), 7.0)) and x.item() == size
    else:
        x = torch.ones(1)
        dist.all_reduce(x)
        if rank == 1:
            dist.send(torch.full((3,), 7.0), 0, tag=9)


def test_barrier_and_work_api(rank, size):
    w = dist.barrier(async_op=True)
    assert w.wait()
    assert w.is_completed() and w.is_success()
    x = torch.ones(4)
    w = dist.all_reduce(x, async_op=True)
    fut = w.get_future()
    got = fut.wait()
    assert torch.equal(got[0], torch.full((4,), float(size)))
    assert w.result()[0] is not None
    assert w.wait(datetime.timedelta(seconds=5))


def test_monitored_barrier_all_arrive(rank, size):
    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(datetime.timedelta(seconds=30), wait_all_ranks=True)


def test_int_types_wrap(rank, size):
    x = torch.full((3,), 127, dtype=torch.int8)
    dist.all_reduce(x)
    want = torch.tensor([127 * size] * 3, dtype=torch.int64).to(torch.int8)
    assert torch.equal(x, want)
    y = torch.full((2,), 32767, dtype=torch.int16)
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    assert y.tolist() == [32767, 32767]
    assert INTS


def test_more_same_as_gloo(rank, size, gloo):
    """gather, scatter, the coalesced forms and send/recv give Gloo's
    results."""
    root = 0
    x = data(torch.float32, 6, rank, seed=30)
    ga = [torch.zeros(6) for _ in range(size)] if rank == root else None
    gb = [torch.zeros(6) for _ in range(size)] if rank == root else None
    dist.gather(x, ga, dst=root)
    dist.gather(x, gb, dst=root, group=gloo)
    if rank == root:
        assert all(torch.equal(a, b) for a, b in zip(ga, gb))
    ins = [data(torch.int64, 4, 50 + r, seed=30) for r in range(size)]
    sa, sb = torch.zeros(4, dtype=torch.int64), torch.zeros(4,
                                                            dtype=torch.int64)
    dist.scatter(sa, ins if rank == root else None, src=root)
    dist.scatter(sb, ins if rank == root else None, src=root, group=gloo)
    assert torch.equal(sa, sb)
    ca = [data(torch.float32, k, rank, seed=31 + k) for k in (2, 5)]
    cb = [t.clone() for t in ca]
    dist.all_reduce_coalesced(ca)
    dist.all_reduce_coalesced(cb, group=gloo)
    assert all(torch.equal(a, b) for a, b in zip(ca, cb))
    oa = [[torch.zeros(2), torch.zeros(5)] for _ in range(size)]
    ob = [[torch.zeros(2), torch.zeros(5)] for _ in range(size)]
    dist.all_gather_coalesced(oa, ca)
    dist.all_gather_coalesced(ob, ca, group=gloo)
    assert all(torch.equal(a, b) for la, lb in zip(oa, ob)
               for a, b in zip(la, lb))
    if size > 1:
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        ra, rb = torch.zeros(3), torch.zeros(3)
        for grp, out in ((None, ra), (gloo, rb)):
            reqs = [dist.isend(torch.full((3,), float(rank)), nxt, group=grp),
                    dist.irecv(out, prv, group=grp)]
            for q in reqs:
                q.wait()
        assert torch.equal(ra, rb)
