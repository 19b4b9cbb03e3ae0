"""Subgroups, DistributedDataParallel, asynchronous progress, timeouts and
the monitored barrier of the "fccl" torch.distributed backend, on the
world that fccl-run launched."""
import datetime
import time

import pytest
import torch
import torch.distributed as dist

import fccl


# ---- groups ----

def test_world_is_fccls_world(rank, size):
    """fccl's Python API sees the world torch's default group made."""
    assert fccl.is_initialized()
    assert fccl.get_rank() == rank and fccl.get_world_size() == size
    pg = dist.distributed_c10d._get_default_group()
    assert pg.getBackendName() == "fccl"
    assert dist.get_backend() == "fccl"


def test_subgroup_ranks_are_translated(rank, size):
    """torch gives the backend group ranks; results must follow them."""
    members = list(range(size - 1, -1, -2))  # the last rank, then every 2nd
    g = dist.new_group(members, backend="fccl")
    if rank not in members:
        assert g == dist.GroupMember.NON_GROUP_MEMBER
        return
    srt = sorted(members)
    assert dist.get_rank(g) == srt.index(rank)
    assert dist.get_world_size(g) == len(members)
    x = torch.tensor([float(rank)])
    dist.all_reduce(x, group=g)
    assert x.item() == float(sum(members))
    src = srt[-1]  # a global rank
    y = torch.tensor([float(rank * 10)])
    dist.broadcast(y, src, group=g)
    assert y.item() == src * 10.0
    out = [torch.zeros(1) for _ in srt]
    dist.all_gather(out, torch.tensor([float(rank)]), group=g)
    assert [o.item() for o in out] == [float(m) for m in srt]
    if len(srt) > 1:  # p2p with global ranks, translated by torch
        lo, hi = srt[0], srt[-1]
        t = torch.zeros(2)
        if rank == lo:
            dist.send(torch.full((2,), 3.0), hi, group=g)
        elif rank == hi:
            dist.recv(t, lo, group=g)
            assert t.tolist() == [3.0, 3.0]


def test_two_groups_of_the_same_ranks_are_independent(rank, size):
    a = dist.new_group(list(range(size)), backend="fccl")
    b = dist.new_group(list(range(size)), backend="fccl")
    wa = dist.all_reduce(xa := torch.ones(1 << 18), group=a, async_op=True)
    wb = dist.all_reduce(xb := torch.full((4,), 2.0), group=b, async_op=True)
    wb.wait()
    wa.wait()
    assert xa[0].item() == size and xb[0].item() == 2.0 * size


def test_group_of_one(rank, size):
    g = dist.new_group([0], backend="fccl")
    if rank == 0:
        x = torch.full((3,), 5.0)
        dist.all_reduce(x, group=g)
        assert x.tolist() == [5.0] * 3


# ---- DDP ----

def _train(pg, steps=20):
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=pg,
                                                    bucket_cap_mb=0.001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(99 + dist.get_rank())
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g)
        y = torch.randn(8, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def test_ddp_matches_gloo(rank, size, gloo):
    ours = _train(None)
    theirs = _train(gloo)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # and the replicas agree with each other
    for p in ours:
        q = p.clone()
        dist.broadcast(q, 0)
        torch.testing.assert_close(p, q, rtol=0, atol=0)


# ---- asynchronous progress ----

def test_async_progresses_while_python_computes(rank, size):
    """A large all_reduce finishes while this thread runs Python code and
    never waits: the queue's thread drives it without the GIL."""
    x = torch.ones(1 << 22)  # 16 MiB: the background path
    dist.barrier()
    w = dist.all_reduce(x, async_op=True)
    # Python work comes first: the call may finish before this thread is
    # scheduled again (a CI run saw no loop at all), which proves nothing.
    t0 = time.monotonic()
    while True:
        sum(i * i for i in range(1000))  # pure Python: holds the GIL
        if w.is_completed() or time.monotonic() - t0 >= 60:
            break
    assert w.is_completed(), "no progress without wait()"
    assert x[0].item() == size and x[-1].item() == size
    w.wait()


def test_wait_timeout_names_the_operation(rank, size):
    if size == 1:
        return
    t = torch.zeros(2)
    if rank == 0:
        w = dist.irecv(t, 1, tag=21)
        with pytest.raises(RuntimeError, match="recv from rank 1.*not "
                           "finished after 200 ms"):
            w.wait(datetime.timedelta(milliseconds=200))
        dist.barrier()
        w.wait()
        assert t.tolist() == [4.0, 4.0]
    else:
        dist.barrier()
        if rank == 1:
            dist.send(torch.full((2,), 4.0), 0, tag=21)


def test_future_callbacks_run(rank, size):
    x = torch.ones(1 << 20)
    fut = dist.all_reduce(x, async_op=True).get_future()
    got = fut.then(lambda f: f.value()[0][0].item() * 2).wait()
    assert got == 2.0 * size


# ---- failures ----

def test_timeout_names_op_group_and_rank(rank, size):
    """Only rank 0 calls: it times out, naming the operation, the group
    and the ranks it waited for; later calls fail at once."""
    if size == 1:
        return
    g = dist.new_group(list(range(size)), backend="fccl",
                       timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        t0 = time.monotonic()
        with pytest.raises(RuntimeError) as ei:
            dist.all_reduce(torch.ones(4), group=g)
        msg = str(ei.value)
        assert time.monotonic() - t0 < 30
        assert "all_reduce" in msg and "timed out" in msg, msg
        assert "group '" in msg and "waiting for rank 1" in msg, msg
        with pytest.raises(RuntimeError, match="failed earlier"):
            dist.all_reduce(torch.ones(4), group=g)
    dist.barrier()


def test_monitored_barrier_names_missing_rank(rank, size):
    if size == 1:
        return
    g = dist.new_group([0, 1], backend="fccl")
    if rank == 0:
        with pytest.raises(RuntimeError, match="Rank 1 failed to pass "
                           "monitoredBarrier"):
            g.monitored_barrier(datetime.timedelta(seconds=1))
    # torch's dist.monitored_barrier refuses every backend but Gloo
    # (RuntimeError on 1.13, ValueError on 2.x)
    with pytest.raises((RuntimeError, ValueError), match="GLOO"):
        dist.monitored_barrier()
    dist.barrier()


def test_bad_arguments_raise(rank, size):
    with pytest.raises(RuntimeError, match="CPU|dense"):
        dist.all_reduce(torch.ones(2).to_sparse())
    with pytest.raises(RuntimeError, match="16 input|2 input|input tensors"):
        pg = dist.distributed_c10d._get_default_group()
        pg.reduce_scatter([torch.zeros(1)], [[torch.zeros(1)] * (size + 1)])
    out = torch.zeros(3 * size + 1)
    with pytest.raises(RuntimeError, match="elements"):
        dist.all_gather_into_tensor(out, torch.zeros(3))
