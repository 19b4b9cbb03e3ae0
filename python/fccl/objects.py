"""Collectives of picklable Python objects: all_gather_object,
broadcast_object_list, gather_object, scatter_object_list.

Each pickles its objects into bytes, exchanges the byte counts first, then
the bytes (one collective each).  Received bytes are unpickled with a
restricted unpickler, as in the seed: only plain data (numbers, strings,
bytes, lists, tuples, dicts, sets, None, ...) and the builtins range,
complex, set, frozenset and slice; anything else (a class, a function) is
refused with pickle.UnpicklingError, so a peer cannot make this process run
code.
"""
import builtins
import io
import pickle

import numpy as np

from . import _fccl
from .coll import (all_gather_into_tensor, all_gather_into_tensor_uneven,
                   broadcast, gather_into_tensor, scatter_tensor)

__all__ = ["all_gather_object", "broadcast_object_list", "gather_object",
           "scatter_object_list"]

_SAFE_BUILTINS = frozenset({"range", "complex", "set", "frozenset", "slice"})


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that resolves only a few harmless builtins."""

    def find_class(self, module, name):
        if module == "builtins" and name in _SAFE_BUILTINS:
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"global '{module}.{name}' is forbidden")


def restricted_loads(data):
    """pickle.loads through RestrictedUnpickler."""
    return RestrictedUnpickler(io.BytesIO(data)).load()


def _dump(obj):
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def _check_group(fn, group):
    if group is not None and not isinstance(group, (str, _fccl.Group)):
        raise TypeError(f"For '{fn}', the argument 'group' must be type of "
                        f"string, but got 'group' type : {type(group)}.")


def _check_root(fn, root, what):
    if not isinstance(root, int) or isinstance(root, bool):
        raise TypeError(f"For {fn}, the {what} must be int")


def all_gather_object(object_list, obj, group=None):
    """Gather every rank's `obj` into `object_list` on every rank (item i
    gets group rank i's object).

    Args:
        object_list (list): as long as the group; overwritten.
        obj: this rank's picklable object.
        group (str, optional): the group; ``None`` is the world group.

    Raises:
        TypeError: `group` is not a str, or `object_list` is not a list as
            long as the group.
        RuntimeError: not initialized, or the call failed.
        pickle.UnpicklingError: a peer sent something the restricted
            unpickler refuses.
    """
    _check_group("all_gather_object", group)
    n = _fccl.get_world_size(group)
    if not isinstance(object_list, list) or len(object_list) != n:
        raise TypeError("The len of argument object_list must be equal to "
                        "group rank size, but got "
                        f"{len(object_list) if isinstance(object_list, list) else type(object_list)}.")
    data = _dump(obj)
    sizes = np.zeros(n, dtype=np.int64)
    all_gather_into_tensor(sizes, np.array([data.size], dtype=np.int64),
                           group)
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    all_gather_into_tensor_uneven(out, data, sizes.tolist(), group)
    offs = np.concatenate(([0], np.cumsum(sizes)))
    for i in range(n):
        object_list[i] = restricted_loads(out[offs[i]:offs[i + 1]].tobytes())


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Send the objects of `object_list` on rank `src` into `object_list`
    on every other rank (item by item; the lists have the same length
    everywhere).

    Args:
        object_list (list): the objects on `src`; overwritten elsewhere.
        src (int): the **global** rank that sends. Default 0.
        group (str, optional): the group; ``None`` is the world group.
        device: reserved (ignored), as in the seed.

    Raises:
        TypeError: `src` is not an int, `group` not a str, or `object_list`
            is not a non-empty list.
        RuntimeError: not initialized, or the call failed.
    """
    _check_group("broadcast_object_list", group)
    _check_root("broadcast_object_list", src, "src")
    if not isinstance(object_list, list) or not object_list:
        raise TypeError("The object_list can not be empty.")
    me = _fccl.get_rank(None) == src
    sizes = np.zeros(len(object_list), dtype=np.int64)
    if me:
        parts = [_dump(o) for o in object_list]
        sizes[:] = [p.size for p in parts]
    broadcast(sizes, src, group)
    if me:
        data = np.concatenate(parts) if parts else np.empty(0, np.uint8)
    else:
        data = np.empty(int(sizes.sum()), dtype=np.uint8)
    broadcast(data, src, group)
    if not me:
        off = 0
        for i, s in enumerate(sizes.tolist()):
            object_list[i] = restricted_loads(data[off:off + s].tobytes())
            off += s


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """Gather every rank's `obj` into `object_gather_list` on rank `dst`.

    Args:
        obj: this rank's picklable object.
        object_gather_list (list, optional): on `dst`, a list as long as the
            group (overwritten); not used elsewhere.
        dst (int): the **global** rank that receives. Default 0.
        group (str, optional): the group; ``None`` is the world group.

    Raises:
        TypeError: `dst` is not an int, `group` not a str, or (on `dst`)
            `object_gather_list` is not a list as long as the group.
        RuntimeError: not initialized, or the call failed.
    """
    _check_group("gather_object", group)
    _check_root("gather_object", dst, "dst")
    n = _fccl.get_world_size(group)
    me = _fccl.get_rank(None) == dst
    if me and (not isinstance(object_gather_list, list) or
               len(object_gather_list) != n):
        raise TypeError("The len of object_gather_list must be equal to group "
                        "rank size.")
    data = _dump(obj)
    sizes = np.zeros(n, dtype=np.int64)
    all_gather_into_tensor(sizes, np.array([data.size], dtype=np.int64),
                           group)
    width = int(sizes.max())
    block = np.zeros(width, dtype=np.uint8)
    block[:data.size] = data
    out = np.empty(width * n if me else 1, dtype=np.uint8)
    gather_into_tensor(out, block, dst, group)
    if me:
        for i in range(n):
            object_gather_list[i] = restricted_loads(
                out[i * width:i * width + int(sizes[i])].tobytes())


def scatter_object_list(scatter_object_output_list, scatter_object_input_list,
                        src=0, group=None):
    """Send ``scatter_object_input_list[r]`` on rank `src` to group rank r,
    which finds it in ``scatter_object_output_list[0]``.

    Args:
        scatter_object_output_list (list): non-empty; item 0 is overwritten.
        scatter_object_input_list (list): on `src`, one picklable object per
            rank of the group; not used elsewhere.
        src (int): the **global** rank that sends. Default 0.
        group (str, optional): the group; ``None`` is the world group.

    Raises:
        TypeError: `group` is not a str, `src` not an int, the output list
            is empty, or (on `src`) the input list is not as long as the
            group.
        RuntimeError: not initialized, or the call failed.
    """
    _check_group("scatter_object_list", group)
    if (not isinstance(scatter_object_output_list, list) or
            not scatter_object_output_list):
        raise TypeError("The scatter_object_output_list can not be empty.")
    _check_root("scatter_object_list", src, "src")
    n = _fccl.get_world_size(group)
    me = _fccl.get_rank(None) == src
    sizes = np.zeros(n, dtype=np.int64)
    if me:
        if (not isinstance(scatter_object_input_list, list) or
                len(scatter_object_input_list) != n):
            raise TypeError("The len of scatter_object_input_list must be "
                            "equal to group rank size.")
        parts = [_dump(o) for o in scatter_object_input_list]
        sizes[:] = [p.size for p in parts]
    broadcast(sizes, src, group)
    width = int(sizes.max())
    if me:
        data = np.zeros(width * n, dtype=np.uint8)
        for i, p in enumerate(parts):
            data[i * width:i * width + p.size] = p
    else:
        data = np.empty(1, dtype=np.uint8)
    out = np.empty(width, dtype=np.uint8)
    scatter_tensor(out, data, src, group)
    r = _fccl.get_rank(group)
    scatter_object_output_list[0] = restricted_loads(
        out[:int(sizes[r])].tobytes())
