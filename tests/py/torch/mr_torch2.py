"""torch 2.x's parallelism on the "fccl" backend: functional collectives,
DeviceMesh (1-D, 2-D with a group per dimension), DTensor redistribution,
DDP, all_gather_into_tensor / reduce_scatter_tensor and their coalesced
forms, async ops with Work.get_future(); each checked against a reference
computed here on one rank and against the same call on Gloo.  Skipped on
torch 1.x (which has none of these but DDP, tested in mr_ops.py)."""
import pytest
import torch
import torch.distributed as dist

if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip("torch 2.x only", allow_module_level=True)

import torch.distributed._functional_collectives as fc  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import (DTensor, Replicate, Shard,  # noqa: E402
                                      distribute_tensor)

from tutil import data, inputs  # noqa: E402


def wait(t):
    return fc.wait_tensor(t) if isinstance(t, torch.Tensor) else t


def both(fn, gloo):
    """fn(group) on the default fccl group and on Gloo: both results."""
    return fn(dist.group.WORLD), fn(gloo)


# ---- functional collectives ----

@pytest.mark.parametrize("count", [1, 1025])
def test_functional_all_reduce(count, rank, size, gloo):
    ins = inputs(torch.float32, count, size)
    got, ref_gloo = both(lambda g: wait(fc.all_reduce(ins[rank], "sum", g)),
                         gloo)
    want = torch.stack(ins).sum(0)
    assert torch.equal(got, want) and torch.equal(ref_gloo, want)
    mx = wait(fc.all_reduce(ins[rank], "max", dist.group.WORLD))
    assert torch.equal(mx, torch.stack(ins).max(0).values)


@pytest.mark.parametrize("dim", [0, 1])
def test_functional_all_gather_tensor(dim, rank, size, gloo):
    ins = [data(torch.float32, 6, r).view(2, 3) for r in range(size)]
    got, g2 = both(lambda g: wait(fc.all_gather_tensor(ins[rank], dim, g)),
                   gloo)
    want = torch.cat(ins, dim)
    assert torch.equal(got, want) and torch.equal(g2, want)


def test_functional_reduce_scatter_tensor(rank, size, gloo):
    ins = inputs(torch.float32, 5 * size, size)
    got = wait(fc.reduce_scatter_tensor(ins[rank], "sum", 0,
                                        dist.group.WORLD))
    want = torch.stack(ins).sum(0)[rank * 5:(rank + 1) * 5]
    assert torch.equal(got, want)


def test_functional_all_to_all_single(rank, size, gloo):
    # uneven: rank r sends (p + 1) elements to peer p
    send = [data(torch.float32, p + 1, 100 * r + p) for r in range(size)
            for p in range(size)]
    mine = torch.cat([send[rank * size + p] for p in range(size)])
    outs = [rank + 1] * size
    ins_split = [p + 1 for p in range(size)]
    got, g2 = both(lambda g: wait(fc.all_to_all_single(mine, outs, ins_split,
                                                       g)), gloo)
    want = torch.cat([send[s * size + rank] for s in range(size)])
    assert torch.equal(got, want) and torch.equal(g2, want)


# ---- the eager tensor forms, coalesced, async ----

def test_all_gather_into_tensor_and_reduce_scatter_tensor(rank, size, gloo):
    ins = inputs(torch.float32, 7, size)
    for g in (dist.group.WORLD, gloo):
        out = torch.empty(7 * size)
        dist.all_gather_into_tensor(out, ins[rank], group=g)
        assert torch.equal(out, torch.cat(ins))
    big = inputs(torch.float32, 3 * size, size, seed=1)
    out = torch.empty(3)
    dist.reduce_scatter_tensor(out, big[rank])
    assert torch.equal(out, torch.stack(big).sum(0)[3 * rank:3 * rank + 3])


def test_coalesced_forms(rank, size):
    a_in = inputs(torch.float32, 3, size)
    b_in = inputs(torch.float32, 5, size, seed=2)
    a, b = torch.empty(3 * size), torch.empty(5 * size)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(a, a_in[rank])
        dist.all_gather_into_tensor(b, b_in[rank])
    cm.wait()
    assert torch.equal(a, torch.cat(a_in)) and torch.equal(b, torch.cat(b_in))
    x_in = inputs(torch.float32, 2 * size, size, seed=3)
    y_in = inputs(torch.float32, 4 * size, size, seed=4)
    x, y = torch.empty(2), torch.empty(4)
    with dist._coalescing_manager():
        dist.reduce_scatter_tensor(x, x_in[rank])
        dist.reduce_scatter_tensor(y, y_in[rank])
    assert torch.equal(x, torch.stack(x_in).sum(0)[2 * rank:2 * rank + 2])
    assert torch.equal(y, torch.stack(y_in).sum(0)[4 * rank:4 * rank + 4])
    ts = [data(torch.float32, 4, rank, s) for s in range(3)]
    with dist._coalescing_manager():
        for t in ts:
            dist.all_reduce(t)
    for s, t in enumerate(ts):
        want = torch.stack([data(torch.float32, 4, r, s)
                            for r in range(size)]).sum(0)
        assert torch.equal(t, want)


def test_async_get_future(rank, size):
    ins = inputs(torch.float32, 70000, size)  # past the inline size
    x = ins[rank].clone()
    w = dist.all_reduce(x, async_op=True)
    fut = w.get_future().then(lambda f: f.value()[0] * 2)
    assert torch.equal(fut.wait(), torch.stack(ins).sum(0) * 2)
    assert w.is_completed() and torch.equal(x, torch.stack(ins).sum(0))


def test_dispatcher_only_calls(rank, size):
    """Calls torch makes only through its dispatcher ops (as compiled code
    does) reach the group's C++ methods (ProcessGroupCpp, _work.cpp) and
    give the right results; with a Python-only group they raised "No
    backend type associated with device type cpu"."""
    f = torch.ops._c10d_functional
    name = dist.group.WORLD.group_name
    out = torch.zeros(2 * size)
    f.all_gather_into_tensor_out(torch.full((2,), float(rank)), size, name,
                                 out=out)
    f.wait_tensor(out)
    assert torch.equal(out, torch.arange(size, dtype=torch.float32)
                       .repeat_interleave(2))
    x = torch.arange(2 * size, dtype=torch.float32) + rank
    total = torch.arange(2 * size, dtype=torch.float32) * size + \
        sum(range(size))
    r = f.wait_tensor(f.reduce_scatter_tensor(x, "sum", size, name))
    assert torch.equal(r, total[2 * rank:2 * rank + 2])
    a = f.wait_tensor(f.all_reduce(x, "sum", name))
    assert torch.equal(a, total)
    t = f.wait_tensor(f.all_to_all_single(x, [2] * size, [2] * size, name))
    want = torch.cat([torch.arange(2 * rank, 2 * rank + 2,
                                   dtype=torch.float32) + s
                      for s in range(size)])
    assert torch.equal(t, want)


def test_group_names(rank, size):
    """torch's names reach the groups (functional collectives resolve
    groups by them)."""
    g = dist.new_group(list(range(size)))
    assert dist.group.WORLD.group_name and g.group_name
    assert g.group_name != dist.group.WORLD.group_name
    from torch.distributed.distributed_c10d import _resolve_process_group
    assert _resolve_process_group(g.group_name) is g


# ---- DeviceMesh and DTensor ----

def test_device_mesh_1d(rank, size):
    mesh = init_device_mesh("cpu", (size,))
    g = mesh.get_group()
    assert dist.get_backend(g) == "fccl"
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, group=g)
    assert t.item() == size * (size + 1) / 2
    got = wait(fc.all_reduce(torch.ones(2), "sum", (mesh, 0)))
    assert torch.equal(got, torch.full((2,), float(size)))


def test_device_mesh_2d(rank, size):
    if size % 2:
        pytest.skip("a 2 x n/2 mesh needs an even world")
    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("dp",
                                                                   "tp"))
    row, col = rank // (size // 2), rank % (size // 2)
    for dim, peers in (("dp", [c * 0 + r * (size // 2) + col
                               for r in range(2) for c in [0]]),
                       ("tp", [row * (size // 2) + c
                               for c in range(size // 2)])):
        g = mesh[dim].get_group()
        assert dist.get_backend(g) == "fccl"
        assert dist.get_process_group_ranks(g) == peers
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=g)
        assert t.item() == sum(peers), (dim, peers)
        got = wait(fc.all_gather_tensor(torch.tensor([float(rank)]), 0,
                                        mesh[dim].get_group()))
        assert got.tolist() == [float(p) for p in peers]


def test_dtensor_redistribute(rank, size):
    mesh = init_device_mesh("cpu", (size,))
    torch.manual_seed(1)
    full = torch.randn(4 * size, 3)
    d = distribute_tensor(full, mesh, [Shard(0)])
    assert torch.equal(d.to_local(), full[4 * rank:4 * rank + 4])
    rep = d.redistribute(mesh, [Replicate()])
    assert torch.equal(rep.to_local(), full)
    back = rep.redistribute(mesh, [Shard(0)])
    assert torch.equal(back.to_local(), full[4 * rank:4 * rank + 4])
    d1 = distribute_tensor(full, mesh, [Shard(1)]) if 3 % size == 0 else None
    if d1 is not None:
        assert torch.equal(d1.full_tensor(), full)
    s = DTensor.from_local(torch.full((2,), float(rank)), mesh, [Shard(0)])
    assert s.full_tensor().tolist() == [float(r) for r in range(size)
                                        for _ in range(2)]


# ---- DDP ----

def test_ddp_matches_single_process_and_gloo(rank, size, gloo):
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                   torch.nn.Linear(16, 1)).double()

    def batch(r, step):
        g = torch.Generator().manual_seed(100 * step + r)
        return torch.randn(4, 8, generator=g, dtype=torch.float64)

    def train(m, xs_of_step):
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        for step in range(5):
            opt.zero_grad()
            x = xs_of_step(step)
            torch.nn.functional.mse_loss(m(x), x.sum(1, keepdim=True)
                                         ).backward()
            opt.step()
        return torch.cat([p.detach().view(-1) for p in m.parameters()])

    got = train(DDP(model()), lambda s: batch(rank, s))
    via_gloo = train(DDP(model(), process_group=gloo),
                     lambda s: batch(rank, s))
    # one process, the whole global batch: the same mean gradient
    ref = train(model(), lambda s: torch.cat([batch(r, s)
                                              for r in range(size)]))
    assert torch.allclose(got, ref, rtol=1e-9, atol=1e-12)
    assert torch.allclose(via_gloo, ref, rtol=1e-9, atol=1e-12)
