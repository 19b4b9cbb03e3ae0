"""Inputs and NumPy references for the multi-rank suites.  Every rank can
compute every other rank's input (seeded by rank), so each result is
checked against a reference computed here, independently of fccl."""
import numpy as np

DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64", "bool"]
SIZES = [0, 1, 7, 1025]


def data(dtype, count, r, seed=0, small=False):
    """Rank r's input: small integers for floats (sums exact in any order),
    the whole range for integers (sums and products wrap; `small` keeps
    them in -50..50 for avg), 0/1 for bool."""
    rng = np.random.default_rng(1000 * seed + 17 * r + 5)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, count).astype(np.bool_)
    if dt.kind in "iu":
        if small:
            lo = 0 if dt.kind == "u" else -50
            return rng.integers(lo, 51, count).astype(dt)
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, count, dtype=dt,
                            endpoint=True)
    return rng.integers(-8, 9, count).astype(dt)


def prod_data(dtype, count, r, seed=0):
    """Inputs for prod on floats: +-1, +-2 (products stay exact)."""
    rng = np.random.default_rng(1000 * seed + 17 * r + 9)
    return rng.choice(np.array([-2, -1, 1, 2]), count).astype(dtype)


def reduce_ref(arrs, op, dtype):
    dt = np.dtype(dtype)
    st = np.stack(arrs) if arrs[0].size else np.zeros((len(arrs), 0), dt)
    if dt == np.bool_:
        f = np.any if op in ("sum", "max") else np.all
        return f(st, axis=0)
    with np.errstate(over="ignore"):
        if op == "sum":
            if dt.kind == "f":
                return st.astype(np.float64).sum(0).astype(dt)
            return np.sum(st, axis=0, dtype=dt)
        if op == "prod":
            if dt.kind == "f":
                return st.astype(np.float64).prod(0).astype(dt)
            return np.prod(st, axis=0, dtype=dt)
        if op == "max":
            return st.max(0)
        if op == "min":
            return st.min(0)
        if dt.kind in "iu":  # the wrapped sum, truncated toward zero
            s = np.sum(st, axis=0, dtype=dt).astype(np.float64) / len(arrs)
            return np.trunc(s).astype(dt)
        return (st.astype(np.float64).sum(0) / len(arrs)).astype(dt)


def assert_equal(got, want, dtype, op="sum"):
    dt = np.dtype(dtype)
    if dt.kind == "f" and op == "avg":
        tol = 1e-2 if dt == np.float16 else 1e-5
        np.testing.assert_allclose(got.astype(np.float64),
                                   want.astype(np.float64), rtol=tol,
                                   atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


def moe_rows(rng, bs, k, hidden, experts):
    """One rank's MoE tokens [bs, hidden], its k distinct experts per token
    [bs, k] and their weights (quarters, sums exact), drawn from rng in
    this order (callers draw more from the same rng after)."""
    x = rng.integers(-4, 5, (bs, hidden)).astype(np.float32)
    ids = np.stack([rng.choice(experts, k, replace=False)
                    for _ in range(bs)]).astype(np.int32)
    scales = rng.integers(1, 4, (bs, k)).astype(np.float32) / 4
    return x, ids, scales
