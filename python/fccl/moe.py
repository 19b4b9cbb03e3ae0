"""MoE expert parallelism (fccl/moe.h, after Ascend's MoeDistributeDispatch,
MoeDistributeCombine and MoeDistributeCombineAddRmsNorm), on NumPy float32
and float16 arrays and torch float32, bfloat16 and float16 tensors.

    cfg = fccl.MoeConfig(ep_group, moe_expert_num=8, bs=16, k=2, hidden=64,
                         dtype="float32")
    d = cfg.dispatch(x, expert_ids, expert_scales)     # tokens -> experts
    y = experts(d.expand_x[:d.rows])                   # this rank's experts
    out = cfg.combine(y_full, d, expert_scales)        # weighted sum back
    y, rstd, x = cfg.combine_add_rms_norm(y_full, d, expert_scales,
                                          residual_x, gamma)

Outputs are allocated like the input `x` (a NumPy array or a torch tensor).
Every call is collective over the EP group (and the TP group).  The shared
expert (shared-expert ranks, or `shared_expert_x`) is weighted by the sum
of the token's active routing weights, the seed's formula read as a
tensor expression (fccl/moe.h says why).
"""
from collections import namedtuple

import numpy as np

from . import _fccl

__all__ = ["MoeConfig", "MoeDispatch"]

MoeDispatch = namedtuple("MoeDispatch", [
    "expand_x", "expand_scales", "expert_token_nums", "ep_recv_counts",
    "tp_recv_counts", "assist_info", "rows"])
MoeDispatch.__doc__ = """What dispatch returns: `expand_x` [expand_rows, H]
(the received rows, by local expert, then source rank; the first `rows`
are filled), their weights `expand_scales`, `expert_token_nums` (int64,
counts or prefix sums), `ep_recv_counts` (int64 [local experts, ep size],
combine's ep_send_counts), `tp_recv_counts` (int64 [2] or None) and the
opaque `assist_info` (int32) that combine needs."""

_NP = {"float32": np.float32, "float16": np.float16, "int32": np.int32,
       "int64": np.int64, "uint8": np.uint8}


def _alloc(like, shape, dtype):
    """An empty array of `shape` and fccl dtype name `dtype`, of the same
    kind as `like` (torch tensor or NumPy array)."""
    mod = type(like).__module__
    if mod.startswith("torch"):
        import torch  # only reached when the caller uses torch already
        return torch.empty(shape, dtype=getattr(torch, dtype))
    if dtype not in _NP:
        raise TypeError(f"MoE: NumPy has no {dtype}; pass torch tensors")
    return np.empty(shape, dtype=_NP[dtype])


class MoeConfig:
    """The MoE config (fccl_moe_new): groups, expert layout, sizes and
    workspaces, created once and collectively, then reused.

    Args:
        ep_group (str): the EP group (2..768 ranks).
        moe_expert_num (int): routed experts, a multiple of the number of
            routed-expert ranks.
        bs (int): most tokens a rank passes per call (1..512).
        k (int): experts per token (1..min(16, moe_expert_num)).
        hidden (int): H, elements of one token row.
        dtype (str): ``"float32"``, ``"bfloat16"`` (torch tensors only:
            NumPy has no bfloat16) or ``"float16"``. Default "bfloat16".
        tp_group (str, optional): a TP group of exactly 2 ranks, or None.
        shared_expert_num (int): shared experts (0 or more).
        shared_expert_rank_num (int): EP ranks 0..n-1 hold shared experts.
        global_bs (int): 0 when every rank passes `bs` tokens; else at least
            the largest bs times the EP size, the same on every rank.
        norm_eps (float): RMSNorm's epsilon. Default 1e-6.
        expert_token_nums_type (int): 0 prefix sums, 1 counts.

    Raises:
        TypeError: a dtype other than float32, bfloat16 and float16.
        ValueError: options that break a constraint, on this rank or
            another (every rank fails together).
        RuntimeError: the groups failed or timed out.
    """

    def __init__(self, ep_group, moe_expert_num, bs, k, hidden,
                 dtype="bfloat16", tp_group=None, shared_expert_num=0,
                 shared_expert_rank_num=0, global_bs=0, norm_eps=1e-6,
                 expert_token_nums_type=0):
        self._c = _fccl.MoeConfig(ep_group, tp_group, moe_expert_num,
                                  shared_expert_num, shared_expert_rank_num,
                                  bs, global_bs, k, hidden, dtype, norm_eps,
                                  expert_token_nums_type)
        self.info = self._c.info()
        self.dtype = self.info["dtype"]

    def dispatch(self, x, expert_ids, expert_scales, x_active_mask=None):
        """Send every active token of `x` [bs, H] to the ranks of its `k`
        experts (`expert_ids` [bs, k] int32, `expert_scales` [bs, k]
        float32).

        `x_active_mask` (bool/uint8, or None: all on) is [bs], a token on
        or off, or [bs, k] as in newer CANN versions, each route of a token
        on or off: a route that is off is not sent and adds nothing in the
        combine; a token with no route on is inactive (combine gives 0,
        the fused operator the residual).

        Returns:
            MoeDispatch.
        """
        i = self.info
        bs = len(x)
        le, ep = i["local_expert_num"], i["ep_size"]
        expand_x = _alloc(x, (i["expand_rows"], i["hidden"]), self.dtype)
        scales = _alloc(x, (i["expand_rows"],), "float32")
        tok = _alloc(x, (le,), "int64")
        epc = _alloc(x, (le, ep), "int64")
        tpc = _alloc(x, (2,), "int64") if i["tp_size"] > 1 else None
        assist = _alloc(x, (max(1, i["assist_len"]),), "int32")
        routes = x_active_mask is not None and len(
            getattr(x_active_mask, "shape", (0,))) == 2
        rows = self._c.dispatch(x, expert_ids, expert_scales, x_active_mask,
                                bs, expand_x, scales, tok, epc, tpc, assist,
                                routes)
        return MoeDispatch(expand_x, scales, tok, epc, tpc, assist, rows)

    def combine(self, expand_x, dispatched, expert_scales,
                shared_expert_x=None, out=None):
        """The weighted sum of the experts' rows `expand_x` (dispatch's
        layout) back on the tokens' owners: returns `out` [bs, H].

        Args:
            expand_x: the experts' outputs, [expand_rows, H].
            dispatched (MoeDispatch): what dispatch returned.
            expert_scales: [bs, k] float32, as passed to dispatch.
            shared_expert_x: [bs, H] added to every active token, weighted
                by the sum of its active scales, or None.
            out: where to write (allocated like `expand_x` when None).
        """
        bs = len(expert_scales)
        if out is None:
            out = _alloc(expand_x, (bs, self.info["hidden"]), self.dtype)
        d = dispatched
        self._c.combine(expand_x, d.assist_info, d.ep_recv_counts,
                        d.tp_recv_counts, expert_scales, shared_expert_x, bs,
                        out)
        return out

    def combine_add_rms_norm(self, expand_x, dispatched, expert_scales,
                             residual_x, gamma, shared_expert_x=None):
        """combine, then ``x = out + residual_x``, ``rstd = 1 / sqrt(mean(
        x^2) + eps)``, ``y = x * rstd * gamma``, fused in one pass.

        Args:
            residual_x: [bs, H] (or [bs, 1, H]).
            gamma: [H].

        Returns:
            (y, rstd, x): y [bs, H], rstd [bs] float32, x [bs, H].
        """
        bs = len(expert_scales)
        h = self.info["hidden"]
        y = _alloc(expand_x, (bs, h), self.dtype)
        rstd = _alloc(expand_x, (bs,), "float32")
        x = _alloc(expand_x, (bs, h), self.dtype)
        d = dispatched
        self._c.combine(expand_x, d.assist_info, d.ep_recv_counts,
                        d.tp_recv_counts, expert_scales, shared_expert_x, bs,
                        residual_x, gamma, y, rstd, x)
        return y, rstd, x

    def last_times(self):
        """Where the last call's time went, in ns (check, comm, math,
        total)."""
        return self._c.last_times()
