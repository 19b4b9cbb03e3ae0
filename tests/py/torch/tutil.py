"""Inputs and torch references for the multi-rank torch suites.  Every rank
can compute every rank's input (seeded by rank), so each result is checked
against a reference computed here on one rank, independently of fccl."""
import functools

import torch
import torch.distributed as dist

DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64,
          torch.bool]
OPS = ["SUM", "PRODUCT", "MAX", "MIN", "AVG", "BAND", "BOR", "BXOR"]
INTS = {torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64}


def defined(dtype, op):
    """Is op a reduction of dtype (in fccl; Gloo has fewer)?"""
    if op in ("BAND", "BOR", "BXOR"):
        return dtype in INTS or dtype == torch.bool
    return not (dtype == torch.bool and op == "AVG")


def data(dtype, count, r, seed=0, op="SUM"):
    """Rank r's input: small integers for floats (exact sums in any order),
    +-1/+-2 for float products, the whole range for integers (sums and
    products wrap), -50..50 for integer averages, 0/1 for bool."""
    g = torch.Generator().manual_seed(1000 * seed + 17 * r + 5)
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), generator=g).bool()
    if dtype.is_complex:
        re = torch.randint(-8, 9, (count, 2), generator=g).float()
        return torch.view_as_complex(re).to(dtype)
    if dtype.is_floating_point:
        if op == "PRODUCT":
            vals = torch.tensor([-2.0, -1.0, 1.0, 2.0])
            return vals[torch.randint(0, 4, (count,), generator=g)].to(dtype)
        return torch.randint(-8, 9, (count,), generator=g).to(dtype)
    if op == "AVG":
        lo = 0 if dtype == torch.uint8 else -50
        return torch.randint(lo, 51, (count,), generator=g).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (count,), generator=g,
                         dtype=torch.int64).to(dtype)


def inputs(dtype, count, n, seed=0, op="SUM"):
    return [data(dtype, count, r, seed, op) for r in range(n)]


def reduce_ref(arrs, op, dtype):
    """The reduction of the ranks' inputs, computed with torch here."""
    st = torch.stack(arrs)
    n = len(arrs)
    if dtype == torch.bool:
        if op == "BXOR":
            return functools.reduce(torch.logical_xor, arrs)
        if op in ("SUM", "MAX", "BOR"):
            return st.any(0)
        return st.all(0)
    if op in ("BAND", "BOR", "BXOR"):
        f = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or,
             "BXOR": torch.bitwise_xor}[op]
        return functools.reduce(f, arrs)
    if op == "MAX":
        return st.amax(0)
    if op == "MIN":
        return st.amin(0)
    if dtype.is_floating_point or dtype.is_complex:
        wide = st.to(torch.complex128 if dtype.is_complex else torch.float64)
        if op == "SUM":
            return wide.sum(0).to(dtype)
        if op == "PRODUCT":
            return wide.prod(0).to(dtype)
        return (wide.sum(0) / n).to(dtype)
    wide = st.to(torch.int64)  # integers wrap: reduce in int64, then cast
    if op == "SUM":
        return wide.sum(0).to(dtype)
    if op == "PRODUCT":
        return wide.prod(0).to(dtype)
    # avg: the wrapped sum, divided truncating toward zero
    wrapped = wide.sum(0).to(dtype).to(torch.int64)
    return torch.div(wrapped, n, rounding_mode="trunc").to(dtype)


def assert_equal(got, want, op="SUM"):
    if (got.dtype.is_floating_point or got.dtype.is_complex) and op == "AVG":
        tol = 1e-2 if got.dtype in (torch.float16, torch.bfloat16) else 1e-5
        torch.testing.assert_close(got.to(torch.complex128 if got.is_complex()
                                          else torch.float64),
                                   want.to(torch.complex128 if want.is_complex()
                                           else torch.float64),
                                   rtol=tol, atol=tol)
    else:
        assert got.dtype == want.dtype
        assert torch.equal(got, want), (got, want)


def red(op):
    return getattr(dist.ReduceOp, op)
