"""The collectives on shaped tensors (NeighborExchangeV2, AlltoAll with
split and concat dimensions) and the MoE additions (the [bs, k] mask,
float16 NumPy, bfloat16 torch, the weighted shared expert), on every rank
of the launch.  References are NumPy slicing of every rank's input (each
rank can make every other's), never the library."""
import numpy as np
import pytest

import fccl
from mrutil import moe_rows

DIRS = [(-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1)]


# ---- NeighborExchangeV2 ----

def nbr_cfg(size, r):
    """Rank r's arguments: a grid of size/2 x 2 (odd sizes: a column), not
    periodic, uneven lengths; one rank is its own top/bottom neighbour."""
    q = 2 if size % 2 == 0 else 1
    p = size // q
    i, j = divmod(r, q)
    sl = [1, 2, 2, 1]            # top bottom left right
    rl = [sl[1], sl[0], sl[3], sl[2]]
    ids = []
    for di, dj in DIRS:
        ii, jj = i + di, j + dj
        ids.append(ii * q + jj if 0 <= ii < p and 0 <= jj < q else -1)
    sid, rid = list(ids), list(ids)
    if size == 1:
        sid[0], rid[4] = 0, 0    # my top comes back as my bottom
    shape = (2, 3, 3 + i, 4 + 2 * j)
    return sid, sl, rid, rl, shape


def nbr_input(r, shape, dtype=np.float32):
    rng = np.random.default_rng(700 + r)
    return rng.integers(-100, 100, shape).astype(dtype)


def side(lens, ids, k, d):
    return lens[k] if ids[d] != -1 else 0


def send_block(x, d, sl):
    """The block direction d sends: NumPy slicing of the input."""
    di, dj = DIRS[d]
    h, w = x.shape[2], x.shape[3]
    rows = slice(0, sl[0]) if di < 0 else slice(h - sl[1], h) if di else \
        slice(0, h)
    cols = slice(0, sl[2]) if dj < 0 else slice(w - sl[3], w) if dj else \
        slice(0, w)
    return x[:, :, rows, cols]


def nbr_expect(size, me, dtype=np.float32):
    sid, sl, rid, rl, shape = nbr_cfg(size, me)
    t, b = side(rl, rid, 0, 0), side(rl, rid, 1, 4)
    l, r = side(rl, rid, 2, 6), side(rl, rid, 3, 2)
    n, c, h, w = shape
    out = np.zeros((n, c, t + h + b, l + w + r), dtype)
    out[:, :, t:t + h, l:l + w] = nbr_input(me, shape, dtype)
    for d, (di, dj) in enumerate(DIRS):
        p = rid[d]
        if p == -1:
            continue
        psid, psl, _, _, pshape = nbr_cfg(size, p)
        blk = send_block(nbr_input(p, pshape, dtype), psid.index(me), psl)
        rows = slice(0, t) if di < 0 else slice(t + h, t + h + b) if di \
            else slice(t, t + h)
        cols = slice(0, l) if dj < 0 else slice(l + w, l + w + r) if dj \
            else slice(l, l + w)
        out[:, :, rows, cols] = blk.reshape(out[:, :, rows, cols].shape)
    return out


def test_nbr_v2_seed_example(rank, size):
    if size != 2:
        pytest.skip("the seed's example runs on 2 ranks")
    x = np.ones([1, 1, 2, 2], np.float32) * (rank + 1)
    ids = [-1] * 8
    ids[4 if rank == 0 else 0] = 1 - rank
    lens = [0, 1, 0, 0] if rank == 0 else [1, 0, 0, 0]
    out = np.zeros([1, 1, 3, 2], np.float32)
    fccl.neighbor_exchange_v2(out, x, ids, lens, ids, lens)
    want = [[1, 1], [1, 1], [2, 2]] if rank == 0 else [[1, 1], [2, 2], [2, 2]]
    np.testing.assert_array_equal(out[0, 0], want)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64])
def test_nbr_v2_grid(rank, size, dtype):
    sid, sl, rid, rl, shape = nbr_cfg(size, rank)
    x = nbr_input(rank, shape, dtype)
    op = fccl.NeighborExchangeV2(sid, sl, rid, rl, "NCHW")
    out = op(x)
    np.testing.assert_array_equal(out, nbr_expect(size, rank, dtype))


def test_nbr_v2_async_torch(rank, size):
    torch = pytest.importorskip("torch")
    sid, sl, rid, rl, shape = nbr_cfg(size, rank)
    x = torch.tensor(nbr_input(rank, shape)).to(torch.bfloat16)
    want = nbr_expect(size, rank)
    out = torch.zeros(want.shape, dtype=torch.bfloat16)
    h = fccl.neighbor_exchange_v2(out, x, sid, sl, rid, rl, async_op=True)
    h.wait()
    np.testing.assert_array_equal(out.float().numpy(), want)
    got = fccl.NeighborExchangeV2(sid, sl, rid, rl)(x)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), want)


def test_nbr_v2_errors(rank, size):
    x = np.zeros([1, 1, 4, 4], np.float32)
    out = np.zeros([1, 1, 4, 4], np.float32)
    none, lens = [-1] * 8, [1, 1, 1, 1]
    f = fccl.neighbor_exchange_v2
    with pytest.raises(TypeError, match="send_rank_ids"):
        f(out, x, 5, lens, none, lens)
    with pytest.raises(ValueError, match="8 entries"):
        f(out, x, [-1] * 7, lens, none, lens)
    with pytest.raises(ValueError, match="rank ids"):
        f(out, x, [-2] + [-1] * 7, lens, none, lens)
    with pytest.raises(ValueError, match="repeat"):
        f(out, x, [0, 0] + [-1] * 6, lens, none, lens)
    with pytest.raises(ValueError, match="send_lens"):
        f(out, x, none, [5, 0, 0, 0], none, lens)
    with pytest.raises(ValueError, match="recv_lens"):
        f(out, x, none, lens, none, [0, -1, 0, 0])
    with pytest.raises(ValueError, match="corner"):
        f(out, x, none, lens, [-1] * 7 + [0], lens)
    with pytest.raises(ValueError, match="NCHW"):
        f(out, x, none, lens, none, lens, "NHWC")
    with pytest.raises(ValueError, match="NCHW"):
        f(out[0], x[0], none, lens, none, lens)
    with pytest.raises(ValueError, match="output"):
        f(np.zeros(3, np.float32), x, none, lens, none, lens)
    with pytest.raises(ValueError, match="out of range"):
        f(out, x, [size] + [-1] * 7, lens, none, lens)
    with pytest.raises(ValueError, match="rank_id in send_rank_ids"):
        fccl.NeighborExchangeV2([size] + [-1] * 7, lens, none, lens)
    with pytest.raises(TypeError):
        fccl.NeighborExchangeV2(none, "1111", none, lens)(x)
    fccl.barrier()  # nothing was sent: the world still works


# ---- AlltoAll with split_dim / concat_dim ----

def a2a_input(r, shape, dtype=np.float32):
    return np.random.default_rng(900 + r).integers(-50, 50, shape).astype(dtype)


def a2a_expect(size, me, shape, s, c, dtype=np.float32):
    """Slice `me` along s of every rank's input, joined along c."""
    parts = [np.split(a2a_input(q, shape, dtype), size, axis=s)[me]
             for q in range(size)]
    return np.concatenate(parts, axis=c)


@pytest.mark.parametrize("nd", [3, 4])
def test_all_to_all_dims_every_pair(rank, size, nd):
    shape = (size, 2 * size, size, 3 * size) if nd == 4 else \
        (size, 2 * size, size)
    for s in range(nd):
        for c in range(-nd, nd):
            x = a2a_input(rank, shape)
            want = a2a_expect(size, rank, shape, s, c)
            out = np.full(want.shape, 7, np.float32)
            fccl.all_to_all_dims(out, x, size, s, c)
            np.testing.assert_array_equal(out, want, err_msg=f"{s} {c}")


def test_alltoall_seed_example_and_torch(rank, size):
    x = np.ones([1, 1, size, 1], np.float32) * rank
    out = fccl.AlltoAll(size, -2, -1)(x)
    assert out.shape == (1, 1, 1, size)
    np.testing.assert_array_equal(out[0, 0, 0], np.arange(size))
    torch = pytest.importorskip("torch")
    t = torch.tensor(a2a_input(rank, (2, size, 3))).to(torch.bfloat16)
    got = fccl.AlltoAll(size, 1, 0)(t)
    assert got.dtype == torch.bfloat16 and tuple(got.shape) == (2 * size, 1, 3)
    np.testing.assert_array_equal(got.float().numpy(),
                                  a2a_expect(size, rank, (2, size, 3), 1, 0))


def test_all_to_all_dims_in_place_async(rank, size):
    shape = (size, 3, 2 * size)
    x = a2a_input(rank, shape, np.int64)
    want = a2a_expect(size, rank, shape, 2, 2, np.int64)
    h = fccl.all_to_all_dims(x, x, size, 2, 2, async_op=True)
    h.wait()
    np.testing.assert_array_equal(x, want)


def test_all_to_all_dims_errors(rank, size):
    x = np.zeros((size, 2, 3), np.float32)
    out = np.zeros_like(x)
    with pytest.raises(ValueError, match="split_count"):
        fccl.all_to_all_dims(out, x, size + 1, 0, 0)
    if size > 1:
        with pytest.raises(ValueError, match="divisible"):
            fccl.all_to_all_dims(out, x, size, 2 if size != 3 else 1, 0)
    with pytest.raises(ValueError, match="split_dim"):
        fccl.all_to_all_dims(out, x, size, 3, 0)
    with pytest.raises(TypeError, match="split_dim"):
        fccl.AlltoAll(size, 1.5, 0)
    with pytest.raises(ValueError, match="output"):
        fccl.all_to_all_dims(np.zeros(1, np.float32), x, size, 0, 0)
    fccl.barrier()


# ---- MoE: the [bs, k] mask, float16, bfloat16, the shared expert ----

def moe_inputs(size, bs, k, hidden, experts, seed):
    xs, ids, scales, masks, shx = [], [], [], [], []
    for r in range(size):
        rng = np.random.default_rng(seed + r)
        x, i, s = moe_rows(rng, bs, k, hidden, experts)
        xs.append(x)
        ids.append(i)
        scales.append(s)
        m = rng.integers(0, 2, (bs, k)).astype(np.uint8)
        m[0] = 0                 # one token with every route off
        m[1] = 1
        masks.append(m)
        shx.append(rng.integers(-2, 3, (bs, hidden)).astype(np.float32))
    return xs, ids, scales, masks, shx


def test_moe_numpy_float16_route_mask(rank, size):
    if size < 2:
        pytest.skip("MoE needs an EP group of 2 or more")
    bs, k, hidden, experts = 4, 2, 16, 2 * size
    cfg = fccl.MoeConfig(None, experts, bs, k, hidden, dtype="float16")
    xs, ids, scales, masks, shx = moe_inputs(size, bs, k, hidden, experts, 60)
    x = xs[rank].astype(np.float16)
    d = cfg.dispatch(x, ids[rank], scales[rank], masks[rank])
    assert d.expand_x.dtype == np.float16
    assert d.rows == sum(int(m.sum()) for m in
                         [masks[r][ids[r] // (experts // size) == rank]
                          for r in range(size)])
    y = (d.expand_x.astype(np.float32) * 2).astype(np.float16)
    out = cfg.combine(y, d, scales[rank], shx[rank].astype(np.float16))
    s = (scales[rank] * masks[rank]).sum(1, keepdims=True)
    want = xs[rank] * 2 * s + shx[rank] * s   # shared_expert_x weighted
    want[masks[rank].sum(1) == 0] = 0
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=2e-3,
                               atol=2e-2)


def test_moe_torch_bfloat16_shared_ranks(rank, size):
    torch = pytest.importorskip("torch")
    if size < 3:
        pytest.skip("a shared-expert rank and two routed ranks")
    bs, k, hidden, experts = 3, 2, 8, size - 1
    cfg = fccl.MoeConfig(None, experts, bs, k, hidden, dtype="bfloat16",
                         shared_expert_num=1, shared_expert_rank_num=1)
    xs, ids, scales, masks, _ = moe_inputs(size, bs, k, hidden, experts, 70)
    x = torch.tensor(xs[rank]).to(torch.bfloat16)
    sc = torch.tensor(scales[rank])
    d = cfg.dispatch(x, torch.tensor(ids[rank]), sc,
                     torch.tensor(masks[rank]).bool())
    out = cfg.combine(d.expand_x, d, sc)  # identity experts, shared too
    s = (scales[rank] * masks[rank]).sum(1, keepdims=True)
    want = xs[rank] * s + xs[rank] * s    # routed + the weighted shared row
    np.testing.assert_allclose(out.float().numpy(), want, rtol=1e-2,
                               atol=1e-2)


def test_moe_bad_option_names_rank(rank, size):
    if size < 2:
        pytest.skip("MoE needs an EP group of 2 or more")
    k = 99 if rank == size - 1 else 1
    with pytest.raises(ValueError) as e:
        fccl.MoeConfig(None, 2 * size, 4, k, 16, dtype="float32")
    if rank != size - 1:
        assert f"EP rank {size - 1}" in str(e.value)
    else:
        assert "k 99" in str(e.value)
