"""The collectives of MindSpore's ``comm_func`` (torch.distributed's names),
on NumPy arrays, C-contiguous buffer-protocol objects and torch CPU tensors.

Every function works in place on the arrays it is given, as comm_func does
in its default (in-place) mode, and returns ``None``, or a
:class:`CommHandle` when ``async_op=True`` (call ``handle.wait()`` before
touching the arrays).  ``group`` is a group name (``new_group`` /
``create_group``), a :class:`Group`, or ``None`` for the world group
``"fccl_world_group"``.  ``src``, ``dst`` and ``peer`` are **global** (world)
ranks, as in the seeds; they must be members of ``group``.

Errors: a wrong argument type raises TypeError and a wrong value or size
ValueError before anything is sent; a timeout raises
:class:`fccl.TimeoutError`, a failed peer :class:`fccl.PeerError`, any
other library failure :class:`fccl.Error` (all RuntimeErrors).

Every collective and send/recv/isend/irecv takes ``timeout=`` (seconds or
a timedelta): that call's own timeout instead of the group's.  When a
call's timeout (or a ``handle.wait(timeout)``) runs out, the group fails
on every member, as NCCL's abort does: this rank raises
:class:`fccl.TimeoutError`, the other members' pending and later calls on
the group raise :class:`fccl.PeerError` with ``rank`` set to this rank;
destroy the group and create it again to go on.

Each wrapper below only passes its arguments to the C extension, which
checks them and makes one library call with the GIL released.
"""
from . import _fccl

__all__ = [
    "ReduceOp", "all_reduce", "all_gather_into_tensor",
    "all_gather_into_tensor_uneven", "all_gather", "reduce_scatter_tensor",
    "reduce_scatter_tensor_uneven", "reduce_scatter", "all_to_all_single",
    "all_to_all", "all_to_all_v_c", "broadcast", "reduce",
    "gather_into_tensor", "scatter_tensor", "gather", "scatter", "barrier",
    "send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv",
    "neighbor_exchange_v2", "NeighborExchangeV2", "all_to_all_dims",
    "AlltoAll",
]


def _timeout_ms(timeout):
    """Seconds (int, float) or a timedelta, as positive milliseconds."""
    s = timeout.total_seconds() if hasattr(timeout, "total_seconds") \
        else timeout
    if isinstance(s, bool) or not isinstance(s, (int, float)):
        raise TypeError("timeout must be None, seconds or a timedelta, not "
                        f"{type(timeout).__name__}")
    ms = int(s * 1000 + 0.5)
    if ms <= 0:
        raise ValueError("timeout must be positive")
    return ms


def _timed(group, timeout, fn, *args):
    """Call fn(*args) with its own timeout: fccl_set_next_timeout on the
    group (the library takes it when the operation starts), cleared again
    if the call did not get that far."""
    if timeout is None:
        return fn(*args)
    _fccl.set_next_timeout(group, _timeout_ms(timeout))
    try:
        return fn(*args)
    finally:
        try:
            _fccl.set_next_timeout(group, -1)
        except Exception:  # the group went away with the call's error
            pass


class ReduceOp:
    """Reduction operations, as strings (MindSpore's ``ReduceOp``).

    - ``SUM`` ("sum"): the sum (integers wrap around).
    - ``PROD`` ("prod"): the product.
    - ``MAX`` ("max"), ``MIN`` ("min"): element-wise maximum / minimum.
    - ``AVG`` ("avg"): the mean (an fccl extension; integers truncate toward
      zero; not for bool).
    """
    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    AVG = "avg"


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False,
               timeout=None):
    """Reduce `tensor` across every rank of the group; every rank gets the
    same result, in place.

    Args:
        tensor: input and output of the collective, with the same shape and
            dtype on every rank.
        op (str): ``ReduceOp.SUM``, ``PROD``, ``MAX``, ``MIN`` or ``AVG``.
            Default ``ReduceOp.SUM``.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: `tensor` is not a tensor, `op` is not one of the ops,
            `group` is not a str or `async_op` not a bool.
        RuntimeError: the process group is not initialized or the call
            failed (fccl.Error, fccl.TimeoutError, fccl.PeerError).

    Example (2 ranks)::

        >>> x = np.ones([2, 8], np.float32)
        >>> fccl.all_reduce(x)
        >>> x[0, 0]
        2.0
    """
    return _timed(group, timeout, _fccl.all_reduce,
                  tensor, op, group, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None,
                           async_op=False, timeout=None):
    """Gather every rank's `input_tensor` into `output_tensor`, rank by
    rank along the first dimension.

    Args:
        output_tensor: receives the blocks; with N ranks it holds N times
            the elements of `input_tensor` (shape (N*x1, x2, ...)).
        input_tensor: this rank's block, the same shape on every rank.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: an argument is not a tensor, the dtypes differ, `group`
            is not a str or `async_op` not a bool.
        ValueError: `output_tensor` does not hold N times the input.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.all_gather_into_tensor,
                  output_tensor, input_tensor, group, async_op)


def all_gather_into_tensor_uneven(output, input, output_split_sizes=None,
                                  group=None, async_op=False, timeout=None):
    """All-gather tensors whose first dimension differs between ranks.

    Args:
        output: the concatenation of every rank's input along the first
            dimension, shape (sum of the split sizes, x2, ...).
        input: this rank's tensor, shape (output_split_sizes[rank], x2, ...).
        output_split_sizes (list[int], optional): the first-dimension size
            of each rank's input, in group rank order; ``None`` means equal
            sizes.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        ValueError: `input` or `output` does not match `output_split_sizes`.
        TypeError: bad argument types.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.all_gather_into_tensor_uneven,
                  output, input, output_split_sizes, group, async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False, timeout=None):
    """Gather every rank's `tensor` into the list `tensor_list` (item i
    receives group rank i's tensor).

    Args:
        tensor_list (list): one output tensor per rank of the group, each
            of `tensor`'s shape and dtype.
        tensor: this rank's input.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: `tensor` is not a tensor or `tensor_list` not a list of
            them, the list's length is not the group size, or an item's
            shape or dtype differs from `tensor`'s.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.all_gather,
                  tensor_list, tensor, group, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None,
                          async_op=False, timeout=None):
    """Reduce `input` across ranks and scatter the result: rank r receives
    block r (of N equal blocks along the first dimension) in `output`.

    Args:
        output: this rank's block of the result, 1/N of `input`.
        input: the tensor to reduce, N times `output`'s elements.
        op (str): the reduction. Default ``ReduceOp.SUM``.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: bad argument types or an unknown `op`.
        ValueError: `input` does not hold N times `output`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.reduce_scatter_tensor,
                  output, input, op, group, async_op)


def reduce_scatter_tensor_uneven(output, input, input_split_sizes=None,
                                 op=ReduceOp.SUM, group=None, async_op=False,
                                 timeout=None):
    """Reduce `input` across ranks and scatter it in blocks of uneven size:
    rank r receives the first-dimension rows of block r.

    Args:
        output: shape (input_split_sizes[rank], x2, ...).
        input: the same shape on every rank; its first dimension is the sum
            of `input_split_sizes`.
        input_split_sizes (list[int], optional): rows of each rank's block;
            ``None`` splits evenly.
        op (str): the reduction. Default ``ReduceOp.SUM``.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        ValueError: `output` or `input` does not match `input_split_sizes`.
        TypeError: bad argument types or an unknown `op`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.reduce_scatter_tensor_uneven,
                  output, input, input_split_sizes, op, group, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None,
                   async_op=False, timeout=None):
    """Reduce the lists across ranks: rank r receives in `output` the
    reduction of every rank's ``input_list[r]``.

    Args:
        output: this rank's result, of ``input_list[rank]``'s shape.
        input_list (list): one tensor per rank of the group.
        op (str): the reduction. Default ``ReduceOp.SUM``.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: bad argument types, an unknown `op`, a list whose length
            is not the group size, or items whose shape or dtype differ
            from `output`'s.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.reduce_scatter,
                  output, input_list, op, group, async_op)


def all_to_all_single(output, input, output_split_sizes=None,
                      input_split_sizes=None, group=None, async_op=False,
                      timeout=None):
    """Split `input` along its first dimension, send block p to rank p, and
    concatenate the blocks received, in rank order, into `output`.

    Args:
        output: receives the blocks.
        input: the blocks to send.
        output_split_sizes (list[int], optional): rows received from each
            rank; ``None`` splits `output` evenly.
        input_split_sizes (list[int], optional): rows sent to each rank;
            ``None`` splits `input` evenly.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: `input` or `output` is not a tensor, bad `group` or
            `async_op`.
        ValueError: without split sizes, a first dimension that the group
            size does not divide; split sizes that do not add up.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.all_to_all_single,
                  output, input, output_split_sizes, input_split_sizes, group,
                  async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None,
               async_op=False, timeout=None):
    """Send ``input_tensor_list[p]`` to rank p and receive rank p's tensor
    for this rank into ``output_tensor_list[p]``; sizes may differ per pair.

    Args:
        output_tensor_list (list): one tensor per rank, receiving.
        input_tensor_list (list): one tensor per rank, sent.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: items that are not tensors or whose dtypes differ, bad
            `group` or `async_op`.
        ValueError: lists that do not have one tensor per rank.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.all_to_all,
                  output_tensor_list, input_tensor_list, group, async_op)


def all_to_all_v_c(output, input, send_count_matrix, group=None,
                   async_op=False, timeout=None):
    """all_to_all with the whole send-count matrix known to every rank.

    Args:
        output: receives the blocks from every rank, in rank order.
        input: the blocks to send, in rank order.
        send_count_matrix (list[int]): ``N*N`` ints, the same on every rank;
            entry ``i*N + j`` is what rank i sends to rank j, counted in
            first-dimension rows of `input`.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: `input` or `output` is not a tensor, the matrix is not a
            list of N*N ints, bad `group` or `async_op`.
        ValueError: `input` or `output` too small for the matrix.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.all_to_all_v_c,
                  output, input, send_count_matrix, group, async_op)


def broadcast(tensor, src, group=None, async_op=False, timeout=None):
    """Send rank `src`'s `tensor` to every rank of the group, in place.

    Args:
        tensor: the data on `src`; the receiving buffer elsewhere (same
            shape and dtype everywhere).
        src (int): the **global** rank that sends.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: `tensor` is not a tensor, `src` not an int, bad `group`
            or `async_op`.
        ValueError: `src` is not a member of `group`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.broadcast,
                  tensor, src, group, async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False,
           timeout=None):
    """Reduce `tensor` across the group into `tensor` on rank `dst` (in
    place); the other ranks' tensors are left as they were.

    Args:
        tensor: input everywhere, output on `dst`.
        dst (int): the **global** rank that receives the result.
        op (str): the reduction. Default ``ReduceOp.SUM``.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: bad argument types or an unknown `op`.
        ValueError: `dst` is not a member of `group`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.reduce,
                  tensor, dst, op, group, async_op)


def gather_into_tensor(output_tensor, input_tensor, dst=0, group=None,
                       async_op=False, timeout=None):
    """Gather every rank's `input_tensor` into `output_tensor` on rank
    `dst`, rank by rank along the first dimension.

    Args:
        output_tensor: on `dst`, N times the input's elements; ignored (but
            still a tensor) elsewhere.
        input_tensor: this rank's block, the same size on every rank.
        dst (int): the **global** rank that receives. Default 0.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: bad argument types.
        ValueError: `dst` not in `group`, or a wrong output size on `dst`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.gather_into_tensor,
                  output_tensor, input_tensor, dst, group, async_op)


def scatter_tensor(output_tensor, input_tensor, src=0, group=None,
                   async_op=False, timeout=None):
    """Split `input_tensor` on rank `src` into N equal blocks along the
    first dimension; rank r receives block r into `output_tensor`.

    Args:
        output_tensor: this rank's block, the same size on every rank.
        input_tensor: on `src`, N times the output's elements; ignored (but
            still a tensor) elsewhere.
        src (int): the **global** rank that sends. Default 0.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: bad argument types.
        ValueError: `src` not in `group`, or a wrong input size on `src`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.scatter_tensor,
                  output_tensor, input_tensor, src, group, async_op)


def gather(tensor, gather_list, dst=0, group=None, async_op=False,
           timeout=None):
    """Gather every rank's `tensor` into the list `gather_list` on `dst`
    (item i receives group rank i's tensor).

    Args:
        tensor: this rank's input, the same shape on every rank.
        gather_list (list): on `dst`, one tensor per rank of `tensor`'s shape
            and dtype; not used elsewhere (a list, possibly empty, or None).
        dst (int): the **global** rank that receives. Default 0.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: bad argument types; on `dst`, a list whose length is not
            the group size or whose items differ from `tensor`.
        ValueError: `dst` is not a member of `group`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.gather,
                  tensor, gather_list, dst, group, async_op)


def scatter(tensor, scatter_list, src=0, group=None, async_op=False,
            timeout=None):
    """Send ``scatter_list[r]`` on rank `src` to rank r's `tensor`.

    Args:
        tensor: this rank's output.
        scatter_list (list): on `src`, one tensor per rank of `tensor`'s
            shape and dtype; not used elsewhere (a list or None).
        src (int): the **global** rank that sends. Default 0.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: bad argument types; on `src`, a list whose length is not
            the group size or whose items differ from `tensor`.
        ValueError: `src` is not a member of `group`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.scatter,
                  tensor, scatter_list, src, group, async_op)


def barrier(group=None, async_op=False, device_ids=None, timeout=None):
    """Block until every rank of the group has entered the barrier.

    Args:
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        async_op (bool): return a handle instead of waiting.
        device_ids: reserved (ignored), as in the seed.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: `group` is not a str or `async_op` not a bool.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.barrier, group, async_op)


def send(tensor, dst=0, group=None, tag=0, timeout=None):
    """Send `tensor` to rank `dst` and wait until it may be reused.

    Args:
        tensor: the data.
        dst (int): the **global** rank to send to. Default 0.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        tag (int): matches the receive with the same tag (>= 0). Default 0.

    Raises:
        TypeError: `tensor` is not a tensor, `dst` or `tag` not an int,
            `group` not a str.
        ValueError: `dst` is this rank, or not a member of `group`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.send, tensor, dst, group, tag)


def recv(tensor, src=0, group=None, tag=0, timeout=None):
    """Receive into `tensor` from rank `src` (the sizes must match).

    Args:
        tensor: the buffer to fill.
        src (int): the **global** rank to receive from. Default 0.
        group (str, optional): the group; ``None`` is the world group.
        timeout (float or timedelta, optional): this call's own timeout
            (fccl_set_next_timeout), instead of the group's; when it
            runs out the group fails on every member.
        tag (int): matches the send with the same tag (>= 0). Default 0.

    Returns:
        int: 0 once the data has arrived.

    Raises:
        TypeError: `tensor` is not a tensor, `src` or `tag` not an int,
            `group` not a str.
        ValueError: `src` is this rank, or not a member of `group`.
        RuntimeError: not initialized, or the call failed.
    """
    return _timed(group, timeout, _fccl.recv, tensor, src, group, tag)


def isend(tensor, dst=0, group=None, tag=0, timeout=None):
    """Start sending `tensor` to rank `dst`; returns at once.

    Args and raises: as :func:`send`.

    Returns:
        CommHandle: wait() on it before touching `tensor`.
    """
    return _timed(group, timeout, _fccl.isend, tensor, dst, group, tag)


def irecv(tensor, src=0, group=None, tag=0, timeout=None):
    """Start receiving into `tensor` from rank `src`; returns at once.

    Args and raises: as :func:`recv`.

    Returns:
        CommHandle: the data is in `tensor` once wait() returned.
    """
    return _timed(group, timeout, _fccl.irecv, tensor, src, group, tag)


class P2POp:
    """One send or receive of :func:`batch_isend_irecv`.

    Args:
        op: ``"isend"`` or ``"irecv"``, or the functions :func:`isend` /
            :func:`irecv`.
        tensor: the data to send, or the buffer that receives (in place).
        peer (int): the **global** rank of the other end.
        group (str, optional): the group; ``None`` is the world group.
            Every op of one batch uses the same group.
        tag (int): matches the other end's op with the same tag (>= 0; the
            seed reserves it, fccl carries it). Default 0.

    Raises:
        TypeError: `op` is neither, `tensor` is not a tensor, `peer` or
            `tag` is not an int.
    """
    __slots__ = ("op", "tensor", "peer", "group", "tag")

    def __init__(self, op, tensor, peer, group=None, tag=0):
        if isinstance(op, str):
            if op not in ("isend", "irecv"):
                raise TypeError(
                    f"Expected op to be of type isend or irecv, but got {op}")
        elif op is isend or op is irecv:
            op = op.__name__
        else:
            raise TypeError(
                f"Expected op to be of type isend or irecv, but got {op}")
        if not _is_tensor(tensor):
            raise TypeError(
                f"Expected tensor to be Tensor, but got {type(tensor)}.")
        if not isinstance(peer, int) or isinstance(peer, bool):
            raise TypeError("For P2POp, the peer must be int")
        if not isinstance(tag, int) or isinstance(tag, bool):
            raise TypeError("For P2POp, the tag must be int")
        self.op = op
        self.tensor = tensor
        self.peer = peer
        self.group = group
        self.tag = tag

    def __repr__(self):
        return (f"P2POp({self.op!r}, peer={self.peer}, group={self.group!r}, "
                f"tag={self.tag})")


_is_tensor = _fccl.is_tensor


def batch_isend_irecv(p2p_op_list):
    """Post a list of sends and receives at once.

    Args:
        p2p_op_list (list[P2POp]): the operations; the sends and receives
            of the ranks involved must match each other, and every op uses
            the same group.

    Returns:
        list[CommHandle]: one handle that completes when every op has; the
        received data is in the receive ops' tensors after its wait().

    Raises:
        TypeError: an empty list, an item that is not a P2POp, or ops of
            different groups.
        ValueError: a peer that is this rank or not in the group.
        RuntimeError: not initialized, or the call failed.
    """
    if not p2p_op_list:
        raise TypeError("p2p_op_list can not be empty list.")
    for p in p2p_op_list:
        if not isinstance(p, P2POp):
            raise TypeError("The elements in p2p_op_list must be type of "
                            "P2POp.")
    group = p2p_op_list[0].group
    ops = []
    for p in p2p_op_list:
        if p.group != group:
            raise TypeError("The group name in p2p_op_list must be "
                            "consistent.")
        ops.append((p.op == "isend", p.tensor, p.peer, p.tag))
    return [_fccl.batch(ops, group)]


# ---- the collectives of comm_ops on shaped tensors ----

def _shape(t):
    """The shape of a tensor, a NumPy array or a buffer-protocol object."""
    shape = getattr(t, "shape", None)
    if shape is None:
        shape = memoryview(t).shape
    return tuple(int(d) for d in shape)


def _new_like(t, shape):
    """An empty tensor of `shape` of `t`'s kind (torch or NumPy) and
    dtype."""
    if type(t).__module__.startswith("torch"):
        return t.new_empty(shape)
    if hasattr(t, "__array_interface__"):
        import numpy as np
        return np.empty(shape, dtype=np.asarray(t).dtype)
    raise TypeError(f"Expected a NumPy array or a torch tensor, but got "
                    f"{type(t).__name__}")


def neighbor_exchange_v2(output, input, send_rank_ids, send_lens,
                         recv_rank_ids, recv_lens, data_format="NCHW",
                         group=None, async_op=False):
    """Halo exchange of an NCHW tensor with up to eight neighbours
    (MindSpore's NeighborExchangeV2) into `output`.

    Direction d of `send_rank_ids` / `recv_rank_ids` is clockwise from the
    top: top, top_right, right, bottom_right, bottom, bottom_left, left,
    top_left; -1 means no neighbour.  `send_lens` / `recv_lens` are
    [top, bottom, left, right].  Rank ids are ranks of `group` (the seed
    checks them against the group's size), no rank twice in one list.

    To the rank in direction d this rank sends that side (or corner) of
    `input`: the top send_lens[0] rows, the right send_lens[3] columns, the
    top-right corner of both, ...  `output` is `input` with a frame: a side
    with a receive rank adds its recv_lens rows or columns (a side of -1
    adds nothing), so its shape is (N, C, H + top + bottom, W + left +
    right); a corner has a rank exactly when both of its sides have one.

    Args:
        output: the result, of the shape above, `input`'s dtype.
        input: a 4-D (N, C, H, W) tensor.
        send_rank_ids (list[int]): 8 ranks or -1.
        send_lens (list[int]): 4 lengths >= 0 (top and bottom at most H,
            left and right at most W).
        recv_rank_ids (list[int]): 8 ranks or -1.
        recv_lens (list[int]): 4 lengths >= 0.
        data_format (str): ``"NCHW"``, the only one.
        group (str, optional): the group; ``None`` is the world group.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: a list that is not a list of ints, tensors that are not
            tensors or whose dtypes differ, a `data_format` not a str.
        ValueError: the seed's rules (a list of the wrong length, an id
            below -1 or out of the group, an id twice, a negative length, a
            corner without its sides, a send length beyond the input,
            data_format not NCHW, not 4-D), or an `output` of another size.
        RuntimeError: not initialized, or the call failed.

    Example (2 ranks, the seed's)::

        >>> x = np.ones([1, 1, 2, 2], np.float32) * (rank + 1)
        >>> ids = [-1] * 8; ids[4 if rank == 0 else 0] = 1 - rank
        >>> lens = [0, 1, 0, 0] if rank == 0 else [1, 0, 0, 0]
        >>> out = np.empty([1, 1, 3, 2], np.float32)
        >>> fccl.neighbor_exchange_v2(out, x, ids, lens, ids, lens)
        >>> out[0, 0]      # rank 0: its two rows, then rank 1's top row
        [[1. 1.] [1. 1.] [2. 2.]]
    """
    return _fccl.neighbor_exchange_v2(output, input, _shape(input),
                                      send_rank_ids, send_lens,
                                      recv_rank_ids, recv_lens, data_format,
                                      group, async_op)


class NeighborExchangeV2:
    """MindSpore's ``ops.NeighborExchangeV2`` as a callable: the arguments
    once, then ``op(x)`` returns a new output tensor (NumPy or torch, as
    `x`).  See :func:`neighbor_exchange_v2`.

    Raises (at construction, as the seed): TypeError for lists that are
    not lists of ints; ValueError for an id out of ``[-1, group size)``.
    """

    def __init__(self, send_rank_ids, send_lens, recv_rank_ids, recv_lens,
                 data_format="NCHW", group=None):
        from .pg import get_world_size
        for name, ids in (("send_rank_ids", send_rank_ids),
                          ("recv_rank_ids", recv_rank_ids)):
            if not isinstance(ids, (list, tuple)):
                raise TypeError(f"For 'NeighborExchangeV2', the '{name}' "
                                f"must be a list, but got {type(ids)}")
        size = get_world_size(group)
        for name, ids in (("send_rank_ids", send_rank_ids),
                          ("recv_rank_ids", recv_rank_ids)):
            for r in ids:
                if isinstance(r, int) and r != -1 and not 0 <= r < size:
                    raise ValueError(
                        f"For 'NeighborExchangeV2', the 'rank_id in {name}' "
                        f"must be in [0, {size}), but got {r}")
        self.send_rank_ids = list(send_rank_ids)
        self.send_lens = send_lens
        self.recv_rank_ids = list(recv_rank_ids)
        self.recv_lens = recv_lens
        self.data_format = data_format
        self.group = group

    def __call__(self, x):
        shape = _fccl.neighbor_exchange_v2_shape(
            _shape(x), self.send_rank_ids, self.send_lens, self.recv_rank_ids,
            self.recv_lens, self.data_format)
        out = _new_like(x, shape)
        neighbor_exchange_v2(out, x, self.send_rank_ids, self.send_lens,
                             self.recv_rank_ids, self.recv_lens,
                             self.data_format, self.group)
        return out


def all_to_all_dims(output, input, split_count, split_dim, concat_dim,
                    group=None, async_op=False):
    """All-to-all along any dimensions (MindSpore's AlltoAll): `input` is
    cut into `split_count` equal blocks along `split_dim`, block p goes to
    rank p, and the blocks received are joined in rank order along
    `concat_dim` into `output`.

    Args:
        output: shape of `input` with ``shape[split_dim] / split_count``,
            then ``shape[concat_dim] * split_count``; in place works
            (`output` may be `input` when the shapes' sizes agree).
        input: the tensor (at most 8 dimensions), the same shape on every
            rank.
        split_count (int): must be the group's size.
        split_dim (int): the dimension to cut (negative counts from the
            end).
        concat_dim (int): the dimension to join along.
        group (str, optional): the group; ``None`` is the world group.
        async_op (bool): return a handle instead of waiting.

    Returns:
        None, or a CommHandle when `async_op` is True.

    Raises:
        TypeError: the ints are not ints, tensors that are not tensors or
            whose dtypes differ.
        ValueError: the seed's rules (split_count not the group size,
            ``x_shape[split_dim]`` not divisible by it), a dimension out of
            range, an `output` of another size.
        RuntimeError: not initialized, or the call failed.

    Example (8 ranks, the seed's)::

        >>> x = np.ones([1, 1, 8, 1], np.float32) * rank
        >>> out = np.empty([1, 1, 1, 8], np.float32)
        >>> fccl.all_to_all_dims(out, x, 8, -2, -1)
        >>> out
        [[[[0. 1. 2. 3. 4. 5. 6. 7.]]]]
    """
    return _fccl.all_to_all_dims(output, input, _shape(input), split_count,
                                 split_dim, concat_dim, group, async_op)


class AlltoAll:
    """MindSpore's ``ops.AlltoAll(split_count, split_dim, concat_dim,
    group)`` as a callable: ``op(x)`` returns a new output tensor (NumPy or
    torch, as `x`).  See :func:`all_to_all_dims`.

    Raises (at construction, as the seed): TypeError when an argument is
    not an int or `group` not a str / Group / None.
    """

    def __init__(self, split_count, split_dim, concat_dim, group=None):
        for name, v in (("split_count", split_count),
                        ("split_dim", split_dim),
                        ("concat_dim", concat_dim)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"For 'AlltoAll', the '{name}' must be int, "
                                f"but got {type(v).__name__}")
        if group is not None and not isinstance(group, (str, _fccl.Group)):
            raise TypeError(f"For 'AlltoAll', the 'group' must be str, but "
                            f"got {type(group).__name__}")
        self.split_count = split_count
        self.split_dim = split_dim
        self.concat_dim = concat_dim
        self.group = group

    def __call__(self, x):
        shape = _fccl.all_to_all_dims_shape(_shape(x), self.split_count,
                                            self.split_dim, self.concat_dim)
        out = _new_like(x, shape)
        all_to_all_dims(out, x, self.split_count, self.split_dim,
                        self.concat_dim, self.group)
        return out
