"""Process groups: MindSpore's ``init_process_group`` family (as in
torch.distributed) and ``mindspore.communication.management``'s calls.

The world group is ``"fccl_world_group"``.  ``new_group(ranks)`` names a
group ``fccl_<n>_<sha1>`` (the SHA-1 of the sorted ranks joined by "_"),
as MindSpore does with its backend's prefix; ``create_group(name, ranks)``
lets the caller choose the name.  Any rank may call either: a rank that is
not in ``ranks`` only records the name (``get_rank(name)`` is then -1),
while the members return once every member has called it.
"""
import atexit
import os
import warnings
from datetime import timedelta

from . import _fccl

__all__ = [
    "is_available", "is_initialized", "init_process_group",
    "destroy_process_group", "get_rank", "get_world_size", "get_local_rank",
    "get_local_rank_size", "new_group", "get_backend", "get_global_rank",
    "get_group_rank", "get_process_group_ranks", "create_group",
    "destroy_group", "get_group_size", "get_group_rank_from_world_rank",
    "get_world_rank_from_group_rank", "init", "release", "get_group",
    "set_timeout", "GlobalComm", "revoke_group", "get_failed_ranks",
    "shrink_group", "grow_group", "is_rejoining",
]

BACKEND = "fccl"


class GlobalComm:
    """Names of the process-wide communication state (MindSpore's)."""
    BACKEND = BACKEND
    WORLD_COMM_GROUP = _fccl.WORLD_GROUP


_atexit_pid = None


def _at_exit():
    # A child forked after init never tears down its parent's world.
    if os.getpid() == _atexit_pid and _fccl.is_initialized():
        _fccl.finalize()


def _type_check(name, value, types):
    if value is not None and (not isinstance(value, types) or
                              (types is int and isinstance(value, bool))):
        raise TypeError(f"For 'init_process_group', the argument '{name}' "
                        f"must be {getattr(types, '__name__', types)}, but "
                        f"got {type(value)}.")


def is_available():
    """Whether the distributed module is available: always True (fccl runs
    wherever libfccl does).

    Returns:
        bool, True.
    """
    return True


def is_initialized():
    """Whether the default process group has been initialized (False in a
    child forked after init_process_group: the world is the parent's).

    Returns:
        bool.
    """
    return _fccl.is_initialized()


def init_process_group(backend="fccl", init_method=None, timeout=None,
                       world_size=-1, rank=-1, store=None, pg_options=None,
                       device_id=None):
    """Join the job and create the world group ``"fccl_world_group"``.

    Blocks until every rank has joined (or the timeout).  Without
    `init_method` and `store`, the torchrun variables are read: RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT (``fccl-run`` sets them).

    Args:
        backend (str): ``"fccl"`` (the only one). Default ``"fccl"``.
        init_method (str, optional): ``"env://"`` or ``"tcp://HOST:PORT"``
            (a store address). Default None.
        timeout (timedelta, optional): bounds joining, and every later
            blocking call of the world. Default: FCCL_TIMEOUT seconds, else
            300 s.
        world_size (int): number of ranks; -1 reads WORLD_SIZE.  Required
            (> 0) with `init_method` or `store`.
        rank (int): this process's rank; -1 reads RANK.  Required (>= 0)
            with `init_method` or `store`.
        store (TCPStore, optional): meet through this store instead.
        pg_options, device_id: reserved (ignored), as in the seed.

    Raises:
        TypeError: an argument of the wrong type.
        ValueError: `backend` is not "fccl"; both `init_method` and
            `store`; `world_size` or `rank` missing or out of range with
            them; `world_size` differing from the job's.
        RuntimeError: already initialized, or joining failed
            (fccl.TimeoutError when ranks did not arrive in time).
    """
    global _atexit_pid
    _type_check("init_method", init_method, str)
    _type_check("timeout", timeout, timedelta)
    _type_check("world_size", world_size, int)
    _type_check("rank", rank, int)
    if pg_options is not None:
        warnings.warn("pg_options is ignored, setting is invalid")
    if device_id is not None:
        warnings.warn("device_id is ignored, setting is invalid")
    if backend != BACKEND:
        raise ValueError("Only support fccl now, please setting backend to "
                         "fccl or using default value")
    if init_method is not None and store is not None:
        raise ValueError("Only one of init_method and store is supported.")
    if init_method is not None or store is not None:
        if world_size <= 0:
            raise ValueError("Specified world_size must be a positive "
                             "integer.")
        if rank < 0:
            raise ValueError("Specified rank must be a non-negative integer.")
    timeout_ms = 0 if timeout is None else int(timeout.total_seconds() * 1000)
    if timeout is not None and timeout_ms <= 0:
        raise ValueError("timeout must be positive")
    _fccl.init(init_method, store, world_size, rank, timeout_ms, None, None)
    if _atexit_pid is None:
        atexit.register(_at_exit)
    _atexit_pid = os.getpid()
    if world_size != -1 and world_size != _fccl.get_world_size(None):
        size = _fccl.get_world_size(None)
        _fccl.finalize()
        raise ValueError("world_size is wrong, please using default value or "
                         f"setting: {size}")


def destroy_process_group(group=None):
    """Destroy a group; with ``None`` or ``"fccl_world_group"``, every group
    and the world (after a final barrier of the world).

    Args:
        group (str, optional): the group; ``None`` is the world group.

    Raises:
        TypeError: `group` is not a str.
        RuntimeError: a forked child (its world is the parent's).
    """
    if group is None or group == GlobalComm.WORLD_COMM_GROUP:
        if _fccl.forked():
            raise RuntimeError("destroy_process_group: this process was "
                               "forked from a rank; the world is the "
                               "parent's")
        _fccl.finalize()
    elif isinstance(group, (str, _fccl.Group)):
        _fccl.destroy_group(group)
    else:
        raise TypeError("For 'destroy_group', the argument 'group' must be "
                        "type of string or None, but got 'group' type : "
                        f"{type(group)}.")


def get_rank(group=None):
    """This process's rank in `group`.

    Args:
        group (str, optional): the group; ``None`` is the world group.

    Returns:
        int, the rank in the group; -1 if this process is not a member (or
        the group is unknown).

    Raises:
        TypeError: `group` is not a str.
    """
    return _fccl.get_rank(group)


def get_world_size(group=None):
    """The number of ranks of `group`.

    Args:
        group (str, optional): the group; ``None`` is the world group.

    Returns:
        int, the size; -1 if the group is not available.

    Raises:
        TypeError: `group` is not a str.
    """
    return _fccl.get_world_size(group)


def get_local_rank(group=None):
    """This rank's index among the ranks of `group` on its host.

    Args:
        group (str, optional): the group; ``None`` is the world group.

    Returns:
        int, the local rank; -1 if not a member.

    Raises:
        TypeError: `group` is not a str.
        RuntimeError: not initialized.
    """
    return _fccl.local(group, False)


def get_local_rank_size(group=None):
    """The number of ranks of `group` on this rank's host.

    Args:
        group (str, optional): the group; ``None`` is the world group.

    Returns:
        int; -1 if not a member.

    Raises:
        TypeError: `group` is not a str.
        RuntimeError: not initialized.
    """
    return _fccl.local(group, True)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None):
    """Create a group of the given world ranks and return its name.

    Any rank may call it.  The members return once every member has called
    it (the group is then ready); a rank that is not in `ranks` returns the
    name at once, without creating or awaiting anything.  Calling it again
    with the same ranks returns the same name.

    Args:
        ranks (list[int], optional): world ranks of the members, any order.
            ``None`` gives the world group.
        backend (str, optional): ``None`` or ``"fccl"``.
        timeout, pg_options, use_local_synchronization, group_desc:
            reserved (ignored), as in the seed.

    Returns:
        str: ``"fccl_<n>_<sha1>"`` (``"fccl_world_group"`` for None); ``""``
        when creating the group failed (with a warning), as the seed does.

    Raises:
        TypeError: `ranks` is not a list, lists a rank twice, or `backend`
            is not fccl.
        ValueError: a rank out of range.
        RuntimeError: not initialized.
    """
    if ranks is None:
        return GlobalComm.WORLD_COMM_GROUP
    if not isinstance(ranks, list):
        raise TypeError("ranks must be list, but got {}".format(type(ranks)))
    if backend is not None and backend != BACKEND:
        raise TypeError(f"the input backend must be fccl, but got {backend}")
    try:
        return _fccl.new_group(ranks)
    except (TypeError, ValueError):
        raise
    except RuntimeError as e:
        if not _fccl.is_initialized():
            raise
        warnings.warn(str(e))
        return ""


def get_backend(group=None):
    """The backend of `group`: always ``"fccl"``.

    Raises:
        TypeError: `group` is not a str.
    """
    if group is not None and not isinstance(group, (str, _fccl.Group)):
        raise TypeError("For 'get_backend', the argument 'group' must be type "
                        "of string or None, but got 'group' type : "
                        f"{type(group)}.")
    return BACKEND


def get_global_rank(group, group_rank):
    """The world rank of rank `group_rank` of `group`.

    Args:
        group (str): the group; ``None`` is the world group.
        group_rank (int): a rank of the group.

    Returns:
        int, the world rank.

    Raises:
        TypeError: `group` is not a str or `group_rank` not an int.
        RuntimeError: `group_rank` out of range, or not initialized.
    """
    if not isinstance(group_rank, int) or isinstance(group_rank, bool):
        raise TypeError("The group_rank argument must be integer, but got "
                        f"{type(group_rank)}.")
    if group is not None and not isinstance(group, (str, _fccl.Group)):
        raise TypeError("For 'get_global_rank', the argument 'group' must be "
                        "type of string or None, but got 'group' type : "
                        f"{type(group)}.")
    return _fccl.world_rank_of(group, group_rank, "get_global_rank")


def get_group_rank(group, global_rank):
    """The rank in `group` of world rank `global_rank`.

    Args:
        group (str): the group; ``None`` is the world group.
        global_rank (int): a world rank.

    Returns:
        int, the group rank.

    Raises:
        TypeError: `global_rank` is not an int or `group` not a str.
        RuntimeError: `global_rank` is not a member, or not initialized.
    """
    if not isinstance(global_rank, int) or isinstance(global_rank, bool):
        raise TypeError("The global_rank argument must be integer, but got "
                        f"{type(global_rank)}.")
    if group is not None and not isinstance(group, (str, _fccl.Group)):
        raise TypeError("For 'get_group_rank_from_world_rank', the argument "
                        "'group' must be type of string, but got 'group' "
                        f"type : {type(group)}.")
    return _fccl.group_rank_of(group, global_rank, "get_group_rank")


def get_process_group_ranks(group=None):
    """The world ranks of `group`'s members, in group rank order.

    Args:
        group (str, optional): the group; ``None`` is the world group.

    Returns:
        list[int].

    Raises:
        TypeError: `group` is not a str.
        RuntimeError: not initialized.
    """
    if group is not None and not isinstance(group, (str, _fccl.Group)):
        raise TypeError("For 'get_process_group_ranks', the argument 'group' "
                        "must be type of string or None, but got 'group' "
                        f"type : {type(group)}.")
    return _fccl.group_ranks(group)


def get_group(group=None):
    """The :class:`Group` object of a name (collectives take either)."""
    return _fccl.get_group(group)


def set_timeout(group, timeout):
    """Set how long each later blocking call on `group` may take (a
    timedelta or seconds); an fccl extension (fccl_group_set_timeout).
    Every rank of the group should set the same value."""
    s = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    _fccl.set_timeout(group, int(s * 1000))


# ---- mindspore.communication.management ----

def init(backend_name=None):
    """Initialize from the environment (management's ``init``): as
    ``init_process_group()`` with the torchrun variables.

    Raises:
        ValueError: `backend_name` is neither None nor "fccl".
    """
    if backend_name not in (None, BACKEND):
        raise ValueError(f"backend_name must be fccl, not {backend_name!r}")
    init_process_group()


def release():
    """Release every group and the world (management's ``release``)."""
    destroy_process_group()


def create_group(group, rank_ids):
    """Create a group named `group` (a name of the caller's choosing) of the
    world ranks `rank_ids` (management's ``create_group``).

    As for new_group, members return once every member has called it, and
    a rank that is not in `rank_ids` only records the name.

    Args:
        group (str): the name; must not exist yet.
        rank_ids (list[int]): world ranks of the members.

    Raises:
        TypeError: `group` is not a str, `rank_ids` not a list, or lists a
            rank twice.
        ValueError: the name exists, or a rank is out of range.
        RuntimeError: not initialized, or creating the group failed.
    """
    if not isinstance(rank_ids, list):
        raise TypeError(f"For 'create_group', rank_ids must be list, but got "
                        f"{type(rank_ids)}")
    _fccl.create_group(group, rank_ids)


def destroy_group(group):
    """Destroy the group `group` (not the world), on this rank.

    Raises:
        TypeError: `group` is not a str.
        ValueError: the world group or an unknown group.
    """
    if not isinstance(group, (str, _fccl.Group)):
        raise TypeError("For 'destroy_group', the argument 'group' must be "
                        f"type of string, but got {type(group)}.")
    _fccl.destroy_group(group)


def revoke_group(group=GlobalComm.WORLD_COMM_GROUP):
    """Revoke `group` on every member (ULFM's revoke): every member's
    pending and later calls on it raise :class:`fccl.RevokedError` naming
    this rank, within a second (also with FCCL_PEER_TIMEOUT=0).  Unlike a
    local abort it reaches every member.  Any member, any thread;
    idempotent; never blocks.

    Raises:
        RuntimeError: not initialized, or this rank is not a member.
    """
    _fccl.revoke(group)


def get_failed_ranks(group=GlobalComm.WORLD_COMM_GROUP):
    """The global ranks of `group`'s members this rank knows to have
    failed, ascending by group rank; after :func:`shrink_group` of
    `group`, exactly the ranks the survivors left out (the same list on
    every survivor).  Never blocks.

    Returns:
        list[int], global ranks.
    """
    return _fccl.failed_ranks(group)


def shrink_group(group=GlobalComm.WORLD_COMM_GROUP, exclude_ranks=None):
    """Make the group of `group`'s survivors and return its name (called by
    the survivors only; see fccl_group_shrink in fccl/pg.h).

    With `exclude_ranks` None the survivors agree, through the store, on
    the failed ranks (a rank that dies meanwhile is left out too); the
    global ranks in `exclude_ranks` are left out as well, without waiting
    for them.  The new group holds the survivors in their order, is named
    ``fccl_<n>_<sha1>`` by its members, and takes collectives at once.
    Works on a failed, a revoked and a healthy group.

    Args:
        group (str or Group): the group to shrink. Default the world.
        exclude_ranks (list[int], optional): global ranks to leave out
            (every survivor passes the same list).

    Returns:
        str, the new group's name.

    Raises:
        TypeError: `exclude_ranks` is not a list.
        ValueError: a rank of `exclude_ranks` is not a member, or is this
            rank.
        fccl.PeerError: the other survivors decided without this rank.
        fccl.TimeoutError: the agreement took longer than the group's
            timeout.
    """
    return _fccl.shrink(group, exclude_ranks)


def grow_group(group, count=1):
    """Take `count` new processes into `group` and return the grown
    group's name (called by every member of `group`; see fccl_group_grow
    in fccl/pg.h).

    A newcomer is a process holding a global rank the members left out in
    :func:`shrink_group` (``fccl-run --respawn N`` restarts a dead rank
    with the same RANK and ``FCCL_REJOIN`` set); its
    :func:`init_process_group` joins through this call and its world
    group (``GlobalComm.WORLD_COMM_GROUP``) is then the grown group.  The
    members keep their order and the newcomers follow; the name is
    ``fccl_<n>_<sha1>`` of the members' global ranks.

    Args:
        group (str or Group): the group to grow (the survivors' group).
        count (int): how many newcomers to take in. Default 1.

    Returns:
        str, the grown group's name.

    Raises:
        TypeError: `count` is not an int.
        ValueError: `count` out of range, or a newcomer claims a rank this
            member did not leave out.
        fccl.TimeoutError: a newcomer did not come within the group's
            timeout.
        fccl.PeerError: a member or newcomer died during the grow (the
            group `group` goes on as before).
    """
    if not isinstance(count, int) or isinstance(count, bool):
        raise TypeError("For 'grow_group', count must be int, but got "
                        f"{type(count)}")
    return _fccl.grow(group, count)


def is_rejoining():
    """Whether this process takes the place of a rank the others left out
    (``FCCL_REJOIN`` set and not "0", as ``fccl-run --respawn`` sets it):
    its :func:`init_process_group` then joins through the others'
    :func:`grow_group`."""
    v = os.environ.get("FCCL_REJOIN", "")
    return v not in ("", "0")


def get_group_size(group=GlobalComm.WORLD_COMM_GROUP):
    """The number of ranks of `group` (management's name for
    get_world_size)."""
    return get_world_size(group)


def get_group_rank_from_world_rank(world_rank_id, group):
    """The rank in `group` of world rank `world_rank_id` (management's
    argument order: the rank first)."""
    return get_group_rank(group, world_rank_id)


def get_world_rank_from_group_rank(group, group_rank_id):
    """The world rank of rank `group_rank_id` of `group` (management's
    argument order: the group first)."""
    return get_global_rank(group, group_rank_id)
